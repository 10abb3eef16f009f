// SPDX-License-Identifier: Apache-2.0
#include "codegen/scan_ops.hpp"

#include <fmt/format.h>

#include "codegen/spell.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {

using ir::Op;

namespace {

/// The body of fz_combine(a, b), `a` holding the earlier elements. Integers wrap as NumPy's do; floats
/// round each operation on its own; max and min propagate NaN.
std::string scan_combine(Op op, DType d) {
  const bool fl = is_floating(d);
  const std::string t(compute_type(d));
  const std::string u = itemsize(d) == 8 ? "unsigned long long" : "unsigned";
  switch (op) {
    case Op::cumsum:
      if (fl) return d == DType::float64 ? "return __dadd_rn(a, b);" : "return __fadd_rn(a, b);";
      return d == DType::bool_ ? "return a || b;" : fmt::format("return ({})(({})a + ({})b);", t, u, u);
    case Op::cumprod:
      if (fl) return d == DType::float64 ? "return __dmul_rn(a, b);" : "return __fmul_rn(a, b);";
      return d == DType::bool_ ? "return a && b;" : fmt::format("return ({})(({})a * ({})b);", t, u, u);
    case Op::cummax: return fl ? "return (a > b || a != a) ? a : b;" : "return a > b ? a : b;";
    case Op::cummin: return fl ? "return (a < b || a != a) ? a : b;" : "return a < b ? a : b;";
    case Op::logcumsumexp:
      // log(exp(a) + exp(b)) without overflow; equal infinities (and -inf with -inf) stay exact
      return "if (a == b) return a + (T)0.693147180559945309417232121458176568;\n"
             "const T hi = a > b ? a : b, lo = a > b ? b : a;\n"
             "if (hi != hi || lo != lo) return a + b;  // NaN\n"
             "return hi + fz_lse_log1p(fz_lse_exp(lo - hi));";
    default: throw Error("internal: not a scan");
  }
}

}  // namespace

std::string scan_identity(Op op, DType d) {
  const bool fl = is_floating(d);
  const std::string t(compute_type(d));
  switch (op) {
    case Op::cumsum: return fl ? fmt::format("({})-0.0", t) : fmt::format("({})0", t);
    case Op::cumprod: return fmt::format("({})1", t);
    case Op::cummax: return dtype_info(d).lowest;
    case Op::cummin: return dtype_info(d).highest;
    case Op::logcumsumexp: return dtype_info(d).lowest;  // -inf
    default: throw Error("internal: not a scan");
  }
}

void write_scan_step(SourceWriter& w, Op op, DType rd) {
  const std::string acc(compute_type(rd));
  if (op == Op::logcumsumexp) {
    w.line("// logcumsumexp's exponential and logarithms. In float, the per-element ones are the hardware's approximations");
    w.line("// (ex2 of x log2(e): its arguments here are at most 0, its results flushed to 0 below 2^-126; lg2: 2^-22 absolute");
    w.line("// error on [0.5, 2], 2 ulp elsewhere, arguments here normal): with expf and logf the kernel was bound by its");
    w.line("// instructions (H100 rows of 8192 f32: 77% of the copy limit; exp2f and log2f 86%, log2f alone 25 instructions");
    w.line("// an element, issue slots 88% busy). log1p, on the short chain that combines threads and warps, stays accurate:");
    w.line("// log1p(x) = log(u) x / (u - 1), u = 1 + x (Goldberg), with log2f's 1 ulp.");
    if (acc == "float") {
      w.line("__device__ __forceinline__ float fz_lse_exp(float x) {{");
      w.line("  float y;");
      w.line("  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x * 1.44269504088896341f));");
      w.line("  return y;");
      w.line("}}");
      w.line("__device__ __forceinline__ float fz_lse_log(float x) {{");
      w.line("  float y;");
      w.line("  asm(\"lg2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));");
      w.line("  return y * 0.693147180559945309f;");
      w.line("}}");
      w.line("__device__ __forceinline__ float fz_lse_log1p(float x) {{");
      w.line("  const float u = 1.f + x;");
      w.line("  return u == 1.f ? x : log2f(u) * 0.693147180559945309f * __fdividef(x, u - 1.f);");
      w.line("}}");
    } else {
      w.line("__device__ __forceinline__ {0} fz_lse_exp({0} x) {{ return exp(x); }}", acc);
      w.line("__device__ __forceinline__ {0} fz_lse_log({0} x) {{ return log(x); }}", acc);
      w.line("__device__ __forceinline__ {0} fz_lse_log1p({0} x) {{ return log1p(x); }}", acc);
    }
    w.blank();
  }
  w.line("// The scan's step: `a` holds the earlier elements.");
  w.line("template <class T> __device__ __forceinline__ T fz_combine_t(T a, T b) {{");
  w.line("{}", scan_combine(op, rd));
  w.line("}}");
  w.line("__device__ __forceinline__ {0} fz_combine({0} a, {0} b) {{ return fz_combine_t<{0}>(a, b); }}", acc);
}

}  // namespace fusion::codegen
