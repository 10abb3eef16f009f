// SPDX-License-Identifier: Apache-2.0
// fz::random without a GPU: the Philox stream against cuRAND's host generator bit for bit, and the
// kernels the generators fuse into (one elementwise kernel; a temporary before a reduction).
#include <curand.h>

#include "philox.hpp"
#include "support.hpp"

TEST_CASE("the Philox stream is cuRAND's: the host generator's first 262,144 values, bit for bit", "[random]") {
  for (const std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{1234}, std::uint64_t{0x123456789abcdefull}}) {
    curandGenerator_t g;
    REQUIRE(curandCreateGeneratorHost(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10) == CURAND_STATUS_SUCCESS);
    REQUIRE(curandSetPseudoRandomGeneratorSeed(g, seed) == CURAND_STATUS_SUCCESS);
    std::vector<std::uint32_t> want(262144);
    REQUIRE(curandGenerate(g, want.data(), want.size()) == CURAND_STATUS_SUCCESS);
    curandDestroyGenerator(g);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) bad += test::philox::bits(seed, 0, i) != want[i];
    INFO("seed " << seed);
    CHECK(bad == 0);
  }
  // Known-answer vector of the Random123 distribution: Philox4x32-10 of counter 0, key 0
  const test::philox::Block zero = test::philox::block(0, 0, 0);
  CHECK(zero == test::philox::Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  // and of counter and key all ones
  const test::philox::Block ones = test::philox::block(~std::uint64_t{0}, ~std::uint64_t{0}, ~std::uint64_t{0});
  CHECK(ones == test::philox::Block{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  // uniforms are multiples of their resolution in [0, 1)
  for (std::uint64_t i = 0; i < 1000; ++i) {
    const float u = test::philox::uniform32(7, 3, i);
    CHECK((u >= 0 && u < 1 && u * 0x1p24f == std::floor(u * 0x1p24f)));
  }
}

TEST_CASE("random generators fuse into one elementwise kernel, and come first before a reduction", "[random][plan]") {
  auto x = fz::placeholder<float>({1 << 20});
  const float p = 0.1f;
  const fz::KernelInfo dropout = fz::inspect(fz::where(fz::random::uniform<float>(42) < p, 0.f, x / (1 - p)));
  CHECK(dropout.kernels == 1);
  CHECK_THAT(dropout.name, Catch::StartsWith("fz_random_uniform"));
  CHECK_THAT(dropout.source, Catch::Contains("__umulhi(0xD2511F53u"));
  CHECK(!dropout.arch.empty());
  CHECK(fz::inspect(fz::random::normal<double>(1, fz::random::Offset{2}) * 2.0 + x).kernels == 1);
  CHECK(!fz::inspect(fz::random::bits(5) + fz::placeholder<std::uint32_t>({7, 9})).arch.empty());
  CHECK(!fz::inspect(fz::random::normal<float>(1) + fz::random::uniform<double>(2) + x)
             .arch.empty());  // both in one kernel

  // a reduction's layout has no index of the result: the generator runs first, into a temporary
  const fz::KernelInfo mean = fz::inspect(fz::sum(fz::random::uniform<float>(7) * x));
  CHECK(mean.kernels == 2);
  auto m = fz::placeholder<float>({512, 1024});
  const fz::KernelInfo noisy_softmax = fz::inspect(fz::exp(m + fz::random::normal<float>(3)) /
                                                   fz::sum(fz::exp(m + fz::random::normal<float>(3)), -1, true));
  CHECK(noisy_softmax.kernels >= 2);  // not a layer kernel
  CHECK(!noisy_softmax.arch.empty());
  // nor does a reduction's kernel have the result's index for an epilogue: a generator beside a total runs after it
  // (it failed to compile in the reduction's kernel: fusion-fuzz --calls found it)
  const fz::KernelInfo shifted = fz::inspect(fz::random::uniform<float>(7) + fz::sum(m));
  CHECK(shifted.kernels == 2);
  CHECK(!shifted.arch.empty());
  CHECK(fz::inspect(fz::random::bits(2) - fz::nanmin(m, {0, 1})).kernels == 2);
}

TEST_CASE("a braced shape picks the overload that makes an array, never a seed", "[random]") {
  // `uniform<float>({n}, 11)` once read {n} as the seed and 11 as the offset: an expression of one element
  const std::int64_t n = 1 << 22;
  STATIC_REQUIRE(std::is_same_v<decltype(fz::random::uniform<float>({n}, 11)), fz::Array<float>>);
  STATIC_REQUIRE(std::is_same_v<decltype(fz::random::normal<double>({n}, 11)), fz::Array<double>>);
  STATIC_REQUIRE(std::is_same_v<decltype(fz::random::bits({n}, 11)), fz::Array<std::uint32_t>>);
  STATIC_REQUIRE(std::is_same_v<decltype(fz::random::uniform<float>({n, 3}, 11)), fz::Array<float>>);
  // a seed of any integer type makes an expression
  STATIC_REQUIRE(!std::is_same_v<decltype(fz::random::uniform<float>(n)), fz::Array<float>>);
  STATIC_REQUIRE(!std::is_same_v<decltype(fz::random::uniform<float>(n, fz::random::Offset{11})), fz::Array<float>>);
  // (two integers do not compile: tests/compile_fail/random_two_ints.cpp)
  STATIC_REQUIRE(!std::is_same_v<decltype(fz::random::bits(11u)), fz::Array<std::uint32_t>>);
  CHECK(fz::inspect(fz::random::uniform<float>(std::int8_t{3}) + fz::placeholder<float>({5})).kernels == 1);
}

TEST_CASE("fz::inspect under fz::Unfused shows the unfused kernels", "[random][plan]") {
  auto x = fz::placeholder<float>({1000}), y = fz::placeholder<float>({1000});
  CHECK(fz::inspect(fz::sin(x) + fz::cos(y)).kernels == 1);
  fz::Unfused unfused;
  CHECK(fz::inspect(fz::sin(x) + fz::cos(y)).kernels == 3);
  CHECK(fz::inspect(fz::sin(x)).kernels == 1);
  CHECK(fz::inspect(fz::sum(x * y)).kernels == 2);
  // a generator's kernel writes a temporary as large as the index space it numbers
  const fz::KernelInfo r = fz::inspect(fz::random::uniform<float>(3) * x + 1.f);
  CHECK(r.kernels == 3);
  CHECK(!r.arch.empty());
}
