// SPDX-License-Identifier: Apache-2.0
#include "codegen/scan_lse.hpp"

#include <fmt/format.h>

#include "codegen/scan_tiles.hpp"

namespace fusion::codegen {

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

void write_lse_pair_helpers(SourceWriter& w, const std::string& acc, bool folds) {
  w.line("// logcumsumexp's pairs (m, s), the value m + log s: (m, s) takes in (m2, s2) with one exponential. Infinities");
  w.line("// keep the larger m (two equal ones add their s); a NaN reaches s through the exponential and stays there.");
  w.line("__device__ __forceinline__ void fz_pair({0}& m, {0}& s, {0} m2, {0} s2) {{", acc);
  w.line("  const {0} e = m == m2 ? ({0})1 : fz_lse_exp(-fabs(m - m2));", acc);
  w.line("  if (m >= m2) s = s + s2 * e;");
  w.line("  else s = s * e + s2, m = m2;");
  w.line("}}");
  if (!folds) return;
  w.line("// The warp's pairs as one value, in lane 0: the lanes' largest m, then the sum of their s exp(m - largest) in a");
  w.line("// fixed tree (the same bits each run), one exponential a lane and one log, where a chain of five combines took");
  w.line("// an exponential and an accurate log1p each (and held up every look-back behind it). A NaN anywhere is the");
  w.line("// result; so is an infinite largest m otherwise.");
  w.line("__device__ __forceinline__ {0} fz_fold_pair({0} m, {0} s) {{", acc);
  w.line("  {} big = m;", acc);
  w.line("  #pragma unroll");
  w.line("  for (int d = 16; d >= 1; d /= 2) big = {}(big, __shfl_xor_sync(0xffffffffu, big, d));",
         acc == "float" ? "fmaxf" : "fmax");
  w.line("  if (big - big != ({})0) return __any_sync(0xffffffffu, m != m || s != s) ? big - big : big;", acc);
  w.line("  {} e = s * fz_lse_exp(m - big);  // (m = -inf: 0)", acc);
  w.line("  #pragma unroll");
  w.line("  for (int d = 1; d < 32; d *= 2) {{");
  w.line("    const {} y = fz_shfl_down(e, d);", acc);
  w.line("    if ((threadIdx.x & 31) + d < 32) e = e + y;");
  w.line("  }}");
  w.line("  return big + fz_lse_log(e);");
  w.line("}}");
  w.line("__device__ __forceinline__ {0} fz_fold({0} v) {{ return fz_fold_pair(v, ({0})1); }}", acc);
  w.line("// Several values a lane folded at once the same way (the look-back's levels: one exponential a value and one");
  w.line("// log, where a fold a level and a combine between levels chained three logs).");
  w.line("template <int N> __device__ __forceinline__ {0} fz_fold_all(const {0} (&v)[N]) {{", acc);
  w.line("  {} big = v[0];", acc);
  w.line("  bool nan = v[0] != v[0];");
  w.line("  #pragma unroll");
  w.line("  for (int i = 1; i < N; ++i) big = {}(big, v[i]), nan = nan || v[i] != v[i];", acc == "float" ? "fmaxf" : "fmax");
  w.line("  #pragma unroll");
  w.line("  for (int d = 16; d >= 1; d /= 2) big = {}(big, __shfl_xor_sync(0xffffffffu, big, d));",
         acc == "float" ? "fmaxf" : "fmax");
  w.line("  if (big - big != ({})0) return __any_sync(0xffffffffu, nan) ? big - big : big;", acc);
  w.line("  {} e = 0;", acc);
  w.line("  #pragma unroll");
  w.line("  for (int i = 0; i < N; ++i) e = e + fz_lse_exp(v[i] - big);");
  w.line("  #pragma unroll");
  w.line("  for (int d = 1; d < 32; d *= 2) {{");
  w.line("    const {} y = fz_shfl_down(e, d);", acc);
  w.line("    if ((threadIdx.x & 31) + d < 32) e = e + y;");
  w.line("  }}");
  w.line("  return big + fz_lse_log(e);");
  w.line("}}").blank();
}

void write_lse_lane_prefixes(SourceWriter& w, const std::string& acc) {
  w.line("// The warp's threads before this one, as pairs; the warp's total to fz_warp, fz_warp_s.");
  w.line("{} im = run, is = run_s;", acc);
  w.line("#pragma unroll");
  w.line("for (int d = 1; d < 32; d *= 2) {{ const {} ym = fz_shfl_up(im, d), ys = fz_shfl_up(is, d); if (lane >= d) "
         "fz_pair(im, is, ym, ys); }}",
         acc);
  w.line("const {} before_m = fz_shfl_up(im, 1), before_s = fz_shfl_up(is, 1);", acc);
  w.line("if (lane == 31) fz_warp[fz_buf][warp] = im, fz_warp_s[fz_buf][warp] = is;");
}

void write_lse_warp_prefixes(SourceWriter& w, const std::string& acc, int W) {
  w.line("// The tile's warps before this one, as pairs, then the prefix before this thread: (pm, ps) and pre.");
  w.line("{0} wm = lane < {1} ? fz_warp[fz_buf][lane] : fz_none, ws = lane < {1} ? fz_warp_s[fz_buf][lane] : ({0})1;", acc, W);
  w.line("#pragma unroll");
  w.line("for (int d = 1; d < {}; d *= 2) {{ const {} ym = fz_shfl_up(wm, d), ys = fz_shfl_up(ws, d); if (lane >= d) "
         "fz_pair(wm, ws, ym, ys); }}",
         W, acc);
  w.line("{} pm = carry, ps = carry_s;  // in a fixed order: the carry, the warps before, the lanes before", acc);
  w.line("if (warp > 0) fz_pair(pm, ps, fz_shfl(wm, warp - 1), fz_shfl(ws, warp - 1));");
  w.line("if (lane > 0) fz_pair(pm, ps, before_m, before_s);");
  w.line("const {} pre = pm + fz_lse_log(ps);  // (exact where pm is not finite or ps not a number)", acc);
}

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

}  // namespace fusion::codegen
