// SPDX-License-Identifier: Apache-2.0
// A layer kernel's passes over its row: reductions in waves (a reduction reading another's result runs a
// pass later), then the per-element outputs. The emitter writes them; the layout rule counts them.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "codegen/layer_variant.hpp"
#include "codegen/variant.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

/// The nodes computing `roots`, stopping at reductions (their results are per-row values by then).
std::vector<bool> needed(const ir::Graph& g, const std::vector<std::uint32_t>& roots);

/// Each reduction's wave: 1 when its operand reads no reduction, else one more than the latest it reads.
std::vector<int> waves_of(const ir::Graph& g);

/// The passes of a layer kernel: its reduction waves in order, then (when some output is per element) the last
/// pass. Per node, bit p set when pass p computes it; `passes` their number. The layout rule reads it to see
/// which inputs several passes read (cached ones); one mask per node, no list per pass (it runs every call).
using PassMask = std::uint64_t;
inline constexpr int kMaxLayerPasses = 64;
std::vector<PassMask> layer_pass_masks(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row,
                                       int& passes);
/// Per node, whether its value varies along the row: it reads (below any reduction) an input for which
/// `varies_input(node)` holds.
template <class VariesInput>
std::vector<bool> varying_nodes(const ir::Graph& g, VariesInput&& varies_input) {
  std::vector<bool> r(g.nodes.size(), false);
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.op == ir::Op::input) r[i] = varies_input(i);
    else if (!ir::is_reduction(n.op))
      for (std::uint32_t o : {n.a, n.b, n.c})
        if (o != ir::kNone) r[i] = r[i] || r[o];
  }
  return r;
}

/// Values a layer kernel keeps beside its row in shared memory for the passes after the one computing them,
/// instead of computing them again (softmax's exp(x - max): the sum's pass computes it, the output's pass reads
/// it): per node, the pass (1-based) that computes and stores it, 0 when none. A value is kept when a later
/// pass needs it, it is floating and varies along the row (`varies[i]`: node i reads an input that does), and
/// computing it takes a math call (exp, log, a division, ...); on each path the value nearest the later pass's
/// results, so that pass computes nothing below it. None in a graph joining pieces.
/// `approximations`: whether values spelled with an approximation (codegen's approximated(): a few instructions)
/// count as worth keeping, as they do in registers.
std::vector<int> kept_values(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row,
                             const std::vector<bool>& varies, bool approximations);
/// kept_values for a layer kernel of variant `v` (values vary along the row where an input the variant does not
/// read once per row is below them), whether or not the variant keeps them; approximated values only where it
/// holds the row in registers.
std::vector<int> kept_values(const ir::Graph& g, const LayerVariant& v);
/// Bytes per element of the row that `kept` (kept_values) adds to a block's shared memory (each value in its
/// compute type: float for 16-bit floats).
std::size_t kept_bytes(const ir::Graph& g, const std::vector<int>& kept);

/// The nodes each pass computes (layer_pass_masks as a list per pass), for the emitter: a pass after the one
/// storing a `kept` value (kept_values; all 0 when none) reads it and computes nothing only it needed.
std::vector<std::vector<bool>> layer_pass_nodes(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row,
                                                const std::vector<int>& kept);

/// Per parameter: the gather node reading it when that gather is its only reader and the gather's offset is
/// the same along the row (computed from row-constant inputs and scalars only: an embedding's row, whose
/// index is per row); else -1. A layer kernel reads such a source as an ordinary input at a per-row offset:
/// cached, in 16-byte vectors where the row's offset allows. `row_constant(p)`: parameter p is constant along
/// the row.
template <class RowConstant>
std::vector<int> row_gathers(const ir::Graph& g, const std::array<std::uint8_t, kMaxParams>& param_of_slot, int np,
                             RowConstant&& row_constant) {
  std::vector<int> found(static_cast<std::size_t>(np), -1), readers(static_cast<std::size_t>(np), 0);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    for (std::uint32_t o : {n.a, n.b, n.c})
      if (o != ir::kNone && g.nodes[o].op == ir::Op::input) ++readers[param_of_slot[g.nodes[o].slot]];
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.op != ir::Op::gather) continue;
    const int p = param_of_slot[g.nodes[n.b].slot];
    if (readers[static_cast<std::size_t>(p)] != 1) continue;
    std::vector<std::uint32_t> roots{n.a};
    if (n.c != ir::kNone) roots.push_back(n.c);
    const std::vector<bool> below = needed(g, roots);
    bool per_row = true;
    for (std::size_t j = 0; j < g.nodes.size() && per_row; ++j) {
      if (!below[j]) continue;
      const ir::Node& m = g.nodes[j];
      per_row = !ir::is_reduction(m.op) && m.op != ir::Op::iota && m.op != ir::Op::gather &&
                (m.op != ir::Op::input || row_constant(static_cast<int>(param_of_slot[m.slot])));
    }
    if (per_row) found[static_cast<std::size_t>(p)] = static_cast<int>(i);
  }
  return found;
}

/// How a layer kernel of variant `v` reads fz::take's sources. `row[p]`: the gather node of a source read at a
/// per-row offset (an embedding's row: an ordinary input from that offset on), else -1 (a source constant along the
/// row, a per-row scale `take(scale, ids[:, None], 0)`, stays a pointer read once per row). `pointer[p]`: the other
/// sources, pointers at the element's position, never loaded, vectorized or cached.
struct LayerGathers {
  std::vector<int> row;
  std::vector<bool> pointer;
  bool any_row = false;
};
LayerGathers layer_gathers(const ir::Graph& g, const LayerVariant& v);

}  // namespace fusion::codegen
