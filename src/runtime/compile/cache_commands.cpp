// SPDX-License-Identifier: Apache-2.0
#include "runtime/compile/cache_commands.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <ostream>
#include <vector>

namespace fusion::detail {
namespace fs = std::filesystem;

void cache_ls(const DiskCache& cache, std::ostream& out) {
  for (const fs::path& p : cache.entries()) {
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (auto e = DiskCache::read_file(p))
      fmt::print(out, "{:<60} {:<12} {:>9} B  {}\n", e->key.kernel_name, e->key.target, size, p.filename().string());
    else
      fmt::print(out, "{:<60} {:<12} {:>9} B  {}\n", "(unreadable: replaced on next use)", "-", size, p.filename().string());
  }
}

bool cache_show(const DiskCache& cache, const std::string& what, std::ostream& out) {
  bool found = false;
  for (const fs::path& p : cache.entries()) {
    auto e = DiskCache::read_file(p);
    if (!e) continue;
    const std::string& name = e->key.kernel_name;
    // the full symbol, its name part (`squared_diff` for squared_diff_<hash>), or a prefix of the
    // kernel's hash or of the entry's file name
    const std::string hash = name.size() > 17 ? name.substr(name.size() - 16) : "";
    const bool match = name == what || name == what + "_" + hash || hash.rfind(what, 0) == 0 ||
                       (what.size() >= 4 && p.stem().string().rfind(what, 0) == 0);
    if (!match) continue;
    found = true;
    fmt::print(out, "// {}  target {}  NVRTC {}  options {}\n// file {}\n{}\n", name, e->key.target,
               e->key.nvrtc_version, e->key.options, p.string(), e->key.source);
  }
  return found;
}

void cache_stats(const DiskCache& cache, std::ostream& out) {
  std::uintmax_t bytes = 0;
  std::size_t good = 0, bad = 0;
  for (const fs::path& p : cache.entries()) {
    std::error_code ec;
    bytes += fs::file_size(p, ec);
    (DiskCache::read_file(p) ? good : bad)++;
  }
  fmt::print(out, "directory: {}{}\nentries:   {} ({} unreadable)\nbytes:     {}\n", cache.dir().string(),
             cache.enabled() ? "" : " (disabled by FUSION_CACHE=0)", good + bad, bad, bytes);
}

std::size_t cache_clear(const DiskCache& cache) {
  std::size_t n = 0;
  std::error_code ec;
  for (const fs::path& p : cache.entries()) n += fs::remove(p, ec);
  return n;
}

std::size_t cache_prune(const DiskCache& cache, std::uintmax_t max_bytes) {
  struct Item {
    fs::path path;
    fs::file_time_type used;
    std::uintmax_t bytes;
  };
  std::vector<Item> items;
  std::uintmax_t total = 0;
  std::error_code ec;
  for (const fs::path& p : cache.entries()) {
    Item it{p, fs::last_write_time(p, ec), fs::file_size(p, ec)};
    total += it.bytes;
    items.push_back(it);
  }
  // loading an entry refreshes its time, so the oldest time is the least recently used
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.used < b.used; });
  std::size_t removed = 0;
  for (const Item& it : items) {
    if (total <= max_bytes) break;
    if (fs::remove(it.path, ec)) {
      total -= it.bytes;
      ++removed;
    }
  }
  return removed;
}

}  // namespace fusion::detail
