// SPDX-License-Identifier: Apache-2.0
// A layer kernel's passes over its row: reductions in waves (a reduction reading another's result runs a
// pass later), then the per-element outputs. The emitter writes them; the layout rule counts them.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "codegen/variant.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

/// The nodes computing `roots`, stopping at reductions (their results are per-row values by then).
std::vector<bool> needed(const ir::Graph& g, const std::vector<std::uint32_t>& roots);

/// Each reduction's wave: 1 when its operand reads no reduction, else one more than the latest it reads.
std::vector<int> waves_of(const ir::Graph& g);

/// The nodes each pass of a layer kernel computes: its reduction waves in order, then (when some output is
/// per element) the last pass. The layout rule reads it to see which inputs several passes read (cached ones).
std::vector<std::vector<bool>> layer_pass_nodes(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row);

}  // namespace fusion::codegen
