// SPDX-License-Identifier: Apache-2.0
// The launch-shape constants generated kernels are written for and launched with (one place: the
// emitters bake them into __launch_bounds__ and thread arithmetic, the launcher uses them for grids).
#pragma once
#include <cstdint>

namespace fusion::codegen {

inline constexpr int kBlockThreads = 256;  ///< threads per block of generated kernels (layer kernels: see LayerVariant)
inline constexpr int kWarpThreads = 32;
inline constexpr int kBlockWarps = kBlockThreads / kWarpThreads;
inline constexpr int kVectorBytes = 16;    ///< one vector access (FzVec)
/// Accesses each lane of a short row's group makes (reductions and layer kernels over rows of up to 1,024
/// elements size their groups by it). A first choice, to measure on the H100.
inline constexpr int kAccessesPerLane = 4;
/// The largest grid.x: kernels loop (grid-stride) over work beyond it.
inline constexpr std::int64_t kMaxGridX = 0x7fffffff;
inline constexpr std::int64_t kMaxGridY = 65535;
/// Blocks of kBlockThreads one SM of an H100-class GPU holds at once (2048 threads).
inline constexpr int kBlocksPerSm = 2048 / kBlockThreads;

}  // namespace fusion::codegen
