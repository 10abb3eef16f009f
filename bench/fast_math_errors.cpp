// SPDX-License-Identifier: Apache-2.0
// Each float32 op's error in ulps against float64, precise and with fz::FastMath (NVRTC's fast-math
// switch: approximate sin/cos/exp/log/pow intrinsics, approximate division and square root, denormals
// flushed to zero). Results whose float64 value is below FLT_MIN in magnitude are left out (fast math
// flushes them to zero by design); an infinite reference counts as met when the result is the same infinity.
#include "fast_math_errors.hpp"

#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "fusion/fusion.hpp"

namespace fz = fusion;

namespace bench {
namespace {

struct Domain {
  double lo, hi;
  bool log_spaced = false;  // magnitudes spread over decades (lo, hi > 0), both signs when `signed_`
  bool signed_ = false;
};

std::vector<float> spread(const Domain& d, std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    double x = d.log_spaced ? std::exp(std::log(d.lo) + u(rng) * (std::log(d.hi) - std::log(d.lo)))
                            : d.lo + u(rng) * (d.hi - d.lo);
    if (d.signed_ && u(rng) < 0.5) x = -x;
    v[i] = static_cast<float>(x);
  }
  return v;
}

/// The spacing of float32 at |r|.
double ulp_at(double r) {
  const float f = static_cast<float>(std::fabs(r));
  return static_cast<double>(std::nextafter(f, INFINITY)) - static_cast<double>(f);
}

struct Errors {
  double max_ulp = 0, sum_ulp = 0, max_abs = 0;
  std::size_t counted = 0;
};

Errors measure(const std::vector<float>& got, const std::vector<double>& want) {
  Errors e;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double r = want[i], g = got[i];
    if (std::isnan(r) || (std::fabs(r) < FLT_MIN && r != 0)) continue;
    if (std::isinf(r) || std::fabs(r) > FLT_MAX) {
      const bool met = std::isinf(g) && std::signbit(g) == std::signbit(r);
      if (!met) e.max_ulp = INFINITY;
      continue;
    }
    const double err = std::fabs(g - r);
    const double u = std::isnan(g) ? INFINITY : err / ulp_at(r);
    e.max_ulp = std::max(e.max_ulp, u);
    e.max_abs = std::max(e.max_abs, err);
    e.sum_ulp += std::isfinite(u) ? u : 0;
    ++e.counted;
  }
  return e;
}

using Unary = std::function<fz::Array<float>(const fz::Array<float>&)>;
using Binary = std::function<fz::Array<float>(const fz::Array<float>&, const fz::Array<float>&)>;

struct Case {
  const char* name;
  Domain a, b;  // b: the second operand's domain (binary ops)
  Binary op;
  std::function<double(double, double)> reference;
};

Binary unary(Unary f) {
  return [f](const fz::Array<float>& x, const fz::Array<float>&) { return f(x); };
}

}  // namespace

void print_fast_math_errors() {
  const double pi = 3.14159265358979323846;
  const Domain none{0, 1};
  const std::vector<Case> cases = {
      {"sin [-pi, pi]",
       {-pi, pi},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::sin(x)); }),
       [](double x, double) { return std::sin(x); }},
      {"sin [-100, 100]",
       {-100, 100},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::sin(x)); }),
       [](double x, double) { return std::sin(x); }},
      {"cos [-pi, pi]",
       {-pi, pi},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::cos(x)); }),
       [](double x, double) { return std::cos(x); }},
      {"tan [-1.5, 1.5]",
       {-1.5, 1.5},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::tan(x)); }),
       [](double x, double) { return std::tan(x); }},
      {"exp [-80, 80]",
       {-80, 80},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::exp(x)); }),
       [](double x, double) { return std::exp(x); }},
      {"exp2 [-120, 120]",
       {-120, 120},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::exp2(x)); }),
       [](double x, double) { return std::exp2(x); }},
      {"expm1 [-10, 10]",
       {-10, 10},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::expm1(x)); }),
       [](double x, double) { return std::expm1(x); }},
      {"log [1e-30, 1e30]",
       {1e-30, 1e30, true},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::log(x)); }),
       [](double x, double) { return std::log(x); }},
      {"log [0.5, 2]",
       {0.5, 2},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::log(x)); }),
       [](double x, double) { return std::log(x); }},
      {"log2 [1e-30, 1e30]",
       {1e-30, 1e30, true},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::log2(x)); }),
       [](double x, double) { return std::log2(x); }},
      {"log10 [1e-30, 1e30]",
       {1e-30, 1e30, true},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::log10(x)); }),
       [](double x, double) { return std::log10(x); }},
      {"log1p [-0.9, 100]",
       {-0.9, 100},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::log1p(x)); }),
       [](double x, double) { return std::log1p(x); }},
      {"sqrt [1e-30, 1e30]",
       {1e-30, 1e30, true},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::sqrt(x)); }),
       [](double x, double) { return std::sqrt(x); }},
      {"rsqrt [1e-30, 1e30]",
       {1e-30, 1e30, true},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::rsqrt(x)); }),
       [](double x, double) { return 1 / std::sqrt(x); }},
      {"tanh [-10, 10]",
       {-10, 10},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::tanh(x)); }),
       [](double x, double) { return std::tanh(x); }},
      {"sinh [-80, 80]",
       {-80, 80},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::sinh(x)); }),
       [](double x, double) { return std::sinh(x); }},
      {"erf [-5, 5]",
       {-5, 5},
       none,
       unary([](const auto& x) { return fz::Array<float>(fz::erf(x)); }),
       [](double x, double) { return std::erf(x); }},
      {"x / y (1e-30..1e30 each)",
       {1e-30, 1e30, true, true},
       {1e-30, 1e30, true, true},
       [](const auto& x, const auto& y) { return fz::Array<float>(x / y); },
       [](double x, double y) { return x / y; }},
      {"pow(x, y) x 0.01..100, y -10..10",
       {0.01, 100, true},
       {-10, 10},
       [](const auto& x, const auto& y) { return fz::Array<float>(fz::pow(x, y)); },
       [](double x, double y) { return std::pow(x, y); }},
      {"atan2(y, x) (-10..10 each)",
       {-10, 10},
       {-10, 10},
       [](const auto& x, const auto& y) { return fz::Array<float>(fz::atan2(x, y)); },
       [](double x, double y) { return std::atan2(x, y); }},
  };
  const std::size_t n = std::size_t{1} << 20;
  fmt::print(
      "float32 error against float64, {} inputs per row (ulps of the float32 result; results below FLT_MIN left out)\n",
      n);
  fmt::print("{:<36} {:>12} {:>12} {:>12}   {:>12} {:>12} {:>12}\n", "op, inputs", "precise max", "mean", "max |err|",
             "fast max", "mean", "max |err|");
  unsigned seed = 90;
  for (const Case& c : cases) {
    const std::vector<float> ha = spread(c.a, n, seed++), hb = spread(c.b, n, seed++);
    const auto a = fz::asarray(ha), b = fz::asarray(hb);
    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = c.reference(ha[i], hb[i]);
    const std::vector<float> precise = c.op(a, b).to_host();
    std::vector<float> fast;
    {
      fz::FastMath scope;
      fast = c.op(a, b).to_host();
    }
    const Errors p = measure(precise, want), f = measure(fast, want);
    auto mean = [](const Errors& e) { return e.counted ? e.sum_ulp / static_cast<double>(e.counted) : 0.0; };
    fmt::print("{:<36} {:>12.3g} {:>12.3g} {:>12.3g}   {:>12.3g} {:>12.3g} {:>12.3g}\n", c.name, p.max_ulp, mean(p),
               p.max_abs, f.max_ulp, mean(f), f.max_abs);
  }
}

}  // namespace bench
