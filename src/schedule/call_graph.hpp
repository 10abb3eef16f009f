// SPDX-License-Identifier: Apache-2.0
// The graph a call computes, for the decisions: a call names its lowered expression (exec's Lowered, which
// also holds the compiled kernels), and the decisions need only its graph.
#pragma once
#include "fusion/evaluate.hpp"
#include "fusion/ir.hpp"

namespace fusion::detail {

/// The graph `c` computes, as lowered (one input slot per array leaf). Defined by exec (lowered.cpp),
/// where Lowered is.
const ir::Graph& graph_of(const Call& c);

/// Whether the graph of `c` joins (fz::concatenate, fz::pad: ir::Op::leading), known since it was lowered.
bool joins(const Call& c);

}  // namespace fusion::detail
