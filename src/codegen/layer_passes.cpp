// SPDX-License-Identifier: Apache-2.0
#include "codegen/layer_passes.hpp"

#include <algorithm>

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

std::vector<std::vector<bool>> layer_pass_nodes(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row) {
  const std::vector<int> wave = waves_of(g);
  int waves = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (ir::is_reduction(g.nodes[i].op)) waves = std::max(waves, wave[i]);
  std::vector<std::vector<bool>> passes;
  for (int w = 1; w <= waves; ++w) {
    std::vector<std::uint32_t> roots;
    for (std::uint32_t i = 0; i < g.nodes.size(); ++i)
      if (ir::is_reduction(g.nodes[i].op) && wave[i] == w) roots.push_back(g.nodes[i].a);
    passes.push_back(needed(g, roots));
  }
  std::vector<std::uint32_t> element_outputs;
  for (std::size_t o = 0; o < g.outputs.size(); ++o)
    if (!out_per_row[o]) element_outputs.push_back(g.outputs[o]);
  if (!element_outputs.empty()) passes.push_back(needed(g, element_outputs));
  return passes;
}

}  // namespace fusion::codegen
