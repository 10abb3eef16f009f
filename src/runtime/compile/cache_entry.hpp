// SPDX-License-Identifier: Apache-2.0
// What a kernel store keeps: the full key a compiled binary depends on, and the binary.
#pragma once
#include <cstdint>
#include <string>

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
  std::string location;  ///< where a store found it (filled by load; not part of the entry's bytes)
};

/// The options of an entry that holds no binary but a product race's verdict (runtime/exec/product_race.cpp): kept
/// with the kernels, listed and pruned with them, never compiled.
inline constexpr const char* kVerdictOptions = "-fusion-product-verdict";
inline bool is_verdict(const CacheKey& k) { return k.options == kVerdictOptions; }

}  // namespace fusion::detail
