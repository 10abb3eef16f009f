// SPDX-License-Identifier: Apache-2.0
// The variant of a generated matrix-product kernel (issue 36; raced against cuBLASLt by default, forced by
// fz::GeneratedProducts): the product of two 16-bit float matrices accumulated in float32 on tensor cores, with the
// elementwise step that reads the product (its epilogue: bias, residual, scale, any activation, casts; one output
// or a tie's several) applied to the accumulators before anything is written. Blocks take BM x BN tiles of the
// result; their warps run mma.sync's m16n8k16 products on fragments ldmatrix loads from shared memory, where operand
// tiles arrive STAGES deep (cp.async, 16 bytes at a time, where the operands' rows allow it). The accumulators pass
// through shared memory once, so the epilogue reads its other arrays and writes the result coalesced.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "codegen/variant.hpp"

namespace fusion::codegen {

/// Blocks tiles of the product and how warps divide them: what the tile table in
/// runtime/exec/generated_product.cpp picks per shape class.
struct ProductTiles {
  std::uint16_t bm = 128, bn = 128;  ///< block tile (multiples of 16)
  std::uint8_t bk = 32;              ///< (a multiple of 16)
  std::uint8_t warps_m = 2, warps_n = 4;     ///< warps along each (each warp's tile a multiple of 16)
  std::uint8_t stages = 3;                   ///< operand tiles in flight (2 without cp.async)
  /// Nonzero: the Hopper path (sm_90a) with this many consumer warpgroups of 64 rows each (bm = 64 x this, bk =
  /// 64): the bulk tensor copy engine fills the stages from tensor maps, one more warpgroup issuing the copies
  /// and running the epilogue, and the consumers' wgmma reads them from shared memory (warps_m and warps_n
  /// unused). Its blocks are persistent: one per SM, taking tile after tile.
  std::uint8_t warpgroups = 0;
  /// Groups of 8 elements an epilogue thread reads before it writes any (more loads in flight: the Hopper path's
  /// epilogue has 96 threads)
  std::uint8_t ahead = 1;
  bool operator==(const ProductTiles&) const = default;
  int threads() const { return warpgroups ? 128 * (warpgroups + 1) : 32 * warps_m * warps_n; }
};

struct ProductVariant {
  ProductTiles tiles;
  DType operand = DType::bfloat16;  ///< both operands' (float16 or bfloat16)
  bool a_rows = true;   ///< a (m x k) lies row by row (k contiguous); false: column by column (a transposed view)
  bool b_rows = true;   ///< b (k x n) lies row by row (n contiguous); false: column by column
  bool async = true;    ///< 16-byte cp.async loads: aligned operands whose contiguous extent is a multiple of 8
  /// K split over several blocks per tile (a skinny or small product: too few tiles to fill the device). Each
  /// writes its float partial tile to the workspace; the last to finish (a counter per tile) sums them in
  /// slice order, so results are the same run to run, and applies the epilogue.
  bool split = false;
  /// The Hopper path's blocks in clusters of this many (1 or 2) taking tiles of one column of tiles together:
  /// each copies its share of b's tile into every block of the cluster (multicast), so b crosses from L2 once
  /// for both, and a stage is refilled once both blocks' consumers are done with it.
  std::uint8_t cluster = 1;
  std::uint8_t product_param = 0;  ///< the epilogue's parameter that is the product (read from the accumulators)
  std::array<DType, kMaxOutputs> out_dtype{DType::bfloat16};  ///< each output's (several: fz::tie)
  std::uint8_t n_outputs = 1;
  std::uint8_t n_params = 0;  ///< the epilogue's distinct arrays, the product's among them
  std::array<std::uint8_t, kMaxParams> param_of_slot{};

  bool operator==(const ProductVariant&) const = default;
  void hash_into(StableHasher& h, std::uint32_t n_slots) const;
  std::string describe() const;
  /// Dynamic shared memory of one block: the operand pipeline, or the float result tile where larger.
  unsigned shared_bytes() const;
};

/// The Hopper path's operand tiles lie in shared memory 128-byte swizzled, 64 elements (128 bytes) across: what
/// its tensor maps' boxes are, and what wgmma's matrix descriptors describe.
inline constexpr int kHopperBoxInner = 64;

/// Dims entries of a product kernel: 0 the product's {m, n, k, lda, ldb, a's batch stride, b's, slices of K,
/// elements of K per slice, batch items}, then per epilogue parameter p (the product's entry unused) its strides
/// {batch, row, column} over the result.
inline constexpr int kProductDims = 10;
constexpr std::uint32_t product_param_strides(int p) { return 1 + static_cast<std::uint32_t>(p); }

}  // namespace fusion::codegen
