// SPDX-License-Identifier: Apache-2.0
#include "codegen/scan_lookback.hpp"

#include <fmt/format.h>

#include "codegen/scan_state.hpp"
#include "codegen/scan_variant.hpp"

namespace fusion::codegen {

void write_lookback_helpers(SourceWriter& w, const std::string& acc, bool fold) {
  w.line("// A node of the one-pass scan's tree (codegen/scan_state.hpp): its flag and value in one 16-byte word,");
  w.line("// written and read whole, so a reader that sees the flag sees the value (no fence between them).");
  w.line("struct __align__(16) fz_node {{ unsigned long long flag, bits; }};");
  w.line("__device__ __forceinline__ void fz_publish(fz_node* node, unsigned long long flag, {} v) {{", acc);
  w.line("  unsigned long long bits = 0;");
  w.line("  memcpy(&bits, &v, sizeof v);");
  w.line("  asm volatile(\"st.volatile.global.v2.u64 [%0], {{%1, %2}};\" :: \"l\"(node), \"l\"(flag), \"l\"(bits) : \"memory\");");
  w.line("}}");
  w.line("__device__ __forceinline__ void fz_load(const fz_node* node, unsigned long long& flag, unsigned long long& bits) {{");
  w.line("  asm volatile(\"ld.volatile.global.v2.u64 {{%0, %1}}, [%2];\" : \"=l\"(flag), \"=l\"(bits) : \"l\"(node) : \"memory\");");
  w.line("}}").blank();
  if (!fold) return;
  w.line("// The warp's values combined in lane order, v0 first, in lane 0: a fixed tree, so the same bits each run.");
  w.line("__device__ __forceinline__ {0} fz_fold({0} v) {{", acc);
  w.line("  #pragma unroll");
  w.line("  for (int d = 1; d < 32; d *= 2) {{");
  w.line("    const {} y = fz_shfl_down(v, d);", acc);
  w.line("    if ((threadIdx.x & 31) + d < 32) v = fz_combine(v, y);");
  w.line("  }}");
  w.line("  return v;");
  w.line("}}").blank();
}

// A one-pass scan's partition (fz_warp holding its warps' totals) publishes its total, then the groups it
// completes, then takes its carry from the groups before it (scan_state.hpp). One warp does it (warp 0, or the
// pipelined kernel's warp 8): its lanes gather the nodes needed and fold them across the lanes in a fixed order
// (fz_fold: lane 0 the whole, five dependent steps where lane 0 alone chained a combine a node, up to 31 a level
// and about 45 in all for 32,768 partitions; no faster on the H200, 2^28 f32, but no slower and shorter). Nothing
// is published later than it must be: the total before any wait, the completed groups after waiting only for their other 31 nodes.
// (Publishing after the carry would chain each partition to the one before it.) A gather issues all its
// loads before it waits on any: about one memory round trip, where a level at a time took one per level
// (H100, one row of 2^28 f32: blocks waited at the barrier after it half their time).
void write_lookback_warp(SourceWriter& w, const std::string& acc, const std::string& total,
                         const std::string& carry_to, bool publish_total, bool fold_all) {
  constexpr int kRounds = 4;  // loads in flight per lane and batch
  {
    w.line("fz_node* const fz_row = {};", row_nodes("row"));
    w.line("// where level l's nodes start (computed where needed: an array of them took registers)");
    w.line("const auto fz_level = [&](int l) {{ long long o = 0; for (int i = 0; i < l; ++i) o += (chunks >> (5 * i)) + 1; return fz_row + o; }};");
    w.line("int top = 0;  // c completes the groups of levels 1..top: its digits below top are all 31");
    w.line("while (top < {} && ((c >> (5 * top)) & 31) == 31) ++top;", kScanLevels - 1);
    w.line("// the nodes c needs of level l: those before its own in its group (all 31 others where it completes it)");
    w.line("const auto fz_needed = [&](int l) {{ return l < top ? 31 : (int)((c >> (5 * l)) & 31); }};");
    w.line("// fz_runs[l][i] for the needed nodes of levels [from, to): the lanes take them in turn, {} at a time each,", kRounds);
    w.line("// every load issued before any is waited on");
    {
      auto gather = w.block("const auto fz_gather = [&](int from, int to)");
      w.line("int total = 0;");
      w.line("for (int l = from; l < to; ++l) total += fz_needed(l);");
      auto batch = w.block("for (int first = 0; first < total; first += {})", 32 * kRounds);
      w.line("unsigned long long f[{0}], bits[{0}];", kRounds);
      w.line("int at_l[{0}], at_i[{0}];", kRounds);
      w.line("#pragma unroll");
      {
        auto issue = w.block("for (int r = 0; r < {}; ++r)", kRounds);
        w.line("int e = first + 32 * r + lane, l = from;");
        w.line("while (l < to && e >= fz_needed(l)) e -= fz_needed(l++);");
        w.line("at_l[r] = l, at_i[r] = e;");
        w.line("if (l < to) fz_load(fz_level(l) + ((c >> (5 * l)) & ~31ll) + e, f[r], bits[r]);");
      }
      w.line("#pragma unroll");
      auto wait = w.block("for (int r = 0; r < {}; ++r)", kRounds);
      w.line("if (at_l[r] >= to) continue;");
      w.line("const fz_node* const node = fz_level(at_l[r]) + ((c >> (5 * at_l[r])) & ~31ll) + at_i[r];");
      w.line("while (f[r] != fz_published) {{ __nanosleep(20); fz_load(node, f[r], bits[r]); }}");
      w.line("memcpy(&fz_runs[at_l[r]][at_i[r]], &bits[r], sizeof({}));", acc);
    }
    w.line(";");
    w.line("// (lane 0) the node of level l ending at c, from the partition's total: its warps' totals folded");
    w.line("{} s = {};", acc, total);
    if (publish_total) w.line("if (lane == 0) fz_publish(fz_row + c, fz_published, s);");
    {
      auto completes = w.block("if (top > 0)");
      w.line("fz_gather(0, top);");
      w.line("__syncwarp();");
      auto runs = w.block("for (int l = 0; l < top; ++l)");
      w.line("s = fz_combine(fz_fold(lane < 31 ? fz_runs[l][lane] : fz_none), s);  // the group's other nodes, then this one");
      w.line("if (lane == 0) fz_publish(fz_level(l + 1) + (c >> (5 * (l + 1))), fz_published, s);");
    }
    w.line("fz_gather(top, {});", kScanLevels);
    w.line("__syncwarp();");
    if (fold_all) {
      w.line("// the nodes before c's at every level folded across the lanes at once");
      w.line("{} fz_before[{}];", acc, kScanLevels);
      w.line("#pragma unroll");
      w.line("for (int l = 0; l < {}; ++l) fz_before[l] = lane < ((c >> (5 * l)) & 31) ? fz_runs[l][lane] : fz_none;",
             kScanLevels);
      w.line("const {} p = fz_fold_all(fz_before);", acc);
    } else {
      w.line("// the nodes before c's at each level, the highest level first, each level folded across the lanes (the");
      w.line("// levels' folds independent of each other; levels above c's highest digit skipped)");
      w.line("{} p = fz_none;", acc);
      w.line("#pragma unroll");
      w.line("for (int l = {}; l >= 0; --l)", kScanLevels - 1);
      w.line("  if (l == 0 || (c >> (5 * l)) != 0) p = fz_combine(p, fz_fold(lane < ((c >> (5 * l)) & 31) ? fz_runs[l][lane] : fz_none));");
    }
    w.line("if (lane == 0) {} = p;", carry_to);
  }
}

void write_lookback(SourceWriter& w, const std::string& acc, const std::string& total, bool fold_all,
                    const std::function<void()>& others) {
  {
    auto warp0 = w.block("if (warp == 0)");
    write_lookback_warp(w, acc, total, "fz_carry", true, fold_all);
  }
  if (others) others();
  w.line("__syncthreads();");
  w.line("carry = fz_carry;");
}

}  // namespace fusion::codegen
