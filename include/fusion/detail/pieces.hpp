// SPDX-License-Identifier: Apache-2.0
// Expressions seen elsewhere than their own index space: a piece of a join placed in the result
// (fz::concatenate, fz::stack, fz::pad), an expression transposed (fz::transpose). Each re-views the arrays the
// operand reads and keeps its math as it is: that works for operands whose value at an element depends on the
// operands at that element alone. Anything else is computed into an array first.
#pragma once
#include <array>
#include <utility>
#include <vector>

#include "fusion/array.hpp"
#include "fusion/function.hpp"
#include "fusion/indexing.hpp"

namespace fusion::detail {

/// Whether an operand joins as it is (its value at each element depends on that element's operands alone):
/// arrays, scalars, elementwise math, fz::function calls, gathers. Anything else is computed first.
template <class E> struct FusesAsPiece : std::false_type {};
template <Element T> struct FusesAsPiece<expr::ArrayRef<T>> : std::true_type {};
template <Element T> struct FusesAsPiece<expr::ArrayOwned<T>> : std::true_type {};
template <Element T> struct FusesAsPiece<expr::Scalar<T>> : std::true_type {};
template <DType To, class A> struct FusesAsPiece<expr::Cast<To, A>> : FusesAsPiece<A> {};
template <ir::Op OP, class A> struct FusesAsPiece<expr::Unary<OP, A>> : FusesAsPiece<A> {};
template <ir::Op OP, class A, class B>
struct FusesAsPiece<expr::Binary<OP, A, B>> : std::bool_constant<FusesAsPiece<A>::value && FusesAsPiece<B>::value> {};
template <class C, class A, class B>
struct FusesAsPiece<expr::Where<C, A, B>>
    : std::bool_constant<FusesAsPiece<C>::value && FusesAsPiece<A>::value && FusesAsPiece<B>::value> {};
template <class A> struct FusesAsPiece<expr::Named<A>> : FusesAsPiece<A> {};
template <class A> struct FusesAsPiece<expr::FastMath<A>> : FusesAsPiece<A> {};
template <IndexMode M, Element T, class I> struct FusesAsPiece<expr::Take<M, T, I>> : FusesAsPiece<I> {};
template <DType R, DType... P, class... A>
struct FusesAsPiece<expr::Call<R, expr::DTypes<P...>, A...>> : std::bool_constant<(FusesAsPiece<A>::value && ...)> {};

/// The node a piece becomes: itself when it fuses, else an array computed now.
template <class E> auto piece_node(E&& e) {
  using N = node_t<E>;
  if constexpr (FusesAsPiece<N>::value) return to_node(std::forward<E>(e));
  else return expr::ArrayOwned<TypeOf<N::dtype>>(eval(to_node(std::forward<E>(e))));
}

/// The arrays `p` (a node) reads, in pack() order.
template <class P> std::vector<const ArrayBase*> packed_arrays(const P& p) {
  std::array<const ArrayBase*, std::max(P::n_arrays, 1)> arrays{};
  std::array<ScalarArg, std::max(P::n_scalars, 1)> scalars{};
  std::array<ReduceArg, std::max(P::n_reductions, 1)> reductions{};
  std::array<std::uint32_t, std::max(P::n_functions, 1)> functions{};
  ArgSink sink{arrays.data(), scalars.data(), reductions.data(), functions.data()};
  p.pack(sink);
  return {arrays.begin(), arrays.begin() + sink.n_arrays};
}

}  // namespace fusion::detail
