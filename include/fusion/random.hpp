// SPDX-License-Identifier: Apache-2.0
// Random numbers inside fused expressions: counter-based (Philox-4x32-10), so the value at each element
// depends only on (seed, offset, the element's flat index in the result) — the same whatever the layout,
// the vector width or how the expression is split into kernels. Dropout is one kernel:
//   y = fz::where(fz::random::uniform<float>(seed) < p, 0.f, x / (1 - p));
#pragma once
#include <concepts>
#include <cstdint>
#include <string>

#include "fusion/array.hpp"
#include "fusion/function.hpp"

namespace fusion::random {

/// Where a generator's counter starts (the step number of a training loop): a type of its own, so that two
/// integers never read as (seed, offset) by accident: `uniform<float>(n, seed)`, PyTorch's `rand(n)` habit,
/// does not compile (it would be one random value with seed n).
struct Offset {
  explicit constexpr Offset(std::uint64_t v) : value(v) {}
  std::uint64_t value;
};

namespace detail {
template <class> inline constexpr bool refused = false;
using Bits = Function<std::uint32_t(std::uint64_t, std::uint64_t, std::int64_t)>;
using Uniform32 = Function<float(std::uint64_t, std::uint64_t, std::int64_t)>;
using Uniform64 = Function<double(std::uint64_t, std::uint64_t, std::int64_t)>;
/// The device functions behind the generators (their CUDA text is in src/runtime/exec/random.cpp).
const Bits& bits_function();
const Uniform32& uniform32_function();
const Uniform64& uniform64_function();
const Uniform32& normal32_function();
const Uniform64& normal64_function();
/// The float32 Box-Muller transform's statements: from words `lo` and `hi` (unsigned int) to the radius `r` and the
/// angle's sine `s` and cosine `c` (tests evaluate it on every input).
std::string normal32_transform();
/// The float64 one: from `lo` and `hi` (unsigned long long) to `r`, `s` and `c` in double.
std::string normal64_transform();

/// A float or double leaf from the generator of that width.
template <class T> auto float_leaf(const Uniform32& f32, const Uniform64& f64, std::uint64_t seed, Offset offset) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "fusion: random::uniform and random::normal make float or double; cast the result for 16-bit floats");
  if constexpr (std::is_same_v<T, float>) return f32(seed, offset.value, expr::Iota{});
  else return f64(seed, offset.value, expr::Iota{});
}
}  // namespace detail

/// The raw stream: element i of the result is word i % 4 of Philox-4x32-10 with key `seed` and counter
/// (offset, i / 4) (two 32-bit words each, low word first). With offset 0 this is cuRAND's
/// CURAND_RNG_PSEUDO_PHILOX4_32_10 host generator's output for the same seed (its first 262,144 values:
/// the generator interleaves 65,536 subsequences after that).
// The seed is a template parameter so that `uniform<float>({n}, seed)` cannot read `{n}` as a seed: a
// braced list deduces nothing, and the call takes the overload with a shape (below) as it looks like it does.
template <std::integral Seed> auto bits(Seed seed, Offset offset = Offset{0}) {
  return detail::bits_function()(static_cast<std::uint64_t>(seed), offset.value, expr::Iota{});
}

/// Uniform in [0, 1): float32 from 24 bits of word i % 4 of block i / 4 (every value a multiple of
/// 2^-24); float64 from 53 bits of the words 2(i % 2), 2(i % 2) + 1 of block i / 2.
template <class T = float, std::integral Seed> auto uniform(Seed seed, Offset offset = Offset{0}) {
  return detail::float_leaf<T>(detail::uniform32_function(), detail::uniform64_function(), seed, offset);
}
/// Two integers: refused (see Offset).
template <class T = float, std::integral A, std::integral B> auto uniform(A, B) {
  static_assert(detail::refused<A>,
                "fusion: random::uniform<float>(a, b) with two integers is ambiguous: an array of n values is "
                "random::uniform<float>({n}, seed); a random leaf of an expression starting at step k is "
                "random::uniform<float>(seed, fz::random::Offset{k})");
}

/// Standard normal (Box-Muller, both outputs of each pair, as cuRAND's curand_normal4 pairs them): float32
/// element i is r cos(2 pi u2) for even i, r sin(2 pi u2) for odd i, with r = sqrt(-2 log u1), u1 in (0, 1] and u2 in
/// [0, 1) from 24 bits of the words 2j, 2j + 1 (j = (i / 2) % 2) of block i / 4; float64 the same from 53 bits of
/// words (0, 1) and (2, 3) of block i / 2.
template <class T = float, std::integral Seed> auto normal(Seed seed, Offset offset = Offset{0}) {
  return detail::float_leaf<T>(detail::normal32_function(), detail::normal64_function(), seed, offset);
}
/// Two integers: refused (see Offset).
template <class T = float, std::integral A, std::integral B> auto normal(A, B) {
  static_assert(detail::refused<A>,
                "fusion: random::normal<float>(a, b) with two integers is ambiguous: an array of n values is "
                "random::normal<float>({n}, seed); a random leaf of an expression starting at step k is "
                "random::normal<float>(seed, fz::random::Offset{k})");
}
template <std::integral A, std::integral B> auto bits(A, B) {
  static_assert(detail::refused<A>,
                "fusion: random::bits(a, b) with two integers is ambiguous: an array of n values is "
                "random::bits({n}, seed); a random leaf starting at step k is random::bits(seed, fz::random::Offset{k})");
}

/// New arrays of `shape` filled from the generators above (one kernel each).
template <class T = float> Array<T> uniform(const Shape& shape, std::uint64_t seed, Offset offset = Offset{0}) {
  Array<T> a = empty<T>(shape);
  copyto(a, uniform<T>(seed, offset));
  return a;
}
template <class T = float> Array<T> normal(const Shape& shape, std::uint64_t seed, Offset offset = Offset{0}) {
  Array<T> a = empty<T>(shape);
  copyto(a, normal<T>(seed, offset));
  return a;
}
inline Array<std::uint32_t> bits(const Shape& shape, std::uint64_t seed, Offset offset = Offset{0}) {
  Array<std::uint32_t> a = empty<std::uint32_t>(shape);
  copyto(a, bits(seed, offset));
  return a;
}

}  // namespace fusion::random
