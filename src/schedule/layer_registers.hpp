// SPDX-License-Identifier: Apache-2.0
// Where a layer kernel holds its row in its threads' registers (codegen::LayerVariant::registers, keep_values), and
// the bytes an element's kept values take. Pure logic: the graph and the layout's choices so far, no GPU.
#pragma once
#include <cstddef>
#include <cstdint>

#include "codegen/layer_variant.hpp"
#include "fusion/ir.hpp"

namespace fusion::detail {

/// The bytes a row element's kept values add (codegen::kept_bytes), counted on the graph the kernel is generated
/// from (see layer_registers.cpp).
std::size_t kept_bytes_of(const ir::Graph& g, const codegen::LayerVariant& v, int np);

/// Sets v.registers (and v.keep_values there) where a row of `r` elements, `cached_bytes` an element, is held in
/// registers; for a long row with kept values also its block (v.group, v.block), wherever the row is then held.
/// `element_gather`: elements read through an index along the row (they keep the loop).
void hold_row_in_registers(const ir::Graph& g, codegen::LayerVariant& v, int np, std::int64_t r, std::size_t cached_bytes,
                           bool element_gather);

}  // namespace fusion::detail
