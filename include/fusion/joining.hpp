// SPDX-License-Identifier: Apache-2.0
// Joining arrays: fz::concatenate, fz::stack and fz::pad. Each allocates its result and writes every piece
// into its place with one kernel per piece: an expression given as a piece is computed straight into the
// result (`concatenate(0, x * 2, y)` reads x once and writes the result once, no temporary). They return
// arrays (they run when called), not expressions.
//   fz::concatenate(pieces, axis)          a span (vector) of arrays of one type, NumPy's argument order
//   fz::concatenate(axis, e1, e2, ...)     any arrays and expressions; the result takes their promoted dtype
//   fz::stack(pieces, axis), fz::stack(axis, e1, e2, ...)       along a new axis
//   fz::pad(e, {{before, after}, ...}, value)                   NumPy's constant pad
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fusion/array.hpp"

namespace fusion {

namespace detail {

template <class E> Shape operand_shape(const E& e) {
  if constexpr (ArrayLike<E>) return e.shape();
  else return with_call(e, [](const Call& c) { return expression_shape(c); });
}
template <class E> constexpr DType operand_dtype() {
  if constexpr (ArrayLike<E>) return std::decay_t<E>::dtype_v;
  else return std::decay_t<E>::dtype;
}

/// NumPy's result dtype of joining operands of types Es...
template <class E, class... Es> constexpr DType promoted_dtype() {
  DType d = operand_dtype<E>();
  ((d = promote_types(d, operand_dtype<Es>())), ...);
  return d;
}

/// The joined shape of pieces of shapes `shapes` along `axis` (a new axis there when `stacked`).
inline Shape joined_shape(std::span<const Shape> shapes, int& axis, bool stacked, const char* what) {
  if (shapes.empty()) throw ShapeError(std::string(what) + ": needs at least one array");
  const Shape& first = shapes[0];
  const int nd = first.size() + (stacked ? 1 : 0);
  if (axis < -nd || axis >= nd)
    throw ShapeError(std::string(what) + ": axis " + std::to_string(axis) + " is out of range for " +
                     std::to_string(nd) + " dimensions");
  if (axis < 0) axis += nd;
  Shape out = first;
  if (stacked) out.insert(axis, static_cast<std::int64_t>(shapes.size()));
  else out[axis] = 0;
  for (const Shape& s : shapes) {
    bool same = s.size() == first.size();
    for (int d = 0; same && d < s.size(); ++d) same = (!stacked && d == axis) || s[d] == first[d];
    if (!same)
      throw ShapeError(std::string(what) + ": the pieces' shapes " + to_string(first) + " and " + to_string(s) +
                       (stacked ? " differ (every piece must have the same shape)"
                                : " differ outside axis " + std::to_string(axis)));
    if (!stacked) out[axis] += s[axis];
  }
  return out;
}

/// The part of `out` piece `k` fills: `at` to `at + extent` along `axis` (a view; `stacked`: that one index,
/// the axis dropped).
template <Element T> Array<T> piece_view(Array<T>& out, int axis, std::int64_t at, std::int64_t extent, bool stacked) {
  std::vector<Slice> s(static_cast<std::size_t>(out.ndim()));
  s[static_cast<std::size_t>(axis)] = Slice{at, at + extent, 1};
  Array<T> v = out.slice(s);
  if (stacked) return v.squeeze(axis);
  return v;  // (moved: a copy of an Array copies its elements, and this view must write into `out`)
}

template <bool Stacked, class... Es> auto join(int axis, const Es&... pieces) {
  static_assert(sizeof...(Es) >= 1, "fusion: joining needs at least one array");
  using T = TypeOf<promoted_dtype<Es...>()>;
  const std::array<Shape, sizeof...(Es)> shapes{operand_shape(pieces)...};
  const Shape out_shape = joined_shape(shapes, axis, Stacked, Stacked ? "stack" : "concatenate");
  Array<T> out = empty<T>(out_shape);
  std::int64_t at = 0;
  std::size_t k = 0;
  auto write = [&](const auto& piece) {
    const Shape& s = shapes[k++];
    const std::int64_t extent = Stacked ? 1 : s[axis];
    if (numel(s) > 0) {
      Array<T> view = piece_view(out, axis, at, extent, Stacked);
      copyto(view, piece);
    }
    at += extent;
  };
  (write(pieces), ...);
  return out;
}

template <bool Stacked, Element T> Array<T> join(std::span<const Array<T>> pieces, int axis) {
  std::vector<Shape> shapes;
  for (const Array<T>& p : pieces) shapes.push_back(p.shape());
  const Shape out_shape = joined_shape(shapes, axis, Stacked, Stacked ? "stack" : "concatenate");
  Array<T> out = empty<T>(out_shape);
  std::int64_t at = 0;
  for (const Array<T>& p : pieces) {
    const std::int64_t extent = Stacked ? 1 : p.shape()[axis];
    if (p.size() > 0) {
      Array<T> view = piece_view(out, axis, at, extent, Stacked);
      copyto(view, p);
    }
    at += extent;
  }
  return out;
}

}  // namespace detail

/// NumPy's concatenate of arrays of one type along an existing axis.
template <Element T> Array<T> concatenate(std::span<const Array<T>> pieces, int axis = 0) {
  return detail::join<false>(pieces, axis);
}
template <Element T> Array<T> concatenate(const std::vector<Array<T>>& pieces, int axis = 0) {
  return detail::join<false>(std::span<const Array<T>>(pieces), axis);
}
/// Concatenates arrays and expressions along `axis`; each expression is computed into its place.
template <Operand... Es> auto concatenate(int axis, const Es&... pieces) { return detail::join<false>(axis, pieces...); }

/// NumPy's stack: pieces of one shape along a new axis `axis`.
template <Element T> Array<T> stack(std::span<const Array<T>> pieces, int axis = 0) {
  return detail::join<true>(pieces, axis);
}
template <Element T> Array<T> stack(const std::vector<Array<T>>& pieces, int axis = 0) {
  return detail::join<true>(std::span<const Array<T>>(pieces), axis);
}
template <Operand... Es> auto stack(int axis, const Es&... pieces) { return detail::join<true>(axis, pieces...); }

/// NumPy's constant pad: `widths[d]` elements of `value` before and after axis d (one pair per axis), `e`
/// in the middle. Two kernels: the border's value, then `e` computed into the middle.
template <Operand E, CppScalar V = int>
auto pad(const E& e, const std::vector<std::pair<std::int64_t, std::int64_t>>& widths, V value = 0) {
  using T = TypeOf<detail::operand_dtype<E>()>;
  const Shape in = detail::operand_shape(e);
  if (static_cast<int>(widths.size()) != in.size())
    throw ShapeError("pad: " + std::to_string(widths.size()) + " (before, after) pairs for an operand of shape " +
                     to_string(in) + "; give one pair per axis");
  Shape out_shape = in;
  std::vector<Slice> middle;
  for (int d = 0; d < in.size(); ++d) {
    const auto [before, after] = widths[static_cast<std::size_t>(d)];
    if (before < 0 || after < 0) throw ShapeError("pad: widths must not be negative");
    out_shape[d] = in[d] + before + after;
    middle.push_back(Slice{before, before + in[d], 1});
  }
  T fill;
  if constexpr (NarrowFloat<T>) fill = T(static_cast<float>(value));
  else fill = static_cast<T>(value);
  Array<T> out = full<T>(out_shape, fill);
  if (numel(in) > 0) {
    Array<T> view = out.slice(middle);
    copyto(view, e);
  }
  return out;
}

}  // namespace fusion
