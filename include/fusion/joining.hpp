// SPDX-License-Identifier: Apache-2.0
// Joining arrays: fz::concatenate, fz::stack and fz::pad are expressions.
//   fz::concatenate(axis, e1, e2, ...)     arrays and expressions; the result takes their promoted dtype
//   fz::stack(axis, e1, e2, ...)           pieces of one shape along a new axis
//   fz::concatenate(pieces, axis), fz::stack(pieces, axis)      a vector of arrays of one type: an array
//   fz::pad(e, {{before, after}, ...}, value)                   NumPy's constant pad
//
// How a join fuses: each piece's arrays are seen in the result's index space, shifted back to where the
// piece sits (ArrayBase::placed), so the piece's math finds its elements at the result's own positions; the
// kernel tests where an element lies (ir::Op::leading: its flat index modulo the axis's period, below the
// piece's end; a rows kernel compares the column with a limit found per row, codegen/join_tests.hpp) and
// computes only that piece there (ir::Op::concatenate, an if/else in the kernel). So
// `fz::concatenate(1, x * 2, fz::exp(y)) + b` is one kernel reading x, y and b once and writing once.
// A piece whose value depends on more than its own elements (a reduction, a scan, a product, fz::arange or
// fz::random, another join) is computed first, into an array.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fusion/array.hpp"
#include "fusion/detail/pieces.hpp"

namespace fusion {

namespace detail {

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

}  // namespace detail

namespace expr {

/// Pieces joined along an axis (fz::concatenate, fz::stack): the pieces' arrays placed in the result's index
/// space (ArrayBase::placed), and at each element the value of the piece it lies in, computed there alone.
template <DType D, class... Ps> struct Join : Node<Join<D, Ps...>> {
  static constexpr DType dtype = D;
  static constexpr int N = static_cast<int>(sizeof...(Ps));
  // the axes after the joined one, the join's extent along it, then where each piece but the last ends
  static constexpr int n_own_scalars = N > 1 ? N + 1 : 0;
  static constexpr int n_arrays = (Ps::n_arrays + ...), n_scalars = (Ps::n_scalars + ...) + n_own_scalars;
  static constexpr int n_reductions = (Ps::n_reductions + ...), n_functions = (Ps::n_functions + ...);
  static_assert(n_reductions == 0, "internal: a piece with a reduction is computed before it joins");
  std::tuple<Ps...> pieces;
  std::vector<ArrayBase> views;                 // the pieces' arrays placed in the result, in pack() order
  std::array<std::int64_t, n_own_scalars> place{};  // those scalars (ir::Op::leading)

  static std::uint32_t lower(ir::Graph& g) {
    // (each piece in the join's dtype first: NumPy's promotion, a left fold, is not associative, so the chain
    // of two-way joins below must not promote pair by pair: int8, uint8, float16 join as float32)
    const std::uint32_t value[] = {g.cast(Ps::lower(g), D)...};  // braces evaluate left to right, as pack() visits
    if constexpr (N == 1) {
      return value[0];
    } else {
      const std::uint32_t after = g.scalar(DType::int64);
      const std::uint32_t extent = g.scalar(DType::int64);
      std::uint32_t below[N - 1];  // whether the element lies before piece k's end
      for (int k = 0; k + 1 < N; ++k) below[k] = g.leading(after, g.scalar(DType::int64), extent);
      return ir::join_tree(g, value, below, N);
    }
  }
  void pack(detail::ArgSink& s) const {
    std::size_t next = 0;
    std::apply([&](const auto&... p) {
      ([&] {
        const int first = s.n_arrays;
        p.pack(s);
        for (int a = first; a < s.n_arrays; ++a) s.arrays[a] = &views[next++];
      }(), ...);
    }, pieces);
    for (std::int64_t e : place) s.scalars[s.n_scalars++] = detail::to_scalar_arg(e);
  }
};

/// NumPy's constant pad (fz::pad): the operand's arrays placed at its offsets in the result, and at each
/// element either the operand's value (inside the box it fills, computed there alone) or the fill value.
/// The box is tested per padded axis, as a join tests where its pieces lie (ir::Op::leading): the element's
/// coordinate lies before the box's end and not before its start. The graph has kAxes such tests (a type's
/// graph is fixed; the padded axes are known at run time), the unused ones always true.
template <DType D, class P> struct Pad : Node<Pad<D, P>> {
  static constexpr DType dtype = D;
  static constexpr int kAxes = 4;
  // per tested axis: the axes after it, the result's extent along it, where the box starts and ends
  static constexpr int n_own_scalars = 4 * kAxes;
  static constexpr int n_arrays = P::n_arrays, n_scalars = P::n_scalars + n_own_scalars + 1;
  static constexpr int n_reductions = P::n_reductions, n_functions = P::n_functions;
  static_assert(n_reductions == 0, "internal: a padded operand with a reduction is computed first");
  P piece;
  Scalar<TypeOf<D>> fill;
  std::vector<ArrayBase> views;                      // the operand's arrays placed in the result
  std::array<std::int64_t, n_own_scalars> place{};  // (ir::Op::leading's scalars; pieces.cpp resolves them)

  static std::uint32_t lower(ir::Graph& g) {
    const std::uint32_t value = g.cast(P::lower(g), D);
    std::uint32_t inside = ir::kNone;
    for (int a = 0; a < kAxes; ++a) {
      const std::uint32_t after = g.scalar(DType::int64), extent = g.scalar(DType::int64);
      const std::uint32_t before_start = g.leading(after, g.scalar(DType::int64), extent);
      const std::uint32_t before_end = g.leading(after, g.scalar(DType::int64), extent);
      const std::uint32_t within = g.binary(ir::Op::logical_and, before_end, g.unary(ir::Op::logical_not, before_start));
      inside = a == 0 ? within : g.binary(ir::Op::logical_and, inside, within);
    }
    return g.join(inside, value, Scalar<TypeOf<D>>::lower(g));
  }
  void pack(detail::ArgSink& s) const {
    const int first = s.n_arrays;
    piece.pack(s);
    for (int a = first; a < s.n_arrays; ++a) s.arrays[a] = &views[static_cast<std::size_t>(a - first)];
    for (std::int64_t e : place) s.scalars[s.n_scalars++] = detail::to_scalar_arg(e);
    fill.pack(s);
  }
};

}  // namespace expr

namespace detail {

/// The pad of `piece` (a node) by `widths` with `fill`, in dtype D (fz::pad).
template <DType D, class P>
auto make_pad(P&& piece, const std::vector<std::pair<std::int64_t, std::int64_t>>& widths, expr::Scalar<TypeOf<D>> fill) {
  using Padded = expr::Pad<D, std::decay_t<P>>;
  const Shape in = shape_of(piece);
  if (static_cast<int>(widths.size()) != in.size())
    throw ShapeError("pad: " + std::to_string(widths.size()) + " (before, after) pairs for an operand of shape " +
                     to_string(in) + "; give one pair per axis");
  Shape out = in;
  std::vector<std::int64_t> where;
  int tested = 0;
  Padded r{{}, std::forward<P>(piece), fill, {}, {}};
  for (int d = 0; d < in.size(); ++d) {
    const auto [before, after] = widths[static_cast<std::size_t>(d)];
    if (before < 0 || after < 0) throw ShapeError("pad: widths must not be negative");
    out[d] = in[d] + before + after;
    where.push_back(before);
    if (before == 0 && after == 0) continue;  // (nothing to test along an axis left as it is)
    if (tested == Padded::kAxes)
      throw ShapeError("pad: " + std::to_string(Padded::kAxes) + " padded axes at most in one call; pad the others in a "
                       "second fz::pad of the first's result");
    std::int64_t* t = &r.place[static_cast<std::size_t>(4 * tested++)];
    t[0] = out.size() - 1 - d, t[1] = out[d], t[2] = before, t[3] = before + in[d];
  }
  for (; tested < Padded::kAxes; ++tested) {  // always inside: no axis (pieces.cpp)
    std::int64_t* t = &r.place[static_cast<std::size_t>(4 * tested)];
    t[0] = -1, t[1] = 1, t[2] = 0, t[3] = 1;
  }
  for (const ArrayBase* a : packed_arrays(r.piece)) r.views.push_back(a->broadcast(in).placed(out, where));
  return r;
}

/// The join of `pieces` (nodes) along `axis` (a new axis there when Stacked) into dtype D.
template <DType D, bool Stacked, class... Ps> auto make_join(int axis, Ps&&... pieces) {
  using J = expr::Join<D, std::decay_t<Ps>...>;
  const std::array<Shape, sizeof...(Ps)> shapes{shape_of(pieces)...};
  const Shape out = joined_shape(shapes, axis, Stacked, Stacked ? "stack" : "concatenate");
  J j{{}, {std::forward<Ps>(pieces)...}, {}, {}};
  j.views.reserve(static_cast<std::size_t>(J::n_arrays));
  std::int64_t at = 0;
  std::size_t k = 0;
  std::apply([&](const auto&... p) {
    ([&] {
      Shape own = shapes[k];
      if (Stacked) own.insert(axis, 1);
      std::vector<std::int64_t> where(static_cast<std::size_t>(out.size()), 0);
      where[static_cast<std::size_t>(axis)] = at;
      for (const ArrayBase* a : packed_arrays(p)) {
        ArrayBase v = a->broadcast(shapes[k]);
        if (Stacked) v = v.expanded(axis);
        j.views.push_back(v.placed(out, where));
      }
      at += own[axis];
      if (J::n_own_scalars > 0 && k + 1 < sizeof...(Ps)) j.place[k + 2] = at;
      ++k;
    }(), ...);
  }, j.pieces);
  if constexpr (J::n_own_scalars > 0) j.place[0] = out.size() - 1 - axis, j.place[1] = out[axis];
  return j;
}

template <bool Stacked, class... Es> auto join(int axis, Es&&... pieces) {
  static_assert(sizeof...(Es) >= 1, "fusion: joining needs at least one array");
  constexpr DType D = promoted_dtype<std::decay_t<Es>...>();
  return make_join<D, Stacked>(axis, piece_node(std::forward<Es>(pieces))...);
}

/// Arrays of one type from a vector, joined into a new array: a kernel per 8 pieces (a kernel's pieces are
/// its parameters), each writing its part of the result.
template <bool Stacked, Element T> Array<T> join(std::span<const Array<T>> pieces, int axis) {
  std::vector<Shape> shapes;
  for (const Array<T>& p : pieces) shapes.push_back(p.shape());
  const Shape out_shape = joined_shape(shapes, axis, Stacked, Stacked ? "stack" : "concatenate");
  Array<T> out = empty<T>(out_shape);
  constexpr std::size_t kPer = 8;
  std::vector<ArrayBase> part;
  std::int64_t at = 0;
  for (std::size_t first = 0; first < pieces.size(); first += kPer) {
    part.clear();
    std::int64_t extent = 0;
    for (std::size_t k = first; k < first + kPer; ++k) {
      if (k < pieces.size()) {
        part.push_back(Stacked ? pieces[k].expanded(axis) : ArrayBase(pieces[k]));
      } else {  // (an empty piece, never chosen: none of the first one, which is not the result's memory)
        std::vector<Slice> none(static_cast<std::size_t>(out.ndim()));
        none[static_cast<std::size_t>(axis)] = Slice{0, 0, 1};
        part.push_back(part.front().sliced(none));
      }
      extent += part.back().shape()[axis];
    }
    if (extent > 0) {
      std::vector<Slice> s(static_cast<std::size_t>(out.ndim()));
      s[static_cast<std::size_t>(axis)] = Slice{at, at + extent, 1};
      Array<T> view = out.slice(s);
      auto piece = [&](std::size_t k) { return expr::ArrayRef<T>{{}, &part[k]}; };
      copyto(view, make_join<dtype_of<T>, false>(axis, piece(0), piece(1), piece(2), piece(3), piece(4), piece(5),
                                                  piece(6), piece(7)));
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
/// NumPy's concatenate of arrays and expressions along `axis`, as an expression: one kernel computes every
/// piece into its place and whatever math uses the result (arrays given as lvalues must outlive it).
template <Operand... Es> auto concatenate(int axis, Es&&... pieces) {
  return detail::join<false>(axis, std::forward<Es>(pieces)...);
}

/// NumPy's stack: pieces of one shape along a new axis `axis`.
template <Element T> Array<T> stack(std::span<const Array<T>> pieces, int axis = 0) {
  return detail::join<true>(pieces, axis);
}
template <Element T> Array<T> stack(const std::vector<Array<T>>& pieces, int axis = 0) {
  return detail::join<true>(std::span<const Array<T>>(pieces), axis);
}
/// NumPy's stack of arrays and expressions of one shape along a new axis `axis`, as an expression.
template <Operand... Es> auto stack(int axis, Es&&... pieces) {
  return detail::join<true>(axis, std::forward<Es>(pieces)...);
}

/// NumPy's constant pad as an expression: `widths[d]` elements of `value` before and after axis d (one pair per
/// axis), `e` in the middle, in e's dtype. One kernel writes the result with any math around it; up to
/// expr::Pad::kAxes axes may be padded (pad in two calls for more).
template <Operand E, CppScalar V = int>
auto pad(E&& e, const std::vector<std::pair<std::int64_t, std::int64_t>>& widths, V value = 0) {
  constexpr DType D = detail::operand_dtype<std::decay_t<E>>();
  return detail::make_pad<D>(detail::piece_node(std::forward<E>(e)), widths, expr::Scalar<TypeOf<D>>::make(value));
}

}  // namespace fusion
