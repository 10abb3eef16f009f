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

/// Standard normals in float64 from the words fz::random::normal reads (Box-Muller, both outputs of a pair): the
/// device's float32 values lie within a few float ulps of normal32, its float64 values within a few double ulps.
inline double box_muller(double u1, double u2, bool sine) {
  const double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * 3.14159265358979323846 * u2;
  return r * (sine ? std::sin(t) : std::cos(t));
}
inline double normal32(std::uint64_t seed, std::uint64_t offset, std::uint64_t i) {
  const Block b = block(seed, offset, i / 4);
  const std::size_t j = 2 * ((i / 2) % 2);
  return box_muller((static_cast<double>(b[j] >> 8) + 1) * 0x1p-24, static_cast<double>(b[j + 1] >> 8) * 0x1p-24, i % 2);
}
inline double normal64(std::uint64_t seed, std::uint64_t offset, std::uint64_t i) {
  const Block b = block(seed, offset, i / 2);
  const std::uint64_t x = (std::uint64_t{b[1]} << 32) | b[0], y = (std::uint64_t{b[3]} << 32) | b[2];
  return box_muller((static_cast<double>(x >> 11) + 1) * 0x1p-53, static_cast<double>(y >> 11) * 0x1p-53, i % 2);
}

}  // namespace test::philox
