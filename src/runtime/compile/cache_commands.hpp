// SPDX-License-Identifier: Apache-2.0
// What `fusion cache ls|show|stats|clear|prune` does, on any DiskCache (the CLI uses the configured one).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

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

}  // namespace fusion::detail
