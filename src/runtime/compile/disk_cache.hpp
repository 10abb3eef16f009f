// SPDX-License-Identifier: Apache-2.0
// The persistent kernel cache. One file per kernel, sharded by hash prefix, written as a temp file and
// renamed into place, checksummed; anything unreadable is a miss that gets replaced.
#pragma once
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace fusion::detail {

inline constexpr std::uint32_t kCacheFormatVersion = 1;

/// Everything that determines a compiled binary. Its hash names the file; all of it is stored and
/// compared on load, so two keys with one hash never share an entry.
struct CacheKey {
  std::string source, kernel_name, nvrtc_version, options, target;
  std::uint64_t hash() const;
};

struct CacheEntry {
  CacheKey key;
  std::string binary;
  bool ptx = false;
  std::int32_t registers = -1;
};

class DiskCache {
 public:
  /// The process-wide cache configured by FUSION_CACHE / FUSION_CACHE_DIR / XDG_CACHE_HOME / HOME.
  static DiskCache& instance();
  explicit DiskCache(std::filesystem::path dir, bool enabled = true);

  bool enabled() const { return enabled_; }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path path_for(const CacheKey& key) const;
  /// The entry for `key`, or nothing when absent, corrupt, truncated or for another key.
  std::optional<CacheEntry> load(const CacheKey& key) const;
  /// Stores atomically; an unwritable directory disables the cache with one warning.
  void store(const CacheEntry& e);

  /// Reads any entry file (for the `fusion cache` tool); nothing when it is not a valid entry.
  static std::optional<CacheEntry> read_file(const std::filesystem::path& p);
  /// All entry files under the directory.
  std::vector<std::filesystem::path> entries() const;

 private:
  std::filesystem::path dir_;
  bool enabled_;
  std::atomic<bool> writable_{true};  // cleared after the first failed write (read-only or full directory)
};

/// The directory from the environment (FUSION_CACHE_DIR, else $XDG_CACHE_HOME/fusion, else ~/.cache/fusion).
std::filesystem::path default_cache_dir();

}  // namespace fusion::detail
