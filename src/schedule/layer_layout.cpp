// SPDX-License-Identifier: Apache-2.0
// When an expression runs as one layer kernel, and the layout of that kernel. The thresholds below were
// chosen from measurements on an H100 (bench/results/layers).
#include "schedule/layer_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "codegen/emit_common.hpp"
#include "codegen/layer_passes.hpp"
#include "codegen/reduce_ops.hpp"
#include "codegen/launch_shape.hpp"
#include "fusion/error.hpp"
#include "schedule/call_graph.hpp"
#include "schedule/layer_registers.hpp"
#include "schedule/layout.hpp"
#include "schedule/reduce_layout.hpp"
#include "schedule/tuning.hpp"

namespace fusion::detail {

using codegen::kMaxOutputs;
using codegen::kMaxParams;
using codegen::LayerRole;

namespace {

/// Rows at most this long run as a layer kernel however few there are; longer rows need enough rows
/// to give half the SMs a block, else a plan of split reductions fills the device better.
constexpr std::int64_t kShortRow = 16384;

/// `s` right-aligned to rank `rank` (leading extents 1), as broadcasting sees it.
Shape padded(const Shape& s, int rank) {
  Shape p;
  for (int d = 0; d < rank - s.size(); ++d) p.push_back(1);
  for (int d = 0; d < s.size(); ++d) p.push_back(s[d]);
  return p;
}

bool fail(std::string* why_not, std::string reason) {
  if (why_not) *why_not = std::move(reason);
  return false;
}

}  // namespace

bool layer_shapes(const Call& c, LayerShapes& S, std::string* why_not) {
  const ir::Graph& g = graph_of(c);
  const std::size_t n = g.nodes.size();
  const int K = static_cast<int>(g.outputs.size());
  std::vector<bool> is_reduction(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const ir::Node& nd = g.nodes[i];
    if (nd.op == ir::Op::iota) return fail(why_not, "an arange leaf needs the flat index");
    if (ir::is_arg_reduction(nd.op)) return fail(why_not, "argmin/argmax run as their own kernels");
    is_reduction[i] = ir::is_reduction(nd.op);
  }
  std::vector<Shape> shape;
  try {
    shape = node_shapes(c);
    S.full = broadcast_shape_of(c);
  } catch (const ShapeError&) {
    return fail(why_not, "the arrays do not broadcast to one index space");
  }
  const int rank = S.full.size();
  bool first = true;
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_reduction[i]) continue;
    const ir::Node& nd = g.nodes[i];
    if (shape[nd.a] != S.full) return fail(why_not, "a reduction's operand is smaller than the index space");
    const unsigned mask = reduced_shapes(shape[nd.a], c.reductions[nd.slot]).mask;
    if (!first && mask != S.mask) return fail(why_not, "the reductions run over different axes");
    S.mask = mask;
    first = false;
  }
  S.n_rows = S.n_red = 1;
  for (int d = 0; d < rank; ++d) ((S.mask & (1u << d)) ? S.n_red : S.n_rows) *= S.full[d];
  for (std::size_t i = 0; i < n; ++i)
    if (is_reduction[i] && ir::needs_nonempty(g.nodes[i].op) && S.n_red == 0 && S.n_rows > 0)
      return fail(why_not, "a reduction without identity over an empty extent (the plan reports it)");

  // Which values vary along the row: arrays that are not constant along the reduced axes, and what reads them.
  std::vector<bool> along(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const ir::Node& nd = g.nodes[i];
    if (nd.op == ir::Op::input) {
      const Shape p = padded(shape[i], rank);
      for (int d = 0; d < rank; ++d) along[i] = along[i] || ((S.mask & (1u << d)) && p[d] > 1);
    } else if (!is_reduction[i]) {
      for (std::uint32_t o : {nd.a, nd.b, nd.c})
        if (o != ir::kNone) along[i] = along[i] || along[o];
    }
  }
  // A per-row value meeting per-element ones must broadcast along the reduced axes only (keepdims, or
  // reduced axes that lead): sum(x, -1) without keepdims would meet x's rows along the wrong axis.
  auto per_row_shape = [&](const Shape& s) {
    if (s.size() > rank) return false;
    const Shape p = padded(s, rank);
    for (int d = 0; d < rank; ++d)
      if ((S.mask & (1u << d)) ? p[d] != 1 : (p[d] != 1 && p[d] != S.full[d])) return false;
    return true;
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (!along[i] && !is_reduction[i]) continue;
    const ir::Node& nd = g.nodes[i];
    for (std::uint32_t o : {nd.a, nd.b, nd.c})
      if (o != ir::kNone && !along[o] && g.nodes[o].op != ir::Op::scalar && !per_row_shape(shape[o]))
        return fail(why_not, "a reduction's result meets the rows along other axes than the reduced ones");
  }
  for (int k = 0; k < K; ++k) {
    const std::uint32_t o = g.outputs[static_cast<std::size_t>(k)];
    S.out[k] = shape[o];
    S.per_row[k] = !along[o];
    if (along[o] && shape[o] != S.full) return fail(why_not, "an output is smaller than the index space");
    if (!along[o]) {
      Shape kept, kept_dims;
      for (int d = 0; d < rank; ++d) {
        kept.push_back((S.mask & (1u << d)) ? 1 : S.full[d]);
        if (!(S.mask & (1u << d))) kept_dims.push_back(S.full[d]);
      }
      if (shape[o] != kept && shape[o] != kept_dims)
        return fail(why_not, "a per-row output has another shape than the rows");
    }
  }
  return true;
}


bool analyze_layer(const Call& c, const LayerShapes& S, const ArrayBase* const* outs, int K, const codegen::TargetDevice& device, LayerLayout& L,
                   std::string* why_not) {
  const ir::Graph& g = graph_of(c);
  codegen::LayerVariant& v = L.v;
  v = codegen::LayerVariant{};
  const int np = distinct_params(c, L.params, v.param_of_slot);
  v.n_params = static_cast<std::uint8_t>(np);
  v.n_outputs = static_cast<std::uint8_t>(K);
  for (int k = 0; k < K; ++k) {
    v.out_dtype[k] = outs[k]->dtype();
    v.out_per_row[k] = S.per_row[k];
  }

  // Strides over the index space, then the dimensions split into kept and reduced and collapsed.
  Strides st[kMaxParams + kMaxOutputs];
  for (int p = 0; p < np; ++p) st[p] = broadcast_strides(*L.params[p], S.full);
  for (int k = 0; k < K; ++k)
    st[np + k] = S.per_row[k] ? result_strides(*outs[k], S.full, S.mask) : broadcast_strides(*outs[k], S.full);
  Shape rshape;
  Strides rst[kMaxParams + kMaxOutputs];
  split_kept_reduced(S.full, S.mask, st, np + K, L.kshape, rshape, [&](int p) -> Strides& { return L.kst[p]; },
                     [&](int p) -> Strides& { return rst[p]; });
  // A row is one stride apart (softmax's last axis), or segments of equal length (batch norm's N and H·W
  // around C: element j at (j / length, j % length), one 32-bit division per access).
  if (rshape.size() > 2) return fail(why_not, "the reduced axes are more than two strides apart in some array");
  v.segmented = rshape.size() == 2;
  if (v.segmented && S.n_red > INT32_MAX) return fail(why_not, "a row in segments of over 2^31 elements");
  L.segment = v.segmented ? rshape[1] : 0;
  for (int p = 0; p < np + K; ++p) {
    L.rst[p] = rshape.empty() ? 0 : rst[p][rshape.size() - 1];
    L.sst[p] = v.segmented ? rst[p][0] : 0;
  }
  v.rank_kept = static_cast<std::uint8_t>(L.kshape.size());
  L.n_rows = S.n_rows;
  L.n_red = S.n_red;

  // Roles: constant along the row, streamed, or cached when several passes read it.
  std::vector<bool> gathered = codegen::gathered_params(g, v.param_of_slot, np);
  // (a source read at a per-row offset, an embedding's row, is an ordinary input: it may be cached)
  const std::vector<int> per_row = codegen::row_gathers(g, v.param_of_slot, np, [&](int p) {
    return L.rst[p] == 0 && L.sst[p] == 0;
  });
  for (int p = 0; p < np; ++p) {
    const bool along = L.rst[p] != 0 || L.sst[p] != 0;  // (a source constant along the row stays a pointer)
    gathered[static_cast<std::size_t>(p)] =
        gathered[static_cast<std::size_t>(p)] && (per_row[static_cast<std::size_t>(p)] < 0 || v.segmented || !along);
  }
  int n_passes = 0;
  const std::vector<codegen::PassMask> pass_of_node = codegen::layer_pass_masks(g, v.out_per_row, n_passes);
  std::array<codegen::PassMask, kMaxParams> read_by{};  // per parameter: the passes reading it
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == ir::Op::input) read_by[v.param_of_slot[g.nodes[i].slot]] |= pass_of_node[i];
  std::array<int, kMaxParams> readers{};
  for (int p = 0; p < np; ++p) readers[static_cast<std::size_t>(p)] = std::popcount(read_by[static_cast<std::size_t>(p)]);
  for (int p = 0; p < np; ++p) {
    // an array shared by every row (a weight) stays in L1/L2 instead; a source read at a per-row offset differs
    bool across_rows = per_row[static_cast<std::size_t>(p)] >= 0;
    for (std::int64_t x : L.kst[p]) across_rows = across_rows || x != 0;
    v.role[p] = L.rst[p] == 0 && L.sst[p] == 0 ? LayerRole::row
                : readers[static_cast<std::size_t>(p)] > 1 && across_rows && !gathered[static_cast<std::size_t>(p)]
                    ? LayerRole::cached
                    : LayerRole::stream;  // (a gather's source is read where its index says, never cached)
  }

  // 16-byte vectors along the row when every array varying along it is contiguous there and aligned.
  std::size_t widest = 1;
  bool unit = !rshape.empty();
  auto element_operand = [&](int op) { return op < np ? v.role[op] != LayerRole::row : !v.out_per_row[op - np]; };
  auto operand_array = [&](int op) -> const ArrayBase& { return op < np ? *L.params[op] : *outs[op - np]; };
  for (int op = 0; op < np + K; ++op) {
    if (!element_operand(op)) continue;
    unit = unit && L.rst[op] == 1;
    widest = std::max(widest, itemsize(operand_array(op).dtype()));
  }
  std::int64_t V = unit ? static_cast<std::int64_t>(codegen::kVectorBytes / widest) : 1;
  for (int op = 0; op < np + K && V > 1; ++op) {
    if (!element_operand(op)) continue;
    const ArrayBase& a = operand_array(op);
    bool ok = vector_aligned(a, V);
    for (std::int64_t x : L.kst[op]) ok = ok && x % V == 0;
    if (v.segmented) ok = ok && L.segment % V == 0 && L.sst[op] % V == 0;  // no vector straddles two segments
    if (!ok) V = 1;
  }
  v.vector_width = static_cast<std::uint8_t>(V);

  const std::int64_t sms = device.sms;
  // Dynamic shared memory a block may take: all it can have less the kernel's static scratch (load_kernel opts
  // in to exactly that). The scratch: per reduction a partial per warp of the block and one for the cluster
  // (codegen/emit_layer.cpp), bounded here for blocks of 1024 threads with 16 bytes of alignment per array; 1 KB
  // at least, as before (a tie of several float64 reductions needs more: a row kept in all that is left beside
  // 1 KB failed to launch).
  std::size_t scratch = 0;
  for (const ir::Node& n : g.nodes)
    if (ir::is_reduction(n.op))
      scratch += (1024 / codegen::kWarpThreads + 1) * codegen::accumulator_size(n.op, g.nodes[n.a].dtype) + 2 * 16;
  const std::size_t limit = device.max_shared_per_block - std::max<std::size_t>(1024, scratch);
  const bool clusters = device.compute_major >= 9;  // thread-block clusters need sm_90
  std::size_t cached_bytes = 0;  // per element of the row
  for (int p = 0; p < np; ++p)
    if (v.role[p] == LayerRole::cached) cached_bytes += itemsize(L.params[p]->dtype());

  // A row longer than one block handles best (tuning().cluster_slice elements) is split over a cluster
  // of blocks, each keeping its slice of the cached inputs in shared memory, when the slices fit; else
  // one block per row keeps what fits or re-reads it.
  const std::int64_t r = L.n_red;
  auto slice_of = [&](std::int64_t c) { return ((r + c - 1) / c + V - 1) / V * V; };
  auto padded_bytes = [&](std::int64_t elements) {
    return static_cast<std::size_t>((elements + 15) / 16 * 16) * cached_bytes;
  };
  std::int64_t C = 1;
  if (clusters && cached_bytes > 0 && r > tuning().cluster_slice) {
    while (C < tuning().max_cluster && (slice_of(C) > tuning().cluster_slice || padded_bytes(slice_of(C)) > limit))
      C *= 2;
    if (padded_bytes(slice_of(C)) > limit) C = 1;
  }
  v.cluster = static_cast<std::uint8_t>(C);
  const std::int64_t span = C > 1 ? slice_of(C) : r;  // what one block covers of its row

  // A warp per short row, or a part of a warp: enough lanes for about kAccessesPerLane 16-byte accesses
  // each (a row of 128 float32, 32 vectors: 8 lanes, 4 rows per warp, three shuffle levels); a block per
  // long one, of about kLongRowAccesses accesses per thread (measured on an H100: rows of 4,096 float32
  // ran layer norm at 93% of the limit with 128 threads, 84% with 256, 52% with 512).
  std::int64_t lanes = 1;
  while (lanes < codegen::kWarpThreads && lanes * V * codegen::kAccessesPerLane < span) lanes *= 2;
  std::int64_t threads = 128;
  while (threads < 1024 && threads * V * codegen::kLongRowAccesses < span) threads *= 2;
  v.group = static_cast<std::uint16_t>(span <= 1024 ? lanes : threads);
  if (span > 1024 && tuning().layer_block > 0) v.group = static_cast<std::uint16_t>(tuning().layer_block);
  v.block = static_cast<std::uint16_t>(span <= 1024 ? codegen::kBlockThreads : v.group);
  const std::int64_t rows_per_block = v.block / v.group;
  L.blocks = (L.n_rows + rows_per_block - 1) / rows_per_block * C;

  if (r > kShortRow && L.blocks * 2 < sms)
    return fail(why_not, fmt::format("{} rows of {} elements leave most SMs idle: split reductions fill the device",
                                     L.n_rows, r));
  // Statistics alone over segmented rows (a batch norm's mean and var over N, H, W) are one split
  // reduction kernel in the plan, spread over as many blocks as fill the device: a layer kernel only
  // where it fills half the SMs itself.
  bool element_outputs = false;
  for (int k = 0; k < K; ++k) element_outputs = element_outputs || !S.per_row[k];
  if (v.segmented && !element_outputs && L.blocks * 2 < sms)
    return fail(why_not, fmt::format("{} rows leave most SMs idle: a split reduction fills the device", L.n_rows));

  // Registers (schedule/layer_registers.cpp).
  // (A row read through an index, an embedding's, loads its vectors as any other row, and a value read through an
  // index once per row is read before the passes; elements read through an index along the row, fz::take's
  // pointers, are read one by one, so they keep the loop.)
  bool element_gather = false;
  for (int p = 0; p < np; ++p)
    element_gather = element_gather || (gathered[static_cast<std::size_t>(p)] && v.role[p] != LayerRole::row);
  hold_row_in_registers(g, v, np, r, cached_bytes, element_gather);
  // Resident when the cached rows fit in shared memory (with room for the reductions' scratch).
  const std::size_t bytes = static_cast<std::size_t>(rows_per_block) * padded_bytes(span);
  v.resident = v.registers == 0 && bytes > 0 && bytes <= limit && tuning().layer_resident;
  L.keep = (span + 15) / 16 * 16;
  const std::size_t per_sm = device.max_shared_per_sm;
  // A grid of clusters meant to run in one wave may not: a cluster is placed whole within a GPC, so slots
  // stay empty (H100, batch norm over (8, 64, 112, 112): 64 clusters of 8 blocks keeping 50 KB each, 4
  // blocks per SM, yet only 62 clusters at once, and the last 2 ran as a second wave: 59% of the limit at
  // best). Then each block keeps only the start of its slice, so one more block fits each SM, and passes
  // re-read the rest, mostly from L2; blocks of 256 threads leave room for that block.
  if (v.resident && C > 1 && tuning().layer_spare_block) {
    const std::int64_t full = std::max<std::int64_t>(1, static_cast<std::int64_t>(per_sm / (bytes + 2048)));
    const std::int64_t wanted = (L.blocks + sms - 1) / sms + 1;  // per SM: the grid's share and one to spare
    std::int64_t block = v.block;
    while (block > 128 && wanted * block > 2048) block /= 2;
    const std::size_t room =
        per_sm / static_cast<std::size_t>(wanted) - 2048;  // the driver's 1 KB and the static scratch
    const std::int64_t keep = static_cast<std::int64_t>(room / cached_bytes) / 16 * 16;
    if (L.blocks <= full * sms && wanted > full && wanted * block <= 2048 && keep >= span / 2) {
      v.block = v.group = static_cast<std::uint16_t>(block);
      v.partly_resident = true;
      v.min_blocks = static_cast<std::uint8_t>(wanted);  // registers for them too
      L.keep = keep;
    }
  }
  // Values a later pass would compute again (softmax's exp(x - max): 16-bit rows were bound by issue slots on an
  // H200) kept beside the row, where shared memory still holds half an SM's threads' worth of blocks with them
  // (a block of 512 threads keeping 64 KB slices of a float32 row twice over would run alone on its SM).
  std::size_t block_bytes = bytes;
  if (v.resident && !v.partly_resident && tuning().layer_keep_values) {
    const std::size_t kept = kept_bytes_of(g, v, np);
    const std::size_t with_kept = static_cast<std::size_t>(rows_per_block) * (static_cast<std::size_t>(span + 15) / 16 * 16) *
                                  (cached_bytes + kept);
    const std::size_t threads = device.max_shared_per_sm / (with_kept + 1024) * v.block;
    if (kept > 0 && with_kept <= limit && threads >= static_cast<std::size_t>(tuning().layer_keep_min_threads)) {
      v.keep_values = true;
      block_bytes = with_kept;
    }
  }
  if (tuning().layer_fit_blocks > 0 && v.resident && !v.partly_resident &&
      span > 1024) {  // registers for as many blocks as shared memory holds
    const std::int64_t by_shared = static_cast<std::int64_t>(per_sm / (block_bytes + 1024));
    const std::int64_t by_threads = 2048 / v.block;
    constexpr std::int64_t kSixteenBitFloor = 64;  // registers a thread of 16-bit rows keeps (below)
    const std::int64_t by_registers = tuning().layer_fit_blocks == 2 && C == 1 && V >= 8
                                          ? codegen::kRegistersPerSm / (kSixteenBitFloor * v.block)
                                          : by_threads;
    const std::int64_t blocks = std::clamp<std::int64_t>(std::min({by_shared, by_threads, by_registers}), 1, 32);
    // By default only where a block owns its whole row and the cap leaves a layer kernel the 40 registers
    // it needs without spilling (rows of 16,384: 3 blocks of 512 threads, 42; rows of 4,096: 13 blocks
    // of 128 threads would be 39, and layer norm fell from 97% to 71% of the limit). A thread of 16-bit
    // rows unpacks each vector into 8 floats: it is capped at no fewer than 64 registers, the blocks fewer
    // than shared memory would hold (H200, bfloat16 rows of 16,384, 256 threads, --tune layer_min_blocks=N,
    // bench/results/layers/h200/long-16bit-caps-2026-12-01.txt: layer norm at 6 / 5 / 4 / 3 blocks 87.3 /
    // 91.6 / 91.3 / 90.5% of the limit, RMSNorm 90.7 / 92.6 / 93.4 / 92.2%).
    const bool fit = tuning().layer_fit_blocks == 1 || (C == 1 && codegen::kRegistersPerSm / (blocks * v.block) >= 40);
    if (fit) v.min_blocks = static_cast<std::uint8_t>(blocks);
  }
  if (tuning().layer_min_blocks > 0) v.min_blocks = static_cast<std::uint8_t>(tuning().layer_min_blocks);
  if (!v.resident && v.registers == 0)
    for (int p = 0; p < np; ++p)
      if (v.role[p] == LayerRole::cached) v.role[p] = LayerRole::stream;
  L.shared_bytes = v.partly_resident ? static_cast<unsigned>(static_cast<std::size_t>(L.keep) * cached_bytes)
                  : v.resident       ? static_cast<unsigned>(block_bytes)
                                     : 0;

  // In place (x = softmax(x)) is safe: a row's elements are read before its outputs are written, each
  // by the thread that writes it. Any other overlap is computed aside by the plan.
  for (int k = 0; k < K; ++k)
    for (int p = 0; p < np; ++p) {
      if (!shares_memory(*outs[k], *L.params[p])) continue;
      if (S.per_row[k] || !same_view(*outs[k], *L.params[p]))
        return fail(why_not, "an output overlaps an input other than element for element");
      v.out_aliases_input = true;
    }

  L.divisors.clear();
  for (const ir::Node& nd : g.nodes)
    if (ir::is_reduction(nd.op)) L.divisors.push_back(static_cast<double>(r) - c.reductions[nd.slot].ddof);

  if (!L.explain) return true;
  const std::size_t waves = static_cast<std::size_t>(n_passes) - (element_outputs ? 1 : 0);
  const std::size_t row_bytes = static_cast<std::size_t>(r) * cached_bytes;
  L.why = fmt::format(
      "one kernel: {} reduction pass{} over each of {} rows of {} elements{}{}", waves, waves == 1 ? "" : "es",
      L.n_rows, r, C > 1 ? fmt::format(", each row split over a cluster of {} blocks (one SM cannot hold it)", C) : "",
      v.partly_resident
          ? fmt::format(", the first {} of each block's {} elements kept in shared memory and the rest re-read "
                        "(mostly from L2), so that a spare block fits each SM and every cluster runs in one wave",
                        L.keep, span)
      : v.registers > 0
          ? fmt::format(", the row's inputs ({} bytes) read once and held in registers, {} vectors a thread{}", row_bytes,
                        v.registers, v.keep_values ? ", with the values a later pass needs again (not computed twice)" : "")
      : v.resident ? fmt::format(", the row's inputs ({} bytes) read once and kept in shared memory{} ({} bytes a block)",
                                 row_bytes,
                                 v.keep_values ? ", with the values a later pass needs again (not computed twice)" : "",
                                 L.shared_bytes)
      : bytes > 0
          ? fmt::format(", rows too long for shared memory ({} bytes per block): passes re-read them, mostly from L2",
                        bytes)
          : "");
  return true;
}

}  // namespace fusion::detail
