// SPDX-License-Identifier: Apache-2.0
// Scans: running reductions along one axis, as expressions. The math feeding a scan runs inside its kernel
// (`cumsum(x > t, 0)` reads x once); math reading it runs in the next kernel (`x - cumsum(x, 1) / n`).
//   fz::cumsum(x, axis)                          NumPy's cumsum (integers and bool sum in int64)
//   fz::cumprod, fz::cummax, fz::cummin          running product, maximum, minimum (NaN propagates)
//   fz::logcumsumexp(x, axis)                    log(cumsum(exp(x))) without overflow (float results within
//                                                about 2^-17 (1 + max |x| + |result|) of float64's, as tested)
//   fz::cumsum(x, axis, {.exclusive = true})     each result leaves its element out (starts from 0)
//   fz::cumsum(x, axis, {.reverse = true})       from the end of the axis to its start
// Results are the same run to run: each row combines in a fixed order (floating sums too).
#pragma once
#include <utility>

#include "fusion/expr.hpp"

namespace fusion {

/// How a scan runs along its axis.
struct ScanOptions {
  bool exclusive = false;  ///< element i's result combines the elements before i (the first gets the identity)
  bool reverse = false;    ///< run from the last element to the first
};

namespace expr {

/// The scan OP of `A` along the axis in `arg` (known at run time, like a reduction's axes).
template <ir::Op OP, class A> struct Scan : Node<Scan<OP, A>> {
  static constexpr DType dtype = ir::scan_result_dtype(OP, A::dtype);
  static constexpr int n_arrays = A::n_arrays, n_scalars = A::n_scalars, n_reductions = A::n_reductions + 1;
  static constexpr int n_functions = A::n_functions;
  A a;
  detail::ReduceArg arg;
  static std::uint32_t lower(ir::Graph& g) { return g.scan(OP, A::lower(g)); }
  void pack(detail::ArgSink& s) const {
    a.pack(s);  // its operand's descriptors first: lower() numbers them first too
    s.reductions[s.n_reductions++] = arg;
  }
};

}  // namespace expr

namespace detail {
template <ir::Op OP, class A> auto make_scan(A&& a, int axis, ScanOptions o) {
  auto x = to_node(std::forward<A>(a));
  ReduceArg arg;
  arg.axes[0] = static_cast<std::int8_t>(axis);
  arg.n_axes = 1;
  arg.exclusive = o.exclusive;
  arg.reverse = o.reverse;
  return expr::Scan<OP, decltype(x)>{{}, std::move(x), arg};
}
}  // namespace detail

template <Operand A> auto cumsum(A&& a, int axis, ScanOptions o = {}) {
  return detail::make_scan<ir::Op::cumsum>(std::forward<A>(a), axis, o);
}
template <Operand A> auto cumprod(A&& a, int axis, ScanOptions o = {}) {
  return detail::make_scan<ir::Op::cumprod>(std::forward<A>(a), axis, o);
}
template <Operand A> auto cummax(A&& a, int axis, ScanOptions o = {}) {
  return detail::make_scan<ir::Op::cummax>(std::forward<A>(a), axis, o);
}
template <Operand A> auto cummin(A&& a, int axis, ScanOptions o = {}) {
  return detail::make_scan<ir::Op::cummin>(std::forward<A>(a), axis, o);
}
template <Operand A> auto logcumsumexp(A&& a, int axis, ScanOptions o = {}) {
  return detail::make_scan<ir::Op::logcumsumexp>(std::forward<A>(a), axis, o);
}

}  // namespace fusion
