// SPDX-License-Identifier: Apache-2.0
// Host-side storage types for 16-bit floats. Conversions round to nearest even, like the GPU's cvt.rn.
#pragma once
#include "fusion/cpp20.hpp"
#include <bit>
#include <cstdint>
#include <type_traits>

namespace fusion {

/// IEEE binary16. Arithmetic happens in float; the value is rounded once on conversion back.
struct half {
  std::uint16_t bits = 0;
  half() = default;
  half(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a built-in float type
  operator float() const { return to_float(bits); }
  static half from_bits(std::uint16_t b) { half h; h.bits = b; return h; }

  static std::uint16_t from_float(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
    if (abs < 0x38800000u) {  // result is subnormal or zero: scale into the subnormal grid, then round
      const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // 2^24: one unit = one subnormal step
      std::uint32_t q = static_cast<std::uint32_t>(scaled);
      const float rem = scaled - static_cast<float>(q);
      if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
      return static_cast<std::uint16_t>(sign | q);
    }
    const std::uint32_t mant_round = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even on bit 13
    return static_cast<std::uint16_t>(sign | ((mant_round - 0x38000000u) >> 13));
  }
  static float to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
      const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
      return sign ? -v : v;
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

/// bfloat16: the top half of a float32, rounded to nearest even.
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float f) : bits(from_float(f)) {}  // NOLINT
  operator float() const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }
  static bfloat16 from_bits(std::uint16_t b) { bfloat16 h; h.bits = b; return h; }

  static std::uint16_t from_float(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
};

/// The host types of 16-bit floats: kept as raw bits, computed in float (a new narrow float joins here).
template <class T> concept NarrowFloat = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

}  // namespace fusion
