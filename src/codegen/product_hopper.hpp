// SPDX-License-Identifier: Apache-2.0
// The Hopper path of generated products (sm_90a): a producer warpgroup's bulk tensor copies into 128-byte-swizzled
// stages, consumer warpgroups' wgmma on them, the accumulators left in shared memory for the epilogue.
#pragma once
#include <string>
#include <string_view>

namespace fusion::codegen {

/// Row tiles per group in the Hopper path's block order (H100, 8192^3: 16 row tiles of 128 share 256-column ones).
inline constexpr int kHopperGroup = 16;

/// The device code of the main loop: fz_product_tile(cs, base, bars, ta, tb, K, m0, n0, batch_a, batch_b), shaped
/// by the FZ_ constants written before it, and the fz_wgmma wrapper it calls (wgmma_wrapper).
std::string_view hopper_loop();

/// wgmma m64n<bn>k16 over `bn / 2` float accumulators per thread, its operand list spelled out (asm takes no
/// arrays).
std::string wgmma_wrapper(int bn);

}  // namespace fusion::codegen
