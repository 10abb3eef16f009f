// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <string_view>

#include "codegen/emit_common.hpp"
#include "codegen/layer_variant.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

/// CUDA source of a layer kernel for a canonical graph whose reductions all run over the row (the
/// layer layout checked that; see schedule/layer_layout.hpp). Reductions run in waves, one pass over
/// the row each (a reduction reading another's result runs a wave later; independent ones share a
/// pass), then a last pass writes the per-element outputs; per-row outputs are written once per row.
/// Parameters: the input arrays, the outputs, the scalars (by slot), n_rows, n_red, a divisor per
/// mean/var (by reduction), then the dims entries of layer_variant.hpp.
GeneratedKernel emit_layer(const ir::Graph& g, const LayerVariant& v, std::string_view name_given);

}  // namespace fusion::codegen
