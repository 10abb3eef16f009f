// SPDX-License-Identifier: Apache-2.0
#include "runtime/compile/cache_commands.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "fusion/error.hpp"
#include "runtime/compile/kernel_cache.hpp"

namespace fusion::detail {
namespace fs = std::filesystem;

void cache_ls(const DiskCache& cache, std::ostream& out) {
  for (const fs::path& p : cache.entries()) {
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (auto e = DiskCache::read_file(p))
      fmt::print(out, "{:<60} {:<12} {:>9} B  {}\n", e->key.kernel_name, e->key.target, size, p.filename().string());
    else
      fmt::print(out, "{:<60} {:<12} {:>9} B  {}\n", "(unreadable: replaced on next use)", "-", size,
                 p.filename().string());
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
    if (is_verdict(e->key)) fmt::print(out, "// verdict (route, the fastest generated kernel, cuBLASLt us, its us): {}\n", e->binary);
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

namespace {

/// A stored kernel, as compile() takes it: source, name, user options, headers.
struct StoredKernel {
  std::string source, name;
  std::vector<std::string> extra;
  bool minimal = true;
  Target built_for;
};

/// The stored key read back into what compiled it; nothing when its options are not fusion's own followed
/// by user options (written by another version of fusion, or an option with a space in it).
std::optional<StoredKernel> parse(const CacheKey& key) {
  StoredKernel k{key.source, key.kernel_name, {}, true, {}};
  const std::size_t cut = key.target.find('_');
  if (cut == std::string::npos) return std::nullopt;
  k.built_for.ptx = key.target.compare(0, cut, "compute") == 0;
  k.built_for.arch = std::atoi(key.target.c_str() + cut + 1);
  k.built_for.specific = key.target.back() == 'a';  // "sm_90a"
  std::vector<std::string> tokens;
  std::istringstream in(key.options);
  for (std::string t; in >> t;) tokens.push_back(t);
  k.minimal = std::find(tokens.begin(), tokens.end(), "-minimal") != tokens.end();
  const std::size_t own = compile_options(k.built_for, {}, k.minimal).size();
  if (tokens.size() < own) return std::nullopt;
  k.extra.assign(tokens.begin() + static_cast<std::ptrdiff_t>(own), tokens.end());
  if (cache_key(k.source, k.name, k.built_for, k.extra, k.minimal).options != key.options) return std::nullopt;
  return k;
}

}  // namespace

WarmResult cache_warm(const DiskCache& from, KernelStore& into, const std::vector<int>& archs, int jobs,
                      std::ostream& out) {
  const auto start = std::chrono::steady_clock::now();
  WarmResult r;
  struct Task {
    StoredKernel k;
    Target t;
    CacheKey key;
  };
  std::vector<Task> tasks;
  std::set<std::uint64_t> seen;
  for (const fs::path& p : from.entries()) {
    const auto e = DiskCache::read_file(p);
    if (!e) continue;  // unreadable: nothing to compile from
    if (is_verdict(e->key)) continue;  // a product race's verdict: nothing to compile
    const auto k = parse(e->key);
    if (!k) {
      fmt::print(out, "skipped {} ({}): its compile options are not ones this fusion writes\n", e->key.kernel_name,
                 p.filename().string());
      ++r.failed;
      continue;
    }
    std::vector<Target> targets;
    for (int a : archs) targets.push_back(target_for_arch(a));
    if (archs.empty()) targets.push_back(target_for_arch(k->built_for.arch));
    if (k->built_for.specific) {  // an sm_90a kernel serves that architecture alone, built for it the same way
      std::vector<Target> same;
      for (Target t : targets)
        if (!t.ptx && t.arch == k->built_for.arch) same.push_back({t.arch, false, true});
      targets = same;
    }
    for (const Target& t : targets) {
      CacheKey key = cache_key(k->source, k->name, t, k->extra, k->minimal);
      if (seen.insert(key.hash()).second) tasks.push_back({*k, t, std::move(key)});
    }
  }
  std::atomic<std::size_t> next{0}, compiled{0}, present{0}, failed{0};
  std::mutex out_mu;
  auto work = [&] {
    for (std::size_t i; (i = next++) < tasks.size();) {
      const Task& task = tasks[i];
      const CacheKey& key = task.key;
      if (into.load(key)) {
        ++present;
        continue;
      }
      try {
        CompileOutput c = compile(task.k.source, task.k.name, task.t, task.k.extra, task.k.minimal);
        into.store(CacheEntry{key, std::move(c.binary), task.t.ptx, c.registers, {}});
        ++compiled;
      } catch (const Error& err) {
        // A kernel generated for one architecture's features (clusters on sm_90) may not compile for another.
        std::lock_guard lock(out_mu);
        const std::string what = err.what();
        fmt::print(out, "failed {} for {}: {}\n", task.k.name, task.t.name(), what.substr(0, what.find('\n')));
        ++failed;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < std::max(jobs, 1); ++j) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  r.compiled = compiled;
  r.present = present;
  r.failed += failed;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace fusion::detail
