// SPDX-License-Identifier: Apache-2.0
// Permuted axes of any operand: fz::transpose(e, axes), fz::swapaxes(e, a, b), fz::moveaxis(e, from, to).
// On an array each is a view (as the members a.transpose() ... are); on an expression, an expression: the arrays
// it reads are seen through the permutation (each broadcast to the expression's shape first), so its math runs
// at the result's own positions and `fz::transpose(x * y) + z.transpose()` is one kernel reading x, y and z
// once. An expression whose value at an element depends on more than that element's operands (a reduction, a
// scan, fz::arange, fz::random, a join, a product) is evaluated into an array first, then viewed.
#pragma once
#include <utility>
#include <vector>

#include "fusion/array.hpp"
#include "fusion/detail/pieces.hpp"

namespace fusion {

namespace expr {

/// An operand with its axes permuted: the same math over the operand's arrays seen through the permutation.
template <class A> struct Transposed : Node<Transposed<A>> {
  static constexpr DType dtype = A::dtype;
  static constexpr int n_arrays = A::n_arrays, n_scalars = A::n_scalars;
  static constexpr int n_reductions = A::n_reductions, n_functions = A::n_functions;
  static_assert(n_reductions == 0, "internal: an operand with a reduction is evaluated before it is transposed");
  A operand;
  std::vector<ArrayBase> views;  // the operand's arrays, permuted, in pack() order
  static std::uint32_t lower(ir::Graph& g) { return A::lower(g); }
  void pack(detail::ArgSink& s) const {
    const int first = s.n_arrays;
    operand.pack(s);
    for (int a = first; a < s.n_arrays; ++a) s.arrays[a] = &views[static_cast<std::size_t>(a - first)];
  }
};

}  // namespace expr

namespace detail {

/// The axes 0..n-1 in order.
inline std::vector<int> identity_permutation(int n) {
  std::vector<int> p(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  return p;
}

}  // namespace detail

/// NumPy's transpose: the axes in the order `axes` gives (reversed when empty). A view of an array; of an
/// expression, an expression that fuses with what reads it.
template <Operand E> auto transpose(E&& e, std::vector<int> axes = {}) {
  if constexpr (ArrayLike<E>) {
    return e.transpose(std::move(axes));
  } else {
    auto node = detail::piece_node(std::forward<E>(e));  // (what does not fuse as it is: an array, evaluated now)
    using N = decltype(node);
    const Shape shape = shape_of(node);
    // the permutation checked once (the same error as an array's), also for operands that read no array
    (void)ArrayBase::make_placeholder(N::dtype, shape).transposed(axes);
    expr::Transposed<N> t{{}, std::move(node), {}};
    for (const ArrayBase* a : detail::packed_arrays(t.operand)) t.views.push_back(a->broadcast(shape).transposed(axes));
    return t;
  }
}

/// NumPy's swapaxes: axes a and b exchanged.
template <Operand E> auto swapaxes(E&& e, int a, int b) {
  const int n = shape_of(e).size();
  std::vector<int> p = detail::identity_permutation(n);
  std::swap(p[static_cast<std::size_t>(detail::checked_axis(a, n, "swapaxes"))],
            p[static_cast<std::size_t>(detail::checked_axis(b, n, "swapaxes"))]);
  return transpose(std::forward<E>(e), std::move(p));
}

/// NumPy's moveaxis: axis `source` moved to position `destination`, the others in their order.
template <Operand E> auto moveaxis(E&& e, int source, int destination) {
  const int n = shape_of(e).size();
  std::vector<int> p = detail::identity_permutation(n);
  const int s = detail::checked_axis(source, n, "moveaxis"), d = detail::checked_axis(destination, n, "moveaxis");
  p.erase(p.begin() + s);
  p.insert(p.begin() + d, s);
  return transpose(std::forward<E>(e), std::move(p));
}

}  // namespace fusion
