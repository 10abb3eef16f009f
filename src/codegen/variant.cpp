// SPDX-License-Identifier: Apache-2.0
#include "codegen/variant.hpp"

#include <fmt/format.h>

#include "codegen/launch_shape.hpp"
#include "codegen/layer_variant.hpp"
#include "codegen/product_variant.hpp"
#include "codegen/reduce_variant.hpp"
#include "codegen/scan_variant.hpp"

namespace fusion::codegen {

void Variant::hash_into(StableHasher& h, std::uint32_t n_slots) const {
  h.add_byte(rank);
  h.add_byte(vector_width);
  h.add_byte(index64);
  h.add_byte(out_aliases_input);
  h.add_byte(static_cast<std::uint8_t>(out_dtype[0]));
  h.add_byte(static_cast<std::uint8_t>(out_access[0]));
  h.add_byte(n_params);
  for (std::uint32_t s = 0; s < n_slots; ++s) h.add_byte(param_of_slot[s]);
  for (int p = 0; p < n_params; ++p) h.add_byte(static_cast<std::uint8_t>(access[p]));
  if (rows) h.add_byte(0x52);  // appended, so other hashes stay what they were
  if (tiles) h.add_byte(0x54);
  if (private_bins) h.add_byte(0x42);
  if (vector_joins) h.add_byte(0x56);
  if (exact_words) {
    h.add_byte(0x45);
    h.add_byte(exact_words);
  }
  if (step) {
    h.add_byte(0x57);
    h.add_byte(step);
    for (int p = 0; p < n_params; ++p)
      if (access[p] == Access::stepped) h.add_byte(step_phase[p]);
  }
  if (n_outputs > 1) {  // appended, so single-output hashes stay what they were
    h.add_byte(n_outputs);
    for (int k = 1; k < n_outputs; ++k) {
      h.add_byte(static_cast<std::uint8_t>(out_dtype[k]));
      h.add_byte(static_cast<std::uint8_t>(out_access[k]));
    }
  }
}

std::string Variant::describe() const {
  std::string s = rows    ? fmt::format("rows, rank {} (offsets once per row, the last dimension streamed)", rank)
                 : tiles ? fmt::format("tiles, rank {} ({}x{} tiles of the last two dimensions)", rank, kTile, kTile)
                 : has_strided() ? fmt::format("strided, rank {}", rank) : "linear";
  if (vector_width > 1) s += fmt::format(", {}-wide vectors", vector_width);
  if (vector_joins) s += " (a join's piece chosen per vector)";
  s += index64 ? ", 64-bit index" : ", 32-bit index";
  if (out_aliases_input) s += ", output aliases an input";
  if (private_bins) s += ", each block's bins in shared memory";
  if (exact_words) s += fmt::format(", exact sums ({} words per element, deterministic)", exact_words);
  int broadcast = 0, strided = 0, row = 0, along = 0, across = 0, stepped = 0;
  for (int p = 0; p < n_params; ++p) {
    stepped += access[p] == Access::stepped;
    across += access[p] == Access::across;
    broadcast += access[p] == Access::broadcast;
    strided += access[p] == Access::strided;
    row += access[p] == Access::row;
    along += access[p] == Access::along;
  }
  if (across) s += fmt::format(", {} transposed input(s) through shared memory", across);
  if (row) s += fmt::format(", {} input(s) loaded once per row", row);
  if (along) s += fmt::format(", {} input(s) along the rows", along);
  if (broadcast) s += fmt::format(", {} broadcast input(s)", broadcast);
  if (strided) s += fmt::format(", {} strided input(s)", strided);
  if (stepped)
    s += fmt::format(", {} input(s) read at every {} elements{}", stepped, step,
                     vector_width > 1 ? " (whole vectors loaded, the elements picked from them)" : "");
  for (int k = 0; k < n_outputs; ++k) {
    const std::string which = n_outputs > 1 ? fmt::format("output {}", k) : std::string("output");
    if (out_access[k] == Access::strided) s += ", strided " + which;
    if (out_access[k] == Access::broadcast)
      s += fmt::format(", {} written where its broadcast coordinates are 0", which);
  }
  if (n_outputs > 1) s += fmt::format(", {} outputs", n_outputs);
  return s;
}

void ReduceVariant::hash_into(StableHasher& h, std::uint32_t n_slots) const {
  h.add_byte(0xd7);  // tells reduction variants from elementwise ones
  h.add_byte(static_cast<std::uint8_t>(mode));
  h.add_u32(group);
  h.add_byte(vector_width);
  h.add_byte(split);
  h.add_byte(rank_kept);
  h.add_byte(rank_reduced);
  h.add_byte(static_cast<std::uint8_t>(out_dtype));
  h.add_byte(n_params);
  for (std::uint32_t s = 0; s < n_slots; ++s) h.add_byte(param_of_slot[s]);
  for (int p = 0; p < n_params; ++p) h.add_byte(broadcast[p]);
  if (n_outputs > 1) {  // appended, so single-output hashes stay what they were
    h.add_byte(n_outputs);
    for (int k = 0; k < n_outputs; ++k) h.add_byte(static_cast<std::uint8_t>(out_dtypes[k]));
  }
  if (row_groups > 1) {  // appended, likewise
    h.add_byte(0x9e);
    h.add_byte(row_groups);
  }
  if (min_blocks > 0) {  // likewise
    h.add_byte(0xb1);
    h.add_byte(min_blocks);
  }
  if (unroll > 0) {  // likewise
    h.add_byte(0x4f);
    h.add_byte(unroll);
  }
  if (cluster > 1) {  // likewise
    h.add_byte(0xc1);
    h.add_byte(cluster);
  }
}

std::string ReduceVariant::describe() const {
  std::string s = mode == ReduceMode::inner
                      ? fmt::format("reduction, {} per output",
                                    group == kWarpThreads  ? "a warp"
                                    : group > kWarpThreads ? "a block"
                                                           : fmt::format("{} thread{}", group, group == 1 ? "" : "s"))
                  : row_groups > 1 ? fmt::format(
                                         "reduction, {} rows of {} threads per block along the outputs (combined in "
                                         "shared memory)",
                                         row_groups, kBlockThreads / row_groups)
                                   : std::string("reduction, a thread per output");
  s += fmt::format(", kept rank {}, reduced rank {}", rank_kept, rank_reduced);
  if (vector_width > 1) s += fmt::format(", {}-wide vectors", vector_width);
  if (split) s += ", split over blocks (combined by the last block, in a fixed order)";
  if (cluster > 1)
    s += fmt::format(", each column tile's rows split over a cluster of {} blocks (combined through distributed shared "
                     "memory, in rank order)", cluster);
  if (min_blocks > 0) s += fmt::format(", registers for {} blocks per SM", min_blocks);
  if (unroll > 0) s += fmt::format(", rows unrolled {} times", unroll);
  if (n_outputs > 1) s += fmt::format(", {} results from one pass over the input", n_outputs);
  return s;
}

void LayerVariant::hash_into(StableHasher& h, std::uint32_t n_slots) const {
  h.add_byte(0x1a);  // tells layer variants from the others
  h.add_u32(block);
  h.add_u32(group);
  if (cluster > 1) {  // tagged, so kernels of one block per row keep their hashes (0xc1 is no vector width)
    h.add_byte(0xc1);
    h.add_byte(cluster);
  }
  if (min_blocks > 0) {  // tagged likewise
    h.add_byte(0xb1);
    h.add_byte(min_blocks);
  }
  if (segmented) h.add_byte(0x5e);  // likewise
  if (partly_resident) h.add_byte(0x9a);  // likewise
  if (keep_values) h.add_byte(0x6b);  // likewise
  if (registers > 0) {                 // likewise
    h.add_byte(0x7e);
    h.add_byte(registers);
    if (full_parts) h.add_byte(0xf1);
  }
  h.add_byte(vector_width);
  h.add_byte(resident);
  h.add_byte(out_aliases_input);
  h.add_byte(rank_kept);
  h.add_byte(n_params);
  h.add_byte(n_outputs);
  for (std::uint32_t s = 0; s < n_slots; ++s) h.add_byte(param_of_slot[s]);
  for (int p = 0; p < n_params; ++p) h.add_byte(static_cast<std::uint8_t>(role[p]));
  for (int k = 0; k < n_outputs; ++k) {
    h.add_byte(static_cast<std::uint8_t>(out_dtype[k]));
    h.add_byte(out_per_row[k]);
  }
}

std::string LayerVariant::describe() const {
  std::string s = fmt::format("layer, {} per row ({} threads per block)",
                              group == kWarpThreads  ? "a warp"
                              : group > kWarpThreads ? "a block"
                                                     : fmt::format("{} thread{}", group, group == 1 ? "" : "s"),
                              block);
  if (min_blocks > 0) s += fmt::format(", registers capped for {} blocks per SM", min_blocks);
  if (cluster > 1)
    s += fmt::format(", a cluster of {} blocks per row (a slice each, combined through distributed shared memory)",
                     cluster);
  s += registers > 0     ? fmt::format(", the row held in registers ({} vectors a thread)", registers)
       : partly_resident ? std::string(", most of the row kept in shared memory (the rest re-read)")
       : resident        ? std::string(", the row kept in shared memory")
                         : std::string(", each pass reads the row from memory");
  if (keep_values) s += ", values later passes need kept beside it";
  if (registers > 0 && full_parts) s += ", every vector a thread holds in the row (no bound tests)";
  s += vector_width > 1 ? fmt::format(", {}-wide vectors", vector_width) : std::string(", strided rows");
  if (segmented) s += ", each row in segments apart in memory";
  s += fmt::format(", kept rank {}", rank_kept);
  int cached = 0, row = 0;
  for (int p = 0; p < n_params; ++p) {
    cached += role[p] == LayerRole::cached;
    row += role[p] == LayerRole::row;
  }
  if (cached) s += fmt::format(", {} input(s) cached", cached);
  if (row) s += fmt::format(", {} input(s) constant along the row", row);
  if (out_aliases_input) s += ", output aliases an input";
  if (n_outputs > 1) s += fmt::format(", {} outputs", n_outputs);
  return s;
}

void ScanVariant::hash_into(StableHasher& h, std::uint32_t n_slots) const {
  h.add_byte(0x5c);  // tells scan variants from the others
  h.add_byte(rank_kept);
  h.add_byte(static_cast<std::uint8_t>(exclusive | reverse << 1 | chunked << 2 | totals << 3 | columns << 4 |
                                       lookback << 5));
  if (items != kScanItemsDefault) h.add_byte(items);  // appended, so default kernels keep their hashes
  h.add_byte(min_blocks);
  h.add_byte(static_cast<std::uint8_t>(out_dtype));
  h.add_byte(n_params);
  for (std::uint32_t s = 0; s < n_slots; ++s) h.add_byte(param_of_slot[s]);
  if (contiguous) h.add_byte(static_cast<std::uint8_t>(0x80 | vector));
  if (strips) h.add_byte(0xb5);
  if (prefetch) {
    h.add_byte(0xa0);
    h.add_byte(prefetch);
  }
  if (thread_registers) h.add_byte(0x7e);
  if (pipelined) h.add_byte(0x91);
  if (ahead) h.add_byte(0xad);
}

std::string ScanVariant::describe() const {
  std::string s = strips    ? fmt::format("scan, kept rank {}, a block per 32 neighbouring rows (a lane each, coalesced), "
                                          "each warp a run of {} along the axis per tile, one pass", rank_kept, items)
                  : columns ? fmt::format("scan, kept rank {}, a thread per row (consecutive rows coalesce)", rank_kept)
                          : fmt::format("scan, kept rank {}, {} per tile ({} threads x {} consecutive)", rank_kept,
                                        tile(), kScanBlock, items);
  if (vector > 1) s += fmt::format(", contiguous, {}-element vectors", vector);
  else if (contiguous) s += ", contiguous";
  if (exclusive) s += ", exclusive";
  if (reverse) s += ", reversed";
  if (chunked) s += totals ? ", each chunk's total (first of two kernels)" : ", chunks started from their carries";
  else if (lookback) s += ", partitions of a tile in one pass, each carry from a tree of published sums";
  if (prefetch) s += fmt::format(", partitions {}/16 of the blocks ahead prefetched into L2", prefetch);
  else if (!columns) s += ", a block per row";
  if (thread_registers) s += ", each thread's items in registers";
  if (pipelined) s += ", a warp looking back while the others load the next partition";
  if (ahead) s += ", each run of the next tile loaded before this one is scanned";
  return s;
}

void ProductVariant::hash_into(StableHasher& h, std::uint32_t n_slots) const {
  h.add_byte(0x3a);  // tells product variants from the others
  for (unsigned t : {unsigned{tiles.bm}, unsigned{tiles.bn}, unsigned{tiles.bk}, unsigned{tiles.warps_m},
                     unsigned{tiles.warps_n}, unsigned{tiles.stages}})
    h.add_byte(static_cast<std::uint8_t>(t));
  if (tiles.warpgroups) {  // (no bytes for the other kernels: their hashes, and golden files, hold)
    h.add_byte(0x90);
    h.add_byte(tiles.warpgroups);
    h.add_byte(static_cast<std::uint8_t>(tiles.bm >> 8));
    h.add_byte(static_cast<std::uint8_t>(tiles.bn >> 8));
    h.add_byte(tiles.ahead);
    if (cluster > 1) h.add_byte(0xc0 | cluster);  // (none for one block: its hashes, and golden files, hold)
  }
  h.add_byte(static_cast<std::uint8_t>(operand));
  h.add_byte(static_cast<std::uint8_t>(a_rows | b_rows << 1 | async << 2 | split << 3));
  h.add_byte(product_param);
  h.add_byte(static_cast<std::uint8_t>(out_dtype[0]));
  h.add_byte(n_params);
  for (std::uint32_t s = 0; s < n_slots; ++s) h.add_byte(param_of_slot[s]);
  if (n_outputs > 1) {  // (no bytes for one output: its hashes, and golden files, hold)
    h.add_byte(0x71);
    for (int k = 0; k < n_outputs; ++k) h.add_byte(static_cast<std::uint8_t>(out_dtype[static_cast<std::size_t>(k)]));
  }
}

std::string ProductVariant::describe() const {
  if (tiles.warpgroups)
    return fmt::format("generated {} product ({}{}), {}x{}x{} tiles, Hopper: {} consumer warpgroup{} of wgmma m64n{}k16 "
                       "fed {} stages deep by the tensor copy engine (one thread issuing), float32 accumulators "
                       "rounded into a staged tile that 3 warps apply the epilogue to and write while the next "
                       "tile's products run, persistent blocks{}{}",
                       dtype_name(operand), a_rows ? "N" : "T", b_rows ? "N" : "T", tiles.bm, tiles.bn, tiles.bk,
                       tiles.warpgroups, tiles.warpgroups > 1 ? "s" : "", tiles.bn, tiles.stages,
                       cluster > 1 ? fmt::format(" in clusters of {} sharing b's tiles (multicast copies)", cluster) : "",
                       split ? ", K split over blocks (the last sums the slices in order)" : "");
  return fmt::format("generated {} product ({}{}), {}x{}x{} tiles, {} warps of mma.sync m16n8k16, {} stages{}",
                     dtype_name(operand), a_rows ? "N" : "T", b_rows ? "N" : "T", tiles.bm, tiles.bn, tiles.bk,
                     tiles.warps_m * tiles.warps_n, tiles.stages, async ? " (cp.async)" : " (plain loads)") +
         (split ? ", K split over blocks (the last sums the slices in order)" : "") +
         ", float32 accumulators, the epilogue applied before the one write";
}

unsigned ProductVariant::shared_bytes() const {
  if (tiles.warpgroups)  // the stages (on a 1024-byte boundary: the swizzle's period), then the staged result tile
    return 1024u + 2u * tiles.stages * (tiles.bm + tiles.bn) * tiles.bk + 2u * tiles.bm * (tiles.bn + 8u);
  const unsigned a = (a_rows ? tiles.bm * (tiles.bk + 8u) : tiles.bk * (tiles.bm + 8u));
  const unsigned b = (b_rows ? tiles.bk * (tiles.bn + 8u) : tiles.bn * (tiles.bk + 8u));
  const unsigned pipeline = 2u * tiles.stages * (a + b);
  const unsigned result = 4u * tiles.bm * (tiles.bn + 4u);
  return pipeline > result ? pipeline : result;
}

}  // namespace fusion::codegen
