// SPDX-License-Identifier: Apache-2.0
#include "runtime/compile/disk_cache.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "common/hash.hpp"
#include "fusion/error.hpp"

namespace fusion::detail {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[4] = {'F', 'Z', 'K', 'C'};
constexpr const char* kSuffix = ".fzk";

void put_u32(std::string& s, std::uint32_t v) { for (int i = 0; i < 4; ++i) s += static_cast<char>(v >> (8 * i)); }
void put_u64(std::string& s, std::uint64_t v) { for (int i = 0; i < 8; ++i) s += static_cast<char>(v >> (8 * i)); }
void put_str(std::string& s, const std::string& v) {
  put_u64(s, v.size());
  s += v;
}

/// Reads the fields back, failing (not throwing) on any truncation.
struct Reader {
  const std::string& s;
  std::size_t pos = 0;
  bool ok = true;
  std::uint64_t u(int bytes) {
    if (pos + static_cast<std::size_t>(bytes) > s.size()) { ok = false; return 0; }
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[pos + i])) << (8 * i);
    pos += static_cast<std::size_t>(bytes);
    return v;
  }
  std::string str() {
    const std::uint64_t n = u(8);
    if (!ok || n > s.size() - pos) { ok = false; return {}; }
    std::string v = s.substr(pos, n);
    pos += n;
    return v;
  }
};

std::uint64_t checksum(std::string_view payload) {
  StableHasher h;
  h.add(payload);
  return h.digest();
}

}  // namespace

std::uint64_t CacheKey::hash() const {
  StableHasher h;
  h.add_u32(kCacheFormatVersion);
  for (const std::string* f : {&source, &kernel_name, &nvrtc_version, &options, &target}) h.add(*f);
  return h.digest();
}

fs::path default_cache_dir() {
  if (const char* d = std::getenv("FUSION_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "fusion";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "fusion";
  return fs::temp_directory_path() / "fusion-cache";
}

bool cache_enabled_by_environment() {
  const char* env = std::getenv("FUSION_CACHE");
  if (!env) return true;
  std::string v(env);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "0" || v == "off" || v == "no" || v == "false") return false;
  if (v.empty() || v == "1" || v == "on" || v == "yes" || v == "true") return true;
  throw Error(fmt::format("FUSION_CACHE='{}': give 0, off, no or false to turn the disk cache off (1, on, yes, true "
                          "or unset keep it)",
                          env));
}

DiskCache& DiskCache::instance() {
  static DiskCache cache = [] {
    return DiskCache(default_cache_dir(), cache_enabled_by_environment());
  }();
  return cache;
}

KernelStore& kernel_store() {
  static KernelStore& store = []() -> KernelStore& {
    const char* shared = std::getenv("FUSION_CACHE_READONLY_DIR");
    if (!shared || !*shared) return DiskCache::instance();
    // Never destroyed: kernels may be compiled from static destructors.
    auto* chain = new ChainedStore(std::make_shared<DiskCache>(fs::path(shared)),
                                   std::shared_ptr<KernelStore>(&DiskCache::instance(), [](KernelStore*) {}));
    return *chain;
  }();
  return store;
}

DiskCache::DiskCache(fs::path dir, bool enabled) : dir_(std::move(dir)), enabled_(enabled) {}

fs::path DiskCache::path_for(const CacheKey& key) const {
  const std::string h = hex16(key.hash());
  return dir_ / h.substr(0, 2) / (h + kSuffix);
}

std::optional<CacheEntry> DiskCache::read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string data = buf.str();
  if (data.size() < 24 || std::memcmp(data.data(), kMagic, 4) != 0) return std::nullopt;
  Reader r{data, 4};
  if (r.u(4) != kCacheFormatVersion) return std::nullopt;
  const std::uint64_t key_hash = r.u(8);
  const std::uint64_t sum = r.u(8);
  if (!r.ok || checksum(std::string_view(data).substr(r.pos)) != sum) return std::nullopt;
  CacheEntry e;
  e.key.kernel_name = r.str();
  e.key.target = r.str();
  e.key.nvrtc_version = r.str();
  e.key.options = r.str();
  e.key.source = r.str();
  e.ptx = r.u(1) != 0;
  e.registers = static_cast<std::int32_t>(r.u(4));
  e.binary = r.str();
  if (!r.ok || r.pos != data.size() || e.key.hash() != key_hash) return std::nullopt;
  return e;
}

std::optional<CacheEntry> DiskCache::load(const CacheKey& key) const {
  if (!enabled_) return std::nullopt;
  const fs::path p = path_for(key);
  auto e = read_file(p);
  if (!e) return std::nullopt;
  const CacheKey& k = e->key;
  if (k.source != key.source || k.kernel_name != key.kernel_name || k.nvrtc_version != key.nvrtc_version ||
      k.options != key.options || k.target != key.target)
    return std::nullopt;
  std::error_code ec;
  fs::last_write_time(p, fs::file_time_type::clock::now(), ec);  // recency for `fusion cache prune`
  e->location = p.string();
  return e;
}

void DiskCache::store(const CacheEntry& e) {
  if (!enabled_ || !writable_) return;
  std::string payload;
  put_str(payload, e.key.kernel_name);
  put_str(payload, e.key.target);
  put_str(payload, e.key.nvrtc_version);
  put_str(payload, e.key.options);
  put_str(payload, e.key.source);
  payload += static_cast<char>(e.ptx ? 1 : 0);
  put_u32(payload, static_cast<std::uint32_t>(e.registers));
  put_str(payload, e.binary);
  std::string file(kMagic, 4);
  put_u32(file, kCacheFormatVersion);
  put_u64(file, e.key.hash());
  put_u64(file, checksum(payload));
  file += payload;

  const fs::path final_path = path_for(e.key);
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const fs::path tmp = final_path.parent_path() /
                       fmt::format(".tmp-{}-{}-{:x}", getpid(), counter++, rng());
  std::error_code ec;
  fs::create_directories(final_path.parent_path(), ec);
  bool written = !ec;  // the temporary file, in the entry's directory
  bool placed = false;
  int err = ec.value();
  if (written) {
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    written = f != nullptr;
    if (f) {
      written = std::fwrite(file.data(), 1, file.size(), f) == file.size();
      written = (std::fclose(f) == 0) && written;
    }
    err = errno;
    if (written) placed = std::rename(tmp.c_str(), final_path.c_str()) == 0;  // atomic: readers see all or nothing
    if (written && !placed) err = errno;
    if (!placed) fs::remove(tmp, ec);
  }
  if (placed) return;
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (written) {  // the directory takes files; only this entry's path is in the way (say a directory there)
    std::fprintf(stderr, "fusion: warning: cannot put a kernel cache entry at %s (%s); this kernel stays in memory "
                 "only. Remove what is at that path.\n", final_path.c_str(), std::strerror(err));
    return;
  }
  if (writable_)
    std::fprintf(stderr, "fusion: warning: cannot write the kernel cache in %s (%s); caching in memory only. "
                 "Set FUSION_CACHE_DIR to a writable directory or FUSION_CACHE=0.\n",
                 dir_.c_str(), std::strerror(err));
  writable_ = false;
}

std::string DiskCache::location(const CacheKey& key) const {
  if (!enabled_ || !writable_) return {};
  const fs::path p = path_for(key);
  std::error_code ec;
  return fs::is_regular_file(p, ec) ? p.string() : std::string();
}

std::vector<fs::path> DiskCache::entries() const {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec) && it->path().extension() == kSuffix) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace fusion::detail
