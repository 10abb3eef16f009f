// SPDX-License-Identifier: Apache-2.0
// The device functions of one reduction of a layer kernel (codegen/emit_layer.cpp): identity, lift, combine,
// step and settle, the reduce over a row's group of threads (and cluster of blocks), the result.
#pragma once
#include <cstddef>
#include <cstdint>

#include "codegen/reduce_ops.hpp"
#include "codegen/source_writer.hpp"
#include "codegen/spell.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

/// Writes reduction `i`'s functions (suffix `i`) for graph node `node`, reducing values of dtype `vd` in
/// wave `wave` over a group of `group` threads per row and a cluster of `cluster` blocks.
void write_layer_reduction(SourceWriter& fn, std::size_t i, const ir::Graph& g, std::uint32_t node,
                           const ReduceOpSpelling& op, DType vd, int wave, int group, int cluster, SpellContext& ctx);

}  // namespace fusion::codegen
