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

#include "runtime/compile/kernel_store.hpp"

namespace fusion::detail {

/// FUSION_CACHE read: off for 0, off, no, false (any case); on when unset or 1, on, yes, true; an Error
/// naming the choices for anything else.
bool cache_enabled_by_environment();

class DiskCache final : public KernelStore {
 public:
  /// The process-wide cache configured by FUSION_CACHE / FUSION_CACHE_DIR / XDG_CACHE_HOME / HOME.
  static DiskCache& instance();
  explicit DiskCache(std::filesystem::path dir, bool enabled = true);

  bool enabled() const { return enabled_; }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path path_for(const CacheKey& key) const;
  /// The entry for `key`, or nothing when absent, corrupt, truncated or for another key.
  std::optional<CacheEntry> load(const CacheKey& key) const override;
  /// Stores atomically; an unwritable directory disables the cache with one warning, an entry's path that
  /// cannot be written (a directory there) skips that entry with a warning naming it.
  void store(const CacheEntry& e) override;
  /// The entry file for `key`, or "" where none was written (the cache off, its directory unwritable, the
  /// entry's path blocked): no path names a file that was never written (KernelInfo::cache_path).
  std::string location(const CacheKey& key) const override;

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
