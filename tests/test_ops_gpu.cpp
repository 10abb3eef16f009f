// SPDX-License-Identifier: Apache-2.0
// Every op x every dtype it accepts, on the GPU, against the host interpreter of the same IR.
#include "reference.hpp"
#include "support.hpp"

using fz::DType;
using fz::ir::Op;

namespace {

/// Input range for an op, so that every value lies in its domain and off its poles.
std::pair<double, double> domain(Op op, DType d, int operand) {
  if (!fz::is_floating(d)) {
    if (op == Op::shl || op == Op::shr)
      return operand == 0 ? std::pair{-50.0, 50.0} : std::pair{0.0, 8.0 * fz::itemsize(d) + 2};
    if (op == Op::pow) return operand == 0 ? std::pair{-4.0, 4.0} : std::pair{-1.0, 6.0};
    if (fz::is_unsigned_int(d)) return {0, 60};
    return {-60, 60};
  }
  switch (op) {
    case Op::sqrt: case Op::rsqrt: case Op::log: case Op::log2: case Op::log10: return {0.05, 20};
    case Op::log1p: return {-0.9, 20};
    case Op::asin: case Op::acos: case Op::atanh: return {-0.95, 0.95};
    case Op::acosh: return {1.05, 20};
    case Op::lgamma: case Op::tgamma: return {0.2, 6};
    case Op::exp: case Op::exp2: case Op::expm1: case Op::sinh: case Op::cosh: return {-5, 5};
    case Op::pow: return operand == 0 ? std::pair{0.2, 4.0} : std::pair{-3.0, 3.0};
    case Op::tan: return {-1.4, 1.4};
    case Op::div:
    case Op::floor_divide:
    case Op::remainder:
    case Op::fmod:
      return operand == 0 ? std::pair{-20.0, 20.0} : std::pair{0.5, 6.0};
    default: return {-20, 20};
  }
}

std::vector<test::Scalar> random_values(std::size_t n, DType d, std::pair<double, double> range, unsigned seed) {
  std::vector<test::Scalar> v(n);
  const auto f = test::random<double>(n, range.first, range.second, seed);
  const auto i = test::random<std::int64_t>(n, range.first, range.second, seed);
  for (std::size_t k = 0; k < n; ++k) {
    if (fz::is_floating(d)) v[k].f = (seed & 1) && k % 2 ? -f[k] * (range.first < 0 ? 1 : -1) : f[k];
    else v[k].i = d == DType::bool_ ? (i[k] & 1) : i[k];
    v[k] = test::normalize(v[k], d);
  }
  return v;
}

}  // namespace

TEST_CASE("every op x dtype matches the float64 host reference", "[gpu][ops]") {
  const std::size_t n = 1021;  // odd: vector loop and tail
  int checked = 0;
  for (const fz::ir::OpInfo& info : fz::ir::kOps) {
    const Op op = info.op;
    // (a join's two ops run only inside a concatenate: tests/test_joining_gpu.cpp)
    if (!fz::ir::is_elementwise(op) || op == Op::cast || op == Op::leading || op == Op::concatenate) continue;
    for (int di = 0; di < fz::kNumDTypes; ++di) {
      const DType d = static_cast<DType>(di);
      const auto ar = fz::ir::arity(op);
      if ((ar == fz::ir::Arity::unary && !fz::ir::accepts(op, d)) ||
          (ar == fz::ir::Arity::binary && !fz::ir::accepts(op, d, d)))
        continue;
      fz::ir::Graph g;
      std::vector<std::vector<test::Scalar>> inputs;
      std::vector<fz::ArrayBase> arrays;
      auto add_input = [&](DType dt, int operand) {
        inputs.push_back(random_values(n, dt, domain(op, d, operand),
                                       static_cast<unsigned>(static_cast<int>(op) * 31 + di * 7 + operand)));
        arrays.push_back(test::upload(inputs.back(), dt, {static_cast<std::int64_t>(n)}));
        return g.input(dt);
      };
      std::uint32_t r;
      if (ar == fz::ir::Arity::unary) {
        r = g.unary(op, add_input(d, 0));
      } else if (ar == fz::ir::Arity::binary) {
        const std::uint32_t a = add_input(d, 0);
        r = g.binary(op, a, add_input(d, 1));
      } else {
        const std::uint32_t c = add_input(DType::bool_, 0);
        const std::uint32_t a = add_input(d, 1);
        r = g.where(c, a, add_input(d, 2));
      }
      g.outputs.push_back(r);
      const DType out_d = g.dtype(r);
      const fz::detail::Lowered& lw = *fz::detail::register_lowered(g);
      std::vector<const fz::ArrayBase*> ptrs;
      for (auto& a : arrays) ptrs.push_back(&a);
      fz::ArrayBase out = test::poisoned(out_d, {static_cast<std::int64_t>(n)});
      fz::detail::evaluate(
          fz::detail::Call{&lw, ptrs.data(), nullptr, nullptr, static_cast<int>(ptrs.size()), 0, 0, {}}, out,
          fz::detail::AssignMode::into);
      const auto got = test::download(out);
      const auto tol = test::tolerance(out_d);
      int bad = 0;
      for (std::size_t k = 0; k < n; ++k) {
        std::vector<test::Scalar> element;
        for (auto& in : inputs) element.push_back(in[k]);
        const test::Scalar want = test::interpret(g, element, {}, static_cast<std::int64_t>(k));
        const double gv = test::to_double(got[k], out_d), wv = test::to_double(test::normalize(want, out_d), out_d);
        if (!test::close(gv, wv, tol)) {
          if (bad < 3)
            UNSCOPED_INFO(fz::ir::op_name(op)
                          << " on " << fz::dtype_name(d) << " element " << k << ": got " << gv << ", want " << wv
                          << " (inputs " << test::to_double(element[0], g.dtype(0)) << ")");
          ++bad;
        }
      }
      CHECK(bad == 0);
      ++checked;
    }
  }
  CHECK(checked > 13 * 50);
}

TEST_CASE("tgamma is NaN at every negative integer, however large", "[gpu][ops]") {
  // fuzz case 73001160: CUDA's tgamma gave 6.5e-296 at -2^63
  const auto x = fz::asarray(std::vector<double>{-3.0, -9.223372036854775808e18, -1e300, -2.5, 5.0, -0.0});
  const auto got = fz::Array<double>(fz::tgamma(x)).to_host();
  CHECK(std::isnan(got[0]));
  CHECK(std::isnan(got[1]));
  CHECK(std::isnan(got[2]));
  CHECK(got[3] == Approx(std::tgamma(-2.5)).epsilon(1e-12));
  CHECK(got[4] == Approx(24.0));
  CHECK(std::isinf(got[5]));
  const auto xf = fz::asarray(std::vector<float>{-4.f, -1e30f, 0.5f});
  const auto gotf = fz::Array<float>(fz::tgamma(xf)).to_host();
  CHECK(std::isnan(gotf[0]));
  CHECK(std::isnan(gotf[1]));
  CHECK(gotf[2] == Approx(std::sqrt(3.14159265358979)).epsilon(1e-5));
}
