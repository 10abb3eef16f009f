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
/// Returns a pointer, not a reference: the Lowered lives for the process (and GCC 13's
/// -Wdangling-reference takes a reference returned from a call with a temporary argument for a dangling one).
const Lowered* register_lowered(ir::Graph graph);

/// The IR of expression types Es... as one graph with one output per type (one output: an ordinary
/// expression; several: fz::tie). Lowered once per process.
template <class... Es> const Lowered& lowered() {
  static const Lowered& l = *register_lowered([] {
    ir::Graph g;
    (g.outputs.push_back(Es::lower(g)), ...);  // a fold over ',' runs left to right, as pack() does
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
  const ReduceArg* reductions;
  int n_arrays, n_scalars, n_reductions;
  std::string_view name;  // the user's name (fz::named) or empty
  const std::uint32_t* functions = nullptr;  // fz::function ids by call slot (see ir::Op::call)
  int n_functions = 0;
};

void evaluate(const Call& call, ArrayBase& out, AssignMode mode);
/// The shape call `c`'s (first) result has, checked as evaluation checks it; nothing runs.
Shape expression_shape(const Call& c);
/// True when call `c` runs as more than one kernel: a reduction, scan or matrix product inside it.
bool runs_in_steps(const Call& c);
/// Runs a scatter's call (its graph's output: ir::is_scatter) writing into `target`, a view of the target
/// array `whole` in the call's index space (extent 1 where the index's axes are).
void scatter_into(const Call& call, const ArrayBase& target, const ArrayBase& whole);
/// Several outputs from one call (fz::tie): `outs[k]` receives the graph's output k.
void evaluate_multi(const Call& call, ArrayBase* const* outs, int n_outs, AssignMode mode);

template <class E> std::string_view name_of(const E&) { return {}; }
template <class A> std::string_view name_of(const expr::Named<A>& e) { return e.name; }

/// Packs the arguments of `es` (on the stack) and hands the call to `f`.
template <class... Es, class F> decltype(auto) with_call_multi(F&& f, const Es&... es) {
  constexpr int n_arrays = (Es::n_arrays + ...), n_scalars = (Es::n_scalars + ...);
  constexpr int n_reductions = (Es::n_reductions + ...), n_functions = (Es::n_functions + ...);
  std::array<const ArrayBase*, std::max(n_arrays, 1)> arrays;
  std::array<ScalarArg, std::max(n_scalars, 1)> scalars;
  std::array<ReduceArg, std::max(n_reductions, 1)> reductions;
  std::array<std::uint32_t, std::max(n_functions, 1)> functions;
  ArgSink sink{arrays.data(), scalars.data(), reductions.data(), functions.data()};
  (es.pack(sink), ...);
  std::string_view name;
  ((name = name.empty() ? name_of(es) : name), ...);
  return f(Call{&lowered<Es...>(), arrays.data(), scalars.data(), reductions.data(), n_arrays, n_scalars,
                n_reductions, name, functions.data(), n_functions});
}
template <class E, class F>
decltype(auto) with_call(const E& e, F&& f) {
  return with_call_multi(std::forward<F>(f), e);
}

/// Runs `e` into `out`.
template <class E> void assign(ArrayBase& out, const E& e, AssignMode mode) {
  with_call(e, [&](const Call& c) { evaluate(c, out, mode); });
}

}  // namespace detail

}  // namespace fusion
