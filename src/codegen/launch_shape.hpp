// SPDX-License-Identifier: Apache-2.0
// The launch-shape constants generated kernels are written for and launched with (one place: the
// emitters bake them into __launch_bounds__ and thread arithmetic, the launcher uses them for grids).
#pragma once
#include <cstdint>

namespace fusion::codegen {

/// Elements per thread and tile of a scan kernel, unless tuned (scan_variant.hpp).
inline constexpr int kScanItemsDefault = 8;

inline constexpr int kBlockThreads = 256;  ///< threads per block of generated kernels (layer kernels: see LayerVariant)
inline constexpr int kWarpThreads = 32;
inline constexpr int kBlockWarps = kBlockThreads / kWarpThreads;
inline constexpr int kVectorBytes = 16;    ///< one vector access (FzVec)
/// Accesses each lane of a short row's group makes (reductions and layer kernels over rows of up to 1,024
/// elements size their groups by it; measured on an H100, rows of 128 float32: layer norm 65% of the limit
/// with a warp per row, 96% with 8 lanes), and the least each thread of a rows kernel makes per row.
inline constexpr int kAccessesPerLane = 4;
/// Accesses each thread makes when a block (or a cluster) owns a long row (layer kernels, and the blocks
/// a reduction over two reduced dimensions splits its rows into): enough loads in flight per thread, and
/// few enough threads that the per-row combine stays short.
inline constexpr int kLongRowAccesses = 8;
/// Blocks of kBlockThreads per SM a reduction that splits its rows over blocks (a batch norm's statistics)
/// counts on being resident at once: its accumulators (a mean and variance, in double while streaming)
/// take about 40 registers, so 6 fit; 4 leaves room for more.
inline constexpr int kSplitRowsBlocksPerSm = 4;
/// The largest grid.x: kernels loop (grid-stride) over work beyond it.
inline constexpr std::int64_t kMaxGridX = 0x7fffffff;
inline constexpr std::int64_t kMaxGridY = 65535;
/// 32-bit registers one SM holds (every architecture fusion targets); a block's share decides how many fit.
inline constexpr int kRegistersPerSm = 65536;
/// Blocks of kBlockThreads one SM of an H100-class GPU holds at once (2048 threads).
inline constexpr int kBlocksPerSm = 2048 / kBlockThreads;

}  // namespace fusion::codegen
