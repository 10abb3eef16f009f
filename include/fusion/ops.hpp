// SPDX-License-Identifier: Apache-2.0
// Operators and functions on arrays and expressions. Each only builds a node; nothing runs until an
// expression is assigned to an Array (or passed to fz::eval / fz::inspect).
#pragma once
#include <type_traits>
#include <utility>

#include "fusion/expr.hpp"

namespace fusion {

/// Two operands, or an operand and a C++ scalar on either side.
template <class A, class B>
concept BinaryArgs = (Operand<A> && (Operand<B> || CppScalar<std::decay_t<B>>)) ||
                     (CppScalar<std::decay_t<A>> && Operand<B>);

// ---- operators ----------------------------------------------------------------------------------
// `%` is NumPy's remainder (the sign of the divisor); `/` is true division (integers give float64).

// clang-format off: the operators and functions below are a table, a row each (wider than 120 columns);
// every row has the same shape, so a row reads across and the column of ops reads down.
template <class A, class B> requires BinaryArgs<A, B> auto operator+(A&& a, B&& b) { return detail::make_binary<ir::Op::add>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator-(A&& a, B&& b) { return detail::make_binary<ir::Op::sub>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator*(A&& a, B&& b) { return detail::make_binary<ir::Op::mul>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator/(A&& a, B&& b) { return detail::make_binary<ir::Op::div>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator%(A&& a, B&& b) { return detail::make_binary<ir::Op::remainder>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator==(A&& a, B&& b) { return detail::make_binary<ir::Op::eq>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator!=(A&& a, B&& b) { return detail::make_binary<ir::Op::ne>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator<(A&& a, B&& b) { return detail::make_binary<ir::Op::lt>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator<=(A&& a, B&& b) { return detail::make_binary<ir::Op::le>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator>(A&& a, B&& b) { return detail::make_binary<ir::Op::gt>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator>=(A&& a, B&& b) { return detail::make_binary<ir::Op::ge>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator&&(A&& a, B&& b) { return detail::make_binary<ir::Op::logical_and>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator||(A&& a, B&& b) { return detail::make_binary<ir::Op::logical_or>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator&(A&& a, B&& b) { return detail::make_binary<ir::Op::bit_and>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator|(A&& a, B&& b) { return detail::make_binary<ir::Op::bit_or>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator^(A&& a, B&& b) { return detail::make_binary<ir::Op::bit_xor>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator<<(A&& a, B&& b) { return detail::make_binary<ir::Op::shl>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto operator>>(A&& a, B&& b) { return detail::make_binary<ir::Op::shr>(std::forward<A>(a), std::forward<B>(b)); }
template <Operand A> auto operator-(A&& a) { return detail::make_unary<ir::Op::neg>(std::forward<A>(a)); }
template <Operand A> auto operator+(A&& a) { return detail::to_node(std::forward<A>(a)); }
template <Operand A> auto operator!(A&& a) { return detail::make_unary<ir::Op::logical_not>(std::forward<A>(a)); }
template <Operand A> auto operator~(A&& a) { return detail::make_unary<ir::Op::bit_not>(std::forward<A>(a)); }

// ---- functions: <cmath> names, and NumPy's where C++ has none ------------------------------------
// Integer inputs to floating functions give NumPy's float type (int8 -> float16, int32 -> float64).
// round() rounds halves away from zero as <cmath> does; rint() rounds them to even.
template <Operand A> auto abs(A&& a) { return detail::make_unary<ir::Op::abs>(std::forward<A>(a)); }
template <Operand A> auto sign(A&& a) { return detail::make_unary<ir::Op::sign>(std::forward<A>(a)); }
template <Operand A> auto square(A&& a) { return detail::make_unary<ir::Op::square>(std::forward<A>(a)); }
template <Operand A> auto reciprocal(A&& a) { return detail::make_unary<ir::Op::reciprocal>(std::forward<A>(a)); }
template <Operand A> auto floor(A&& a) { return detail::make_unary<ir::Op::floor>(std::forward<A>(a)); }
template <Operand A> auto ceil(A&& a) { return detail::make_unary<ir::Op::ceil>(std::forward<A>(a)); }
template <Operand A> auto trunc(A&& a) { return detail::make_unary<ir::Op::trunc>(std::forward<A>(a)); }
template <Operand A> auto rint(A&& a) { return detail::make_unary<ir::Op::rint>(std::forward<A>(a)); }
template <Operand A> auto round(A&& a) { return detail::make_unary<ir::Op::round>(std::forward<A>(a)); }
template <Operand A> auto sqrt(A&& a) { return detail::make_unary<ir::Op::sqrt>(std::forward<A>(a)); }
template <Operand A> auto rsqrt(A&& a) { return detail::make_unary<ir::Op::rsqrt>(std::forward<A>(a)); }
template <Operand A> auto cbrt(A&& a) { return detail::make_unary<ir::Op::cbrt>(std::forward<A>(a)); }
template <Operand A> auto exp(A&& a) { return detail::make_unary<ir::Op::exp>(std::forward<A>(a)); }
template <Operand A> auto exp2(A&& a) { return detail::make_unary<ir::Op::exp2>(std::forward<A>(a)); }
template <Operand A> auto expm1(A&& a) { return detail::make_unary<ir::Op::expm1>(std::forward<A>(a)); }
template <Operand A> auto log(A&& a) { return detail::make_unary<ir::Op::log>(std::forward<A>(a)); }
template <Operand A> auto log2(A&& a) { return detail::make_unary<ir::Op::log2>(std::forward<A>(a)); }
template <Operand A> auto log10(A&& a) { return detail::make_unary<ir::Op::log10>(std::forward<A>(a)); }
template <Operand A> auto log1p(A&& a) { return detail::make_unary<ir::Op::log1p>(std::forward<A>(a)); }
template <Operand A> auto sin(A&& a) { return detail::make_unary<ir::Op::sin>(std::forward<A>(a)); }
template <Operand A> auto cos(A&& a) { return detail::make_unary<ir::Op::cos>(std::forward<A>(a)); }
template <Operand A> auto tan(A&& a) { return detail::make_unary<ir::Op::tan>(std::forward<A>(a)); }
template <Operand A> auto asin(A&& a) { return detail::make_unary<ir::Op::asin>(std::forward<A>(a)); }
template <Operand A> auto acos(A&& a) { return detail::make_unary<ir::Op::acos>(std::forward<A>(a)); }
template <Operand A> auto atan(A&& a) { return detail::make_unary<ir::Op::atan>(std::forward<A>(a)); }
template <Operand A> auto sinh(A&& a) { return detail::make_unary<ir::Op::sinh>(std::forward<A>(a)); }
template <Operand A> auto cosh(A&& a) { return detail::make_unary<ir::Op::cosh>(std::forward<A>(a)); }
template <Operand A> auto tanh(A&& a) { return detail::make_unary<ir::Op::tanh>(std::forward<A>(a)); }
template <Operand A> auto asinh(A&& a) { return detail::make_unary<ir::Op::asinh>(std::forward<A>(a)); }
template <Operand A> auto acosh(A&& a) { return detail::make_unary<ir::Op::acosh>(std::forward<A>(a)); }
template <Operand A> auto atanh(A&& a) { return detail::make_unary<ir::Op::atanh>(std::forward<A>(a)); }
template <Operand A> auto erf(A&& a) { return detail::make_unary<ir::Op::erf>(std::forward<A>(a)); }
template <Operand A> auto erfc(A&& a) { return detail::make_unary<ir::Op::erfc>(std::forward<A>(a)); }
template <Operand A> auto lgamma(A&& a) { return detail::make_unary<ir::Op::lgamma>(std::forward<A>(a)); }
template <Operand A> auto tgamma(A&& a) { return detail::make_unary<ir::Op::tgamma>(std::forward<A>(a)); }
/// GELU, x * Phi(x) (Phi the normal distribution: 0.5 * (1 + erf(x / sqrt 2))), as PyTorch's default gelu.
template <Operand A> auto gelu(A&& a) { return detail::make_unary<ir::Op::gelu>(std::forward<A>(a)); }
/// GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): PyTorch's
/// gelu(approximate="tanh"), JAX's default; after a product, cuBLASLt's GELU epilogue runs it in the call.
template <Operand A> auto gelu_tanh(A&& a) { return detail::make_unary<ir::Op::gelu_tanh>(std::forward<A>(a)); }
template <Operand A> auto isnan(A&& a) { return detail::make_unary<ir::Op::isnan>(std::forward<A>(a)); }
template <Operand A> auto isinf(A&& a) { return detail::make_unary<ir::Op::isinf>(std::forward<A>(a)); }
template <Operand A> auto isfinite(A&& a) { return detail::make_unary<ir::Op::isfinite>(std::forward<A>(a)); }
template <Operand A> auto signbit(A&& a) { return detail::make_unary<ir::Op::signbit>(std::forward<A>(a)); }
template <Operand A> auto negative(A&& a) { return detail::make_unary<ir::Op::neg>(std::forward<A>(a)); }
template <Operand A> auto logical_not(A&& a) { return detail::make_unary<ir::Op::logical_not>(std::forward<A>(a)); }
// maximum/minimum propagate NaN; fmax/fmin ignore it. floor_divide and remainder follow the divisor's sign,
// fmod the dividend's. Integer division by zero gives 0.
template <class A, class B> requires BinaryArgs<A, B> auto floor_divide(A&& a, B&& b) { return detail::make_binary<ir::Op::floor_divide>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto remainder(A&& a, B&& b) { return detail::make_binary<ir::Op::remainder>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto fmod(A&& a, B&& b) { return detail::make_binary<ir::Op::fmod>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto pow(A&& a, B&& b) { return detail::make_binary<ir::Op::pow>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto maximum(A&& a, B&& b) { return detail::make_binary<ir::Op::maximum>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto minimum(A&& a, B&& b) { return detail::make_binary<ir::Op::minimum>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto fmax(A&& a, B&& b) { return detail::make_binary<ir::Op::fmax>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto fmin(A&& a, B&& b) { return detail::make_binary<ir::Op::fmin>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto atan2(A&& a, B&& b) { return detail::make_binary<ir::Op::atan2>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto hypot(A&& a, B&& b) { return detail::make_binary<ir::Op::hypot>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto copysign(A&& a, B&& b) { return detail::make_binary<ir::Op::copysign>(std::forward<A>(a), std::forward<B>(b)); }
template <class A, class B> requires BinaryArgs<A, B> auto logaddexp(A&& a, B&& b) { return detail::make_binary<ir::Op::logaddexp>(std::forward<A>(a), std::forward<B>(b)); }
// NumPy's names for the bitwise operators.
template <Operand A> auto invert(A&& a) { return ~std::forward<A>(a); }
template <Operand A> auto bitwise_not(A&& a) { return ~std::forward<A>(a); }
template <class A, class B> requires BinaryArgs<A, B> auto bitwise_and(A&& a, B&& b) { return std::forward<A>(a) & std::forward<B>(b); }
template <class A, class B> requires BinaryArgs<A, B> auto bitwise_or(A&& a, B&& b) { return std::forward<A>(a) | std::forward<B>(b); }
template <class A, class B> requires BinaryArgs<A, B> auto bitwise_xor(A&& a, B&& b) { return std::forward<A>(a) ^ std::forward<B>(b); }
template <class A, class B> requires BinaryArgs<A, B> auto left_shift(A&& a, B&& b) { return std::forward<A>(a) << std::forward<B>(b); }
template <class A, class B> requires BinaryArgs<A, B> auto right_shift(A&& a, B&& b) { return std::forward<A>(a) >> std::forward<B>(b); }
template <class A, class B> requires BinaryArgs<A, B> auto logical_and(A&& a, B&& b) { return std::forward<A>(a) && std::forward<B>(b); }
template <class A, class B> requires BinaryArgs<A, B> auto logical_or(A&& a, B&& b) { return std::forward<A>(a) || std::forward<B>(b); }
template <class A, class B> requires BinaryArgs<A, B> auto logical_xor(A&& a, B&& b) { return detail::make_binary<ir::Op::ne>(detail::make_unary<ir::Op::logical_not>(std::forward<A>(a)), !std::forward<B>(b)); }
// clang-format on

/// clip(x, lo, hi) = minimum(maximum(x, lo), hi); lo and hi may be scalars or operands.
template <Operand A, class L, class H> auto clip(A&& x, L&& lo, H&& hi) {
  return minimum(maximum(std::forward<A>(x), std::forward<L>(lo)), std::forward<H>(hi));
}

/// NumPy's where: `cond ? a : b` elementwise, broadcasting all three; scalars take the other branch's dtype.
template <Operand C, class A, class B>
  requires(Operand<A> || CppScalar<std::decay_t<A>>) && (Operand<B> || CppScalar<std::decay_t<B>>)
auto where(C&& cond, A&& a, B&& b) {
  auto c = detail::to_node(std::forward<C>(cond));  // the IR converts it to bool
  auto branches = [&] {
    if constexpr (CppScalar<std::decay_t<A>> && CppScalar<std::decay_t<B>>) {
      using T = std::common_type_t<std::decay_t<A>, std::decay_t<B>>;
      return std::pair{expr::Scalar<T>::make(a), expr::Scalar<T>::make(b)};
    } else if constexpr (CppScalar<std::decay_t<A>>) {
      auto y = detail::to_node(std::forward<B>(b));
      return std::pair{detail::to_node_beside<decltype(y)::dtype>(a), std::move(y)};
    } else {
      auto x = detail::to_node(std::forward<A>(a));
      return std::pair{std::move(x), detail::to_node_beside<decltype(x)::dtype>(std::forward<B>(b))};
    }
  }();
  using N = decltype(branches);
  return expr::Where<decltype(c), typename N::first_type, typename N::second_type>{
      {}, std::move(c), std::move(branches.first), std::move(branches.second)};
}

/// Converts to U: float -> int truncates, anything -> bool tests != 0, wider -> 16-bit float rounds to nearest.
template <Element U, Operand A> auto cast(A&& a) {
  auto x = detail::to_node(std::forward<A>(a));
  return expr::Cast<dtype_of<U>, decltype(x)>{{}, std::move(x)};
}

/// Compiles the kernel(s) of the assignment `e` is part of with approximate float32 math, as inside an
/// fz::FastMath scope: `y = fz::fast_math(fz::exp(x) / s)`. Float64 math stays exact; see fz::FastMath.
template <Operand A> auto fast_math(A&& a) {
  auto x = detail::to_node(std::forward<A>(a));
  return expr::FastMath<decltype(x)>{{}, std::move(x)};
}

/// Gives the kernel a readable name: `named("squared_diff", e)` compiles to `squared_diff_<hash>`.
template <Operand A> auto named(std::string name, A&& a) {
  auto x = detail::to_node(std::forward<A>(a));
  return expr::Named<decltype(x)>{{}, std::move(name), std::move(x)};
}

}  // namespace fusion
