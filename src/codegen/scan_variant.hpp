// SPDX-License-Identifier: Apache-2.0
// The variant of a scan kernel: a running reduction along one axis (fz::cumsum and its kin), its operand
// an elementwise prologue of the kernel's arrays. Each row (every position of the other axes) is scanned
// by a block, in tiles of kScanBlock x items elements staged in shared memory (loads and stores coalesced):
// each thread scans its `items` consecutive elements in order, a warp scan combines the threads' totals,
// shared memory the warps', and a carry runs from tile to tile. A few long rows are split into
// partitions of one tile over blocks, in one pass (ScanVariant::lookback): each block publishes its
// partition's total and reads the totals of the partitions before it from a tree of published sums
// (scan_state.hpp), so the combination order is fixed and results are the same run to run. Scans along
// an axis that is not the contiguous one run a block per strip of 32 rows where the rows are many
// (ScanVariant::strips, scan_strips.hpp), else a thread per row (ScanVariant::columns), a few long ones split
// into chunks: a first kernel reduces each chunk, the second scans it from the chunks before it.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "codegen/launch_shape.hpp"
#include "codegen/variant.hpp"

namespace fusion::codegen {

inline constexpr int kScanBlock = 256;  ///< threads per block

struct ScanVariant {
  std::uint8_t items = kScanItemsDefault;  ///< elements per thread and tile (a tile: kScanBlock x items)
  std::uint8_t rank_kept = 0;  ///< dimensions of the rows' index space after collapsing (0: one row)
  bool exclusive = false;      ///< each result leaves its own element out
  bool reverse = false;        ///< from the end of the axis to its start
  bool chunked = false;        ///< (columns) rows split into chunks over threads, each starting from a carry
  bool totals = false;         ///< (chunked) this kernel only reduces each chunk into the workspace
  /// Rows split into partitions of one tile, claimed by blocks in order; each partition's carry is
  /// combined from the published sums of the partitions before it (one pass, scan_state.hpp).
  bool lookback = false;
  /// Blocks per SM the kernel's registers must allow (__launch_bounds__): unbounded, the compiler hoisted
  /// a whole tile's loads into 228 registers.
  std::uint8_t min_blocks = 4;
  /// A thread per row, walking its part of the axis element by element: for an axis that is not the
  /// contiguous one (`cumsum(x, 0)`), consecutive threads take consecutive rows, so every access coalesces.
  bool columns = false;
  /// (columns) One pass: a block per strip of 32 neighbouring rows, its warps taking consecutive runs of
  /// `items` positions along the axis per tile (codegen/scan_strips.hpp).
  bool strips = false;
  /// (strips) Each thread loads its run of the next tile into registers before it scans this one: the loads
  /// stay in flight through the tile's barriers and stores, where a strip's few blocks an SM left memory idle.
  bool ahead = false;
  /// (tiles) Every operand and the output run along the axis with stride 1, forward: a whole tile's loads and
  /// stores take no bounds test and address from one pointer per operand.
  bool contiguous = false;
  /// (contiguous) Elements per 16-byte access: 4 where every operand and the output holds 4-byte elements at
  /// 16-byte aligned row starts, else 1.
  std::uint8_t vector = 1;
  /// (lookback, contiguous) While warp 0 looks back on partition b, the block's other warps pull partition
  /// b + gridDim.x * prefetch / 16 (about to be claimed, by some block) into L2: memory stays busy through the
  /// look-back. 0: no prefetch. (Claiming a block's next partition early and prefetching that one lost:
  /// H100, one row of 2^28 f32, 83 -> 68% of the copy limit: a claimed partition waited behind its block's
  /// current one, and every later partition's carry behind it. A block per partition taken in block order,
  /// as CUB does, with no claim counter: H200 67-69% against 89% (bench/results/indexing/
  /// h200-2026-12-03-ordered-blocks.txt): 172 us more over 32,768 partitions, about 3.5 us of each block's
  /// time at 660 resident, where a claim's round trip is under 1 us.)
  std::uint8_t prefetch = 0;
  /// (tiles) Each thread holds its items in registers from its own pass to their results, where shared memory
  /// held them between: one shared-memory read and write an element fewer (logcumsumexp two). Off for one
  /// pass over partitions: its 32 items spilled across the look-back.
  bool thread_registers = false;
  /// (lookback; logcumsumexp only where tuned) A warp of its own (warp 8 of 9) looks back on a block's
  /// partition while the other eight load and scan its next one into a second tile, then finish the first: the
  /// loads go on through the look-back, where the block waited at a barrier. Two tiles a block (dynamic shared
  /// memory).
  bool pipelined = false;
  DType out_dtype = DType::float32;
  std::uint8_t n_params = 0;
  std::array<std::uint8_t, kMaxParams> param_of_slot{};

  bool operator==(const ScanVariant&) const = default;
  void hash_into(StableHasher& h, std::uint32_t n_slots) const;
  std::string describe() const;
  std::int64_t tile() const { return std::int64_t{kScanBlock} * items; }
  /// A tile's words in shared memory: a pad word after every 32 (a thread's consecutive items conflict-free).
  std::int64_t padded_tile() const { return tile() + tile() / 32; }
  /// Threads a block: kScanBlock, and the pipelined kernel's looking-back warp.
  int threads() const { return kScanBlock + (pipelined ? 32 : 0); }
};

/// Dims entries of a scan kernel: the rows' extents, then per operand (parameters, then the output) its
/// strides over the rows and its stride along the axis.
constexpr std::uint32_t scan_row_strides(int operand) { return 1 + 2 * static_cast<std::uint32_t>(operand); }
constexpr std::uint32_t scan_axis_stride(int operand) { return 2 + 2 * static_cast<std::uint32_t>(operand); }
constexpr std::uint32_t scan_dims_count(int operands) { return 1 + 2 * static_cast<std::uint32_t>(operands); }

}  // namespace fusion::codegen
