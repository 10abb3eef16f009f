// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace fusion {

/// Incremental stable hash (see hash.cpp); feed it explicit fixed-width values only.
class StableHasher {
 public:
  void add_byte(std::uint8_t b);
  void add_u32(std::uint32_t v);
  void add_u64(std::uint64_t v);
  void add(std::string_view s);
  std::uint64_t digest() const;

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ull;
};

/// 16 lowercase hex digits.
std::string hex16(std::uint64_t v);

}  // namespace fusion
