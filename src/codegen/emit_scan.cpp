// SPDX-License-Identifier: Apache-2.0
// IR + scan variant -> CUDA source. The prologue is one inlined device function (fz_expr) of the loaded
// values, as in the elementwise kernels; the kernel around it walks each row in tiles (scan_variant.hpp).
#include "codegen/kernel_frame.hpp"
#include "codegen/emit_scan.hpp"

#include <fmt/format.h>

#include "codegen/scan_ops.hpp"
#include "codegen/scan_state.hpp"
#include "codegen/scan_strips.hpp"
#include "codegen/scan_tiles.hpp"
#include "codegen/spell.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {

using ir::Node;
using ir::Op;

namespace {

/// A one-pass scan's partition (fz_warp holding its warps' totals) publishes its total, then the groups it
/// completes, then takes its carry from the groups before it (scan_state.hpp). Warp 0 does it: its lanes
/// gather the nodes needed and fold them across the lanes in a fixed order (fz_fold: lane 0 the whole,
/// five dependent steps where lane 0 alone chained a combine a node, up to 31 a level and about 45 in all
/// for 32,768 partitions; no faster on the H200, 2^28 f32, but no slower and shorter). Nothing is published later than it
/// must be: the total before any wait, the completed groups after waiting only for their other 31 nodes.
/// (Publishing after the carry would chain each partition to the one before it.) A gather issues all its
/// loads before it waits on any: about one memory round trip, where a level at a time took one per level
/// (H100, one row of 2^28 f32: blocks waited at the barrier after it half their time).
/// `totals` reads lane's warp total of the partition (lanes from `n_totals` on read fz_none); the carry goes
/// to shared `carry_to`. This is the warp's part (row, c, lane in scope); write_lookback the block's.
void write_lookback_warp(SourceWriter& w, const std::string& acc, const std::string& totals, int n_totals,
                         const std::string& carry_to, bool publish_total = true) {
  constexpr int kRounds = 4;  // loads in flight per lane and batch
  {
    w.line("fz_node* const fz_row = fz_nodes + row * (2 * chunks + 8);");
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
    w.line("{} s = fz_fold(lane < {} ? {} : fz_none);", acc, n_totals, totals);
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
    w.line("// the nodes before c's at each level, the highest level first, each level folded across the lanes (the");
    w.line("// levels' folds independent of each other; levels above c's highest digit skipped)");
    w.line("{} p = fz_none;", acc);
    w.line("#pragma unroll");
    w.line("for (int l = {}; l >= 0; --l)", kScanLevels - 1);
    w.line("  if (l == 0 || (c >> (5 * l)) != 0) p = fz_combine(p, fz_fold(lane < ((c >> (5 * l)) & 31) ? fz_runs[l][lane] : fz_none));");
    w.line("if (lane == 0) {} = p;", carry_to);
  }
}

/// Warp 0 looks back while the others run `others` (a prefetch), then the block takes the carry.
void write_lookback(SourceWriter& w, const std::string& acc, const std::function<void()>& others) {
  {
    auto warp0 = w.block("if (warp == 0)");
    write_lookback_warp(w, acc, "fz_warp[fz_buf][lane]", kScanBlock / 32, "fz_carry");
  }
  if (others) others();
  w.line("__syncthreads();");
  w.line("carry = fz_carry;");
}

/// A thread's results over its `items` elements, in place: each element's running form x becomes value(x)
/// (inclusive), or the form before it does, `last_init` before the first (exclusive; `first`, when given,
/// is element 0's result as it is).
template <class Value>
void write_thread_results(SourceWriter& w, const std::string& acc, int items, bool exclusive, const std::string& last_init,
                          const std::string& first, Value&& value) {
  if (exclusive) w.line("{} last = {};  // the thread's elements before k", acc, last_init);
  w.line("#pragma unroll");
  if (!exclusive) {
    w.line("for (int k = 0; k < {}; ++k) fz_mine[k] = {};", items, value("fz_r[k]"));
    return;
  }
  auto results = w.block("for (int k = 0; k < {}; ++k)", items);
  w.line("const {} here = fz_r[k];  // the thread's elements to k", acc);
  w.line("fz_mine[k] = {};", first.empty() ? value("last") : fmt::format("k == 0 ? {} : {}", first, value("last")));
  w.line("last = here;");
}

/// logcumsumexp's thread pass, in the exp domain: with m the maximum of the thread's elements, the tile
/// keeps the running sums p_k of exp(x - m) (an exp each and a chain of adds: no log on the chain), and
/// the thread's total is m + log(p). Where m is not finite (all -inf, +inf, NaN) or the elements spread too
/// far below it (some exp(x - m) not a normal number) the thread scans with fz_combine as every other scan
/// does, and `fz_exp` says which form its tile holds.
void write_lse_thread_scan(SourceWriter& w, const std::string& acc, int items, bool registers, bool pairs) {
  const bool fl = acc == "float";
  w.line("// Each thread scans its {} consecutive elements: against their maximum, as sums of exponentials.", items);
  w.line("{} fz_m = fz_none, fz_lo = -fz_none;  // (NaN left out: it reaches the sums through its exponential)", acc);
  w.line("#pragma unroll");
  w.line("for (int k = 0; k < {}; ++k) {{ {}fz_m = {}(fz_m, fz_r[k]); fz_lo = {}(fz_lo, fz_r[k]); }}", items,
         registers ? "fz_r[k] = fz_mine[k]; " : "", fl ? "fmaxf" : "fmax", fl ? "fminf" : "fmin");
  w.line("// A finite maximum, and every exponential against it a normal number: a wider spread (or a -inf) would lose");
  w.line("// the small elements' digits, or all of them, in the sums (exp(-200) is 0 in float).");
  w.line("const bool fz_exp = fz_m - fz_m == ({0})0 && fz_m - fz_lo <= ({0}){1};", acc, fl ? 80 : 700);
  w.line("{} run = fz_none;", acc);
  if (pairs) w.line("{} run_s = 1;  // the thread's total as a pair: run + log(run_s)", acc);
  {
    auto sums = w.block("if (fz_exp)");
    w.line("{} p = 0;", acc);
    w.line("#pragma unroll");
    w.line("for (int k = 0; k < {}; ++k) fz_r[k] = p = p + fz_lse_exp(fz_r[k] - fz_m);", items);
    if (pairs) w.line("run = fz_m, run_s = p;");
    else w.line("run = fz_m + fz_lse_log(p);");
  }
  {
    auto exact = w.block("else");
    w.line("#pragma unroll");
    w.line("for (int k = 0; k < {}; ++k) fz_r[k] = run = fz_combine(run, fz_r[k]);", items);
  }
}

/// logcumsumexp across a block's threads and warps and along its tiles as pairs (m, s), the value m + log s
/// (fz_pair): the thread's total, the prefixes before each thread (pm, ps), the tiles' carry (carry, carry_s).
/// Two pairs combine with one exponential, where two values combine with an exponential and an accurate log1p
/// (fz_combine): of the about 57 instructions an element the row-wise kernel issued (H200, rows of 8192 f32, 84% of
/// the issue slots busy), the 11 combines a thread makes a tile took about 25.
void write_lse_pair_prefixes(SourceWriter& w, const std::string& acc, int W) {
  w.line("// The warp's threads before this one, then the tile's warps before this one, as pairs.");
  w.line("{} im = run, is = run_s;", acc);
  w.line("#pragma unroll");
  w.line("for (int d = 1; d < 32; d *= 2) {{ const {} ym = fz_shfl_up(im, d), ys = fz_shfl_up(is, d); if (lane >= d) "
         "fz_pair(im, is, ym, ys); }}",
         acc);
  w.line("const {} before_m = fz_shfl_up(im, 1), before_s = fz_shfl_up(is, 1);", acc);
  w.line("if (lane == 31) fz_warp[fz_buf][warp] = im, fz_warp_s[fz_buf][warp] = is;");
  w.line("__syncthreads();");
  w.line("{0} wm = lane < {1} ? fz_warp[fz_buf][lane] : fz_none, ws = lane < {1} ? fz_warp_s[fz_buf][lane] : ({0})1;", acc, W);
  w.line("#pragma unroll");
  w.line("for (int d = 1; d < {}; d *= 2) {{ const {} ym = fz_shfl_up(wm, d), ys = fz_shfl_up(ws, d); if (lane >= d) "
         "fz_pair(wm, ws, ym, ys); }}",
         W, acc);
  w.line("{} pm = carry, ps = carry_s;  // in a fixed order: the carry, the warps before, the lanes before", acc);
  w.line("if (warp > 0) fz_pair(pm, ps, fz_shfl(wm, warp - 1), fz_shfl(ws, warp - 1));");
  w.line("if (lane > 0) fz_pair(pm, ps, before_m, before_s);");
  w.line("const {} pre = pm + fz_lse_log(ps);  // (exact where pm is not finite or ps not a number)", acc);
  w.line("fz_pair(carry, carry_s, fz_shfl(wm, {0}), fz_shfl(ws, {0}));  // the tile's total, for the next tile", W - 1);
}

/// logcumsumexp's results from a thread's sums: with M = max(pre, m), each is M + log(a + b p_k) where
/// a = exp(pre - M) and b = exp(m - M), one log per element. A carry of +inf or NaN takes fz_combine.
void write_lse_results(SourceWriter& w, const std::string& acc, int items, bool exclusive, bool pairs) {
  if (pairs) {  // (pre as the pair (pm, ps))
    w.line("const {} fz_big = pm > fz_m ? pm : fz_m;", acc);
    w.line("const {0} fz_a = ps * fz_lse_exp(pm - fz_big), fz_b = fz_lse_exp(fz_m - fz_big);", acc);
  } else {
    w.line("const {} fz_big = pre > fz_m ? pre : fz_m;", acc);
    w.line("const {0} fz_a = fz_lse_exp(pre - fz_big), fz_b = fz_lse_exp(fz_m - fz_big);", acc);
  }
  {
    auto fast = pairs ? w.block("if (fz_exp && ps - ps == ({0})0 && (pm - pm == ({0})0 || pm == fz_none))", acc)
                      : w.block("if (fz_exp && (pre - pre == ({})0 || pre == fz_none))", acc);
    write_thread_results(w, acc, items, exclusive, "0", "pre",
                         [](const char* p) { return fmt::format("fz_big + fz_lse_log(fz_a + fz_b * {})", p); });
  }
  auto exact = w.block("else");
  w.line("{} before_k = fz_none;", acc);
  w.line("#pragma unroll");
  auto results = w.block("for (int k = 0; k < {}; ++k)", items);
  w.line("const {} here = fz_exp ? fz_m + fz_lse_log(fz_r[k]) : fz_r[k];  // the thread's elements to k", acc);
  w.line("fz_mine[k] = fz_combine(pre, {});", exclusive ? "before_k" : "here");
  w.line("before_k = here;");
}

}  // namespace

GeneratedKernel emit_scan(const ir::Graph& g, const ScanVariant& v, std::string_view name_given) {
  if (g.outputs.size() != 1 || !ir::is_scan(g.nodes[g.outputs[0]].op))
    throw Error("internal: a scan kernel's graph has one output, a scan");
  const Node& scan = g.nodes[g.outputs[0]];
  const DType rd = scan.dtype;
  const std::string acc(compute_type(rd));
  auto [k, pdt, scalars, ctx, heavy] = emit_context(g, v, name_given, std::span(&v.out_dtype, 1));
  const int np = v.n_params, rk = v.rank_kept;

  // The prologue: the scan's operand from the loaded values.
  SourceWriter body;
  {
    std::vector<std::string> args;
    for (int p = 0; p < np; ++p) args.push_back(fmt::format("{} x{}", compute_type(pdt[p]), p));
    for (auto [slot, d] : scalars) args.push_back(fmt::format("{} s{}", compute_type(d), slot));
    auto fn = body.block("__device__ __forceinline__ {} fz_expr({})", acc, fmt::join(args, ", "));
    std::vector<std::string> value(g.nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      if (n.op == Op::input) value[i] = fmt::format("x{}", v.param_of_slot[n.slot]);
      if (n.op == Op::scalar) value[i] = fmt::format("s{}", n.slot);
    }
    write_values(body, g, reachable(g, scan.a), value, ctx);
    body.line("return {};", value[scan.a]);
  }

  SourceWriter w;
  w.line("// Generated by fusion. Kernel {}: {}.", k.name, v.describe());
  write_prelude(w, ctx, heavy);
  if (rk > 0) w.line("struct FzKept {{ long long v[{}]; }};", rk).blank();
  w.line("{}", body.str());
  const bool lse = scan.op == Op::logcumsumexp;
  // (the one-pass scan publishes and looks back on values, not pairs)
  const bool pairs = lse && !v.strips && !v.columns && !v.lookback;
  write_scan_step(w, scan.op, rd);
  if (pairs) {
    w.line("// logcumsumexp's pairs (m, s), the value m + log s: (m, s) takes in (m2, s2) with one exponential. Infinities");
    w.line("// keep the larger m (two equal ones add their s); a NaN reaches s through the exponential and stays there.");
    w.line("__device__ __forceinline__ void fz_pair({0}& m, {0}& s, {0} m2, {0} s2) {{", acc);
    w.line("  const {0} e = m == m2 ? ({0})1 : fz_lse_exp(-fabs(m - m2));", acc);
    w.line("  if (m >= m2) s = s + s2 * e;");
    w.line("  else s = s * e + s2, m = m2;");
    w.line("}}");
  }
  w.line("// Shuffles move 32- and 64-bit values: narrower ones widen.");
  const auto shuffle = [&](const char* name, const char* intrinsic, const char* arg) {
    w.line("template <class T> __device__ __forceinline__ T {}(T a, int {}) {{", name, arg);
    w.line("  if constexpr (sizeof(T) < 4) return (T){}(0xffffffffu, (int)a, {});", intrinsic, arg);
    w.line("  else return {}(0xffffffffu, a, {});", intrinsic, arg);
    w.line("}}");
  };
  shuffle("fz_shfl_up", "__shfl_up_sync", "d");
  shuffle("fz_shfl", "__shfl_sync", "lane");
  if (v.lookback) shuffle("fz_shfl_down", "__shfl_down_sync", "d");
  w.blank();
  if (v.vector > 1) write_vector_helpers(w);
  if (v.lookback) {
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

  KernelSignature& sig = k.signature;
  for (int p = 0; p < np; ++p)
    sig.add(ArgSource::pointer, p, fmt::format("const {}* __restrict__ in{}", storage_type(pdt[p]), p));
  if (!v.totals) sig.add(ArgSource::pointer, np, fmt::format("{}* __restrict__ out", storage_type(v.out_dtype)));
  if (v.chunked) sig.add(ArgSource::pointer, np + 1, fmt::format("{}* __restrict__ fz_chunk_totals", acc));
  if (v.lookback) sig.add(ArgSource::pointer, np + 1, "unsigned* __restrict__ fz_state");
  for (auto [slot, d] : scalars) sig.add(ArgSource::scalar, slot, fmt::format("const {} s{}", compute_type(d), slot));
  sig.add(Count::n_out, "const long long n_rows");
  sig.add(Count::n_red, "const long long n");
  sig.add(Count::chunk, "const long long chunk");
  sig.add(Count::lanes, "const long long chunks");
  if (rk > 0) sig.add(ArgSource::dims, 0, "const FzKept kshape");
  for (int op = 0; op <= np; ++op) {
    if (op == np && v.totals) break;
    const std::string suffix = op < np ? std::to_string(op) : "_out";
    if (rk > 0) sig.add(ArgSource::dims, scan_row_strides(op), fmt::format("const FzKept kst{}", suffix));
    sig.add(ArgSource::dims, scan_axis_stride(op), fmt::format("const long long ast{}", suffix));
  }

  const int W = kScanBlock / 32, I = v.items;
  const ElementCall expr_call = [&](const std::function<std::string(int)>& element) {
    std::vector<std::string> args;  // fz_expr's arguments: each parameter's element, then the scalars
    for (int p = 0; p < np; ++p) args.push_back(load_conversion(pdt[p], element(p)));
    for (auto [slot, d] : scalars) args.push_back(fmt::format("s{}", slot));
    return fmt::format("fz_expr({})", fmt::join(args, ", "));
  };
  // Each operand's offset of row `row` (<prefix>p, the output's <prefix>_out where `out`).
  auto decode = [&](const char* row, const char* prefix, bool out) {
    std::vector<std::pair<std::string, std::string>> targets;
    for (int p = 0; p < np; ++p) targets.emplace_back(fmt::format("{}{}", prefix, p), fmt::format("kst{}", p));
    if (out) targets.emplace_back(fmt::format("{}_out", prefix), "kst_out");
    if (rk > 0) write_decode(w, row, "kshape", rk, targets);
    else
      for (const auto& [offset, strides] : targets) w.line("const long long {} = 0;", offset);
  };
  if (v.strips) {
    auto kernel = w.block("extern \"C\" __global__ void __launch_bounds__({}, {}) {}({})", kScanBlock, v.min_blocks,
                          k.name, sig.list());
    write_wait_for_previous_kernel(w);
    write_strip_scan(w, v, acc, scan_identity(scan.op, rd), expr_call, decode,
                     [&](const std::string& x) { return store_conversion(rd, v.out_dtype, x); });
  } else if (v.columns) {
    auto kernel = w.block("extern \"C\" __global__ void __launch_bounds__({}) {}({})", kScanBlock, k.name, sig.list());
    write_wait_for_previous_kernel(w);
    w.line("const {} fz_none = {};", acc, scan_identity(scan.op, rd));
    w.line("// A thread per row and chunk of the axis; consecutive threads take consecutive rows.");
    auto threads = w.block("for (long long t = (long long)blockIdx.x * {0} + threadIdx.x; t < n_rows * chunks; t += "
                           "(long long)gridDim.x * {0})",
                           kScanBlock);
    w.line("const long long c = t / n_rows, row = t - c * n_rows;");
    w.line("const long long lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;");
    decode("row", "k", !v.totals);
    w.line("{} carry = fz_none;", acc);
    if (v.chunked && !v.totals)
      w.line("for (long long i = 0; i < c; ++i) carry = fz_combine(carry, fz_chunk_totals[row * chunks + i]);");
    w.line("#pragma unroll 4");
    {
      auto walk = w.block("for (long long j = lo; j < hi; ++j)");
      w.line("const long long q = {};", v.reverse ? "n - 1 - j" : "j");
      w.line("const {} x = {};", acc, expr_call([](int p) { return fmt::format("in{0}[k{0} + q * ast{0}]", p); }));
      if (v.totals) {
        w.line("carry = fz_combine(carry, x);");
      } else if (v.exclusive) {
        w.line("out[k_out + q * ast_out] = {};", store_conversion(rd, v.out_dtype, "carry"));
        w.line("carry = fz_combine(carry, x);");
      } else {
        w.line("carry = fz_combine(carry, x);");
        w.line("out[k_out + q * ast_out] = {};", store_conversion(rd, v.out_dtype, "carry"));
      }
    }
    if (v.totals) w.line("fz_chunk_totals[row * chunks + c] = carry;");
  } else {
    auto kernel = w.block("extern \"C\" __global__ void __launch_bounds__({}, {}) {}({})", v.threads(), v.min_blocks,
                          k.name, sig.list());
    write_wait_for_previous_kernel(w);
    const bool piped = v.pipelined;  // (lookback) a warp of its own looks back while the others load the next
    const std::int64_t padded = v.tile() + v.tile() / 32;
    if (piped) {
      w.line("// Each warp's total of a tile, for the two partitions a block holds (one loading, one looked back on).");
      w.line("__shared__ {} fz_warp[2][{}];", acc, W);
      w.line("// The two partitions' tiles, a pad word after every 32 (dynamic: past the 48 KB static arrays may take).");
      w.line("extern __shared__ __align__(16) unsigned char fz_dynamic[];");
      w.line("{0} (* const fz_tiles)[{1}] = ({0} (*)[{1}])fz_dynamic;", acc, padded);
    } else {
      w.line("// Each warp's total of a tile, for two tiles: a warp runs at most one tile ahead of the others.");
      w.line("__shared__ {} fz_warp[2][{}];", acc, W);
      if (pairs) w.line("__shared__ {} fz_warp_s[2][{}];  // (logcumsumexp: each total as a pair, fz_warp + log fz_warp_s)", acc, W);
      w.line("__shared__ {} fz_tile[{}];  // the tile, a pad word after every 32", acc, padded);
    }
    w.line("const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;");
    // The thread's own elements: in a tile of fz_tile (pipelined: declared with each partition).
    const auto declare_mine = [&] {
      w.line("// The thread's {} consecutive elements of the tile: together in the padded layout ({} divides 32).", I, I);
      w.line("{}* const fz_mine = fz_tile + threadIdx.x * {} + (threadIdx.x * {} >> 5);", acc, I, I);
    };
    if (!piped) declare_mine();
    w.line("const {} fz_none = {};", acc, scan_identity(scan.op, rd));
    if (!piped) w.line("int fz_buf = 0;  // which of fz_warp this tile writes");
    if (v.lookback) {
      w.line("// The partitions' tree of published sums (codegen/scan_state.hpp).");
      w.line("__shared__ {} fz_runs[{}][32];  // per level, the nodes c's carry or completed groups need", acc, kScanLevels);
      if (piped) {
        w.line("__shared__ {} fz_carries[2];  // each held partition's carry", acc);
        w.line("__shared__ long long fz_held[2];  // the partitions claimed, in the order they were");
      } else {
        w.line("__shared__ {} fz_carry;", acc);
        w.line("__shared__ long long fz_claimed;");
      }
      w.line("fz_node* const fz_nodes = (fz_node*)((char*)fz_state + {});", kScanStateHeaderBytes);
      w.line("const unsigned fz_published = *(volatile unsigned*)fz_state + 1;  // this launch's flag");
    }
    // A tile's loads, each thread's pass over its elements and the warp's scan of the threads' totals, up to
    // the warp's total in fz_warp[fz_buf] and `before` (the warp's lanes before this one); then, from the
    // carry, the tile's results and stores.
    const auto front = [&] {
      write_tile_loads(w, v, pdt, acc, expr_call);
      w.line("__syncwarp();  // (each warp moves its own span of the tile: no block-wide barrier)");
      if (v.thread_registers)
        w.line("{} fz_r[{}];  // the thread's elements, in registers from its pass to their results", acc, I);
      else
        w.line("{}* const fz_r = fz_mine;  // the thread's elements, in the tile from its pass to their results", acc);
      if (lse) {
        write_lse_thread_scan(w, acc, I, v.thread_registers, pairs);
      } else {
        w.line("// Each thread scans its {} consecutive elements in order.", I);
        w.line("{} run = fz_none;", acc);
        w.line("#pragma unroll");
        w.line("for (int k = 0; k < {}; ++k) fz_r[k] = run = fz_combine(run, fz_mine[k]);", I);
      }
      if (pairs) return;
      w.line("// The warp's threads before this one, then the tile's warps before this one.");
      w.line("{} inc = run;", acc);
      w.line("#pragma unroll");
      w.line("for (int d = 1; d < 32; d *= 2) {{ const {} y = fz_shfl_up(inc, d); if (lane >= d) inc = fz_combine(y, inc); }}",
             acc);
      w.line("{} before = fz_shfl_up(inc, 1);", acc);
      w.line("if (lane == 31) fz_warp[fz_buf][warp] = inc;");
    };
    const auto back = [&] {
      w.line("// The warps' totals scanned across lanes (a few steps, where a loop over them chained up to {}).", W - 1);
      w.line("{} fz_warps = lane < {} ? fz_warp[fz_buf][lane] : fz_none;", acc, W);
      w.line("#pragma unroll");
      w.line("for (int d = 1; d < {}; d *= 2) {{ const {} y = fz_shfl_up(fz_warps, d); if (lane >= d) fz_warps = fz_combine(y, fz_warps); }}",
             W, acc);
      w.line("{} pre = carry;  // in a fixed order: the carry, the warps before, the lanes before", acc);
      w.line("if (warp > 0) pre = fz_combine(pre, fz_shfl(fz_warps, warp - 1));");
      w.line("if (lane > 0) pre = fz_combine(pre, before);");
      w.line("const {} fz_total = fz_shfl(fz_warps, {});  // the tile's, for the next tile's carry", acc, W - 1);
      if (lse) {
        write_lse_results(w, acc, I, v.exclusive, false);
      } else {
        write_thread_results(w, acc, I, v.exclusive, "fz_none", "",
                             [](const char* p) { return fmt::format("fz_combine(pre, {})", p); });
      }
      w.line("carry = fz_combine(carry, fz_total);");
    };
    const auto stores = [&] {
      w.line("__syncwarp();");
      write_tile_stores(w, v, acc, [&](const std::string& x) { return store_conversion(rd, v.out_dtype, x); });
      w.line("__syncwarp();  // fz_tile's span is read before the next tile writes it");
    };
    const auto prefetch = [&] {
      write_next_tile_prefetch(w, v, [&](const char* row, const char* prefix) { decode(row, prefix, false); });
    };
    // Partition `b`'s row and chunk, its part of the row [lo, hi) (one tile) and the operands' row offsets.
    const auto partition = [&](const char* b) {
      w.line("const long long row = {0} / chunks, c = {0} - row * chunks;", b);
      w.line("const long long lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n, base = lo;");
      decode("row", "k", true);
    };
    if (piped) {
      // Warps 0..W-1 load and scan partition s + 1 (and publish its total) while warp W looks back on partition
      // s; then they finish partition s - 1, whose carry the step before found, and claim the next. No warp
      // waits on a look-back unless it took longer than a partition's loads.
      w.line("const long long fz_parts = n_rows * chunks;");
      w.line("// Partitions are claimed in order, so the ones a partition waits for are held by running blocks.");
      w.line("if (threadIdx.x == 0) fz_held[0] = atomicAdd(fz_state + 1, 1u);");
      w.line("__syncthreads();");
      w.line("// (warps 0..{}) the partitions loaded: s - 1, finished in step s, and s, looked back on in it", W - 1);
      w.line("long long fz_prev = -1, fz_cur = -1;");
      w.line("{} fz_prev_before = fz_none, fz_cur_before = fz_none;  // this thread's `before` in each", acc);
      const auto compute_barrier = [&] {
        w.line("asm volatile(\"bar.sync 1, {};\" ::: \"memory\");  // warps 0..{} only", kScanBlock, W - 1);
      };
      // Warps 0..W-1: the partition claimed into fz_held[slot], loaded and scanned into buffer `slot`, its total
      // published.
      const auto load = [&](const char* slot) {
        w.line("const long long fz_b = fz_held[{}];", slot);
        {
          auto valid = w.block("if (fz_b < fz_parts)");
          w.line("const int fz_buf = {};", slot);
          w.line("{}* const fz_tile = fz_tiles[fz_buf];", acc);
          declare_mine();
          partition("fz_b");
          front();
          w.line("fz_cur = fz_b, fz_cur_before = before;");
        }
        compute_barrier();
        auto total = w.block("if (warp == 0 && fz_b < fz_parts)");
        w.line("const long long row = fz_b / chunks, c = fz_b - row * chunks;");
        w.line("const {} s = fz_fold(lane < {} ? fz_warp[{}][lane] : fz_none);  // the partition's total", acc, W, slot);
        w.line("if (lane == 0) fz_publish(fz_nodes + row * (2 * chunks + 8) + c, fz_published, s);");
      };
      // Warps 0..W-1: partition fz_prev's results (its tile in buffer `slot`, its carry found) and stores.
      const auto finish = [&](const char* slot) {
        w.line("const int fz_buf = {};", slot);
        w.line("{}* const fz_tile = fz_tiles[fz_buf];", acc);
        declare_mine();
        partition("fz_prev");
        w.line("{} carry = fz_carries[fz_buf];", acc);
        w.line("const {} before = fz_prev_before;", acc);
        w.line("{}* const fz_r = fz_mine;", acc);
        back();
        stores();
      };
      {
        auto first = w.block("if (warp < {})", W);
        load("0");
      }
      w.line("__syncthreads();");
      w.line("int fz_s = 0;");
      {
        auto steps = w.block("for (;; ++fz_s)");
        w.line("const int fz_now = fz_s & 1;  // partition s's slot; s - 1 and s + 1 share the other");
        w.line("const long long fz_b = fz_held[fz_now];");
        w.line("if (fz_b >= fz_parts) break;  // (the same for every thread: read after the barrier)");
        {
          auto looker = w.block("if (warp == {})", W);
          partition("fz_b");
          write_lookback_warp(w, acc, "fz_warp[fz_now][lane]", W, "fz_carries[fz_now]", false);
        }
        {
          auto loaders = w.block("else");
          {
            auto done = w.block("if (fz_prev >= 0)");
            finish("fz_now ^ 1");
          }
          w.line("if (threadIdx.x == 0) fz_held[fz_now ^ 1] = atomicAdd(fz_state + 1, 1u);");
          compute_barrier();  // (partition s - 1's tile, totals and slot free again)
          if (v.prefetch) {
            auto pf = w.block("");
            w.line("const long long b = fz_held[fz_now ^ 1];");
            prefetch();
          }
          w.line("fz_prev = fz_cur, fz_prev_before = fz_cur_before, fz_cur = -1;");
          load("fz_now ^ 1");
        }
        w.line("__syncthreads();");
      }
      // The last partition a block held, looked back on in the last step: finished here.
      auto last = w.block("if (warp < {} && fz_prev >= 0)", W);
      finish("(fz_s & 1) ^ 1");
    } else {
    auto blocks = v.lookback ? w.block("for (;;)") : w.block("for (long long b = blockIdx.x; b < n_rows * chunks; b += gridDim.x)");
    if (v.lookback) {
      w.line("// Partitions are claimed in order, so the ones a partition waits for are held by running blocks.");
      w.line("if (threadIdx.x == 0) fz_claimed = atomicAdd(fz_state + 1, 1u);");
      w.line("__syncthreads();");
      w.line("const long long b = fz_claimed;");
      w.line("if (b >= n_rows * chunks) break;");
    }
    w.line("const long long row = b / chunks, c = b - row * chunks;");
    w.line("const long long lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;  // this block's part of the row");
    decode("row", "k", true);
    w.line("{} carry = fz_none;", acc);
    if (pairs) w.line("{} carry_s = 1;  // the carry as a pair: carry + log(carry_s)", acc);
    auto tiles = w.block("for (long long base = lo; base < hi; base += {}, fz_buf ^= 1)", v.tile());
    front();
    if (pairs) {
      write_lse_pair_prefixes(w, acc, W);
      write_lse_results(w, acc, I, v.exclusive, true);
    } else {
      w.line("__syncthreads();");
      if (v.lookback) write_lookback(w, acc, v.prefetch == 0 ? std::function<void()>() : prefetch);
      back();
    }
    stores();
    }
    if (v.lookback) {
      w.line("// The last block to finish readies the state for the next launch.");
      w.line("__syncthreads();");
      auto last = w.block("if (threadIdx.x == 0)");
      w.line("__threadfence();");
      auto reset = w.block("if (atomicAdd(fz_state + 2, 1u) == gridDim.x - 1)");
      w.line("atomicExch(fz_state + 1, 0u);");
      w.line("atomicExch(fz_state + 2, 0u);");
      w.line("atomicExch(fz_state, fz_published);");
    }
  }
  k.source = w.str();
  return k;
}

}  // namespace fusion::codegen
