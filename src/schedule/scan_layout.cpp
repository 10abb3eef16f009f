// SPDX-License-Identifier: Apache-2.0
#include "schedule/scan_layout.hpp"

#include <algorithm>

#include "schedule/call_graph.hpp"
#include "schedule/layout.hpp"
#include "schedule/tuning.hpp"

namespace fusion::detail {

void analyze_scan(const Call& c, const ArrayBase& out, const Shape& shape, int axis,
                  const codegen::TargetDevice& device, ScanLayout& L) {
  const ir::Graph& g = graph_of(c);
  const ir::Node& scan = g.nodes[g.outputs[0]];
  const ReduceArg& arg = c.reductions[scan.slot];
  L.v = codegen::ScanVariant{};
  L.v.exclusive = arg.exclusive;
  L.v.reverse = arg.reverse;
  L.v.out_dtype = out.dtype();
  const int np = distinct_params(c, L.params, L.v.param_of_slot);
  L.v.n_params = static_cast<std::uint8_t>(np);

  // Every operand's strides over the scan's shape; the axis's apart, the rest collapsed as rows.
  Shape kept;
  Strides st[codegen::kMaxParams + 1], kept_st[codegen::kMaxParams + 1];
  for (int p = 0; p < np; ++p) st[p] = broadcast_strides(*L.params[p], shape);
  st[np] = broadcast_strides(out, shape);
  for (int d = 0; d < shape.size(); ++d)
    if (d != axis) kept.push_back(shape[d]);
  for (int op = 0; op <= np; ++op) {
    for (int d = 0; d < shape.size(); ++d)
      if (d != axis) kept_st[op].push_back(st[op][d]);
    L.ast[op] = st[op][axis];
  }
  collapse_dims(kept, kept_st, np + 1, L.kshape, L.kst);
  L.n_rows = numel(kept);
  L.n = shape[axis];
  // A 0-d or all-ones row space is one row: no decode.
  L.v.rank_kept = static_cast<std::uint8_t>(L.n_rows == 1 ? 0 : L.kshape.size());
  // Blocks per SM the registers must allow (every tiled kind: rows, one pass, strips); 4, or 5 below, unless tuned
  if (tuning().scan_min_blocks > 0) L.v.min_blocks = static_cast<std::uint8_t>(tuning().scan_min_blocks);

  const std::int64_t blocks = std::max<std::int64_t>(1, device.sms) * 8;
  // Accumulators of 4 bytes at most: what bounds their registers and tiles differs from 8-byte ones' throughout
  const bool narrow = itemsize(dtype_info(scan.dtype).compute) <= 4, lse = scan.op == ir::Op::logcumsumexp;
  L.chunks = 1;
  L.chunk = std::max<std::int64_t>(L.n, 1);
  // The output contiguous along the rows and not along the axis (`cumsum(x, 0)` of a C-ordered x): a thread
  // per row, consecutive threads on consecutive rows; the axis split into chunks of 16 or more until about
  // 2048 threads per SM are busy (a first kernel reduces each chunk, the second starts from the chunks before).
  const bool row_contiguous = !L.kshape.empty() && L.kst[np][L.kshape.size() - 1] == 1 && L.n_rows > 1;
  if (row_contiguous && L.ast[np] != 1 && L.n > 0) {
    L.v.columns = true;
    L.v.items = codegen::kScanItemsDefault;
    // Rows enough for a strip of 32 per SM: one pass, a block per strip (codegen/scan_strips.hpp). (Tuned to 2,
    // any number of rows: how the fuzzer's small shapes reach the strips.)
    const bool many_rows = L.n_rows >= 32 * std::max<std::int64_t>(1, device.sms);
    if (tuning().scan_strips == 2 || (tuning().scan_strips == 1 && many_rows)) {
      L.v.strips = true;
      // Each run of the next tile loaded before this one is scanned: 256 strips of 8192 columns make 2 blocks an
      // SM, and memory idled through each tile's barriers and stores. H200, cumsum(x, 0) of 8192x8192 f32
      // (--tune scan_ahead=1|0): 137.4-138.2 us (95.2-95.8% of the copy limit) against 153.7-153.9 us (85.2-85.6%);
      // 8 items 79.2%, 32 items (2 blocks an SM, 128 registers) 85.4% ahead and 88.6% not.
      // 8-byte accumulators keep the order of before: two runs of 16 spilled 172-272 bytes at the 64 registers of 4
      // blocks an SM (f64, int64; ptxas -v, sm_90); runs of 8 ahead fit (64 registers, no spill) but have not run
      // on a GPU yet (fusion-bench-indexing --scans has the f64 row to measure them: --tune scan_items=8).
      L.v.ahead = tuning().scan_ahead == 1 && (narrow || tuning().scan_items == 8);
      L.v.items = tuning().scan_items > 0 ? static_cast<std::uint8_t>(tuning().scan_items) : 16;
      return;
    }
    const std::int64_t threads = blocks * codegen::kScanBlock;
    const std::int64_t want = std::min((threads + L.n_rows - 1) / L.n_rows, std::max<std::int64_t>(1, L.n / 16));
    L.chunk = (L.n + want - 1) / want;
    L.chunks = (L.n + L.chunk - 1) / L.chunk;
    L.v.chunked = L.chunks > 1;
    return;
  }
  // Every operand forward along the axis at stride 1: whole tiles load and store without bounds tests, from one
  // pointer each; 16-byte vectors where all hold 4-byte elements whose rows start 16-byte aligned.
  L.v.contiguous = !L.v.reverse;
  bool vectors = true;
  for (int op = 0; op <= np; ++op) {
    const ArrayBase& a = op < np ? *L.params[op] : out;
    L.v.contiguous = L.v.contiguous && L.ast[op] == 1;
    vectors = vectors && itemsize(a.dtype()) == 4 && a.data_ptr() % 16 == 0;
    for (int d = 0; d < L.kshape.size(); ++d) vectors = vectors && (L.kshape[d] == 1 || L.kst[op][d] % 4 == 0);
  }
  // Tiles: 16 elements per thread for accumulators of 4 bytes at most, else 8 (an int64 exclusive scan's 16
  // took 92 registers). A block per row fills the GPU when the rows are many and short; rows of several
  // tiles split into partitions of a tile scanned in one pass (lookback): blocks claim them in order, so
  // the work balances and a few long rows spread over the whole GPU.
  L.v.items = tuning().scan_items > 0 ? static_cast<std::uint8_t>(tuning().scan_items) : narrow ? 16 : 8;
  if (!narrow) L.v.items = std::min<std::uint8_t>(L.v.items, 16);  // the tile in shared memory: 33 KB at most
  const int policy = tuning().scan_lookback;
  const bool few_rows = L.n_rows < blocks / 2;
  const auto tiles = [&] { return (L.n + L.v.tile() - 1) / L.v.tile(); };
  if (tiles() >= 2 && (policy == 1 || (policy == 0 && few_rows))) {
    // One pass over partitions: 32 elements per thread for narrow accumulators (fewer partitions, each
    // waiting for its carry about as long). H100, one row of 2^28 f32: 8, 16, 32 items at 42.9, 63.6,
    // 74.9% of the copy limit (fusion-bench-indexing --scans --tune scan_items=N). 16 for 8-byte ones where the
    // look-back has a warp of its own (two tiles of 32 KB a block): H200, one row of 2^27 f64, 8 and 16 items at
    // 66.0 and 86.8% (795-798 and 613-614 us), 72 registers unspilled at 3 blocks an SM (logcumsumexp of f64
    // spilled 142 bytes at 16 and 2 blocks: 8).
    if (tuning().scan_items == 0) L.v.items = narrow ? 32 : tuning().scan_pipelined == 1 && !lse ? 16 : 8;
    L.v.lookback = true;
    // (4 blocks per SM at first: at 5 or 6 the registers spilled then, and one row of 2^28 f32 fell from 60.0% of
    // the copy limit to 41.0 and 34.8%, H100; the kernel now fits 5 without spilling: below)
    L.resident_blocks = blocks;
    L.chunk = L.v.tile();
    L.chunks = tiles();
    // A warp of its own looks back while the others load the next partition (ScanVariant::pipelined). H200, one
    // row of 2^28 f32 (--tune scan_pipelined=0|1): 586-587 us (90.4-90.5% of the copy limit) with warp 0 looking
    // back between two barriers, 551.5-554.9 us (95.0-96.8%) pipelined, prefetch distances 3..8/16 alike; with
    // no look-back at all (wrong carries, a probe) 517-529 us. logcumsumexp too, its look-back folded in pairs:
    // 631-634 us (84.3-86.0%) against 680-682 us (78.4-78.6%) at scan_pipelined=0 (H200, 2026-12-04).
    L.v.pipelined = tuning().scan_pipelined == 1;
    if (L.v.pipelined)  // (two tiles: past the 48 KB of static arrays, dynamic shared memory)
      L.shared_bytes = static_cast<unsigned>(2 * L.v.padded_tile() * itemsize(dtype_info(scan.dtype).compute));
  }
  // 5 blocks per SM (48 registers) where 4-byte accumulators fit them without spilling: the tile loop of a block
  // waits on its loads, then on its barriers, and a fifth block hides more of both. H200 (fusion-bench-indexing
  // --scans --tune scan_min_blocks=N, 4 / 5 / 6): logcumsumexp rows of 8192 f32 83.0 / 90.1 / 89.5% of the copy
  // limit, one row of 2^28 f32 in one pass 85.7 / 89.9 / 78.2%, row-wise cumsum 99% at each. 8-byte accumulators,
  // logcumsumexp in one pass and rows walked element by element (reversed, strided) spill at 48 registers.
  if (tuning().scan_min_blocks == 0 && narrow && L.v.contiguous && !(lse && L.v.lookback)) L.v.min_blocks = 5;
  // (pipelined, two tiles a block: as many blocks an SM as their shared memory leaves room for, 228 KB an SM with
  // 2 KB a block for its static arrays and the hardware's reserve; launched as many, no more, so that the
  // prefetch's distance, a share of the grid, counts partitions being worked on). 8-byte accumulators' tiles are
  // a quarter as long, and registers bound them instead: at the 6 blocks their shared memory fits (32 registers)
  // cumsum of f64 and int64 spilled 460-480 bytes a thread and logcumsumexp of f64 1,250, at 3 none, at 4 140-150
  // (logcumsumexp 490; 250 at 3, 16 at 2). (ptxas -v, sm_90.)
  if (L.v.pipelined) {
    const std::int64_t fit = static_cast<std::int64_t>(device.max_shared_per_sm) / (L.shared_bytes + 2048);
    const std::int64_t most = narrow ? 6 : lse ? 2 : 3;
    if (tuning().scan_min_blocks == 0) L.v.min_blocks = static_cast<std::uint8_t>(std::clamp<std::int64_t>(fit, 1, most));
    L.resident_blocks = std::max<std::int64_t>(1, device.sms) * std::clamp<std::int64_t>(fit, 1, L.v.min_blocks);
  }
  // (logcumsumexp in double spilled 56 bytes a thread with its items in the tile, 128 with them in registers)
  L.v.thread_registers = !L.v.lookback && !(lse && !narrow) && tuning().scan_registers == 1;
  L.v.vector = L.v.contiguous && vectors && L.v.items % 4 == 0 ? 4 : 1;
  if (L.v.lookback && L.v.contiguous) L.v.prefetch = static_cast<std::uint8_t>(tuning().scan_prefetch);
  // (logcumsumexp's rows took 6 blocks per SM while expf and logf left them bound by instructions: 82.3, 85.1,
  // 86.4% of the copy limit at 4, 5, 6, H100 rows of 8192 f32. With the hardware's ex2 and lg2 per element they
  // are bound by memory again, and 4 was best there: 101.0% at 4, 98.1% at 6, 91.3% at 8. The H200, 1.4x the
  // bandwidth, meets their instructions again: 5, above.)
}

}  // namespace fusion::detail
