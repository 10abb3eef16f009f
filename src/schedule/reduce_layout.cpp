// SPDX-License-Identifier: Apache-2.0
// The layout of one reduction (fused or ReductionKernel): which axes are reduced, the kept/reduced split
// with collapsed dimensions, the thread layout and the split over blocks. Pure logic: no GPU needed.
#include "schedule/reduce_layout.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "codegen/launch_shape.hpp"
#include "fusion/error.hpp"
#include "schedule/layout.hpp"
#include "schedule/tuning.hpp"

namespace fusion::detail {

using codegen::kBlockThreads;
using codegen::kMaxParams;
using codegen::ReduceMode;
using codegen::ReduceVariant;

namespace {

/// The reduced axes as a bit mask over a rank-`rank` operand; a ShapeError names a bad axis.
unsigned reduced_mask(const ReduceArg& r, int rank) {
  if (r.n_axes < 0) return rank >= 32 ? ~0u : (1u << rank) - 1;
  unsigned mask = 0;
  for (int i = 0; i < r.n_axes; ++i) {
    const int given = r.axes[static_cast<std::size_t>(i)];
    const int axis = given < 0 ? given + rank : given;
    if (axis < 0 || axis >= rank)
      throw ShapeError(fmt::format("axis {} is out of range for an operand of rank {} (valid: {} to {})", given, rank,
                                   -rank, rank - 1));
    if (mask & (1u << axis)) throw ShapeError(fmt::format("axis {} is repeated in a reduction", given));
    mask |= 1u << axis;
  }
  return mask;
}

/// Two reduced dimensions streamed as rows of vectors: every outer row split alike into `chunk`-element
/// parts (a whole number of vectors), a block per part, so no block crosses a row. False when the
/// partials would not fit the workspace.
bool split_rows(ReduceLayout& L, std::size_t acc_bytes, std::int64_t sms) {
  codegen::ReduceVariant& v = L.v;
  const std::int64_t outer = L.rshape[0], row = L.rshape[1], V = v.vector_width;
  // As many parts as one wave of resident blocks holds, never more: a second, partial wave costs as long
  // as a whole one (H100, batch norm (8, 64, 112, 112), 10 calls per sample: rows whole, 512 blocks,
  // 35.5 us for the layer; rows halved, 1,024 blocks = 1.3 waves at 6 blocks an SM, 39.1-39.7 us). Each
  // thread streams at least about row_split_accesses vectors.
  const std::int64_t wave = sms * codegen::kSplitRowsBlocksPerSm;
  const std::int64_t wanted = std::max<std::int64_t>(1, wave / (L.blocks * outer));
  const std::int64_t per_block = std::int64_t{kBlockThreads} * V * tuning().row_split_accesses;
  const std::int64_t longest = (row + per_block - 1) / per_block;
  const std::int64_t parts =
      std::clamp<std::int64_t>(std::min(wanted, longest), 1, std::max<std::int64_t>(1, 65535 / outer));
  const std::int64_t chunk = ((row + parts - 1) / parts + V - 1) / V * V;
  const std::int64_t per_row = (row + chunk - 1) / chunk;  // what the kernel computes from chunk
  const std::int64_t splits = outer * per_row;
  if (static_cast<std::size_t>(L.n_out) > kMaxCounters || splits > 65535 ||
      static_cast<std::size_t>(L.n_out * splits) * acc_bytes > kPartialBytes)
    return false;
  L.chunk = chunk;
  L.splits = splits;
  v.split = true;
  return true;
}

/// Outputs per thread (16-byte loads) an outer-mode reduction can take: the widest non-broadcast input
/// decides V; every such input and the result must run with unit stride along the last kept dimension,
/// whose extent V divides (so a thread's outputs share a row), with other strides and the base
/// addresses multiples of V. 1 where any of that fails.
int outer_vector_width(const ReduceLayout& L, int np, int main) {
  const codegen::ReduceVariant& v = L.v;
  const int rk = v.rank_kept;
  if (rk == 0 || main < 0 || L.kst_out[rk - 1] != 1) return 1;
  std::size_t widest = 1;
  for (int p = 0; p < np; ++p)
    if (!v.broadcast[static_cast<std::size_t>(p)]) widest = std::max(widest, itemsize(L.params[p]->dtype()));
  const std::int64_t V = codegen::kVectorBytes / static_cast<std::int64_t>(widest);
  bool ok = V > 1 && L.kshape[rk - 1] % V == 0;
  for (int d = 0; d + 1 < rk && ok; ++d) ok = L.kst_out[d] % V == 0;
  for (int p = 0; p < np && ok; ++p) {
    if (v.broadcast[static_cast<std::size_t>(p)]) continue;
    ok = L.kst[p][rk - 1] == 1 && vector_aligned(*L.params[p], V);
    for (int d = 0; d + 1 < rk && ok; ++d) ok = L.kst[p][d] % V == 0;
    for (std::int64_t x : L.rst[p]) ok = ok && x % V == 0;
  }
  return ok ? static_cast<int>(V) : 1;
}

}  // namespace

void split_kept_reduced(const Shape& in, unsigned mask, const Strides* st, int n_ops, Shape& kshape, Shape& rshape,
                        const std::function<Strides&(int)>& kst, const std::function<Strides&(int)>& rst) {
  kshape = Shape();
  rshape = Shape();
  for (int p = 0; p < n_ops; ++p) kst(p) = Strides(), rst(p) = Strides();
  for (int d = 0; d < in.size(); ++d) {
    if (in[d] == 1) continue;
    const bool reduced = mask & (1u << d);
    Shape& shape = reduced ? rshape : kshape;
    auto group = [&](int p) -> Strides& { return reduced ? rst(p) : kst(p); };
    bool merge = !shape.empty();
    const int last = shape.size() - 1;
    for (int p = 0; merge && p < n_ops; ++p) merge = group(p)[last] == st[p][d] * in[d];
    if (merge) {
      shape[last] *= in[d];
      for (int p = 0; p < n_ops; ++p) group(p)[last] = st[p][d];
    } else {
      shape.push_back(in[d]);
      for (int p = 0; p < n_ops; ++p) group(p).push_back(st[p][d]);
    }
  }
}

Strides result_strides(const ArrayBase& out, const Shape& in, unsigned mask) {
  const bool keep = out.ndim() == in.size();
  Strides st;
  st.resize(in.size());
  for (int d = 0, j = 0; d < in.size(); ++d) {
    const bool reduced = mask & (1u << d);
    if (!reduced || keep) {
      st[d] = reduced ? 0 : out.strides()[j];
      ++j;
    }
  }
  return st;
}

Reduced reduced_shapes(const Shape& in, const ReduceArg& arg) {
  Reduced r;
  r.in = in;
  r.mask = reduced_mask(arg, r.in.size());
  for (int d = 0; d < r.in.size(); ++d) {
    if (!(r.mask & (1u << d))) r.out.push_back(r.in[d]);
    else if (arg.keepdims) r.out.push_back(1);
  }
  return r;
}

namespace {

/// Splits each output's reduced range over blocks so that about `target` blocks run (when the outputs
/// alone give too few); the last block to finish combines the partials in a fixed order.
void size_split(ReduceLayout& L, std::int64_t target) {
  ReduceVariant& v = L.v;
  const bool inner = v.mode == ReduceMode::inner;
  std::int64_t S = 1;
  const std::int64_t tiles = inner ? L.n_out : L.blocks;  // counters needed
  // (no outputs: nothing to split; fz::inspect describes such a reduction too)
  if (v.group == kBlockThreads && L.blocks > 0 && L.blocks * 2 < target &&
      static_cast<std::size_t>(tiles) <= kMaxCounters && L.n_red > 1) {
    const std::int64_t min_chunk =
        inner ? std::int64_t{kBlockThreads} * v.vector_width * 4 : std::int64_t{tuning().reduce_min_rows} * v.row_groups;
    S = std::min((target + L.blocks - 1) / L.blocks, (L.n_red + min_chunk - 1) / min_chunk);
    const std::int64_t slots = inner ? L.n_out : L.blocks * L.per_block;
    S = std::min<std::int64_t>(S, static_cast<std::int64_t>(kPartialBytes / L.acc_bytes) / slots);
    S = std::clamp<std::int64_t>(S, 1, 65535);
  }
  L.chunk = (L.n_red + S - 1) / S;
  if (inner && v.vector_width > 1) L.chunk = (L.chunk + v.vector_width - 1) / v.vector_width * v.vector_width;
  L.splits = L.chunk > 0 ? (L.n_red + L.chunk - 1) / L.chunk : 1;
  v.split = L.splits > 1;
}

}  // namespace

void fit_split_to_kernel(ReduceLayout& L, int registers, const codegen::TargetDevice& device) {
  if (!L.v.split || L.rows_split || registers <= 0 || !device.real) return;
  // Registers are allocated per warp in units of 256 (8 a thread).
  const int per_block = (registers + 7) / 8 * 8 * kBlockThreads;
  const int resident = std::min(codegen::kBlocksPerSm, codegen::kRegistersPerSm / per_block);
  const int wanted = L.v.row_groups > 1 ? tuning().reduce_grouped_blocks_per_sm : tuning().reduce_blocks_per_sm;
  if (resident <= 0 || resident >= wanted) return;
  // One wave of the blocks that really fit, not of those the layout assumed (var(x) over 2^26 float32:
  // 40 registers, 6 blocks an SM: 1,056 blocks were 1.33 waves).
  const std::int64_t chunk = L.chunk, splits = L.splits;
  size_split(L, device.sms * resident);
  if (!L.v.split) {  // the compiled kernel is a split one: keep the planned split
    L.chunk = chunk;
    L.splits = splits;
    L.v.split = true;
  }
}

void analyze_reduction(int np, const ArrayBase& out, const Reduced& shapes, const ReduceArg& arg, std::size_t acc_bytes,
                       const codegen::TargetDevice& device, ReduceLayout& L) {
  ReduceVariant& v = L.v;
  v.out_dtype = out.dtype();
  v.n_params = static_cast<std::uint8_t>(np);

  // Split the dimensions into kept and reduced; within each group merge neighbours that every operand
  // walks as one (and drop extent-1 dimensions), so common cases become a 1-d by 1-d problem.
  const Shape& in = shapes.in;
  Strides st[kMaxParams + 1];
  for (int p = 0; p < np; ++p) st[p] = broadcast_strides(*L.params[p], in);
  st[np] = result_strides(out, in, shapes.mask);
  Strides rst_out;
  split_kept_reduced(
      in, shapes.mask, st, np + 1, L.kshape, L.rshape, [&](int p) -> Strides& { return p < np ? L.kst[p] : L.kst_out; },
      [&](int p) -> Strides& { return p < np ? L.rst[p] : rst_out; });
  v.rank_kept = static_cast<std::uint8_t>(L.kshape.size());
  v.rank_reduced = static_cast<std::uint8_t>(L.rshape.size());
  L.n_out = numel(L.kshape);
  L.n_red = numel(L.rshape);

  int main = -1;
  for (int p = 0; p < np; ++p) {
    bool zero = true;
    for (std::int64_t x : L.kst[p]) zero = zero && x == 0;
    for (std::int64_t x : L.rst[p]) zero = zero && x == 0;
    v.broadcast[static_cast<std::size_t>(p)] = zero;
    if (!zero && main < 0) main = p;
  }

  // Which elements are adjacent in memory decides the mapping: reduced ones -> a warp or block per
  // output, reading along the row; kept ones -> a thread per output, neighbours reading neighbours.
  bool inner = true;
  if (v.rank_reduced == 0) inner = false;  // nothing to combine: one thread per output
  else if (v.rank_kept > 0 && main >= 0) {
    const std::int64_t r = std::abs(L.rst[main][v.rank_reduced - 1]);
    const std::int64_t k = std::abs(L.kst[main][v.rank_kept - 1]);
    inner = r < k;
  }
  if (!inner && L.n_out < 64 && v.rank_reduced > 0) inner = true;  // too few outputs for a thread each
  v.mode = inner ? ReduceMode::inner : ReduceMode::outer;
  v.group =
      static_cast<std::uint16_t>(inner && L.n_red <= tuning().reduce_warp_row ? codegen::kWarpThreads : kBlockThreads);  // refined below

  const std::int64_t sms = device.sms;
  const std::int64_t target = sms * tuning().reduce_blocks_per_sm;  // blocks that fill the device once
  // Outer mode: V neighbouring outputs per thread where every operand and the result run contiguously
  // along the last kept dimension, and a thread's outputs share one row of it.
  const int outer_vector = inner || !tuning().reduce_outer_vectors ? 1 : outer_vector_width(L, np, main);
  // As many threads as outputs when that fills the device (with vectors if they still fill it: an
  // 8192-column sum fell from 86% to 30% of copy bandwidth with 4 outputs a thread, as 8 blocks had to
  // be split 128 ways). Otherwise few outputs share each block's rows: the block's threads are row groups
  // over 32-odd columns (vectors where they fit), combined in shared memory, and each column is split
  // over a few blocks only (sum(m, 0) of 4096^2 float32, a thread a column: 66 blocks a column, 73.5%).
  auto tiles_of = [&](std::int64_t outputs_per_block) { return (L.n_out + outputs_per_block - 1) / outputs_per_block; };
  const int groups = tuning().reduce_row_groups;
  if (!inner && outer_vector > 1 && tiles_of(std::int64_t{kBlockThreads} * outer_vector) * 2 >= target) {
    v.vector_width = static_cast<std::uint8_t>(outer_vector);
  } else if (!inner && groups > 1 && tiles_of(kBlockThreads) * 2 < target && L.n_red >= 4 * groups) {
    v.row_groups = static_cast<std::uint8_t>(groups);
    v.min_blocks = static_cast<std::uint8_t>(tuning().reduce_min_blocks);
    v.unroll = static_cast<std::uint8_t>(tuning().reduce_unroll);
    v.vector_width = static_cast<std::uint8_t>(outer_vector);
  }
  // Vectors along a contiguous reduced row: one reduced dimension, or two (a batch norm's N and H*W
  // around C) whose inner one is contiguous, long and a whole number of vectors; there each block
  // streams part of one outer row (the split below keeps blocks inside rows).
  const bool two_rows = v.rank_reduced == 2 && L.rshape[1] > 1024;
  if (inner && (v.rank_reduced == 1 || two_rows)) {
    std::size_t widest = 1;
    bool unit = true;
    for (int p = 0; p < np; ++p) {
      if (v.broadcast[static_cast<std::size_t>(p)]) continue;
      unit = unit && L.rst[p][v.rank_reduced - 1] == 1;
      widest = std::max(widest, itemsize(L.params[p]->dtype()));
    }
    const std::int64_t V = codegen::kVectorBytes / static_cast<std::int64_t>(widest);
    bool ok = unit && V > 1 && main >= 0 && (!two_rows || L.rshape[1] % V == 0);
    for (int p = 0; p < np && ok; ++p) {
      if (v.broadcast[static_cast<std::size_t>(p)]) continue;
      ok = vector_aligned(*L.params[p], V);
      for (std::int64_t x : L.kst[p]) ok = ok && x % V == 0;
      if (two_rows) ok = ok && L.rst[p][0] % V == 0;
    }
    v.vector_width = static_cast<std::uint8_t>(ok ? V : 1);
  }
  const bool rows_of_vectors = two_rows && v.vector_width > 1;
  // A short row takes part of a warp: enough lanes for about kAccessesPerLane accesses each, so a warp
  // keeps several rows' loads in flight and combines over fewer shuffle levels (rows of 128 float32: 8 lanes).
  if (inner && v.group == codegen::kWarpThreads) {
    const std::int64_t accesses = (L.n_red + v.vector_width - 1) / v.vector_width;
    std::int64_t lanes = 1;
    while (lanes < codegen::kWarpThreads && lanes * codegen::kAccessesPerLane < accesses) lanes *= 2;
    v.group = static_cast<std::uint16_t>(lanes);
  }

  // Enough blocks to fill the device: when the outputs alone give too few, split the reduced range
  // over several blocks per output; the last block to finish combines the partials in a fixed order.
  const std::int64_t per_block = inner ? kBlockThreads / v.group : kBlockThreads / v.row_groups * v.vector_width;
  L.blocks = (L.n_out + per_block - 1) / per_block;
  if (rows_of_vectors && split_rows(L, acc_bytes, sms)) {
    L.rows_split = true;
    L.divisor = static_cast<double>(L.n_red) - arg.ddof;
    return;
  }
  if (rows_of_vectors) v.vector_width = 1;  // too many partials for the split: the scalar walk below
  L.acc_bytes = acc_bytes;
  L.per_block = per_block;
  // Row groups keep more of each column's rows in one block; fewer blocks, longer ones, fill the device.
  size_split(L, v.row_groups > 1 ? sms * tuning().reduce_grouped_blocks_per_sm : target);
  // Row groups over a cluster: the tile's row ranges are its ranks, combined through distributed shared memory, no
  // partials. By default where the split cuts each tile 16 or more ways (its last block's combine then costs more
  // than the ranks' exchange; at 9 ways the split was as fast), with registers for 4 blocks an SM, without which
  // ptxas keeps 32 and fewer loads in flight (tuning.hpp: reduce_cluster).
  const bool auto_cluster = tuning().reduce_cluster < 0 && L.splits >= 16;
  const std::int64_t C = auto_cluster ? 8 : std::max(tuning().reduce_cluster, 0);
  if (v.row_groups > 1 && !inner && C > 1 && device.compute_major >= 9 && L.n_out > 0 && L.n_red > 1) {
    v.cluster = static_cast<std::uint8_t>(C);
    if (auto_cluster && tuning().reduce_min_blocks == 0) v.min_blocks = 4;
    v.split = false;
    L.chunk = (L.n_red + C - 1) / C;
    L.splits = C;
  }
  L.divisor = static_cast<double>(L.n_red) - arg.ddof;
}


}  // namespace fusion::detail
