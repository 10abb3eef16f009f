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

// Without any mode: a half or bfloat16 result rounds to 11 or 8 bits on store, so its exp, division, sqrt and
// log1p take float's full-range approximations (spell.cpp); float32 results stay precise.
TEST_CASE("16-bit results take float's full-range approximations; float32 and float64 stay precise", "[fast_math]") {
  auto b = fz::placeholder<fz::bfloat16>({1 << 20});
  auto h = fz::placeholder<fz::half>({1 << 20});
  auto f = fz::placeholder<float>({1 << 20});
  const std::string sixteen = fz::inspect(fz::exp(b) / fz::sqrt(b) + fz::log1p(b) + fz::reciprocal(b) + 2.f / b).source;
  for (const char* fn : {"fz_exp16(", "fz_div16(", "fz_sqrt16(", "fz_log1p_fast(", "fz_div16(1.f, ", "fz_div16(s"})
    CHECK_THAT(sixteen, Catch::Contains(fn));
  CHECK_THAT(sixteen, Catch::Contains("ex2.approx.f32 ") && Catch::Contains("sqrt.approx.f32 "));  // not the .ftz forms
  CHECK_THAT(fz::inspect(fz::softmax(fz::placeholder<fz::half>({64, 1024}))).source, Catch::Contains("fz_div16("));
  const std::string wide = fz::inspect(fz::exp(f) / fz::sqrt(f) + fz::log1p(f) + fz::exp(fz::cast<float>(h))).source;
  for (const char* fn : {"fz_exp16", "fz_div16", "fz_sqrt16", "fz_log1p_fast"}) CHECK_THAT(wide, !Catch::Contains(fn));
  CHECK_THAT(fz::inspect(fz::exp(b) / f).source, !Catch::Contains("fz_div16"));  // a float32 quotient
  // float32 values that reach only 16-bit roundings, through products, quotients and sums of exps: a softmax
  // computed in float32 and stored in bfloat16 (its exp, sum and division); a difference before the rounding is
  // computed precisely, as a value stored as float32 is
  auto m = fz::placeholder<fz::bfloat16>({64, 1024});
  auto mf = fz::cast<float>(m);
  const std::string mixed = fz::inspect(fz::cast<fz::bfloat16>(fz::exp(mf - fz::max(mf, -1, true)) /
                                                               fz::sum(fz::exp(mf - fz::max(mf, -1, true)), -1, true))).source;
  CHECK_THAT(mixed, Catch::Contains("fz_div16(") && Catch::Contains("fz_exp16("));
  CHECK_THAT(fz::inspect(fz::cast<fz::bfloat16>(fz::exp(mf) - 1.f)).source, !Catch::Contains("fz_exp16("));
  CHECK_THAT(fz::inspect(fz::cast<fz::bfloat16>(fz::sum(fz::exp(mf) * mf, -1))).source, !Catch::Contains("fz_exp16("));
  CHECK_THAT(fz::inspect(fz::cast<fz::half>(fz::sqrt(f))).source, Catch::Contains("fz_sqrt16("));
  auto both = fz::sqrt(f);  // also stored as float32: precise
  const fz::KernelInfo twice = fz::inspect(both, fz::cast<fz::half>(both));
  CHECK_THAT(twice.source, !Catch::Contains("fz_sqrt16("));
  const fz::KernelInfo fast = fz::inspect(fz::fast_math(fz::exp(b) / b));  // fast math's own forms instead
  CHECK_THAT(fast.source, !Catch::Contains("fz_exp16"));
}

namespace {
/// The spacing of 16-bit float T's grid at |r| (its subnormal spacing below the smallest normal).
template <class T> double grid_spacing(double r) {
  constexpr bool bf = std::is_same_v<T, fz::bfloat16>;
  const int mantissa = bf ? 7 : 10, min_exp = bf ? -126 : -14;
  int e = 0;
  std::frexp(r, &e);  // r = m 2^e, m in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 1, min_exp) - mantissa);
}

/// Each op of a 16-bit result against float64: every value faithful (within one step of the grid, the precise
/// path's guarantee too), at most `share` of them not the nearest, and the special values exact.
template <class T> void check_approximations_16(double share) {
  constexpr bool bf = std::is_same_v<T, fz::bfloat16>;
  const std::size_t n = 1 << 18;
  std::mt19937_64 rng(bf ? 61 : 62);
  // magnitudes spread evenly in the exponent over T's whole range, subnormals included, both signs
  auto spread = [&](double lo_exp, double hi_exp, bool negative) {
    std::uniform_real_distribution<double> e(lo_exp, hi_exp);
    std::vector<T> v(n);
    for (auto& x : v) x = T(static_cast<float>(((negative && (rng() & 1)) ? -1 : 1) * std::exp2(e(rng))));
    return v;
  };
  const double top = bf ? 127 : 15.9, bottom = bf ? -133 : -24;
  const auto num = spread(bottom, top, true), den = spread(bottom, top, true), pos = spread(bottom, top, false);
  std::vector<T> arg(n);  // exp's arguments: its whole range, overflow, and subnormal results
  std::uniform_real_distribution<double> ea(bf ? -93 : -17.5, bf ? 89.5 : 11.2);
  for (auto& x : arg) x = T(static_cast<float>(ea(rng)));
  std::vector<T> lp(n);  // log1p's: near 0, near -1 and far
  for (std::size_t i = 0; i < n; ++i)
    lp[i] = T(static_cast<float>(i % 3 == 0 ? std::ldexp(double(rng() % 2000) - 1000, -16)
                                            : (i % 3 == 1 ? -1 + std::exp2(-double(rng() % 9)) : std::exp2(double(rng() % 100)))));
  // float32 operands of full precision, each result cast to T (every use of the float32 value rounds it to 16 bits)
  std::vector<float> numf(n), denf(n), argf(n);
  std::uniform_real_distribution<float> jitter(1.f, 1.0078125f);  // bits below T's grid
  for (std::size_t i = 0; i < n; ++i)
    numf[i] = float(num[i]) * jitter(rng), denf[i] = float(den[i]) * jitter(rng), argf[i] = float(arg[i]) * jitter(rng);
  auto a = fz::asarray(num), d = fz::asarray(den), p = fz::asarray(pos), x = fz::asarray(arg), l = fz::asarray(lp);
  auto af = fz::asarray(numf), df = fz::asarray(denf), xf = fz::asarray(argf);
  const std::int64_t width = 1024;  // a layer kernel's rows, their exps down to 0 through T's subnormals
  auto rows = xf.reshape({static_cast<std::int64_t>(n) / width, width});
  std::vector<double> softmax(n);
  for (std::size_t r = 0; r < n; r += width) {
    const double top = *std::max_element(argf.begin() + r, argf.begin() + r + width);
    double sum = 0;
    for (std::size_t i = r; i < r + width; ++i) sum += softmax[i] = std::exp(double(argf[i]) - top);
    for (std::size_t i = r; i < r + width; ++i) softmax[i] /= sum;
  }
  struct Case {
    const char* name;
    fz::Array<T> got;
    std::function<double(std::size_t)> want;
  };
  auto at = [](const std::vector<T>& v, std::size_t i) { return double(float(v[i])); };
  const std::vector<Case> cases = {
      {"exp", fz::Array<T>(fz::exp(x)), [&](std::size_t i) { return std::exp(at(arg, i)); }},
      {"division", fz::Array<T>(a / d), [&](std::size_t i) { return at(num, i) / at(den, i); }},
      {"reciprocal", fz::Array<T>(1.f / d), [&](std::size_t i) { return 1 / at(den, i); }},
      {"sqrt", fz::Array<T>(fz::sqrt(p)), [&](std::size_t i) { return std::sqrt(at(pos, i)); }},
      {"log1p", fz::Array<T>(fz::log1p(l)), [&](std::size_t i) { return std::log1p(at(lp, i)); }},
      {"float32 division cast", fz::Array<T>(fz::cast<T>(af / df)), [&](std::size_t i) { return double(numf[i]) / denf[i]; }},
      {"float32 exp cast", fz::Array<T>(fz::cast<T>(fz::exp(xf))), [&](std::size_t i) { return std::exp(double(argf[i])); }},
      {"softmax in float32, cast", fz::Array<T>(fz::cast<T>(fz::exp(rows - fz::max(rows, -1, true)) /
                                                           fz::sum(fz::exp(rows - fz::max(rows, -1, true)), -1, true))),
       [&](std::size_t i) { return softmax[i]; }},
  };
  const double largest = bf ? 3.3895313892515355e38 : 65504;
  for (const Case& c : cases) {
    const auto got = c.got.to_host();
    std::size_t unfaithful = 0, not_nearest = 0, finite = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double want = c.want(i), g = double(float(got[i]));
      const double nearest = double(float(T(static_cast<float>(want))));  // (float first: off only at exact ties)
      if (std::abs(want) > largest) {  // beyond the grid: the rounding's infinity, or the largest value
        if (!(std::isinf(g) || std::abs(g) == largest) || std::signbit(g) != std::signbit(want)) ++unfaithful;
        continue;
      }
      ++finite;
      if (g != nearest) ++not_nearest;
      if (!(std::abs(g - want) < grid_spacing<T>(want))) {
        if (unfaithful < 4) UNSCOPED_INFO(c.name << "(element " << i << "): got " << g << ", want " << want);
        ++unfaithful;
      }
    }
    INFO(c.name << ": " << not_nearest << " of " << finite << " not the nearest");
    CHECK(unfaithful == 0);
    CHECK(double(not_nearest) <= share * double(finite));
  }
  const float inf = INFINITY, nan = NAN;
  const std::vector<T> s = {T(inf), T(-inf), T(nan), T(0.f), T(-0.f), T(1.f), T(-3.f)};
  auto sv = fz::asarray(s);
  const auto e = fz::Array<T>(fz::exp(sv)).to_host(), q = fz::Array<T>(1.f / sv).to_host();
  const auto r = fz::Array<T>(fz::sqrt(sv)).to_host(), z = fz::Array<T>(sv / 0.f).to_host();
  auto v = [](T t) { return float(t); };
  CHECK((v(e[0]) == inf && v(e[1]) == 0 && std::isnan(v(e[2])) && v(e[3]) == 1 && v(e[4]) == 1));
  CHECK((v(q[0]) == 0 && std::signbit(v(q[1])) && v(q[1]) == 0 && std::isnan(v(q[2])) && v(q[3]) == inf && v(q[4]) == -inf));
  CHECK((v(r[0]) == inf && std::isnan(v(r[1])) && std::isnan(v(r[2])) && v(r[3]) == 0 && std::signbit(v(r[4])) && std::isnan(v(r[6]))));
  CHECK((v(z[0]) == inf && v(z[1]) == -inf && std::isnan(v(z[3])) && v(z[5]) == inf && v(z[6]) == -inf));
}
}  // namespace

TEST_CASE("16-bit exp, division, sqrt and log1p (and float32 ones cast to 16 bits) are faithful over the whole range, nearly always the nearest",
          "[gpu][ops][fast_math]") {
  check_approximations_16<fz::bfloat16>(0.01);
  check_approximations_16<fz::half>(0.01);
}
