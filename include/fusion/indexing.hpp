// SPDX-License-Identifier: Apache-2.0
// Reads through an index, as expressions that fuse with the math around them: fz::take (NumPy's take, an
// embedding lookup `take(table, ids, 0)`), fz::take_along_axis (the values at an argmax), fz::index_select
// (PyTorch's). The source is an array; the result is read from it inside the kernel of the expression.
//
// How it works: the source becomes a view in the result's index space, with stride 0 where the index's
// dimensions are, so the kernel finds each element's own position in it as it finds any operand's; the
// index (an ordinary operand, broadcast there) is made valid by the mode, times the axis's stride, and the
// element read at that offset from the position (ir::Op::take_index, ir::Op::gather).
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "fusion/array.hpp"
#include "fusion/expr.hpp"

namespace fusion {

/// What fz::take does with an index outside [-n, n) (NumPy's `mode`): IndexMode::raise (the default) throws
/// IndexError after the kernel, which the statement then waits for; wrap and clip never wait, and run
/// inside fz::Step and stream captures.
using IndexMode = ir::IndexMode;

namespace detail {

/// An index along an axis of extent `extent` and element stride `stride`, made valid by mode M: what a read
/// (fz::take) or a write (fz::index_add) through it lowers to and packs (the two scalars, in this order).
template <IndexMode M> struct AxisIndex {
  std::int64_t extent = 0, stride = 0;
  struct Nodes {
    std::uint32_t offset;   // the element offset along the axis (int64)
    std::uint32_t checked;  // raise: the checked index (-1 when bad); else ir::kNone
  };
  static Nodes lower(ir::Graph& g, std::uint32_t index) {
    const std::uint32_t n = g.scalar(DType::int64);
    const std::uint32_t st = g.scalar(DType::int64);
    const std::uint32_t k = g.take_index(index, n, M);
    return {g.binary(ir::Op::mul, k, st), M == IndexMode::raise ? k : ir::kNone};
  }
  void pack(ArgSink& s) const {
    s.scalars[s.n_scalars++] = to_scalar_arg(extent);
    s.scalars[s.n_scalars++] = to_scalar_arg(stride);
  }
};

}  // namespace detail

namespace expr {

/// The element of `source` (a view in the result's index space) at the index `index` gives along an axis
/// of extent `extent` and element stride `stride`.
template <IndexMode M, Element T, class I> struct Take : Node<Take<M, T, I>> {
  static constexpr DType dtype = dtype_of<T>;
  static constexpr int n_arrays = I::n_arrays + 1, n_scalars = I::n_scalars + 2;
  static constexpr int n_reductions = I::n_reductions, n_functions = I::n_functions;
  I index;
  ArrayBase source;
  detail::AxisIndex<M> axis;
  static std::uint32_t lower(ir::Graph& g) {
    const std::uint32_t i = I::lower(g);  // in pack()'s order: the index, the axis's scalars, the source
    const auto at = detail::AxisIndex<M>::lower(g, i);
    return g.gather(at.offset, g.input(dtype), at.checked);
  }
  void pack(detail::ArgSink& s) const {
    index.pack(s);
    axis.pack(s);
    s.arrays[s.n_arrays++] = &source;
  }
};

}  // namespace expr

namespace detail {

inline int checked_axis(int axis, int ndim, const char* what) {
  if (axis < -ndim || axis >= ndim)
    throw ShapeError(std::string(what) + ": axis " + std::to_string(axis) + " is out of range for " +
                     std::to_string(ndim) + " dimensions");
  return axis < 0 ? axis + ndim : axis;
}

/// `a` along `axis` narrowed to its first element, then that axis replaced by `m` axes of extent 1: the
/// source's view for an index of `m` dimensions (extent-1 axes broadcast with stride 0).
inline ArrayBase gather_view(const ArrayBase& a, int axis, int m, const char* what) {
  if (a.shape()[axis] == 0)
    throw IndexError(std::string(what) + ": cannot take from axis " + std::to_string(axis) + ", which is empty");
  std::vector<Slice> first(static_cast<std::size_t>(a.ndim()));
  first[static_cast<std::size_t>(axis)] = Slice{0, 1, 1};
  ArrayBase v = a.sliced(first);
  if (m == 0) return v.squeezed(axis);
  for (int k = 1; k < m; ++k) v = v.expanded(axis);
  return v;
}

template <IndexMode M, class T, class I>
auto make_take(const ArrayBase& a, I&& index_node, int axis, ArrayBase view) {
  using Node = expr::Take<M, T, std::decay_t<I>>;
  static_assert(is_integer(std::decay_t<I>::dtype) && std::decay_t<I>::dtype != DType::bool_,
                "fusion: indices must be integers (int32, int64, ...); cast them first with fz::cast<std::int64_t>(e)");
  Node t{{}, std::forward<I>(index_node), std::move(view), {a.shape()[axis], a.strides()[axis]}};
  return t;
}

/// The array an index operand is read from: an array as it is, an expression evaluated first.
template <class I> decltype(auto) index_array(I&& idx) {
  if constexpr (ArrayLike<I>) return static_cast<const std::decay_t<I>&>(idx);
  else return eval(std::forward<I>(idx));
}

}  // namespace detail

/// NumPy's take: the elements of `a` at `indices` along `axis`; the result's shape is `a`'s with that axis
/// replaced by the index's shape (`take(table, ids, 0)`: a row of `table` per id). Negative indices count
/// from the end. An index expression is evaluated first (its dimensions place it in the result); the read
/// of `a` fuses with whatever uses the result.
template <IndexMode M = IndexMode::raise, Element T, class I>
requires Operand<I>
auto take(const Array<T>& a, I&& indices, int axis) {
  axis = detail::checked_axis(axis, a.ndim(), "take");
  const auto& idx = detail::index_array(std::forward<I>(indices));
  const int m = idx.ndim();
  // The index's dimensions sit where the axis was: trailing extent-1 axes put them there.
  Shape placed = idx.shape();
  for (int k = axis + 1; k < a.ndim(); ++k) placed.push_back(1);
  using Idx = typename std::decay_t<decltype(idx)>::value_type;
  ArrayBase view = detail::gather_view(a, axis, m, "take");
  return detail::make_take<M, T>(a, expr::ArrayOwned<Idx>(idx.reshape(placed)), axis, std::move(view));
}

template <class T>
template <class I>
auto Array<T>::take(I&& indices, int axis) const {
  return fusion::take(*this, std::forward<I>(indices), axis);
}

/// NumPy's take without an axis: `a` read as flat, in C order.
template <IndexMode M = IndexMode::raise, Element T, class I>
requires Operand<I>
auto take(const Array<T>& a, I&& indices) {
  return take<M>(a.reshape({a.size()}), std::forward<I>(indices), 0);
}

/// NumPy's take_along_axis: `indices` has `a`'s dimensions (broadcasting with it elsewhere) and picks, along
/// `axis`, the element of `a` for each of its own (`take_along_axis(x, argmax(x, 1, true), 1)`). The index may be
/// any expression; it fuses.
template <IndexMode M = IndexMode::raise, Element T, class I>
requires Operand<I>
auto take_along_axis(const Array<T>& a, I&& indices, int axis) {
  axis = detail::checked_axis(axis, a.ndim(), "take_along_axis");
  if constexpr (ArrayLike<I>)
    if (indices.ndim() != a.ndim())
      throw ShapeError("take_along_axis: the indices have " + std::to_string(indices.ndim()) +
                       " dimensions and the array " + std::to_string(a.ndim()) + "; they must have the same number");
  ArrayBase view = detail::gather_view(a, axis, 1, "take_along_axis");
  return detail::make_take<M, T>(a, detail::to_node(std::forward<I>(indices)), axis, std::move(view));
}

/// PyTorch's index_select: take() with a one-dimensional index.
template <IndexMode M = IndexMode::raise, Element T, class I>
requires Operand<I>
auto index_select(const Array<T>& a, int axis, I&& indices) {
  if constexpr (ArrayLike<I>)
    if (indices.ndim() != 1)
      throw ShapeError("index_select: the index must have one dimension; it has " + std::to_string(indices.ndim()));
  return take<M>(a, std::forward<I>(indices), axis);
}

}  // namespace fusion
