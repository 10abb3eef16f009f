// SPDX-License-Identifier: Apache-2.0
// Reductions: sum, prod, min, max, mean, var, std, argmin, argmax, any, all (and the NaN-ignoring
// nansum, nanmin, nanmax). Like every operation they only build a node; the elementwise work inside a
// reduction (its prologue) and on its result (its epilogue) run in the same kernel.
#pragma once
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "fusion/ops.hpp"

namespace fusion {

namespace detail {
template <class> inline constexpr bool always_false = false;
}

/// The axes a reduction runs over: every axis (the default), one (`1`, `-1`) or several (`{0, 2}`),
/// counted like NumPy's (negative from the end). Checked against the operand's rank when it runs.
class Axes {
 public:
  Axes() = default;
  Axes(int axis) { add(axis); }
  /// A bool or floating-point value where an axis goes is a mistake (`sum(m, true)` once meant
  /// keepdims and silently reduced axis 1): it does not compile.
  template <class X>
    requires(std::is_same_v<X, bool> || std::is_floating_point_v<X>)
  Axes(X) {
    static_assert(detail::always_false<X>,
                  "fz: a reduction axis must be an integer: fz::sum(m, 1), fz::sum(m, {0, 2}), fz::sum(m) for every "
                  "axis; keepdims comes after the axes: fz::sum(m, 1, true) or fz::sum(m, fz::Axes{}, true). "
                  "An elementwise maximum with a number (a ReLU) is fz::maximum(x, 0.f) or fz::relu(x)");
  }
  Axes(std::initializer_list<int> axes) : all_(false) {
    for (int a : axes) add(a);
  }
  Axes(const std::vector<int>& axes) : all_(false) {
    for (int a : axes) add(a);
  }
  detail::ReduceArg arg(bool keepdims, double ddof = 0) const {
    detail::ReduceArg r = arg_;
    if (all_) r.n_axes = -1;
    r.keepdims = keepdims;
    r.ddof = ddof;
    return r;
  }

 private:
  void add(int axis) {
    if (arg_.n_axes < 0) arg_.n_axes = 0, all_ = false;
    if (arg_.n_axes == kMaxDims)
      throw ShapeError("a reduction takes at most " + std::to_string(kMaxDims) + " axes");
    if (axis < -kMaxDims || axis >= kMaxDims)
      throw ShapeError("axis " + std::to_string(axis) + " is out of range for any operand: arrays have at most " +
                       std::to_string(kMaxDims) + " dimensions (an operand of rank r takes axes -r to r - 1)");
    arg_.axes[static_cast<std::size_t>(arg_.n_axes++)] = static_cast<std::int8_t>(axis);
  }
  detail::ReduceArg arg_;
  bool all_ = true;
};

/// The keepdims argument of a reduction: only a bool converts (a number there is a misplaced axis or ddof).
class KeepDims {
 public:
  constexpr KeepDims(bool keep = false) : keep_(keep) {}  // NOLINT: implicit, as the bool it stands for
  template <class X>
    requires(std::is_arithmetic_v<X> && !std::is_same_v<X, bool>)
  KeepDims(X) {
      static_assert(
          detail::always_false<X>,
          "fz: keepdims must be a bool (true or false); axes go before it (fz::sum(m, {0, 1}, true)) and var/std "
          "take ddof after it (fz::var(m, 1, false, 1))");
  }
  constexpr operator bool() const { return keep_; }  // NOLINT

 private:
  bool keep_ = false;
};
/// Reads better than `true` at a call site: fz::sum(m, 1, fz::keepdims); also for ReductionKernel calls.
inline constexpr KeepDims keepdims{true};

namespace detail {

template <ir::Op OP, DType Result, class A> auto make_reduce(A&& a, const Axes& axes, bool keepdims, double ddof = 0) {
  auto x = to_node(std::forward<A>(a));
  return expr::Reduce<OP, Result, decltype(x)>{{}, std::move(x), axes.arg(keepdims, ddof)};
}

/// NumPy's result dtype, or the user's `U` (which is then also the accumulator, as NumPy's `dtype=`).
template <ir::Op OP, class U, class A> constexpr DType reduce_dtype() {
  if constexpr (std::is_void_v<U>) return ir::reduction_result_dtype(OP, node_t<A>::dtype);
  else return dtype_of<U>;
}

}  // namespace detail

// Integer and bool sums and products give int64 (uint64 for unsigned); 16-bit floats accumulate in
// float32; `sum<double>(x)` chooses the result and accumulator dtype. An empty extent gives the identity.
template <class U = void, Operand A> auto sum(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::sum, detail::reduce_dtype<ir::Op::sum, U, A>()>(std::forward<A>(a), axes,
                                                                                     keepdims);
}
template <class U = void, Operand A> auto prod(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::prod, detail::reduce_dtype<ir::Op::prod, U, A>()>(std::forward<A>(a), axes,
                                                                                       keepdims);
}
/// The mean of integers is float64; of an empty extent, NaN (0/0) as in NumPy.
template <class U = void, Operand A> auto mean(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::mean, detail::reduce_dtype<ir::Op::mean, U, A>()>(std::forward<A>(a), axes,
                                                                                       keepdims);
}
// min and max propagate NaN; nanmin and nanmax ignore it (NaN only where every element is NaN). An
// empty extent is a ShapeError: they have no identity.
template <Operand A> auto min(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::min, detail::reduce_dtype<ir::Op::min, void, A>()>(std::forward<A>(a), axes,
                                                                                        keepdims);
}
template <Operand A> auto max(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::max, detail::reduce_dtype<ir::Op::max, void, A>()>(std::forward<A>(a), axes,
                                                                                        keepdims);
}
template <Operand A> auto nanmin(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::nanmin, detail::reduce_dtype<ir::Op::nanmin, void, A>()>(std::forward<A>(a), axes,
                                                                                              keepdims);
}
template <Operand A> auto nanmax(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::nanmax, detail::reduce_dtype<ir::Op::nanmax, void, A>()>(std::forward<A>(a), axes,
                                                                                              keepdims);
}
/// The int64 index of the first minimum (the first NaN if any), flat in C order over the reduced axes.
template <Operand A> auto argmin(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::argmin, DType::int64>(std::forward<A>(a), axes, keepdims);
}
template <Operand A> auto argmax(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::argmax, DType::int64>(std::forward<A>(a), axes, keepdims);
}
template <Operand A> auto any(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::any, DType::bool_>(std::forward<A>(a), axes, keepdims);
}
template <Operand A> auto all(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return detail::make_reduce<ir::Op::all, DType::bool_>(std::forward<A>(a), axes, keepdims);
}
/// How many elements are not zero (NumPy's count_nonzero), as int64.
template <Operand A> auto count_nonzero(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return sum<std::int64_t>(detail::to_node(std::forward<A>(a)) != 0, axes, keepdims);
}

/// NumPy's isclose: |a - b| <= atol + rtol * |b| where both are finite (so not symmetric), infinities
/// close only to themselves, NaNs close to each other only with `equal_nan`.
template <class A, class B> requires BinaryArgs<A, B>
auto isclose(A&& a, B&& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) {
  const auto x = detail::to_node(std::forward<A>(a));
  const auto y = detail::to_node_beside<decltype(x)::dtype>(std::forward<B>(b));
  return (x == y) || (isfinite(x) && isfinite(y) && abs(x - y) <= atol + rtol * abs(y)) ||
         (isnan(x) && isnan(y) && equal_nan);
}
/// Whether every element of `a` is close to `b`'s (NumPy's allclose): runs and waits for the answer.
template <class A, class B> requires BinaryArgs<A, B>
bool allclose(A&& a, B&& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) {
  return eval(all(isclose(std::forward<A>(a), std::forward<B>(b), rtol, atol, equal_nan))).item();
}
/// Whether two arrays have the same shape and equal elements (NumPy's array_equal): runs and waits.
template <Element T, Element U> bool array_equal(const Array<T>& a, const Array<U>& b) {
  return a.shape() == b.shape() && eval(all(a == b)).item();
}

/// sum with NaN counted as zero.
template <class U = void, Operand A> auto nansum(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  auto x = detail::to_node(std::forward<A>(a));
  if constexpr (is_floating(decltype(x)::dtype)) return sum<U>(where(isnan(x), 0, x), axes, keepdims);
  else return sum<U>(std::move(x), axes, keepdims);
}

/// Variance as NumPy defines it, mean(square(x - mean(x))) * n / (n - ddof), computed in one pass
/// (Welford's update, Chan's combine: accurate where a sum of squares would cancel), accumulated in
/// float32 for 16-bit floats and float64 for integers.
template <class U = void, Operand A>
auto var(A&& a, const Axes& axes = {}, KeepDims keepdims = false, double ddof = 0) {
  return detail::make_reduce<ir::Op::var, detail::reduce_dtype<ir::Op::mean, U, A>()>(std::forward<A>(a), axes,
                                                                                      keepdims, ddof);
}
template <class U = void, Operand A>
auto std(A&& a, const Axes& axes = {}, KeepDims keepdims = false, double ddof = 0) {
  return sqrt(var<U>(std::forward<A>(a), axes, keepdims, ddof));
}

/// mean ignoring NaN (NumPy's nanmean): the sum of the other elements over their count; NaN where every
/// element is NaN. For integers it is mean (float64). One reduction kernel computes both sums.
template <Operand A> auto nanmean(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  auto x = detail::to_node(std::forward<A>(a));
  using X = decltype(x);
  if constexpr (is_floating(X::dtype)) {
    using T = TypeOf<X::dtype>;
    return sum(where(isnan(x), 0, x), axes, keepdims) / cast<T>(sum<std::int64_t>(!isnan(x), axes, keepdims));
  } else {
    return mean(std::move(x), axes, keepdims);
  }
}
/// var ignoring NaN (NumPy's nanvar): the mean square deviation from nanmean of the other elements, times
/// n / (n - ddof) for their count n. A second pass over the elements after their nanmean.
template <Operand A> auto nanvar(A&& a, const Axes& axes = {}, KeepDims keepdims = false, double ddof = 0) {
  auto x = detail::to_node(std::forward<A>(a));
  using X = decltype(x);
  if constexpr (is_floating(X::dtype)) {
    using T = TypeOf<X::dtype>;
    const auto deviation = x - nanmean(x, axes, true);
    const auto n = cast<T>(sum<std::int64_t>(!isnan(x), axes, keepdims));
    return sum(where(isnan(x), 0, deviation * deviation), axes, keepdims) / (n - static_cast<T>(ddof));
  } else {
    return var(std::move(x), axes, keepdims, ddof);
  }
}
template <Operand A> auto nanstd(A&& a, const Axes& axes = {}, KeepDims keepdims = false, double ddof = 0) {
  return sqrt(nanvar(std::forward<A>(a), axes, keepdims, ddof));
}

/// The vector norm of order Ord over `axes` (every axis by default; PyTorch's linalg.vector_norm, NumPy's
/// norm for vectors), a fused expression: (sum |x|^Ord)^(1/Ord). Ord = 2 is the Euclidean norm (the
/// Frobenius norm over a matrix's two axes), 1 the sum of magnitudes, INFINITY (-INFINITY) the largest
/// (smallest) magnitude, 0 the count of non-zeros. Integers give float64, as NumPy's.
/// (`fz::vector_norm<1>(x, 0)`; the order is a template argument: each order is a different expression.)
template <auto P = 2, Operand A> auto vector_norm(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  static_assert(std::is_arithmetic_v<decltype(P)>, "fusion: vector_norm's order is a number: vector_norm<1>(x)");
  constexpr double Ord = static_cast<double>(P);
  static_assert(Ord == Ord, "fusion: vector_norm's order is NaN");
  auto x = detail::to_node(std::forward<A>(a));
  using X = decltype(x);
  using R = std::conditional_t<is_floating(X::dtype), TypeOf<X::dtype>, double>;
  const auto m = abs(cast<R>(std::move(x)));
  if constexpr (Ord == 2) return sqrt(sum(m * m, axes, keepdims));
  else if constexpr (Ord == 1) return sum(m, axes, keepdims);
  else if constexpr (Ord == INFINITY) return max(m, axes, keepdims);
  else if constexpr (Ord == -INFINITY) return min(m, axes, keepdims);
  else if constexpr (Ord == 0) return cast<R>(sum<std::int64_t>(m != 0, axes, keepdims));
  else return pow(sum(pow(m, static_cast<R>(Ord)), axes, keepdims), static_cast<R>(1 / Ord));
}
/// The Euclidean norm over `axes` (every axis: a vector's 2-norm, a matrix's Frobenius norm).
template <Operand A> auto norm(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  return vector_norm<2>(std::forward<A>(a), axes, keepdims);
}

}  // namespace fusion
