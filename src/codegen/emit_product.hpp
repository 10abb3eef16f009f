// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <string_view>

#include "codegen/generated_kernel.hpp"
#include "codegen/product_variant.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

/// Whether graph `g` can be a generated product's epilogue: one output, made of inputs, scalars, casts,
/// elementwise ops and fz::function calls only (no reduction, index, join, scan or flat index).
bool is_product_epilogue(const ir::Graph& g);

/// CUDA source of the product `a @ b` with epilogue graph `g` (is_product_epilogue), whose parameter
/// v.product_param is the product. Kernel parameters, in order: a, b, the epilogue's other arrays, the
/// output, the scalars (by slot), the product's dims entry, then each other array's strides (product_variant.hpp).
/// A block per BM x BN tile (blockIdx.x, n fastest) of one batch item (blockIdx.y); v.threads() threads and
/// v.shared_bytes() of dynamic shared memory.
GeneratedKernel emit_product(const ir::Graph& g, const ProductVariant& v, std::string_view name_given);

}  // namespace fusion::codegen
