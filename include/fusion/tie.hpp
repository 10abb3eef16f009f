// SPDX-License-Identifier: Apache-2.0
// Several outputs from one kernel: `fz::tie(a, b) = std::make_tuple(x + y, x * y);` reads x and y once.
#pragma once
#include <array>
#include <tuple>
#include <utility>

#include "fusion/array.hpp"
#include "fusion/reductions.hpp"

namespace fusion {

/// The left-hand side of a multi-output assignment. Each output keeps its own shape (the broadcast of
/// what its expression reads) and dtype (results convert on store), as if assigned one by one, but
/// in one plan: one kernel where the outputs have one shape, or are reductions of one input over the same
/// axes (a mean and a variance: one pass); fz::inspect(e1, e2) shows the plan. Outputs that share memory
/// with an input get NumPy's answer (every input is read before any output is written).
template <Element... T> class Tie {
 public:
  explicit Tie(Array<T>&... outs) : outs_{&outs...} {}

  template <class... E>
    requires(sizeof...(E) == sizeof...(T) && (Operand<E> && ...))
  Tie& operator=(const std::tuple<E...>& exprs) {
    std::apply([&](const auto&... e) { assign(detail::to_node(e)...); }, exprs);
    return *this;
  }

 private:
  template <class... N> void assign(const N&... nodes) {
    detail::with_call_multi(
        [&](const detail::Call& c) {
          detail::evaluate_multi(c, outs_.data(), sizeof...(T), detail::AssignMode::replace);
        },
        nodes...);
  }
  std::array<ArrayBase*, sizeof...(T)> outs_;
};

/// `fz::tie(a, b) = std::make_tuple(e1, e2)`: one kernel for every right-hand side. (An Array put
/// into std::make_tuple is copied first; std::forward_as_tuple avoids that copy.)
template <Element... T> Tie<T...> tie(Array<T>&... outs) { return Tie<T...>(outs...); }

namespace detail {
/// A statistic and a mean evaluated together: one pass over the input where they reduce the same axes.
template <class S, class M> auto evaluated_pair(const S& s, const M& m) {
  Array<TypeOf<S::dtype>> rs;
  Array<TypeOf<M::dtype>> rm;
  tie(rs, rm) = std::forward_as_tuple(s, m);
  return std::pair{std::move(rs), std::move(rm)};
}
}  // namespace detail

/// PyTorch's var_mean: the variance (fz::var's ddof) and the mean of `a` over `axes`, from one pass over `a`
/// in one kernel. `auto [v, m] = fz::var_mean(x, 1);`
template <Operand A> auto var_mean(const A& a, const Axes& axes = {}, KeepDims keepdims = false, double ddof = 0) {
  return detail::evaluated_pair(var(a, axes, keepdims, ddof), mean(a, axes, keepdims));
}
/// PyTorch's std_mean: the standard deviation and the mean, as var_mean.
template <Operand A> auto std_mean(const A& a, const Axes& axes = {}, KeepDims keepdims = false, double ddof = 0) {
  return detail::evaluated_pair(std(a, axes, keepdims, ddof), mean(a, axes, keepdims));
}

}  // namespace fusion
