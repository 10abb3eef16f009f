// SPDX-License-Identifier: Apache-2.0
// Whether an expression with reductions runs as one layer kernel, and how (codegen/layer_variant.hpp).
// Pure logic: shapes and strides of the call's arrays (placeholders are enough), no GPU.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "codegen/layer_variant.hpp"
#include "codegen/target_device.hpp"
#include "fusion/evaluate.hpp"

namespace fusion::detail {

/// What the call computes, from its arrays' shapes alone.
struct LayerShapes {
  Shape full;          ///< the index space: the broadcast of every array
  unsigned mask = 0;   ///< the reduced axes of `full`, shared by every reduction
  std::int64_t n_rows = 0, n_red = 0;
  std::array<Shape, codegen::kMaxOutputs> out;             ///< each output's shape
  std::array<bool, codegen::kMaxOutputs> per_row{};        ///< one value per row, else one per element
};

/// True when every reduction of the call (equal ones merged) runs over the same axes of the full index
/// space and its result meets the rows only along those axes, so that one group of threads per row can
/// compute everything; `why_not` (when given) says what stops it otherwise.
bool layer_shapes(const Call& c, LayerShapes& S, std::string* why_not = nullptr);

struct LayerLayout {
  codegen::LayerVariant v;
  std::int64_t n_rows = 0, n_red = 0;
  Shape kshape;  // collapsed kept extents
  const ArrayBase* params[codegen::kMaxParams];
  Strides kst[codegen::kMaxParams + codegen::kMaxOutputs];       // parameters, then outputs
  std::int64_t rst[codegen::kMaxParams + codegen::kMaxOutputs];  // along the row (within a segment)
  std::int64_t sst[codegen::kMaxParams + codegen::kMaxOutputs];  // from a segment to the next (segmented rows)
  std::int64_t segment = 0;                                      // a segment's length (segmented rows)
  std::vector<double> divisors;  // per reduction, in graph order
  std::int64_t blocks = 0;
  std::int64_t keep = 0;  // elements of its slice a block caches (partly resident kernels)
  unsigned shared_bytes = 0;
  bool explain = false;  // fill `why` (fz::inspect asks; a launch does not pay for the formatting)
  std::string why;       // the strategy in words, for fz::inspect
};

/// The layout of the layer kernel writing `outs` (prepared with S's shapes) for `device` (-1: an H100).
/// False, with `why_not`, when one kernel would not pay or cannot walk the rows (then a plan runs).
bool analyze_layer(const Call& c, const LayerShapes& S, const ArrayBase* const* outs, int K, const codegen::TargetDevice& device, LayerLayout& L,
                   std::string* why_not = nullptr);

/// Row statistics alone (no per-element output) with a floating variance among them (var, std, a tie of mean and
/// var) over the trailing axes, which the plan computes in one kernel otherwise (`one_kernel_otherwise`): a layer
/// kernel only where one block holds each whole row (holds_whole_rows), or never (tuning().layer_statistics = 0,
/// over any axes); anything else: wherever a layer kernel applies.
enum class StatisticsLayer { anywhere, one_block, never };
StatisticsLayer statistics_layer(const ir::Graph& g, const LayerShapes& S, bool one_kernel_otherwise);
/// One block holds each whole row: in its threads' registers or its shared memory.
bool holds_whole_rows(const codegen::LayerVariant& v);

}  // namespace fusion::detail
