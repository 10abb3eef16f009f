// SPDX-License-Identifier: Apache-2.0
// Matrix products: fz::matmul with NumPy's rules, run by cuBLASLt (loaded at run time on first use).
//
//   fz::Array<fz::bfloat16> y = fz::matmul(x, w);        // (batch..., m, k) @ (k, n) -> (batch..., m, n)
//   auto yt = fz::matmul(x, w.transpose());              // a transposed view is read in place, not copied
//   { fz::TF32Products tf32; c = fz::matmul(a, b); }     // float32 on tensor cores (modes.hpp)
//
// 2-D × 2-D; a 1-D operand is a row (on the left) or a column (on the right) and its axis leaves the
// result; leading batch axes broadcast. float16 and bfloat16 accumulate in float32; operands of two dtypes
// promote (the other one is cast by one fused kernel first). Nothing runs until the expression is
// assigned: then the product is a cuBLASLt call on the current stream, and the math around it fuses.
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

namespace expr {
/// The matrix product of two nodes, in dtype D (each operand converted to D first). In a plan it is a
/// step of its own (cuBLASLt); what it reads is computed first, what reads it is fused code.
template <class A, class B, DType D> struct MatMul : TwoOperands<MatMul<A, B, D>, A, B> {
  static constexpr DType dtype = D;
  static std::uint32_t lower(ir::Graph& g) {
    const std::uint32_t x = A::lower(g);  // operands lower in the order pack() visits them
    const std::uint32_t y = B::lower(g);
    return g.product(x, y, D);
  }
};
}  // namespace expr

/// The dtype of `fz::matmul(a, b)`: NumPy's promotion of the operands' dtypes.
template <class A, class B>
using MatmulResult = TypeOf<promote_types(detail::node_t<A>::dtype, detail::node_t<B>::dtype)>;

/// The matrix product of `a` and `b` (NumPy's matmul), arrays or expressions: an expression like any other,
/// run when assigned. Its surroundings fuse: `relu(matmul(x, w) + b) * s` is the product, then one fused
/// kernel reading it once; an expression operand (`x * mask`) is one fused kernel before it. ShapeError
/// naming both shapes when the inner dimensions differ or the batch axes do not broadcast; BlasError when
/// cuBLASLt cannot be loaded.
template <Operand A, Operand B> auto matmul(A&& a, B&& b) {
  using R = MatmulResult<A, B>;
  static_assert(is_floating(dtype_of<R>),
                "fusion: fz::matmul multiplies float16, bfloat16, float32 or float64 matrices; cast integer "
                "arrays first (x.astype<float>())");
  auto x = detail::to_node(std::forward<A>(a));
  auto y = detail::to_node(std::forward<B>(b));
  return expr::MatMul<decltype(x), decltype(y), dtype_of<R>>{{{}, std::move(x), std::move(y)}};
}

/// What fz::matmul(a, b) runs, in words (compiles nothing, launches nothing; placeholders work).
template <Element A, Element B> std::string describe_matmul(const Array<A>& a, const Array<B>& b) {
  return detail::describe_matmul(a, b, dtype_of<MatmulResult<const Array<A>&, const Array<B>&>>);
}

}  // namespace fusion
