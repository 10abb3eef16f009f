// SPDX-License-Identifier: Apache-2.0
// Generated matrix products without a GPU (fz::GeneratedProducts): which products and epilogues become one
// generated kernel, its name and source, each layout and load path compiling through NVRTC for sm_90, and
// what stays on cuBLASLt.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/exec/product_race.hpp"
#include "schedule/product_layout.hpp"
#include "schedule/product_route.hpp"
#include "schedule/tuning.hpp"
#include "support.hpp"

namespace {

using bf16 = fz::bfloat16;

fz::KernelInfo generated(const fz::KernelInfo& k) {
  INFO(k);
  REQUIRE(k.kernels == 1);
  CHECK_THAT(k.name, Catch::StartsWith("fz_matmul_"));
  CHECK_THAT(k.variant, Catch::Contains("generated") && Catch::Contains("product"));
  CHECK_THAT(k.source, (Catch::Contains("mma.sync.aligned.m16n8k16") || Catch::Contains("wgmma.mma_async")) &&
                           Catch::Contains("fz_expr"));
  CHECK(k.registers > 0);  // compiled (NVRTC and ptxas for the planned device)
  return k;
}

}  // namespace

TEST_CASE("under fz::GeneratedProducts a product and the math reading it are one generated kernel", "[matmul]") {
  fz::GeneratedProducts on;
  const auto x = fz::placeholder<bf16>({300, 256}), w = fz::placeholder<bf16>({256, 520});
  const auto bias = fz::placeholder<bf16>({520}), residual = fz::placeholder<bf16>({300, 520});
  const auto p = fz::matmul(x, w);
  const auto k = generated(fz::inspect(fz::maximum(p + bias, 0.0f) * 0.5f + residual));
  CHECK_THAT(k.name, Catch::Contains("maximum") && Catch::Contains("add"));
  CHECK_THAT(k.variant, Catch::Contains("bfloat16 product (NN)") && Catch::Contains("cp.async"));
  // what cuBLASLt's epilogues cannot express is the same one kernel: an erf GELU, a bias along the rows,
  // a float32 result, a user function
  generated(fz::inspect(fz::gelu(p + bias)));
  generated(fz::inspect(p + fz::placeholder<bf16>({300, 1})));
  generated(fz::inspect(fz::tanh(p.astype<float>()) + fz::placeholder<float>({520})));
}

TEST_CASE("generated products: every layout, unaligned operands, both tile classes and float16 compile", "[matmul]") {
  fz::GeneratedProducts on;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const auto a = ta ? fz::placeholder<bf16>({64, 128}).transpose() : fz::placeholder<bf16>({128, 64});
      const auto b = tb ? fz::placeholder<bf16>({96, 64}).transpose() : fz::placeholder<bf16>({64, 96});
      const auto k = generated(fz::inspect(fz::matmul(a, b) * 2.0f));
      CHECK_THAT(k.variant, Catch::Contains(std::string("(") + (ta ? "T" : "N") + (tb ? "T" : "N") + ")"));
    }
  // a contiguous extent not of whole 16-byte chunks: plain loads
  const auto odd = generated(fz::inspect(fz::matmul(fz::placeholder<fz::half>({33, 13}), fz::placeholder<fz::half>({13, 21})) + 1.0f));
  CHECK_THAT(odd.variant, Catch::Contains("float16") && Catch::Contains("plain loads") && Catch::Contains("64x64x64"));
  // a product with a tile per multiprocessor takes the large tiles (on the H100 planned for, the Hopper path's);
  // batches count
  const auto big = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({2048, 512}), fz::placeholder<bf16>({512, 1536})) - 1.0f));
  CHECK_THAT(big.variant, Catch::Contains("128x256x64") && Catch::Contains("Hopper"));
  // too few tiles to fill the device: K split over blocks (on the H100, the Hopper path's 64-row tiles)
  const auto skinny = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({16, 4096}), fz::placeholder<bf16>({4096, 4096})) + 1.0f));
  CHECK_THAT(skinny.variant, Catch::Contains("64x128x64") && Catch::Contains("Hopper") && Catch::Contains("K split"));
  CHECK_THAT(skinny.source, Catch::Contains("constexpr bool FZ_SPLIT = true") && Catch::Contains("float* __restrict__ fz_partials"));
  const auto small = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({100, 1000}), fz::placeholder<bf16>({1000, 200})) + 1.0f));
  CHECK_THAT(small.variant, Catch::Contains("K split"));
  // (K shorter than two slices: no split, and too few tiles for the Hopper path)
  const auto short_k = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({100, 200}), fz::placeholder<bf16>({200, 1000})) + 1.0f));
  CHECK_THAT(short_k.variant, Catch::Contains("64x64x64") && Catch::Contains("mma.sync") && !Catch::Contains("K split"));
  CHECK_THAT(big.variant, !Catch::Contains("K split"));
  const auto batched = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({40, 128, 64}), fz::placeholder<bf16>({64, 512})) + 1.0f));
  CHECK_THAT(batched.variant, Catch::Contains("Hopper"));
}

TEST_CASE("generated products: the Hopper path compiles for sm_90a in every layout, and where it does not apply",
          "[matmul]") {
  fz::GeneratedProducts on;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const auto a = ta ? fz::placeholder<fz::half>({512, 2048}).transpose() : fz::placeholder<fz::half>({2048, 512});
      const auto b = tb ? fz::placeholder<fz::half>({4096, 512}).transpose() : fz::placeholder<fz::half>({512, 4096});
      const auto k = generated(fz::inspect(fz::matmul(a, b) * 2.0f));
      CHECK_THAT(k.variant, Catch::Contains("Hopper") && Catch::Contains("float16"));
      // the producer's tensor copies and the consumers' wgmma; the operands arrive as tensor maps; the epilogue
      // warps wait for each staged tile
      CHECK_THAT(k.source, Catch::Contains("cp.async.bulk.tensor.3d") && Catch::Contains("wgmma.mma_async.sync.aligned.m64n256k16") &&
                               Catch::Contains("__grid_constant__ FzTensorMap ta") && Catch::Contains("fz_bar_wait(staged, j & 1)"));
    }
  // the tile table's other rows compile too: 128 x 192 tiles 4 stages deep
  const fz::detail::Tuning before = fz::detail::tuning();
  fz::detail::set_tuning("product_hopper=2");
  const auto wide = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({2048, 512}), fz::placeholder<bf16>({512, 4096})) + 1.0f));
  fz::detail::tuning() = before;
  CHECK_THAT(wide.variant, Catch::Contains("128x192x64") && Catch::Contains("4 stages"));
  CHECK_THAT(wide.source, Catch::Contains("wgmma.mma_async.sync.aligned.m64n192k16"));
  // a few hundred rows: 64 x 128 tiles, one consumer warpgroup
  const auto few = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({256, 4096}), fz::placeholder<bf16>({4096, 4096}).transpose()) + 1.0f));
  CHECK_THAT(few.variant, Catch::Contains("64x128x64") && Catch::Contains("1 consumer warpgroup of"));
  // too few 128 x 256 tiles to fill the device: 128 x 128 ones
  const auto mid = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({1000, 136}), fz::placeholder<bf16>({136, 1040})) + 1.0f));
  CHECK_THAT(mid.variant, Catch::Contains("128x128x64") && Catch::Contains("Hopper"));
  CHECK_THAT(mid.source, Catch::Contains("wgmma.mma_async.sync.aligned.m64n128k16"));
  // rows not 16 bytes apart (the copy engine's strides are), or the path turned off: the mma.sync kernel
  const auto odd = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({2048, 516}), fz::placeholder<bf16>({516, 4096})) + 1.0f));
  CHECK_THAT(odd.variant, Catch::Contains("mma.sync") && Catch::Contains("128x128x32"));
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("product_hopper=0");
  const auto off = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({2048, 512}), fz::placeholder<bf16>({512, 4096})) + 1.0f));
  fz::detail::tuning() = saved;
  CHECK_THAT(off.variant, Catch::Contains("mma.sync"));
  // the same source is a different kernel from the mma.sync one (name and hash)
  CHECK(off.name != generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({2048, 512}), fz::placeholder<bf16>({512, 4096})) + 1.0f)).name);
}

TEST_CASE("generated products: clusters of 2 sharing b's tiles compile in every layout where the row tiles pair up",
          "[matmul]") {
  fz::GeneratedProducts on;
  const fz::detail::Tuning before = fz::detail::tuning();
  fz::detail::set_tuning("product_cluster=2");
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const auto a = ta ? fz::placeholder<bf16>({512, 256}).transpose() : fz::placeholder<bf16>({256, 512});
      const auto b = tb ? fz::placeholder<bf16>({4096, 512}).transpose() : fz::placeholder<bf16>({512, 4096});
      const auto k = generated(fz::inspect(fz::matmul(a, b) * 2.0f));
      INFO(k.variant);
      // 4 row tiles of 64: pairs of blocks take the two tiles of one column of tiles, each copying its share of
      // b into both (the boxes of 64 columns alternate, or half the columns of a column-major b)
      CHECK_THAT(k.variant, Catch::Contains("64x128x64") && Catch::Contains("in clusters of 2 sharing b's tiles"));
      CHECK_THAT(k.source, Catch::Contains("__cluster_dims__(2, 1, 1)") && Catch::Contains(".multicast::cluster") &&
                               Catch::Contains("constexpr int FZ_CLUSTER = 2;") && Catch::Contains("fz_cluster_meet();"));
    }
  // large tiles (128 x 256, two consumer warpgroups) pair up as well
  const auto large = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({2048, 512}), fz::placeholder<bf16>({512, 4096})) + 1.0f));
  CHECK_THAT(large.variant, Catch::Contains("128x256x64") && Catch::Contains("in clusters of 2"));
  // an odd number of row tiles (3 of 64 x 128), or K split: no cluster
  const auto odd = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({190, 512}), fz::placeholder<bf16>({512, 4096})) + 1.0f));
  const auto split = generated(fz::inspect(fz::matmul(fz::placeholder<bf16>({16, 4096}), fz::placeholder<bf16>({4096, 4096})) + 1.0f));
  fz::detail::tuning() = before;
  CHECK_THAT(odd.variant, !Catch::Contains("clusters"));
  CHECK_THAT(split.variant, Catch::Contains("K split") && !Catch::Contains("clusters"));
  CHECK_THAT(odd.source, !Catch::Contains("__cluster_dims__"));
}

TEST_CASE("by default a product the generated kernel could win is raced against cuBLASLt; fz::inspect says so",
          "[matmul]") {
  const auto bias = fz::placeholder<bf16>({4096});
  auto layer = [&](std::int64_t m) {
    const auto x = fz::placeholder<bf16>({m, 4096}), w = fz::placeholder<bf16>({4096, 4096});
    return fz::inspect(fz::maximum(fz::matmul(x, w) + bias, 0.0f) * 0.5f + fz::placeholder<bf16>({m, 4096}));
  };
  // (on the H100 planned for, without a GPU) the Hopper path's classes are raced on a GPU's first calls: until
  // then, and here, cuBLASLt's product and the epilogue kernel
  for (const std::int64_t m : {8192, 512, 64, 16}) {
    const fz::KernelInfo k = layer(m);
    INFO(k);
    REQUIRE(k.kernels == 2);
    CHECK_THAT(k.plan[0], Catch::Contains("cublasLtMatmul") && Catch::Contains("Hopper") &&
                              Catch::Contains("timed against cuBLASLt on the first calls"));
  }
  // the mma.sync kernel (other devices; here the Hopper path tuned off) is not raced, and fz::inspect says why
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("product_hopper=0");
  CHECK_THAT(layer(8192).plan[0], Catch::Contains("cublasLtMatmul") && Catch::Contains("is not raced") &&
                                      Catch::Contains("mma.sync kernel measured"));
  fz::detail::tuning() = saved;
  // fz::GeneratedProducts takes it whatever was measured; fz::CublasProducts (and fz::Deterministic) never
  {
    fz::GeneratedProducts on;
    const fz::KernelInfo forced = layer(512);
    CHECK(forced.kernels == 1);
    CHECK_THAT(forced.plan[0], Catch::StartsWith("fz_matmul_") && Catch::Contains("chosen by fz::GeneratedProducts"));
  }
  for (int which = 0; which < 2; ++which) {
    std::optional<fz::CublasProducts> off;
    std::optional<fz::Deterministic> exact;
    which == 0 ? (void)off.emplace() : (void)exact.emplace();
    const fz::KernelInfo library = layer(8192);
    REQUIRE(library.kernels == 2);
    CHECK_THAT(library.plan[0], Catch::Contains("cublasLtMatmul") && !Catch::Contains("generated kernel"));
  }
}

TEST_CASE("the product race times the routes in turn and keeps the fastest candidate only 1% faster or more",
          "[matmul]") {
  using fz::detail::Verdict;
  using Taken = std::vector<std::size_t>;
  const auto next = [](Taken t) { return fz::detail::route_to_time(t); };
  // the fewest samples first, the candidates (1...) before the library (0) where they tie: turns
  CHECK(next({0, 0}) == 1);
  CHECK(next({0, 1}) == 0);
  CHECK(next({3, 3}) == 1);
  CHECK(next({5, 6}) == 0);
  CHECK(next({6, 6}) == -1);
  CHECK(next({2, 6}) == 0);  // (more calls on one route than another: each to its count)
  CHECK(next({0, 0, 0, 0}) == 1);
  CHECK(next({0, 1, 0, 0}) == 2);
  CHECK(next({0, 1, 1, 1}) == 0);
  CHECK(next({1, 1, 1, 1}) == 1);
  CHECK(next({6, 6, 6, 5}) == 3);
  // each route's fastest sample; the library wins a tie and anything within 1%
  const auto verdict = [](std::vector<std::vector<double>> times, std::vector<int> out_of_race = {}) {
    std::unique_ptr<bool[]> out(new bool[times.size()]());
    for (const int r : out_of_race) out[static_cast<std::size_t>(r)] = true;
    return fz::detail::race_verdict(times, std::span<const bool>(out.get(), times.size()));
  };
  const std::vector<double> library = {80, 10.1, 70, 10.3, 10.2, 90};  // (the host's work inside some samples)
  CHECK(verdict({library, {12, 12, 12, 12, 12}}).verdict == Verdict::none);  // five: not yet
  const auto won = verdict({library, {30, 9.9, 9.8, 30, 9.9, 9.9}});
  CHECK(won.verdict == Verdict::generated);
  CHECK(won.fastest == 1);
  CHECK(won.library_us == 10.1);
  CHECK(won.generated_us == 9.8);
  CHECK(verdict({library, {10.0, 10.0, 10.0, 10.0, 10.0, 10.0}}).verdict == Verdict::library);  // within 1%
  const auto lost = verdict({library, {11, 11, 11, 11, 11, 11}});
  CHECK(lost.verdict == Verdict::library);
  CHECK(lost.fastest == 1);
  CHECK(lost.generated_us == 11);
  // several candidates: the fastest of them against the library; one still short of samples: not yet
  const std::vector<double> slow = {12, 12, 12, 12, 12, 12}, fast = {20, 9, 9.5, 9.2, 9.1, 9.3};
  const auto three = verdict({library, slow, fast, slow});
  CHECK(three.verdict == Verdict::generated);
  CHECK(three.fastest == 2);
  CHECK(three.generated_us == 9);
  CHECK(verdict({library, slow, fast, {1, 2}}).verdict == Verdict::none);
  // after two samples each, a candidate more than 15% behind the fastest route leaves the race
  const auto cuts = [](std::vector<std::vector<double>> times, std::vector<int> out_of_race = {}) {
    std::unique_ptr<bool[]> out(new bool[times.size()]());
    for (const int r : out_of_race) out[static_cast<std::size_t>(r)] = true;
    fz::detail::race_cuts(times, std::span<bool>(out.get(), times.size()));
    std::vector<int> left;
    for (std::size_t r = 0; r < times.size(); ++r)
      if (out[r]) left.push_back(static_cast<int>(r));
    return left;
  };
  using Routes = std::vector<int>;
  CHECK(cuts({{13.2, 13.3}, {13.3, 13.5}, {12.6, 12.5}, {17.0, 17.2}, {23.2, 23.3}}) == Routes{3, 4});
  CHECK(cuts({{13.2, 13.3}, {13.3, 13.5}, {12.6}, {17.0, 17.2}, {23.2, 23.3}}).empty());  // one sample: not yet
  CHECK(cuts({{13.2, 13.3}, {}, {12.6, 12.5}, {17.0, 17.2}}, {1}) == Routes{1, 3});  // (a failed one stays out)
  CHECK(cuts({{30, 31}, {10, 10}}).empty());  // the library never leaves
  // a candidate whose build failed leaves the race: the others decide, and with none left the library stays
  const auto without = verdict({library, slow, {}, slow}, {2});
  CHECK(without.verdict == Verdict::library);
  CHECK(without.fastest == 1);
  // every candidate behind: the library stays, and the verdict names the fastest of them
  const auto behind = verdict({library, {30, 31}, {40, 41}}, {1, 2});
  CHECK(behind.verdict == Verdict::library);
  CHECK(behind.fastest == 1);
  CHECK(behind.generated_us == 30);
  CHECK(verdict({library, {}}, {1}).fastest == 0);
  CHECK(verdict({library, {}}, {1}).verdict == Verdict::library);
}

TEST_CASE("FUSION_GENERATED_PRODUCTS takes the spellings people write and refuses the rest", "[matmul]") {
  using fz::detail::ProductsMode;
  using test::ScopedEnv;
  for (const char* race : {"", "auto", "AUTO"}) {
    ScopedEnv env("FUSION_GENERATED_PRODUCTS", race);
    CHECK(fz::detail::products_mode_by_environment() == ProductsMode::race);
  }
  for (const char* on : {"1", "on", "Yes", "true"}) {
    ScopedEnv env("FUSION_GENERATED_PRODUCTS", on);
    CHECK(fz::detail::products_mode_by_environment() == ProductsMode::generated);
  }
  for (const char* off : {"0", "OFF", "no", "False"}) {
    ScopedEnv env("FUSION_GENERATED_PRODUCTS", off);
    CHECK(fz::detail::products_mode_by_environment() == ProductsMode::library);
  }
  ScopedEnv env("FUSION_GENERATED_PRODUCTS", "fast");
  CHECK_THROWS_WITH(fz::detail::products_mode_by_environment(),
                    Catch::Contains("'fast'") && Catch::Contains("give auto") && Catch::Contains("0 (always cuBLASLt)"));
}

TEST_CASE("generated products: the outputs of a tie are written by the one kernel", "[matmul]") {
  fz::GeneratedProducts on;
  const fz::detail::Tuning saved = fz::detail::tuning();
  for (const bool hopper : {true, false}) {  // (on the H100 planned for) the Hopper path, and mma.sync tiles
    if (!hopper) fz::detail::set_tuning("product_hopper=0");
    const auto x = fz::placeholder<bf16>({2048, 512}), w = fz::placeholder<bf16>({512, 1536});
    const auto bias = fz::placeholder<bf16>({1536});
    const auto p = fz::matmul(x, w);
    const auto k = generated(fz::inspect(fz::maximum(p + bias, 0.0f), ((p + bias) * 0.5f).astype<float>()));
    CHECK_THAT(k.variant, Catch::Contains(hopper ? "Hopper" : "mma.sync"));
    // one epilogue function computes both values (shared work computed once), each written to its own array
    CHECK_THAT(k.source, Catch::Contains("fz_expr(r0, r1, ") && Catch::Contains("* out0") && Catch::Contains("float* out1") &&
                             Catch::Contains("fz_copy8(to1, y1)"));
    // the product itself among them: stored as its step would store it
    const auto with_product = generated(fz::inspect(p, fz::gelu(p + bias)));
    CHECK_THAT(with_product.source, Catch::Contains("fz_expr(r0, r1, "));
  }
  fz::detail::tuning() = saved;
}

TEST_CASE("generated products: what the kernel does not cover stays on cuBLASLt", "[matmul]") {
  const auto x = fz::placeholder<bf16>({64, 32}), w = fz::placeholder<bf16>({32, 16});
  const auto b = fz::placeholder<bf16>({16});
  auto cublas = [](const fz::KernelInfo& k) {
    INFO(k);
    CHECK_THAT(k.plan[0], Catch::Contains("cublasLtMatmul"));
  };
  cublas(fz::inspect(fz::gelu(fz::matmul(x, w) + b)));  // the default route, no GPU to race on
  fz::GeneratedProducts on;
  cublas(fz::inspect(fz::matmul(x, w)));  // a lone product: nothing to fuse
  cublas(fz::inspect(fz::matmul(fz::placeholder<float>({64, 32}), fz::placeholder<float>({32, 16})) + 1.0f));
  cublas(fz::inspect(fz::matmul(x * 2.0f, w) + b));  // a scaled operand (cuBLASLt's alpha)
  cublas(fz::inspect(fz::matmul(fz::placeholder<bf16>({32}), w) + b));  // a 1-D operand
  cublas(fz::inspect(fz::sum(fz::matmul(x, w), -1)));  // a reduction of the product
  const auto gapped = fz::placeholder<bf16>({64, 64}).slice({fz::Slice{}, fz::Slice{0, 64, 2}});
  cublas(fz::inspect(fz::matmul(gapped, w) + b));  // an operand to copy first
  cublas(fz::inspect(fz::where(fz::random::uniform<float>(7) < 0.1f, 0.0f, fz::matmul(x, w))));  // flat index
  // an empty batch: nothing to generate (the fuzzer's case 2402007590 divided by its zero tiles planning it)
  const auto none = fz::inspect(fz::tanh(fz::matmul(fz::placeholder<bf16>({0, 13, 14}), fz::placeholder<bf16>({0, 14, 6}))));
  CHECK_THAT(none.variant, !Catch::Contains("generated"));
  // the mode is this thread's: another thread plans with cuBLASLt
  std::string other;
  std::thread([&] { other = fz::inspect(fz::gelu(fz::matmul(x, w) + b)).plan[0]; }).join();
  CHECK_THAT(other, Catch::Contains("cublasLtMatmul"));
  CHECK_THAT(fz::inspect(fz::gelu(fz::matmul(x, w) + b)).plan[0], Catch::StartsWith("fz_matmul_"));
}

TEST_CASE("generated products: the Hopper epilogue warps keep their columns through a tile and load a bias before the wait",
          "[matmul]") {
  fz::GeneratedProducts on;
  const auto x = fz::placeholder<bf16>({2048, 1024}), w = fz::placeholder<bf16>({1024, 4096});
  const auto bias = fz::placeholder<bf16>({4096}), residual = fz::placeholder<bf16>({2048, 4096});
  const std::string src = fz::inspect(fz::maximum(fz::matmul(x, w) + bias, 0.0f) * 0.5f + residual).source;
  REQUIRE_THAT(src, Catch::Contains("wgmma.mma_async"));
  // the epilogue warps alone take 8 columns a thread for the tile, rows FZ_ROW_STEP apart; the block's last tile,
  // the consumers joining, goes the general way (352 threads x 8 are not whole rows)
  CHECK_THAT(src, Catch::Contains("if (!last) {") && Catch::Contains("r0 += FZ_ROW_STEP * FZ_AHEAD") &&
                      Catch::Contains("e0 += helpers * 8 * FZ_AHEAD"));
  // an input the same in every row (the bias, row stride 0 at run time) is read once a tile, before the wait for the
  // staged tile, so that its load's latency passes while the consumers finish; the residual's rows in the loop
  const auto once = src.find("if (!last && st1.v[1] == 0 && n8c < N)"), wait = src.find("fz_bar_wait(staged, j & 1);");
  REQUIRE(once != std::string::npos);
  REQUIRE(wait != std::string::npos);
  CHECK(once < wait);
  CHECK_THAT(src, Catch::Contains("if (st1.v[1] == 0) fz_copy8(x1[g], same1);") &&
                      Catch::Contains("else if (vec2) fz_copy8(x2[g], col2 + m[g] * st2.v[1]);"));
}

TEST_CASE("generated products: the source of two representative kernels matches the golden files", "[matmul]") {
  fz::GeneratedProducts on;
  // an MLP layer's bias + GELU + residual on large tiles (Hopper's copies and wgmma; mma.sync and cp.async), and a skinny transposed product with K split
  const auto x = fz::placeholder<bf16>({2048, 1024}), w = fz::placeholder<bf16>({1024, 4096});
  const auto bias = fz::placeholder<bf16>({4096}), residual = fz::placeholder<bf16>({2048, 4096});
  // (on the H100 planned for, the Hopper path takes it; the mma.sync kernel is what other devices run)
  test::check_golden("product_hopper_gelu_residual", fz::inspect(fz::gelu(fz::matmul(x, w) + bias) + residual).source);
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("product_hopper=0");
  test::check_golden("product_gelu_residual", fz::inspect(fz::gelu(fz::matmul(x, w) + bias) + residual).source);
  fz::detail::tuning() = saved;
  const auto tokens = fz::placeholder<fz::half>({4096, 16}).transpose(), wt = fz::placeholder<fz::half>({4096, 4096}).transpose();
  fz::detail::set_tuning("product_hopper=0");
  test::check_golden("product_skinny_split", fz::inspect(fz::matmul(tokens, wt).astype<float>() * 0.125f).source);
  fz::detail::tuning() = saved;
}

TEST_CASE("product_layout: the kernel, tiles and split from the shape, the alignment and the device", "[matmul]") {
  using fz::detail::matmul_layout;
  using fz::detail::product_layout;
  const auto layout = [](std::int64_t m, std::int64_t k, std::int64_t n) {
    return matmul_layout({m, k}, {k, 1}, {k, n}, {n, 1});  // row-major operands
  };
  const fz::codegen::TargetDevice h100;  // (the device planned for without a GPU: 132 SMs, 9.0)
  const auto big = product_layout(layout(8192, 8192, 8192), true, h100);
  CHECK(big.tiles.warpgroups == 2);
  CHECK(big.tiles.bn == 256);
  CHECK(big.split == 1);
  CHECK(big.tile_count == 64 * 32);
  CHECK(big.blocks == 132);  // persistent: a block per SM
  // batch items' tiles are one sequence for the persistent blocks; fewer tiles than SMs, a block each
  const auto batched = product_layout(matmul_layout({12, 1024, 512}, {512 * 1024, 512, 1}, {512, 1024}, {1024, 1}), true, h100);
  CHECK(batched.tiles.warpgroups == 2);
  CHECK(batched.blocks == std::min<std::int64_t>(batched.tile_count * 12, 132));
  CHECK(product_layout(layout(1000, 136, 1040), true, h100).tiles.bn == 128);  // too few 128 x 256 tiles
  const auto rows = product_layout(layout(256, 4096, 4096), true, h100);  // too few 128 x 128 ones: 64 rows
  CHECK(rows.tiles.warpgroups == 1);
  CHECK(rows.tiles.bm == 64);
  CHECK(rows.blocks == 128);
  CHECK(product_layout(layout(64, 4096, 14336), true, h100).tiles.warpgroups == 1);  // 112 tiles: most SMs
  const auto split = product_layout(layout(64, 4096, 4096), true, h100);  // 32 of them: K split 4 ways, 128 units
  CHECK(split.tiles.warpgroups == 1);
  CHECK(split.split == 4);
  CHECK(split.slice == 1024);
  CHECK(split.blocks == 128);
  // unaligned data, or another architecture: the mma.sync kernel (plain loads where unaligned)
  const auto unaligned = product_layout(layout(8192, 8192, 8192), false, h100);
  CHECK(unaligned.tiles.warpgroups == 0);
  CHECK_FALSE(unaligned.async);
  CHECK(unaligned.tiles.stages == 2);
  fz::codegen::TargetDevice a100{.sms = 108, .compute_major = 8};
  const auto ampere = product_layout(layout(8192, 8192, 8192), true, a100);
  CHECK(ampere.tiles.warpgroups == 0);
  CHECK(ampere.async);
  CHECK(ampere.tiles.bm == 128);
  fz::codegen::TargetDevice blackwell{.compute_major = 10};  // (sm_90a kernels run on 9.0 alone)
  CHECK(product_layout(layout(8192, 8192, 8192), true, blackwell).tiles.warpgroups == 0);
  // the tokens of inference off Hopper: 32-row tiles, K split into whole steps covering K
  const auto skinny = product_layout(layout(16, 4096, 4096), true, a100);
  CHECK(skinny.tiles.bm == 32);
  CHECK(skinny.split > 1);
  CHECK(skinny.slice % skinny.tiles.bk == 0);
  CHECK(skinny.slice * skinny.split >= 4096);
  CHECK(skinny.slice * (skinny.split - 1) < 4096);
}

TEST_CASE("product_layouts: the race's candidate tile layouts, the planned one first, each filling the device",
          "[matmul]") {
  using fz::detail::matmul_layout;
  using fz::detail::product_layouts;
  const auto layout = [](std::int64_t m, std::int64_t k, std::int64_t n) {
    return matmul_layout({m, k}, {k, 1}, {k, n}, {n, 1});
  };
  const auto tiles = [](const std::vector<fz::detail::ProductLayout>& all) {
    std::vector<std::string> t;
    for (const auto& x : all) t.push_back(fmt::format("{}x{}/{}", x.tiles.bm, x.tiles.bn, +x.tiles.stages));
    return t;
  };
  const fz::codegen::TargetDevice h100;
  using V = std::vector<std::string>;
  // a large product: every row of the Hopper table, then 64-row tiles; K whole, a block per SM, every one raced
  const auto big = product_layouts(layout(8192, 8192, 8192), true, h100);
  CHECK(tiles(big) == V{"128x256/3", "128x192/4", "128x128/5", "64x128/6"});
  for (const auto& x : big) {
    CHECK(x.raced);
    CHECK(x.split == 1);
    CHECK(x.slice == 8192);
    CHECK(x.blocks == 132);
    CHECK(x.tile_count == (8192 / x.tiles.bm) * ((8192 + x.tiles.bn - 1) / x.tiles.bn));
  }
  // 512 rows: 128 x 256 tiles are too few (64 for 132 SMs); 128 x 128 planned, the others that fill after it
  CHECK(tiles(product_layouts(layout(512, 4096, 4096), true, h100)) == V{"128x128/5", "128x192/4", "64x128/6"});
  // the tuned row first; product_candidates=1: that one alone
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("product_hopper=2");
  CHECK(tiles(product_layouts(layout(8192, 8192, 8192), true, h100)) == V{"128x192/4", "128x256/3", "128x128/5", "64x128/6"});
  fz::detail::set_tuning("product_candidates=1");
  CHECK(tiles(product_layouts(layout(8192, 8192, 8192), true, h100)) == V{"128x192/4"});
  fz::detail::tuning() = saved;
  // K split (tens of rows), and the mma.sync kernel off Hopper: one layout
  const auto split = product_layouts(layout(64, 4096, 4096), true, h100);
  REQUIRE(split.size() == 1);
  CHECK(split[0].split == 4);
  fz::codegen::TargetDevice a100{.sms = 108, .compute_major = 8};
  CHECK(product_layouts(layout(8192, 8192, 8192), true, a100).size() == 1);
  CHECK_THROWS_WITH(fz::detail::set_tuning("product_candidates=5"), Catch::Contains("product_candidates=1..4"));
}
