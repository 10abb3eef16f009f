// SPDX-License-Identifier: Apache-2.0
// Writes through an index: fz::index_add (PyTorch's index_add_), fz::scatter_add (PyTorch's scatter_add_,
// the inverse of take_along_axis) and fz::bincount; fz::index_max/index_min and fz::scatter_max/scatter_min
// keep the larger or smaller value instead (NumPy's maximum.at, PyTorch's scatter_reduce_ "amax"/"amin" with
// include_self). They write into an existing array in place, one kernel each; the values may be any
// expression (computed inside that kernel), the index any integer operand.
// Each element's write is atomic; a target of at most 32 KiB of 4- or 8-byte elements is first written in
// each block's copy in shared memory. Floating sums are therefore not the same run to run in their last bits
// (the adds' order varies) unless an fz::Deterministic scope is alive: then they are exact and bit-identical
// (fixed-point sums and a second kernel, about 1.9x the time); integer sums, maxima and minima are exact
// always. An index outside the axis is an IndexError (IndexMode::raise) or wraps or clips.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "fusion/indexing.hpp"
#include "fusion/reductions.hpp"

namespace fusion {

namespace expr {

/// Writes `values` (op OP: adds, or keeps the larger or smaller) into the target's element at the index
/// `index` gives along an axis of extent `extent` and element stride `stride` (the graph's output; the
/// target is the call's output).
template <ir::Op OP, IndexMode M, Element T, class I, class V> struct Scatter : Node<Scatter<OP, M, T, I, V>> {
  static constexpr DType dtype = dtype_of<T>;
  static constexpr int n_arrays = I::n_arrays + V::n_arrays, n_scalars = I::n_scalars + 2 + V::n_scalars;
  static constexpr int n_reductions = I::n_reductions + V::n_reductions, n_functions = I::n_functions + V::n_functions;
  I index;
  V values;
  detail::AxisIndex<M> axis;
  static std::uint32_t lower(ir::Graph& g) {
    const std::uint32_t i = I::lower(g);  // in pack()'s order: the index, the axis's scalars, the values
    const auto at = detail::AxisIndex<M>::lower(g, i);
    return g.scatter(OP, at.offset, V::lower(g), dtype, at.checked);
  }
  void pack(detail::ArgSink& s) const {
    index.pack(s);
    axis.pack(s);
    values.pack(s);
  }
};

}  // namespace expr

namespace detail {

template <class T> constexpr bool scatter_addable =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16> ||
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint32_t> ||
    std::is_same_v<T, std::uint64_t>;

template <ir::Op OP, IndexMode M, class T, class I, class V>
void scatter_into_target(Array<T>& target, int axis, I&& index_node, V&& values, const ArrayBase& view) {
  static_assert(scatter_addable<T>,
                "fusion: index_add, scatter_add and their max and min write into float, double, half, bfloat16, int32, "
                "int64, uint32 or uint64 arrays (atomics on narrower integers and bool do not exist)");
  using In = std::decay_t<I>;
  static_assert(is_integer(In::dtype), "fusion: indices must be integers; cast them first with fz::cast<std::int64_t>(e)");
  auto v = to_node_beside<dtype_of<T>>(std::forward<V>(values));
  // A scatter is one pass over its index space: a reduction, scan or product inside the index or the values
  // runs first, into an array (found by the fuzzer: the kernel had no spelling for them)
  auto steps = [](const auto& node) { return with_call(node, [](const Call& c) { return runs_in_steps(c); }); };
  if (steps(index_node)) {
    const auto index = eval(index_node);
    return scatter_into_target<OP, M>(target, axis, to_node(index), std::move(v), view);
  }
  if (steps(v)) {
    const auto evaluated = eval(v);
    return scatter_into_target<OP, M>(target, axis, std::forward<I>(index_node), to_node(evaluated), view);
  }
  const expr::Scatter<OP, M, T, In, decltype(v)> node{
      {}, std::forward<I>(index_node), std::move(v), {target.shape()[axis], target.strides()[axis]}};
  with_call(node, [&](const Call& c) { scatter_into(c, view, target); });
}

/// index_add and its max and min: the index's axes take the axis's place in `values`.
template <ir::Op OP, IndexMode M, Element T, class I, class V>
void index_write(Array<T>& target, int axis, I&& index, V&& values, const char* what) {
  axis = checked_axis(axis, target.ndim(), what);
  const auto& idx = index_array(std::forward<I>(index));
  Shape placed = idx.shape();
  for (int k = axis + 1; k < target.ndim(); ++k) placed.push_back(1);
  using Idx = typename std::decay_t<decltype(idx)>::value_type;
  const ArrayBase view = gather_view(target, axis, idx.ndim(), what);
  scatter_into_target<OP, M>(target, axis, expr::ArrayOwned<Idx>(idx.reshape(placed)), std::forward<V>(values), view);
}

/// scatter_add and its max and min: the index has the target's dimensions.
template <ir::Op OP, IndexMode M, Element T, class I, class V>
void scatter_write(Array<T>& target, int axis, I&& index, V&& values, const char* what) {
  axis = checked_axis(axis, target.ndim(), what);
  if constexpr (ArrayLike<I>)
    if (index.ndim() != target.ndim())
      throw ShapeError(std::string(what) + ": the index has " + std::to_string(index.ndim()) +
                       " dimensions and the target " + std::to_string(target.ndim()) +
                       "; they must have the same number");
  const ArrayBase view = gather_view(target, axis, 1, what);
  scatter_into_target<OP, M>(target, axis, to_node(std::forward<I>(index)), std::forward<V>(values), view);
}

}  // namespace detail

/// PyTorch's index_add_: `target[..., index[i], ...] += values[..., i, ...]` along `axis` (index one-dimensional,
/// or any shape: its axes take the axis's place in `values`, as in take). Repeated indices add up.
template <IndexMode M = IndexMode::raise, Element T, class I, class V>
requires Operand<I> && (Operand<V> || CppScalar<V>)
void index_add(Array<T>& target, int axis, I&& index, V&& values) {
  detail::index_write<ir::Op::scatter_add, M>(target, axis, std::forward<I>(index), std::forward<V>(values), "index_add");
}
/// index_add keeping the larger value: `target[..., index[i], ...] = maximum(that, values[..., i, ...])`
/// (PyTorch's index_reduce_ "amax" with include_self; NaN wins, as in fz::maximum).
template <IndexMode M = IndexMode::raise, Element T, class I, class V>
requires Operand<I> && (Operand<V> || CppScalar<V>)
void index_max(Array<T>& target, int axis, I&& index, V&& values) {
  detail::index_write<ir::Op::scatter_max, M>(target, axis, std::forward<I>(index), std::forward<V>(values), "index_max");
}
/// index_add keeping the smaller value (NaN wins, as in fz::minimum).
template <IndexMode M = IndexMode::raise, Element T, class I, class V>
requires Operand<I> && (Operand<V> || CppScalar<V>)
void index_min(Array<T>& target, int axis, I&& index, V&& values) {
  detail::index_write<ir::Op::scatter_min, M>(target, axis, std::forward<I>(index), std::forward<V>(values), "index_min");
}

/// PyTorch's scatter_add_: `index` has `target`'s dimensions; each of its elements adds the value at its own
/// position to the element of `target` it names along `axis` (elsewhere at its own position). The index may be
/// any integer expression.
template <IndexMode M = IndexMode::raise, Element T, class I, class V>
requires Operand<I> && (Operand<V> || CppScalar<V>)
void scatter_add(Array<T>& target, int axis, I&& index, V&& values) {
  detail::scatter_write<ir::Op::scatter_add, M>(target, axis, std::forward<I>(index), std::forward<V>(values), "scatter_add");
}
/// scatter_add keeping the larger value (PyTorch's scatter_reduce_ "amax" with include_self, NumPy's
/// maximum.at along an axis; NaN wins).
template <IndexMode M = IndexMode::raise, Element T, class I, class V>
requires Operand<I> && (Operand<V> || CppScalar<V>)
void scatter_max(Array<T>& target, int axis, I&& index, V&& values) {
  detail::scatter_write<ir::Op::scatter_max, M>(target, axis, std::forward<I>(index), std::forward<V>(values), "scatter_max");
}
/// scatter_add keeping the smaller value (NaN wins).
template <IndexMode M = IndexMode::raise, Element T, class I, class V>
requires Operand<I> && (Operand<V> || CppScalar<V>)
void scatter_min(Array<T>& target, int axis, I&& index, V&& values) {
  detail::scatter_write<ir::Op::scatter_min, M>(target, axis, std::forward<I>(index), std::forward<V>(values), "scatter_min");
}

namespace detail {
/// bincount's bins: the largest value plus one, at least `minlength` (a wait for the GPU); negative values refused.
template <Element I> std::int64_t bins_needed(const Array<I>& x, std::int64_t minlength) {
  static_assert(is_integer(dtype_of<I>), "fusion: bincount counts integers");
  if (x.ndim() != 1) throw ShapeError("bincount: the input must have one dimension; it has " + std::to_string(x.ndim()));
  if (x.size() == 0) return minlength;
  if (static_cast<std::int64_t>(fusion::min(x).item()) < 0) throw Error("bincount: the input has negative values");
  return std::max<std::int64_t>(minlength, static_cast<std::int64_t>(fusion::max(x).item()) + 1);
}
}  // namespace detail

/// NumPy's bincount: how often each value 0, 1, ... occurs in the one-dimensional non-negative integer array `x`
/// (at least `minlength` bins). Reads the largest value first (a wait for the GPU).
template <Element I> Array<std::int64_t> bincount(const Array<I>& x, std::int64_t minlength = 0) {
  Array<std::int64_t> counts = zeros<std::int64_t>({detail::bins_needed(x, minlength)});
  if (x.size() > 0) index_add<IndexMode::clip>(counts, 0, x, std::int64_t{1});
  return counts;
}
/// With weights: the sum of `weights` per value (float64, as NumPy's).
template <Element I, Operand W> Array<double> bincount(const Array<I>& x, const W& weights, std::int64_t minlength = 0) {
  Array<double> sums = zeros<double>({detail::bins_needed(x, minlength)});
  if (x.size() > 0) index_add<IndexMode::clip>(sums, 0, x, weights);
  return sums;
}

}  // namespace fusion
