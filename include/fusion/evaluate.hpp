// SPDX-License-Identifier: Apache-2.0
// The bridge from expression types to the runtime: each expression type is lowered to its IR once per
// process; a repeated assignment only packs arguments and calls detail::evaluate.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "fusion/expr.hpp"

namespace fusion {

namespace detail {

/// An expression type's IR, canonicalized and hashed once; also holds that type's compiled kernels.
struct Lowered;
const Lowered& register_lowered(ir::Graph graph);

template <class E> const Lowered& lowered() {
  static const Lowered& l = register_lowered([] {
    ir::Graph g;
    g.outputs.push_back(E::lower(g));
    return g;
  }());
  return l;
}

enum class AssignMode {
  fresh,         ///< allocate the output with the expression's shape
  replace,       ///< `a = e`: write into `a` when shapes match, else allocate
  into,          ///< `a += e`, copyto: broadcast into `a`'s existing memory
};

struct Call {
  const Lowered* lowered;
  const ArrayBase* const* arrays;
  const ScalarArg* scalars;
  int n_arrays, n_scalars;
  std::string_view name;  // the user's name (fz::named) or empty
};

void evaluate(const Call& call, ArrayBase& out, AssignMode mode);

template <class E> std::string_view name_of(const E&) { return {}; }
template <class A> std::string_view name_of(const expr::Named<A>& e) { return e.name; }

/// Packs `e`'s arguments (on the stack) and hands the call to `f`.
template <class E, class F> decltype(auto) with_call(const E& e, F&& f) {
  std::array<const ArrayBase*, std::max(E::n_arrays, 1)> arrays;
  std::array<ScalarArg, std::max(E::n_scalars, 1)> scalars;
  ArgSink sink{arrays.data(), scalars.data()};
  e.pack(sink);
  return f(Call{&lowered<E>(), arrays.data(), scalars.data(), E::n_arrays, E::n_scalars, name_of(e)});
}

/// Runs `e` into `out`.
template <class E> void assign(ArrayBase& out, const E& e, AssignMode mode) {
  with_call(e, [&](const Call& c) { evaluate(c, out, mode); });
}

}  // namespace detail

}  // namespace fusion
