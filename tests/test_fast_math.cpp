// SPDX-License-Identifier: Apache-2.0
// Fast math (fz::FastMath, fz::fast_math(e)): a kernel of its own name and options, the same source,
// every strategy; on the GPU, float32 results within the approximate instructions' error of float64.
#include "support.hpp"

TEST_CASE("fast math is a kernel of its own: another hash, the same source, NVRTC's switch", "[fast_math]") {
  auto x = fz::placeholder<float>({1 << 20});
  auto y = fz::placeholder<float>({1 << 20});
  const fz::KernelInfo precise = fz::inspect(fz::exp(x) / fz::sqrt(y) + fz::sin(x));
  fz::KernelInfo scoped;
  {
    fz::FastMath fast;
    CHECK(fz::FastMath::active());
    scoped = fz::inspect(fz::exp(x) / fz::sqrt(y) + fz::sin(x));
  }
  CHECK_FALSE(fz::FastMath::active());
  const fz::KernelInfo wrapped = fz::inspect(fz::fast_math(fz::exp(x) / fz::sqrt(y) + fz::sin(x)));
  INFO(precise.name << " / " << scoped.name << " / " << wrapped.name);
  CHECK(scoped.name != precise.name);
  CHECK(scoped.name == wrapped.name);  // the scope and the wrapper ask for the same kernel
  // the sources differ only in the kernel's name: the code is the same, NVRTC's options make it fast
  // (log1p excepted: CUDA has no fast form of it, fusion spells its own)
  auto without_name = [](std::string s, const std::string& name) {
    for (auto at = s.find(name); at != std::string::npos; at = s.find(name)) s.erase(at, name.size());
    return s;
  };
  CHECK(without_name(scoped.source, scoped.name) == without_name(precise.source, precise.name));
  CHECK_THAT(scoped.variant, Catch::Contains("fast math"));
  CHECK_THAT(precise.variant, !Catch::Contains("fast math"));
  CHECK(!scoped.arch.empty());
  CHECK(fz::inspect(fz::exp(x) / fz::sqrt(y) + fz::sin(x)).name == precise.name);  // the scope ended
}

TEST_CASE("fast math reaches every kernel of a plan, reductions and layer kernels", "[fast_math]") {
  fz::FastMath fast;
  auto m = fz::placeholder<float>({4096, 1024});
  auto v = fz::placeholder<float>({1 << 22});
  const fz::KernelInfo layer =
      fz::inspect(fz::exp(m - fz::max(m, -1, true)) / fz::sum(fz::exp(m - fz::max(m, -1, true)), -1, true));
  CHECK_THAT(layer.variant, Catch::StartsWith("layer"));
  CHECK_THAT(layer.variant, Catch::Contains("fast math"));
  const fz::KernelInfo reduction = fz::inspect(fz::sum(fz::log(v)));
  CHECK_THAT(reduction.variant, Catch::Contains("fast math"));
  const fz::KernelInfo plan = fz::inspect(v / fz::sum(fz::exp(v)));  // one long row: the sum, then the division
  REQUIRE(plan.kernels == 2);
  for (const std::string& step : plan.plan) CHECK_THAT(step, Catch::Contains("fast math"));
  // float64 and half kernels compile with the switch too (it changes only float32 math)
  CHECK(!fz::inspect(fz::exp(fz::placeholder<double>({8})) + 1.0).arch.empty());
  CHECK(!fz::inspect(fz::tanh(fz::placeholder<fz::half>({8}))).arch.empty());
}

TEST_CASE("fast math stays within the approximate instructions' error of float64", "[gpu][ops][fast_math]") {
  const std::size_t n = 1 << 16;
  const auto hx = test::random<float>(n, -3, 3, 51), hp = test::random<float>(n, 0.01f, 100, 52);
  const auto hs = test::random<float>(n, -0.03f, 0.03f, 53), hl = test::random<float>(n, -0.95f, 100, 54);
  auto x = fz::asarray(hx), p = fz::asarray(hp), small = fz::asarray(hs), wide = fz::asarray(hl);
  struct Case {
    const char* name;
    std::function<fz::Array<float>()> run;
    std::function<double(std::size_t)> want;
    double abs, rel;  // allowed error: abs + rel * |want|
  };
  // bounds from the CUDA programming guide's tables of intrinsic errors, with margin for the
  // surrounding float32 arithmetic
  const std::vector<Case> cases = {
      {"sin", [&] { return fz::Array<float>(fz::sin(x)); }, [&](std::size_t i) { return std::sin(double(hx[i])); },
       1e-6, 0},
      {"cos", [&] { return fz::Array<float>(fz::cos(x)); }, [&](std::size_t i) { return std::cos(double(hx[i])); },
       1e-6, 0},
      {"exp", [&] { return fz::Array<float>(fz::exp(x)); }, [&](std::size_t i) { return std::exp(double(hx[i])); }, 0,
       1e-5},
      {"log", [&] { return fz::Array<float>(fz::log(p)); }, [&](std::size_t i) { return std::log(double(hp[i])); },
       1e-6, 0},
      {"div", [&] { return fz::Array<float>(x / p); }, [&](std::size_t i) { return double(hx[i]) / double(hp[i]); }, 0,
       1e-6},
      {"sqrt", [&] { return fz::Array<float>(fz::sqrt(p)); }, [&](std::size_t i) { return std::sqrt(double(hp[i])); },
       0, 1e-6},
      {"tanh", [&] { return fz::Array<float>(fz::tanh(x)); }, [&](std::size_t i) { return std::tanh(double(hx[i])); },
       1e-5, 1e-5},
      // fusion's own fast log1p: a series near 0 (relative error), __logf with the rounding of 1 + x corrected beyond
      {"log1p near 0", [&] { return fz::Array<float>(fz::log1p(small)); },
       [&](std::size_t i) { return std::log1p(double(hs[i])); }, 0, 1e-6},
      {"log1p", [&] { return fz::Array<float>(fz::log1p(wide)); },
       [&](std::size_t i) { return std::log1p(double(hl[i])); }, 5e-7, 1e-6},
  };
  for (const Case& c : cases) {
    fz::Array<float> fast_result;
    {
      fz::FastMath fast;
      fast_result = c.run();
    }
    const auto got = fast_result.to_host();
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double want = c.want(i);
      worst = std::max(worst, std::abs(double(got[i]) - want) / (c.abs + c.rel * std::abs(want)));
    }
    INFO(c.name << ": worst error over its bound " << worst);
    CHECK(worst <= 1.0);
  }
  // log1p's edges under fast math: -1, below -1, infinities, NaN, a denormal (flushed to 0 by fast math)
  const std::vector<float> edges = {-1.f, -2.f, INFINITY, -INFINITY, NAN, 1e-40f, 0.f, 3e38f, 16777216.f, 16777218.f};
  fz::Array<float> e;
  {
    fz::FastMath fast;
    e = fz::log1p(fz::asarray(edges));
  }
  const auto ge = e.to_host();
  CHECK(ge[0] == -INFINITY);
  CHECK(std::isnan(ge[1]));
  CHECK(ge[2] == INFINITY);
  CHECK(std::isnan(ge[3]));
  CHECK(std::isnan(ge[4]));
  CHECK(ge[5] == 0.f);
  CHECK(ge[6] == 0.f);
  for (int i : {7, 8, 9})
    CHECK(std::abs(ge[static_cast<std::size_t>(i)] - std::log1p(double(edges[static_cast<std::size_t>(i)]))) < 1e-5);
}

TEST_CASE("fast math spells float log1p with fusion's approximation, and only float log1p", "[fast_math]") {
  auto x = fz::placeholder<float>({1 << 20});
  auto d = fz::placeholder<double>({1 << 20});
  auto b = fz::placeholder<fz::bfloat16>({1 << 20});
  const std::string precise = fz::inspect(fz::log1p(fz::exp(-fz::abs(x)))).source;
  CHECK_THAT(precise, !Catch::Contains("fz_log1p_fast"));
  fz::FastMath fast;
  CHECK_THAT(fz::inspect(fz::log1p(fz::exp(-fz::abs(x)))).source, Catch::Contains("fz_log1p_fast("));
  CHECK_THAT(fz::inspect(fz::log1p(b)).source, Catch::Contains("fz_log1p_fast("));  // computed in float
  CHECK_THAT(fz::inspect(fz::log1p(d)).source, !Catch::Contains("fz_log1p_fast("));
}
