// SPDX-License-Identifier: Apache-2.0
// Which row statistics with a variance take a layer kernel (layer_layout.hpp's statistics_layer): pure logic.
#include <algorithm>

#include "schedule/layer_layout.hpp"
#include "schedule/tuning.hpp"

namespace fusion::detail {

// The layer kernel's centered variance reads the row twice, so for statistics alone it pays only where one block
// holds the whole row, in registers or its shared memory. H200, float32, rows of 128 / 1,024 / 4,096 / 16,384 / 65,536,
// % of the limit, layer kernel against the reduction kernel of Welford accumulators: var 104.6 / 108.4 / 108.3 /
// 104.9 / 80.4 against 90-94 / 92.9 / 95.5, a tie of mean and var 102.1 / 107.1 / 108.1 / 101.7 / 71.7 against ... /
// 84.6 / 87.6: over a cluster of blocks, whose barriers the row waits at, it loses
// (bench/results/layers/h200/statistics-2026-11-29.txt). Statistics over other axes (a batch norm's, columns') keep
// the layer kernel wherever it applies.
StatisticsLayer statistics_layer(const ir::Graph& g, const LayerShapes& S, bool one_kernel_otherwise) {
  if (tuning().layer_statistics == 2 || !ir::has_floating_variance(g)) return StatisticsLayer::anywhere;
  const std::size_t K = g.outputs.size();
  if (!std::all_of(S.per_row.begin(), S.per_row.begin() + K, [](bool b) { return b; }) || !one_kernel_otherwise)
    return StatisticsLayer::anywhere;
  if (tuning().layer_statistics == 0) return StatisticsLayer::never;
  const unsigned all = (1u << S.full.size()) - 1, first = S.mask & (~S.mask + 1);  // (the lowest reduced axis)
  if (S.mask == 0 || S.mask != (all & ~(first - 1))) return StatisticsLayer::anywhere;
  return StatisticsLayer::one_block;
}

bool holds_whole_rows(const codegen::LayerVariant& v) {
  return v.cluster == 1 && (v.registers > 0 || (v.resident && !v.partly_resident));
}

}  // namespace fusion::detail
