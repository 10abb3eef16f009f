// SPDX-License-Identifier: Apache-2.0
// How a generated product's blocks cover it (fz::GeneratedProducts, codegen/product_variant.hpp): the kernel
// (the Hopper path or mma.sync), its tile class, its loads and a split of K over blocks, decided from the
// product's layout, its operands' alignment and the device alone (no GPU: fz::inspect plans the same way).
#pragma once
#include <cstdint>
#include <vector>

#include "codegen/product_variant.hpp"
#include "codegen/target_device.hpp"
#include "schedule/matmul_layout.hpp"

namespace fusion::detail {

struct ProductLayout {
  codegen::ProductTiles tiles;
  bool async = false;           ///< the mma.sync kernel's 16-byte cp.async loads
  std::int64_t tile_count = 0;  ///< tiles of one batch item
  std::int64_t split = 1;       ///< blocks sharing a tile, each a slice of K (1: no split)
  std::int64_t slice = 0;       ///< elements of K a slice has (the last may have fewer)
  /// The Hopper path's persistent blocks, one per SM at most, each taking tile after tile of every batch item (0:
  /// the mma.sync kernel's grid, a block per tile and slice, batch items along y).
  std::int64_t blocks = 0;
  /// The Hopper path's blocks a cluster (codegen::ProductVariant::cluster); `blocks` a multiple of it
  int cluster = 1;
  /// Whether the default route races this kernel against cuBLASLt + the epilogue kernel (runtime/exec/product_race),
  /// else why not (fz::GeneratedProducts takes it all the same).
  bool raced = false;
  const char* unraced = "";
};

/// The layouts a generated product of `L` (no copies, no outer batch loop, nonzero extents) may take on `dev`
/// (`aligned16`: both operands' data starts on a 16-byte boundary), one at least, up to Tuning::product_candidates:
/// the first is the planned one (fz::GeneratedProducts, fz::inspect without a GPU), the others the race's
/// alternatives (runtime/exec/product_race times them all against cuBLASLt and keeps the fastest).
std::vector<ProductLayout> product_layouts(const MatmulLayout& L, bool aligned16, const codegen::TargetDevice& dev);
/// The first of them.
ProductLayout product_layout(const MatmulLayout& L, bool aligned16, const codegen::TargetDevice& dev);

}  // namespace fusion::detail
