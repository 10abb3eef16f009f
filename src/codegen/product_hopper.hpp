// SPDX-License-Identifier: Apache-2.0
// The Hopper path of generated products (sm_90a): one thread's bulk tensor copies into 128-byte-swizzled stages,
// consumer warpgroups' wgmma on them, the rounded accumulators staged in shared memory for epilogue warps that
// write one tile while the consumers multiply the next.
#pragma once
#include <string>
#include <string_view>

#include "codegen/product_variant.hpp"

namespace fusion::codegen {

/// Row tiles per group in the Hopper path's block order (H100, 8192^3: 16 row tiles of 128 share 256-column ones).
inline constexpr int kHopperGroup = 16;

/// The device code of the persistent block's parts, shaped by the FZ_ constants written before it: fz_hopper_role
/// (barriers, registers, who does what), fz_produce (the copies), fz_consume (the products, staged tile by tile)
/// and fz_tile_at (the tile order the epilogue follows too); it calls the fz_wgmma wrapper (wgmma_wrapper).
std::string_view hopper_loop();

/// The FZ_ constants that shape hopper_loop for `v` (its tiles checked: 64 rows a warpgroup, 64 along K, whole
/// blocks of 64 columns).
std::string hopper_constants(const ProductVariant& v);

/// wgmma m64n<bn>k16 over `bn / 2` float accumulators per thread, its operand list spelled out (asm takes no
/// arrays).
std::string wgmma_wrapper(int bn);

}  // namespace fusion::codegen
