// SPDX-License-Identifier: Apache-2.0
// The mma.sync path of generated products (any architecture from sm_80): blocks of tensor-core tiles, operand tiles
// cp.async-ed STAGES deep into shared memory, ldmatrix fragments, the float accumulators staged in shared memory for
// the epilogue (codegen/emit_product.cpp writes the epilogue after it).
#pragma once
#include <string_view>

namespace fusion::codegen {

/// The device code of one block's product tile (fz_product_tile) and of K split over blocks (fz_sum_slices), shaped
/// by the FZ_ constants written before it.
std::string_view mma_sync_loop();

}  // namespace fusion::codegen
