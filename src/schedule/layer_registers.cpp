// SPDX-License-Identifier: Apache-2.0
#include "schedule/layer_registers.hpp"

#include <algorithm>
#include <array>

#include "codegen/emit_common.hpp"
#include "codegen/layer_passes.hpp"
#include "schedule/tuning.hpp"

namespace fusion::detail {

namespace {

/// Rows at most this long may be held in registers (tuning().layer_registers). H200, every layer row of
/// fusion-bench at 2^26 elements, registers against shared memory in one call (bench/results/layers/h200/
/// registers-2026-11-29.txt): bfloat16 softmax rows of 128 / 1,024 / 4,096 99.5 / 98.8 / 96.6% of the limit against
/// 77.4 / 82.7 / 79.7%, layer norm float32 rows of 1,024 100.6 against 94.5%, the others within 2 points; rows of
/// 16,384 (blocks of 512 threads, one a SM with the row in registers) lost up to 29 points (bfloat16 layer norm
/// 59.6 against 88.4%).
constexpr std::int64_t kRegisterRow = 4096;
/// Rows longer than kRegisterRow, up to this, are held in registers too where a later pass needs values an earlier
/// one computed (softmax's exps, kept beside the row), by the smallest of kKeptRegisterBlocks whose part fits: the
/// values are then computed once, where shared memory could not keep them beside a row this long (H200, bench/results/
/// layers/h200/long-register-rows-2026-11-30.txt: bfloat16 softmax over rows of 16,384 79.2 -> 90.3-91.0% of the limit
/// at 512 threads (256 do not fit: 79.1%, in shared memory), of 8,192 82.6 -> 98.6% at 256 (82.6% at 512); float32
/// 97-98 -> 100.4% and 92.5 -> 100.5%; blocks of 1,024 lost everywhere). Rows with nothing to keep lost in registers
/// (bfloat16 layer norm 88.9 -> 58.6%, RMSNorm 91.4 -> 70.0%, float32 layer norm 95.4 -> 85.9%): shared memory.
constexpr std::int64_t kKeptRegisterRow = 16384;
constexpr std::array<std::int64_t, 2> kKeptRegisterBlocks = {256, 512};
/// Float32 rows longer than kRegisterRow, up to this, whose outputs are rows (a layer norm, an RMSNorm; not only a
/// row's statistics) are held in registers by blocks of kPlainRegisterBlock threads, two vectors a thread, with nothing
/// kept. H200, rows of 8,192 (fusion-bench --layers --only D=8192 --tune layer_block=1024 --tune
/// layer_long_registers=1, 2026-12-02, bench/results/layers/h200/long-registers-2026-12-02.txt): layer norm 89.0 ->
/// 99.6%, RMSNorm 93.9 -> 102.4%, softmax unchanged; there bfloat16 rows lost 20 points (one vector a thread), `var`
/// and ties of statistics 5-30, and float32 rows of 16,384 (four vectors) 8: those keep shared memory.
constexpr std::int64_t kPlainRegisterRow = 8192;
constexpr std::int64_t kPlainRegisterBlock = 1024;

}  // namespace

/// The bytes a row element's kept values add (codegen::kept_bytes), counted on the graph the kernel is generated
/// from: where two slots read one array they merge, and equal values with them, which a later pass may then find
/// worth keeping (the fuzzer: a kernel keeping two values was launched with room for one). Worked out once per
/// thread for each of the last few graphs and variants asked: merging a softmax's graph (it reads its row four
/// times) on every call cost 0.4 us of a 2.0 us statement under the null driver; remembered, the statement takes
/// 1.4 us (the passes' analysis is no longer repeated either).
std::size_t kept_bytes_of(const ir::Graph& g, const codegen::LayerVariant& v, int np) {
  struct Asked {
    const ir::Graph* graph = nullptr;  // (a Lowered's graph: they live as long as the process)
    std::array<std::uint8_t, codegen::kMaxParams> param_of_slot{};
    std::array<codegen::LayerRole, codegen::kMaxParams> role{};
    std::array<bool, codegen::kMaxOutputs> out_per_row{};
    bool registers = false;
    std::size_t bytes = 0;
  };
  thread_local std::array<Asked, 8> asked;
  thread_local std::size_t next = 0;
  for (const Asked& a : asked)
    if (a.graph == &g && a.param_of_slot == v.param_of_slot && a.role == v.role && a.out_per_row == v.out_per_row &&
        a.registers == (v.registers > 0))
      return a.bytes;
  const ir::Graph merged = np < static_cast<int>(g.n_inputs) ? codegen::merged_inputs(g, v.param_of_slot) : ir::Graph{};
  const ir::Graph& generated = np < static_cast<int>(g.n_inputs) ? merged : g;
  Asked& a = asked[next++ % asked.size()];
  a = {&g, v.param_of_slot, v.role, v.out_per_row, v.registers > 0,
       codegen::kept_bytes(generated, codegen::kept_values(generated, v))};
  return a.bytes;
}

/// A short row in registers: each thread holds its vectors of the cached inputs, and of the values later passes
/// need (approximated ones too: there they cost no shared memory), between the passes, when that takes at most
/// tuning().layer_registers registers and the row is short (kRegisterRow). (bfloat16 softmax over rows of 1,024,
/// H200, Nsight Compute: the row in shared memory and exp(x - max) computed twice executed 64.0 M instructions,
/// torch.compile's kernel, which holds the row and the exps in registers, 43.4 M.)
void hold_row_in_registers(const ir::Graph& g, codegen::LayerVariant& v, int np, std::int64_t r, std::size_t cached_bytes,
                           bool element_gather) {
  const std::int64_t C = v.cluster, V = v.vector_width;
  // A thread's part of the row in a block of `block` threads: its vectors, the kept values' bytes an element (counted as
  // held in registers: approximated ones too), and the registers the vectors of both take.
  struct Part {
    std::int64_t vectors = 0;
    std::size_t kept = 0, registers = 0;
  };
  auto part_of = [&](std::int64_t block) {
    Part q;
    q.vectors = (r + block * V - 1) / (block * V);
    const std::uint8_t held = v.registers;
    v.registers = 1;
    q.kept = kept_bytes_of(g, v, np);
    v.registers = held;
    q.registers = static_cast<std::size_t>(q.vectors * V) * (cached_bytes + q.kept) / 4;
    return q;
  };
  // (at most 8 vectors a thread, as every row measured: ptxas gave a float64 layer norm holding 16 vectors of its rows
  // of 1,024 159 registers a thread, one block of 256 threads an SM)
  const bool held_kind = V > 1 && !v.segmented && cached_bytes > 0 && r > 0 && r % V == 0 && !element_gather && C == 1;
  // A longer row (up to kKeptRegisterRow) only where later passes need values kept (or tuning().layer_long_registers
  // asks), by the smallest block of 256 or 512 threads whose part of the row and of those values fits the default budget. That block is then the row's wherever
  // it is held (a tuning that turns registers or kept values off keeps it), so its threads combine the same elements.
  bool long_row = false;
  bool rows_out = false;
  for (int k = 0; k < v.n_outputs; ++k) rows_out = rows_out || !v.out_per_row[k];
  if (held_kind && tuning().layer_block == 0 && !tuning().layer_long_registers && V == 4 && rows_out &&
      r > kRegisterRow && r <= kPlainRegisterRow) {
    const Part q = part_of(kPlainRegisterBlock);  // (what is kept does not depend on the block)
    if (q.kept == 0 && q.vectors <= 2 && q.registers <= static_cast<std::size_t>(Tuning{}.layer_registers)) {
      long_row = true;
      v.group = v.block = static_cast<std::uint16_t>(kPlainRegisterBlock);
    }
  }
  if (held_kind && !long_row && r > kRegisterRow && r <= kKeptRegisterRow) {
    const std::int64_t first = tuning().layer_block > 0 ? tuning().layer_block : kKeptRegisterBlocks.front();
    const std::int64_t last = tuning().layer_block > 0 ? tuning().layer_block : kKeptRegisterBlocks.back();
    for (std::int64_t block = first; block <= last && !long_row; block *= 2) {
      const Part q = part_of(block);
      if (q.vectors <= 8 && (q.kept > 0 || tuning().layer_long_registers) &&
          q.registers <= static_cast<std::size_t>(Tuning{}.layer_registers)) {
        long_row = true;
        v.group = v.block = static_cast<std::uint16_t>(block);
      }
    }
  }
  if (held_kind && tuning().layer_registers > 0 && (r <= kRegisterRow || long_row)) {
    const Part q = part_of(v.group);
    if (q.vectors <= 8 && q.registers <= static_cast<std::size_t>(tuning().layer_registers)) {
      v.registers = static_cast<std::uint8_t>(q.vectors);
      v.keep_values = q.kept > 0 && tuning().layer_keep_values;
      v.full_parts = r == q.vectors * v.group * V && tuning().layer_full_parts;
    }
  }
}

}  // namespace fusion::detail
