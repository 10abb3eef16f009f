// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "codegen/emit_common.hpp"
#include "codegen/variant.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

/// CUDA source of one elementwise kernel for a canonical graph with one output, in a layout variant.
/// Kernel parameters, in order: the variant's input arrays, the output, the graph's scalars (by slot,
/// in compute types), n, then for rank > 1 the collapsed shape and the strides of each strided operand.
GeneratedKernel emit_elementwise(const ir::Graph& g, const Variant& v, std::string_view name_given);

}  // namespace fusion::codegen
