// SPDX-License-Identifier: Apache-2.0
// The host side of fz::random, written from the Philox paper for the tests: what every element of the
// generators must be (fusion's own device code is text in src/runtime/exec/random.cpp).
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

namespace test::philox {

using Block = std::array<std::uint32_t, 4>;

inline Block block(std::uint64_t seed, std::uint64_t offset, std::uint64_t counter) {
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  Block c{static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(offset >> 32),
          static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32)};
  for (int r = 0; r < 10; ++r) {
    if (r > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0], p1 = std::uint64_t{0xCD9E8D57u} * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<std::uint32_t>(p0)};
  }
  return c;
}

inline std::uint32_t bits(std::uint64_t seed, std::uint64_t offset, std::uint64_t i) {
  return block(seed, offset, i / 4)[i % 4];
}
inline float uniform32(std::uint64_t seed, std::uint64_t offset, std::uint64_t i) {
  return static_cast<float>(bits(seed, offset, i) >> 8) * 0x1p-24f;
}
inline double uniform64(std::uint64_t seed, std::uint64_t offset, std::uint64_t i) {
  const Block b = block(seed, offset, i / 2);
  const std::uint64_t w = (std::uint64_t{b[2 * (i % 2) + 1]} << 32) | b[2 * (i % 2)];
  return static_cast<double>(w >> 11) * 0x1p-53;
}

}  // namespace test::philox
