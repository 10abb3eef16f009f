// SPDX-License-Identifier: Apache-2.0
// A stable 64-bit hash: FNV-1a over an explicit little-endian serialization, then a strong final mix.
// It depends on nothing but the bytes, so it is the same on every machine, compiler and run.
#include "common/hash.hpp"

namespace fusion {

void StableHasher::add_byte(std::uint8_t b) {
  h_ ^= b;
  h_ *= 0x100000001b3ull;
}
void StableHasher::add_u32(std::uint32_t v) {
  for (int i = 0; i < 4; ++i) add_byte(static_cast<std::uint8_t>(v >> (8 * i)));
}
void StableHasher::add_u64(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) add_byte(static_cast<std::uint8_t>(v >> (8 * i)));
}
void StableHasher::add(std::string_view s) {
  add_u64(s.size());
  for (char c : s) add_byte(static_cast<std::uint8_t>(c));
}
std::uint64_t StableHasher::digest() const {
  std::uint64_t z = h_ + 0x9e3779b97f4a7c15ull;  // splitmix64 finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string hex16(std::uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = digits[v & 15];
  return s;
}

}  // namespace fusion
