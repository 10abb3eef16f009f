// SPDX-License-Identifier: Apache-2.0
// What `fusion cache ls|show|stats|clear|prune|warm` does, on any DiskCache (the CLI uses the configured one).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/compile/disk_cache.hpp"

namespace fusion::detail {

/// One line per entry: kernel name, target, size, file.
void cache_ls(const DiskCache& cache, std::ostream& out);
/// The stored source (and key facts) of entries whose kernel name or hash matches `what`; false if none.
bool cache_show(const DiskCache& cache, const std::string& what, std::ostream& out);
/// Directory, entries, bytes, and unreadable files.
void cache_stats(const DiskCache& cache, std::ostream& out);
/// Removes every entry; returns how many.
std::size_t cache_clear(const DiskCache& cache);
/// Removes least recently used entries until the total is at most `max_bytes`; returns how many.
std::size_t cache_prune(const DiskCache& cache, std::uintmax_t max_bytes);

/// What cache_warm did.
struct WarmResult {
  std::size_t compiled = 0;  ///< new entries
  std::size_t present = 0;   ///< already in the cache
  std::size_t failed = 0;    ///< did not compile for a target, or options not understood (a line each on `out`)
  double seconds = 0;
};
/// Compiles every kernel stored in `from` (a copy of another machine's cache, or the cache itself) with
/// this process's NVRTC into `into`, for each architecture in `archs` (empty: the one each entry was built
/// for), on `jobs` threads; what `into` has already is skipped. For a cache that must be ready before the
/// first call: after a CUDA upgrade (entries of another NVRTC are misses), for a new GPU generation, or
/// to turn a cache filled on one machine into one for another.
WarmResult cache_warm(const DiskCache& from, KernelStore& into, const std::vector<int>& archs, int jobs,
                      std::ostream& out);

}  // namespace fusion::detail
