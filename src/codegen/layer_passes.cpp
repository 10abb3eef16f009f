// SPDX-License-Identifier: Apache-2.0
#include "codegen/layer_passes.hpp"

#include <algorithm>

#include "codegen/emit_common.hpp"
#include "codegen/spell.hpp"
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

namespace {

/// Ops whose CUDA spelling is a math call or a correctly rounded division: worth a shared-memory round trip.
bool costly(const ir::Node& n) {
  using ir::Op;
  if (is_heavy_math(n.op)) return true;
  switch (n.op) {
    case Op::exp: case Op::exp2: case Op::log: case Op::log2: case Op::log10: case Op::sqrt: case Op::rsqrt:
    case Op::div: case Op::reciprocal: case Op::logaddexp:
      return true;
    default:
      return false;
  }
}

/// Pass `p`'s roots (0-based): its wave's reduction operands, or (the pass after the last wave) the element outputs.
std::vector<bool> pass_roots(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row,
                             const std::vector<int>& wave, int waves, int p) {
  std::vector<bool> r(g.nodes.size(), false);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (ir::is_reduction(g.nodes[i].op) && wave[i] - 1 == p) r[g.nodes[i].a] = true;
  if (p == waves)
    for (std::size_t o = 0; o < g.outputs.size(); ++o)
      if (!out_per_row[o]) r[g.outputs[o]] = true;
  return r;
}

/// The nodes pass `p` computes from its roots, stopping at reductions and at values an earlier pass kept.
std::vector<bool> pass_set(const ir::Graph& g, std::vector<bool> r, const std::vector<int>& kept, int p) {
  for (std::size_t i = g.nodes.size(); i-- > 0;) {
    if (!r[i] || ir::is_reduction(g.nodes[i].op) || (kept[i] > 0 && kept[i] - 1 < p)) continue;
    for (std::uint32_t o : {g.nodes[i].a, g.nodes[i].b, g.nodes[i].c})
      if (o != ir::kNone) r[o] = true;
  }
  return r;
}

int wave_count(const std::vector<int>& wave, const ir::Graph& g) {
  int waves = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (ir::is_reduction(g.nodes[i].op)) waves = std::max(waves, wave[i]);
  return waves;
}

}  // namespace

std::vector<int> kept_values(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row,
                             const std::vector<bool>& varies, bool approximations) {
  const std::size_t n = g.nodes.size();
  std::vector<int> kept(n, 0);
  bool any_costly = false;  // (most layers, layer norm and RMSNorm among them, stop here: this runs every launch)
  for (const ir::Node& nd : g.nodes) any_costly = any_costly || (!ir::is_reduction(nd.op) && costly(nd));
  if (!any_costly || ir::has_pieces(g)) return kept;
  // An approximation costs a few instructions: computing it again beat keeping it in shared memory (bfloat16
  // softmax, H200: rows of 128 / 1,024 79 / 84% of the limit recomputed, 67 / 80% kept, where keeping halved the
  // resident blocks; rows of 4,096 81 against 87%: the one loss, left); in registers it costs no shared memory.
  const std::vector<bool> approximate = approximations ? std::vector<bool>(n, false) : approximated(g);
  int passes = 0;
  layer_pass_masks(g, out_per_row, passes);
  const std::vector<int> wave = waves_of(g);
  const int waves = wave_count(wave, g);
  // Whether a node's value comes from a math call somewhere below it, without crossing a reduction.
  std::vector<bool> has_cost(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const ir::Node& nd = g.nodes[i];
    if (ir::is_reduction(nd.op)) continue;
    has_cost[i] = costly(nd) && !approximate[i];
    for (std::uint32_t o : {nd.a, nd.b, nd.c})
      if (o != ir::kNone && !ir::is_reduction(g.nodes[o].op)) has_cost[i] = has_cost[i] || has_cost[o];
  }
  std::vector<std::vector<bool>> sets;  // each earlier pass's nodes, with the values kept before it read
  for (int p = 0; p < passes; ++p) {
    // From the roots down: a value an earlier pass computed, worth keeping, is read here and not descended into.
    std::vector<bool> r = pass_roots(g, out_per_row, wave, waves, p);
    for (std::size_t i = n; i-- > 0;) {
      if (!r[i] || ir::is_reduction(g.nodes[i].op)) continue;
      if (kept[i] > 0 && kept[i] - 1 < p) continue;
      const ir::Node& nd = g.nodes[i];
      const bool floating = is_floating(nd.dtype);
      if (floating && varies[i] && has_cost[i] && kept[i] == 0)
        for (int q = 0; q < p; ++q)
          if (sets[static_cast<std::size_t>(q)][i]) {
            kept[i] = q + 1;
            break;
          }
      if (kept[i] > 0) continue;
      for (std::uint32_t o : {nd.a, nd.b, nd.c})
        if (o != ir::kNone) r[o] = true;
    }
    sets.push_back(r);
  }
  return kept;
}

std::size_t kept_bytes(const ir::Graph& g, const std::vector<int>& kept) {
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < kept.size(); ++i)
    if (kept[i] > 0) bytes += g.nodes[i].dtype == DType::float64 ? 8 : 4;  // kept in its compute type
  return bytes;
}

std::vector<std::vector<bool>> layer_pass_nodes(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row,
                                                const std::vector<int>& kept) {
  int passes = 0;
  layer_pass_masks(g, out_per_row, passes);
  const std::vector<int> wave = waves_of(g);
  const int waves = wave_count(wave, g);
  std::vector<std::vector<bool>> nodes;
  for (int p = 0; p < passes; ++p) nodes.push_back(pass_set(g, pass_roots(g, out_per_row, wave, waves, p), kept, p));
  return nodes;
}

std::vector<int> kept_values(const ir::Graph& g, const LayerVariant& v) {
  return kept_values(g, v.out_per_row,
                     varying_nodes(g, [&](std::uint32_t i) { return v.role[v.param_of_slot[g.nodes[i].slot]] != LayerRole::row; }),
                     v.registers > 0);
}

LayerGathers layer_gathers(const ir::Graph& g, const LayerVariant& v) {
  LayerGathers r;
  r.row = row_gathers(g, v.param_of_slot, v.n_params, [&](int p) { return v.role[p] == LayerRole::row; });
  r.pointer = gathered_params(g, v.param_of_slot, v.n_params);
  for (std::size_t p = 0; p < static_cast<std::size_t>(v.n_params); ++p) {
    if (v.segmented || v.role[p] == LayerRole::row) r.row[p] = -1;
    r.pointer[p] = r.pointer[p] && r.row[p] < 0;
    r.any_row = r.any_row || r.row[p] >= 0;
  }
  return r;
}

}  // namespace fusion::codegen
