// SPDX-License-Identifier: Apache-2.0
#include "codegen/layer_passes.hpp"

#include <algorithm>

#include "fusion/error.hpp"

namespace fusion::codegen {

/// The nodes computing `roots`, stopping at reductions (their results are per-row values by then).
std::vector<bool> needed(const ir::Graph& g, const std::vector<std::uint32_t>& roots) {
  std::vector<bool> r(g.nodes.size(), false);
  for (std::uint32_t x : roots) r[x] = true;
  for (std::size_t i = g.nodes.size(); i-- > 0;) {
    if (!r[i] || ir::is_reduction(g.nodes[i].op)) continue;
    for (std::uint32_t o : {g.nodes[i].a, g.nodes[i].b, g.nodes[i].c})
      if (o != ir::kNone) r[o] = true;
  }
  return r;
}

/// Each reduction's wave: 1 when its operand reads no reduction, else one more than the latest it reads.
std::vector<int> waves_of(const ir::Graph& g) {
  std::vector<int> wave(g.nodes.size(), 0);
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    for (std::uint32_t o : {n.a, n.b, n.c})
      if (o != ir::kNone) wave[i] = std::max(wave[i], wave[o]);
    if (ir::is_reduction(n.op)) wave[i] += 1;
  }
  return wave;
}

std::vector<PassMask> layer_pass_masks(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row,
                                       int& passes) {
  const std::vector<int> wave = waves_of(g);
  int waves = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (ir::is_reduction(g.nodes[i].op)) waves = std::max(waves, wave[i]);
  bool element = false;
  for (std::size_t o = 0; o < g.outputs.size(); ++o) element = element || !out_per_row[o];
  passes = waves + (element ? 1 : 0);
  if (passes > kMaxLayerPasses) throw Error("internal: a layer kernel of more passes than a pass mask holds");
  // Each pass's roots (its wave's reduction operands, or the per-element outputs), then every node a marked
  // node reads, back to front (operands come first), stopping at reductions as `needed` does.
  std::vector<PassMask> mask(g.nodes.size(), 0);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (ir::is_reduction(g.nodes[i].op)) mask[g.nodes[i].a] |= PassMask{1} << (wave[i] - 1);
  for (std::size_t o = 0; o < g.outputs.size(); ++o)
    if (!out_per_row[o]) mask[g.outputs[o]] |= PassMask{1} << waves;
  for (std::size_t i = g.nodes.size(); i-- > 0;) {
    if (!mask[i] || ir::is_reduction(g.nodes[i].op)) continue;
    for (std::uint32_t o : {g.nodes[i].a, g.nodes[i].b, g.nodes[i].c})
      if (o != ir::kNone) mask[o] |= mask[i];
  }
  return mask;
}

std::vector<std::vector<bool>> layer_pass_nodes(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row) {
  int passes = 0;
  const std::vector<PassMask> mask = layer_pass_masks(g, out_per_row, passes);
  std::vector<std::vector<bool>> nodes(static_cast<std::size_t>(passes), std::vector<bool>(g.nodes.size(), false));
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < g.nodes.size(); ++i) nodes[static_cast<std::size_t>(p)][i] = (mask[i] >> p) & 1;
  return nodes;
}

}  // namespace fusion::codegen
