// SPDX-License-Identifier: Apache-2.0
// Several outputs from one kernel: `fz::tie(a, b) = std::make_tuple(x + y, x * y);` reads x and y once.
#pragma once
#include <array>
#include <tuple>
#include <utility>

#include "fusion/array.hpp"

namespace fusion {

/// The left-hand side of a multi-output assignment. Each output keeps its own shape (the broadcast of
/// what its expression reads) and dtype (results convert on store), as if assigned one by one, but
/// all in one kernel; outputs that share memory with an input get NumPy's answer (every input is read
/// before any output is written). Expressions with reductions run each output as its own plan.
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

}  // namespace fusion
