// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <string_view>

#include "codegen/emit_common.hpp"
#include "codegen/scan_variant.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

/// CUDA source of a scan kernel for a canonical graph whose one output is a scan of an elementwise
/// prologue (see scan_variant.hpp). Parameters: the input arrays, the output, the chunk workspace (chunked
/// variants), the scalars (by slot), the rows, the axis extent, the chunk length and chunks per row, then
/// the dims entries of scan_variant.hpp.
GeneratedKernel emit_scan(const ir::Graph& g, const ScanVariant& v, std::string_view name_given);

}  // namespace fusion::codegen
