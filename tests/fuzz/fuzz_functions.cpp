// SPDX-License-Identifier: Apache-2.0
#include "fuzz_functions.hpp"

#include <cmath>

#include "fusion/random.hpp"
#include "philox.hpp"

namespace fuzz {

using fusion::DType;

namespace {

test::Scalar floating(double f) { return test::Scalar{f, 0}; }
test::Scalar integer(std::int64_t i) { return test::Scalar{0, i}; }

}  // namespace

const std::vector<UserFunction>& user_functions() {
  static const std::vector<UserFunction> table = {
      {"fuzz_softplus", "float(float)", "(float x) { return x > 20.f ? x : log1pf(expf(x)); }", DType::float32,
       {DType::float32},
       [](const test::Scalar* a) { return floating(a[0].f > 20 ? a[0].f : std::log1p(std::exp(a[0].f))); }},
      {"fuzz_fma", "double(double, double, double)", "(double a, double b, double c) { return fma(a, b, c); }",
       DType::float64, {DType::float64, DType::float64, DType::float64},
       [](const test::Scalar* a) { return floating(std::fma(a[0].f, a[1].f, a[2].f)); }},
      {"fuzz_clamp_low", "std::int32_t(std::int32_t, std::int32_t)", "(int x, int lo) { return x < lo ? lo : x; }",
       DType::int32, {DType::int32, DType::int32},
       [](const test::Scalar* a) { return integer(a[0].i < a[1].i ? a[1].i : a[0].i); }},
      {"fuzz_mix_bits", "std::uint32_t(std::uint32_t)",
       "(unsigned int x) { x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; return x; }", DType::uint32,
       {DType::uint32}, [](const test::Scalar* a) {
         auto x = static_cast<std::uint32_t>(a[0].i);
         x ^= x >> 16;
         x *= 0x7feb352du;
         x ^= x >> 15;
         return integer(x);
       }},
      {"fuzz_scaled", "float(std::int64_t, float)", "(long long n, float x) { return n > 0 ? x * (float)(n % 5) : -x; }",
       DType::float32, {DType::int64, DType::float32}, [](const test::Scalar* a) {
         const auto x = static_cast<float>(a[1].f);
         return floating(a[0].i > 0 ? x * static_cast<float>(a[0].i % 5) : -x);
       }},
  };
  return table;
}

std::uint32_t user_function_id(int k) {
  static const std::vector<std::uint32_t> ids = [] {
    std::vector<std::uint32_t> v;
    for (const UserFunction& f : user_functions())
      v.push_back(fusion::detail::register_function(f.name, f.body, f.result, f.params));
    return v;
  }();
  return ids.at(static_cast<std::size_t>(k));
}

// (normal: Box-Muller as the device computes it, in float64: tests/philox.hpp)
const std::vector<RandomGenerator>& random_generators() {
  static const std::vector<RandomGenerator> table = {
      {"fz::random::uniform<float>", DType::float32,
       [](std::uint64_t s, std::uint64_t o, std::int64_t i) {
         return floating(test::philox::uniform32(s, o, static_cast<std::uint64_t>(i)));
       }},
      {"fz::random::uniform<double>", DType::float64,
       [](std::uint64_t s, std::uint64_t o, std::int64_t i) {
         return floating(test::philox::uniform64(s, o, static_cast<std::uint64_t>(i)));
       }},
      {"fz::random::normal<float>", DType::float32,
       [](std::uint64_t s, std::uint64_t o, std::int64_t i) {
         return floating(test::philox::normal32(s, o, static_cast<std::uint64_t>(i)));
       }},
      {"fz::random::normal<double>", DType::float64,
       [](std::uint64_t s, std::uint64_t o, std::int64_t i) {
         return floating(test::philox::normal64(s, o, static_cast<std::uint64_t>(i)));
       }},
      {"fz::random::bits", DType::uint32,
       [](std::uint64_t s, std::uint64_t o, std::int64_t i) {
         return integer(test::philox::bits(s, o, static_cast<std::uint64_t>(i)));
       }},
  };
  return table;
}

std::uint32_t random_generator_id(int k) {
  namespace r = fusion::random::detail;
  switch (k) {
    case 0: return r::uniform32_function()(0ull, 0ull, fusion::expr::Iota{}).id;
    case 1: return r::uniform64_function()(0ull, 0ull, fusion::expr::Iota{}).id;
    case 2: return r::normal32_function()(0ull, 0ull, fusion::expr::Iota{}).id;
    case 3: return r::normal64_function()(0ull, 0ull, fusion::expr::Iota{}).id;
    default: return r::bits_function()(0ull, 0ull, fusion::expr::Iota{}).id;
  }
}

}  // namespace fuzz
