// SPDX-License-Identifier: Apache-2.0
// Matrix products: fz::matmul with NumPy's rules, run by cuBLASLt (loaded at run time on first use).
//
//   fz::Array<fz::bfloat16> y = fz::matmul(x, w);        // (batch..., m, k) @ (k, n) -> (batch..., m, n)
//   auto yt = fz::matmul(x, w.transpose());              // a transposed view is read in place, not copied
//   { fz::TF32Products tf32; c = fz::matmul(a, b); }     // float32 on tensor cores (modes.hpp)
//
// 2-D × 2-D; a 1-D operand is a row (on the left) or a column (on the right) and its axis leaves the
// result; leading batch axes broadcast. float16 and bfloat16 accumulate in float32; operands of two dtypes
// promote (the other one is cast by one fused kernel first). The product runs at the call, on the current
// stream, and is captured by streams' graphs and fz::Step like every kernel.
#pragma once
#include <string>

#include "fusion/array.hpp"
#include "fusion/modes.hpp"

namespace fusion {

namespace detail {
/// `a @ b` for operands of one floating dtype: a new C-ordered array, computed on the current stream.
ArrayBase matmul(const ArrayBase& a, const ArrayBase& b);
/// What matmul runs for `a @ b` with result dtype `result` (an operand of another dtype is cast into a
/// C-ordered copy first), in words: shapes, the cuBLASLt call (transposes, batch, compute type), copies.
std::string describe_matmul(const ArrayBase& a, const ArrayBase& b, DType result);
}  // namespace detail

namespace detail {
template <class X> constexpr DType operand_dtype() {
  if constexpr (ArrayLike<X>) return dtype_of<typename std::decay_t<X>::value_type>;
  else return std::decay_t<X>::dtype;
}
/// Operand `x` as an array of dtype R: an Array<R> as it is (a view, not copied), anything else evaluated
/// by one fused kernel (an expression, with the cast to R if it needs one).
template <Element R, class X> decltype(auto) operand_as(const X& x) {
  if constexpr (std::is_same_v<std::decay_t<X>, Array<R>>) return static_cast<const ArrayBase&>(x);
  else return ArrayBase(Array<R>(x.template astype<R>()));
}
}  // namespace detail

/// The dtype of `fz::matmul(a, b)`: NumPy's promotion of the operands' dtypes.
template <class A, class B> using MatmulResult = TypeOf<promote_types(detail::operand_dtype<A>(), detail::operand_dtype<B>())>;

/// The matrix product of `a` and `b` (NumPy's matmul): arrays or expressions (evaluated first, by one fused
/// kernel each). ShapeError naming both shapes when the inner dimensions differ or the batch axes do not
/// broadcast; BlasError when cuBLASLt cannot be loaded.
template <Operand A, Operand B> Array<MatmulResult<A, B>> matmul(const A& a, const B& b) {
  using R = MatmulResult<A, B>;
  static_assert(is_floating(dtype_of<R>),
                "fusion: fz::matmul multiplies float16, bfloat16, float32 or float64 matrices; cast integer "
                "arrays first (x.astype<float>())");
  return Array<R>(detail::matmul(detail::operand_as<R>(a), detail::operand_as<R>(b)));
}

/// What fz::matmul(a, b) runs, in words (compiles nothing, launches nothing; placeholders work).
template <Element A, Element B> std::string describe_matmul(const Array<A>& a, const Array<B>& b) {
  return detail::describe_matmul(a, b, dtype_of<MatmulResult<Array<A>, Array<B>>>);
}

}  // namespace fusion
