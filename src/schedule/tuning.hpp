// SPDX-License-Identifier: Apache-2.0
// Layout thresholds a benchmark may override to measure alternatives in one run (fusion-bench --tune).
// Every choice they steer is part of the kernel's variant, so kernel names and caches stay exact.
// Not an API: programs get the defaults, which come from measurements on an H100 (bench/results).
#pragma once
#include <cstdint>
#include <string_view>

#include "codegen/launch_shape.hpp"

namespace fusion::detail {

struct Tuning {
  std::int64_t cluster_slice = 16384;  ///< elements of a row one block of a cluster keeps (layer kernels)
  int max_cluster = 8;                 ///< blocks per cluster at most (8: the portable cluster size; 16 opts in)
  int layer_block = 0;                 ///< threads per row of a long-row layer kernel (0: the layout's choice)
  /// Cap a long-row layer kernel's registers so as many blocks fit an SM as its shared memory allows
  /// (__launch_bounds__' second argument): 0 never, 1 always, 2 when one block owns a whole row (not a
  /// cluster) and the cap leaves 40 registers. H100, rows of 16,384 float32, 10 calls per sample: layer
  /// norm 84.3 -> 92.5% of the limit, RMSNorm bfloat16 88.3 -> 94.9%, softmax and RMSNorm float32 within
  /// 1%; rows of 65,536 (clusters of 4): layer norm +0.7, softmax -1.6, RMSNorm bfloat16 -2.9 points;
  /// rows of 4,096 (a cap of 39): layer norm 97 -> 71%.
  int layer_fit_blocks = 2;
  /// Blocks per SM every layer kernel's registers must allow (__launch_bounds__' second argument), where N > 0:
  /// an experiment's switch, overriding the layout's own choice.
  int layer_min_blocks = 0;
  bool layer_resident = true;  ///< keep a layer kernel's cached inputs in shared memory where they fit
  /// A one-wave grid of clusters keeps part of each slice so that each SM has room for a spare block.
  bool layer_spare_block = true;
  /// Values a later pass would compute again (softmax's exp(x - max)) kept beside the cached row where it fits.
  bool layer_keep_values = true;
  /// threads resident per SM (by shared memory) a layer kernel keeping values must still have. H200, softmax at
  /// 512 against 1,024: float32 rows of 1,024 / 16,384 / 65,536 94.2 / 96.5 / 81.1% -> 85.3 / 63.9 / 45.2%, bfloat16
  /// rows of 16,384 58.5 -> 52.0% (bench/results/layers/h200/keep-min-threads-2026-11-28.txt)
  int layer_keep_min_threads = 1024;
  /// Registers a thread may spend holding its part of a row (the cached inputs and kept values) instead of shared
  /// memory, where the row is short enough; 0: never. H200, one call: 64 against 48 took float32 softmax over rows
  /// of 1,024 / 4,096 (the row and its exps, 64 registers) from 93.5 / 90.8% of the limit to 103.3 / 102.8%
  /// (bench/results/layers/h200/registers-2026-11-29.txt).
  int layer_registers = 64;
  /// A row held in registers that fills every thread's vectors spells its vector count as a constant (0: as a kernel
  /// argument, as every row did before 2026-12-01; LayerVariant::full_parts).
  bool layer_full_parts = true;
  /// Rows of 4,097 to 16,384 elements held in registers even where no later pass needs values kept (layer norm,
  /// RMSNorm), by layer_block's threads (or the smallest block of kKeptRegisterBlocks that fits): an experiment, off.
  /// (bfloat16 softmax over rows of 16,384 with layer_block=1024: 32 registers, two blocks of 1,024 an SM.)
  bool layer_long_registers = false;
  /// Row statistics alone with a variance among them (var, std, a tie of mean and var) as a layer kernel: 0 never
  /// (one reduction kernel), 1 where one block holds each whole row, 2 wherever one applies (row_statistics.cpp).
  int layer_statistics = 1;
  /// vectors each thread streams when a reduction over two dimensions splits its rows over blocks (a batch
  /// norm's statistics)
  int row_split_accesses = codegen::kLongRowAccesses;
  int reduce_blocks_per_sm = codegen::kBlocksPerSm;  ///< blocks per SM a reduction's split aims at
  /// Row groups per block of an outer-mode reduction over too few outputs for a thread each (a column sum);
  /// 1: a thread per column, the column split over as many blocks as fill the device.
  int reduce_row_groups = 8;
  int reduce_grouped_blocks_per_sm = 4;  ///< blocks per SM the split of such a grouped reduction aims at
  /// Reduced rows each thread of an outer-mode reduction split over blocks reads at least (a block of R row groups
  /// covers at least R times as many rows). H200, column sums of 2,048^2 float32 (16 column tiles: 32 rows gave 8
  /// splits, 128 blocks, under one an SM): 32 / 16 / 8 / 4 rows 56.6 / 55.1 / 59.5 / 59.5% of the limit, again 52.5
  /// (32) and 57.2% (8); 4,096^2 and 8,192^2 within a point (bench/results/layouts/h200-2026-11-29-column-sums.txt).
  int reduce_min_rows = 8;
  /// Blocks per SM a grouped (row-group) reduction's registers must allow: 0 leaves `__launch_bounds__` without it,
  /// where ptxas keeps 32 registers (a full SM's threads) and so holds fewer of a thread's loads in flight than
  /// its unrolled loop asks; 4 leaves it 64 (bench/column_sum_probe.cu).
  int reduce_min_blocks = 0;
  int reduce_unroll = 0;  ///< a grouped reduction's row loop unrolled this many times; 0: 4
  /// A grouped reduction's row ranges as the blocks of a cluster of this many (2, 4, 8), combined through distributed
  /// shared memory instead of partials in global memory, a fence and a counter; 0: off; -1 (the default): clusters of
  /// 8, with registers for 4 blocks per SM, where the split would cut each column tile 16 or more ways. H200, fusion-bench
  /// --layouts, sum(m, 0) float32 at 2,048^2 / 4,096^2 / 8,192^2 (splits of 33 / 17 / 9): the split 64.5-64.8 /
  /// 81.9-82.0 / 101.4-101.8% of the limit, clusters of 8 alone 58.4 / 75.3 / 102.1%, with reduce_min_blocks=4
  /// 80.5 / 87.6 / 99.8%, clusters of 4 49.3 / 52.6 / 89.3%, of 2 30.4 / 30.2 / 58.4%
  /// (bench/results/layouts/h200-2026-12-02-column-clusters.txt).
  int reduce_cluster = -1;
  bool reduce_outer_vectors = true;      ///< 16-byte loads across neighbouring outputs of outer-mode reductions
  /// Rows of a reduction along them up to this many elements take a warp each, longer ones a block. H100,
  /// var over rows of 4,096 float32 (2^26 elements, fusion-bench --layers --tune reduce_warp_row=N): a block
  /// per row 91.5% of the limit, a warp 95.3-96.6%; rows of 16,384 lose with a warp (98.2 -> 96.9%); sums of
  /// a row and its squares (fz::tie) are within 1% either way.
  std::int64_t reduce_warp_row = 4096;
  /// Linear elementwise kernels: 0 launches a thread per vector; N > 0 at most N blocks per SM, each
  /// thread looping (grid-stride) over several vectors.
  int linear_blocks_per_sm = 0;
  /// Launch generated kernels as programmatic dependents of the kernel before them on the stream (PDL; each waits
  /// for that one first: codegen/kernel_frame.hpp). FUSION_LAUNCH_OVERLAP=0 in the environment turns it off.
  bool launch_overlap = true;
  /// Linear elementwise kernels that call a device function (fz::random, fz::function) or do much math on 16-bit
  /// floats: at most N blocks per SM, each thread looping over several vectors (0: a thread per vector). See
  /// schedule/layout.hpp, loops_over_vectors.
  int linear_call_blocks_per_sm = 32;
  /// Elements each thread of a tiled scan takes per tile (consecutive ones, scanned in order); 0: 16 for a
  /// block per row, 32 for one pass over partitions, 8 for 8-byte accumulators. H100, float32
  /// (fusion-bench-indexing --scans): rows of 8192 x 8192 at 8, 16, 32 items 85.9, 91.2, 91.0% of the
  /// limit; one row of 2^28 in one pass at 8, 16, 32 items 36.0, 54.1, 60.7%.
  int scan_items = 0;
  /// Rows of several tiles: 0 scans them in partitions over blocks in one pass (lookback) when the rows
  /// are too few for a block each, 1 always, 2 never (a block per row).
  int scan_lookback = 0;
  /// Blocks per SM a one-pass scan's registers must allow (0: 4, as a block per row's).
  int scan_min_blocks = 0;
  /// One-pass scans of contiguous rows: while a block looks back on partition b, its idle warps prefetch
  /// partition b + gridDim.x * N / 16 into L2 (0: no prefetch).
  int scan_prefetch = 4;
  /// Scans along a non-contiguous axis over 32 rows per SM or more: 1 in one pass, a block per strip of 32
  /// rows; 0 a thread per row and chunk (two kernels where the axis is split); 2 strips for any number of rows
  /// (the fuzzer's small shapes).
  int scan_strips = 1;
  /// Tiled scans a block per row: 1 holds each thread's items in registers between its pass and its results,
  /// 0 in the shared-memory tile (ScanVariant::thread_registers).
  int scan_registers = 1;
  /// One-pass scans: 1 gives the look-back a warp of its own while the others load the next partition
  /// (ScanVariant::pipelined), 0 the block's warp 0 between barriers.
  int scan_pipelined = 1;
  /// Strips (scan_strips): 1 loads each thread's run of the next tile into registers before this one is
  /// scanned (ScanVariant::ahead; 4-byte accumulators, 8-byte ones where scan_items=8), 0 after its stores.
  int scan_ahead = 1;
  /// Generated products (fz::GeneratedProducts): the row of the tile table for products with a tile per SM at
  /// least (schedule/product_layout.cpp's kLargeTiles), and the blocks per SM a split of K aims at
  /// where the tiles are fewer (0: never split).
  int product_large = 0;
  /// % of the SMs the large tiles must give a tile each to be chosen (half as many where the product's rows
  /// fill a large tile's)
  int product_large_fill = 100;
  int product_small = 0;
  int product_skinny = 0;
  int product_split_blocks_per_sm = 4;
  /// On sm_90 (H100): the row of the Hopper tile table (kHopperTiles) taking what large tiles would, 1-based;
  /// 0 leaves Hopper devices on the mma.sync kernel.
  int product_hopper = 1;
  /// The Hopper path's groups of 8 an epilogue thread reads ahead of its writes (0: the tile table's)
  int product_ahead = 0;
  /// The Hopper path's blocks in clusters of 2 sharing b's tiles by multicast copies where the tiles allow
  /// (an even number of row tiles, K not split); 1: none
  int product_cluster = 1;
  /// The Hopper path's tile layouts a race times against cuBLASLt, the planned one first (1: that one alone)
  int product_candidates = 4;
};

/// The process's tuning (defaults unless a benchmark changed them).
Tuning& tuning();

/// Sets one field from "name=value"; throws fusion::Error naming the fields for an unknown one.
void set_tuning(std::string_view assignment);

}  // namespace fusion::detail
