// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <string_view>

#include "codegen/emit_common.hpp"
#include "codegen/reduce_variant.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

/// The graph's single reduction node (an Error when there is none or more than one).
std::uint32_t reduction_node(const ir::Graph& g);

/// Bytes of one partial result of the graph's reduction (its accumulator) in the split workspace.
std::size_t accumulator_bytes(const ir::Graph& g);

/// CUDA source of one reduction kernel for a canonical graph holding exactly one reduction: the nodes
/// below it (the prologue) run on every loaded element, the nodes above it (the epilogue; scalars are
/// its only other leaves) run once per output. Kernel parameters, in order: the input arrays, the
/// output, the scalars (by slot), n_out, n_red, chunk (reduced elements per block), divisor (of mean),
/// then the kept and reduced extents and, per non-broadcast input, its kept and reduced strides, the
/// output's kept strides, and for split kernels the partials and counters workspace.
GeneratedKernel emit_reduction(const ir::Graph& g, const ReduceVariant& v, std::string_view name_given);

}  // namespace fusion::codegen
