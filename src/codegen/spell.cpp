// SPDX-License-Identifier: Apache-2.0
#include "codegen/spell.hpp"

#include <fmt/format.h>

#include "codegen/device_functions.hpp"
#include "codegen/exact_sum.hpp"
#include "fusion/error.hpp"

namespace fusion {
namespace codegen {

std::string_view compute_type(DType d) { return dtype_info(d).cuda; }
std::string_view storage_type(DType d) { return dtype_info(d).storage; }

std::string load_conversion(DType d, const std::string& v) {
  if (!is_16bit_float(d)) return v;
  return fmt::format("{}({})", dtype_info(d).to_float, v);
}

std::string store_conversion(DType from, DType to, const std::string& v) {
  if (is_16bit_float(to)) return fmt::format("{}((float)({}))", dtype_info(to).from_float, v);
  if (from == to || (compute_type(from) == compute_type(to))) return v;
  return fmt::format("({})({})", compute_type(to), v);
}

void need_conversions(SpellContext& ctx, DType d) {
  if (is_16bit_float(d)) ctx.conversions.insert(d);
}

const char* conversion_source(DType d) {
  switch (d) {
    case DType::float16:
      return R"(// IEEE half <-> float, rounding to nearest even (PTX cvt), without cuda_fp16.h.
__device__ __forceinline__ float fz_half_to_float(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short fz_float_to_half(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; })";
    case DType::bfloat16:
      // The PTX cvt (sm_80 and later) and not integer arithmetic: with the arithmetic, the compiler split a
      // rows kernel's 16-byte stores of 8 results into 2-byte ones (m + row in bfloat16 ran at 27% of the
      // copy bandwidth, float16 at 92%).
      return R"(// bfloat16 <-> float, rounding to nearest even (PTX cvt from sm_80; before it, integer arithmetic).
__device__ __forceinline__ float fz_bfloat16_to_float(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short fz_float_to_bfloat16(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  const unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN stays NaN, quiet
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
})";
    default: throw Error(fmt::format("internal: no conversion functions for {}", dtype_name(d)));
  }
}

const char* helper_source(Helper h) {
  switch (h) {
    case Helper::floor_divide:
      return R"(// NumPy's floor_divide: rounds toward -inf; integer division by zero gives 0.
template <class T> __device__ __forceinline__ T fz_floor_divide_int(T a, T b) {
  if (b == 0) return 0;
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q = q - 1;
  return q;
}
template <class T> __device__ __forceinline__ T fz_floor_divide_float(T a, T b) {
  if (b == 0) return a / b;
  const T mod = fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
  if (div == 0) return copysign(T(0), a / b);
  T q = floor(div);
  if (div - q > T(0.5)) q += T(1);
  return q;
})";
    case Helper::remainder:
      return R"(// NumPy's remainder: the result takes the divisor's sign; integer remainder by zero gives 0.
template <class T> __device__ __forceinline__ T fz_remainder_int(T a, T b) {
  if (b == 0) return 0;
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r = r + b;
  return r;
}
template <class T> __device__ __forceinline__ T fz_remainder_float(T a, T b) {
  T m = fmod(a, b);
  if (b == 0) return m;
  if (m != 0) { if ((b < 0) != (m < 0)) m += b; }
  else m = copysign(T(0), b);
  return m;
})";
    case Helper::fmod_int:
      return R"(// C's fmod for integers: the dividend's sign; by zero gives 0.
template <class T> __device__ __forceinline__ T fz_fmod_int(T a, T b) { return b == 0 ? T(0) : T(a % b); })";
    case Helper::pow_int:
      return R"(// Integer power by squaring; negative exponents give 0 except for bases 1 and -1.
template <class T> __device__ __forceinline__ T fz_pow_int(T a, T b) {
  if (b < 0) return a == T(1) ? T(1) : (a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0));
  unsigned long long r = 1, x = (unsigned long long)a;  // unsigned: overflow wraps, as in NumPy
  while (b) { if (b & 1) r = r * x; x = x * x; b >>= 1; }
  return (T)r;
})";
    case Helper::maximum:
      return R"(// NumPy's maximum: NaN in either operand gives NaN; of equal operands (0 and -0) the first.
template <class T> __device__ __forceinline__ T fz_maximum(T a, T b) { return a != a ? a : (b != b ? b : (a >= b ? a : b)); })";
    case Helper::minimum:
      return R"(// NumPy's minimum: NaN in either operand gives NaN; of equal operands (0 and -0) the first.
template <class T> __device__ __forceinline__ T fz_minimum(T a, T b) { return a != a ? a : (b != b ? b : (a <= b ? a : b)); })";
    case Helper::logaddexp:
      return R"(// log(exp(a) + exp(b)) without overflow; equal infinities stay exact.
template <class T> __device__ __forceinline__ T fz_logaddexp(T a, T b) {
  if (a == b) return a + T(0.693147180559945309417232121458176568);
  const T d = a - b;
  return d > 0 ? a + log1p(exp(-d)) : (d <= 0 ? b + log1p(exp(d)) : d);
})";
    case Helper::shifts:
      return R"(// Shifts by a negative count or by the width or more are defined, as in NumPy.
template <class T> __device__ __forceinline__ T fz_shl(T a, T b) { return (b < 0 || b >= (T)(8 * sizeof(T))) ? T(0) : T(a << b); }
template <class T> __device__ __forceinline__ T fz_shr(T a, T b) { return (b < 0 || b >= (T)(8 * sizeof(T))) ? (a < 0 ? T(-1) : T(0)) : T(a >> b); })";
    case Helper::tgamma:
      return R"(// NaN at every pole (0 excepted: +-inf, by sign): CUDA's tgamma missed the poles at large negative
// integers (6.5e-296 for -2^63).
__device__ __forceinline__ float fz_tgamma(float x) { return (x < 0.f && x == floorf(x)) ? __int_as_float(0x7fc00000) : tgammaf(x); }
__device__ __forceinline__ double fz_tgamma(double x) { return (x < 0.0 && x == floor(x)) ? __longlong_as_double(0x7ff8000000000000ll) : tgamma(x); })";
    case Helper::log1p_fast:
      return R"(// log1p under fast math: CUDA's log1pf has no approximate form, and it is most of a softplus's work.
// Below 2^-5 in magnitude, four terms of the series (relative error under x^4 / 5 < 2^-22); above, the fast
// log of u = 1 + x, corrected for the rounding of 1 + x by x / (u - 1) (exact beyond 2^24, where u - 1 is x).
__device__ __forceinline__ float fz_log1p_fast(float x) {
  if (fabsf(x) < 0.03125f) return x * (1.f - x * (0.5f - x * (0.333333343f - x * 0.25f)));
  const float u = 1.f + x;
  return x > 16777216.f ? __logf(u) : __logf(u) * (x / (u - 1.f));
})";
    case Helper::gelu:
      return R"(// GELU through erf, and its tanh approximation; each step rounded on its own, as fused code is.
__device__ __forceinline__ float fz_gelu(float x) {
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.f, erff(__fmul_rn(x, 0.707106781186547524f))));
}
__device__ __forceinline__ double fz_gelu(double x) {
  return __dmul_rn(__dmul_rn(0.5, x), __dadd_rn(1.0, erf(__dmul_rn(x, 0.707106781186547524))));
}
__device__ __forceinline__ float fz_gelu_tanh(float x) {
  const float cube = __fmul_rn(__fmul_rn(0.044715f, x), __fmul_rn(x, x));
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.f, tanhf(__fmul_rn(0.797884560802865355f, __fadd_rn(x, cube)))));
}
__device__ __forceinline__ double fz_gelu_tanh(double x) {
  const double cube = __dmul_rn(__dmul_rn(0.044715, x), __dmul_rn(x, x));
  return __dmul_rn(__dmul_rn(0.5, x), __dadd_rn(1.0, tanh(__dmul_rn(0.797884560802865355, __dadd_rn(x, cube)))));
})";
    case Helper::leading:
      return R"(// Where element i lies along a joined axis, as a flat offset: i modulo the axis's period (its extent times
// the extents after it), which the kernel compares with each piece's end times those. No division when one
// period spans the result (joins along the first axis); a 32-bit one where both fit (a 64-bit one is a long
// software routine). Computed once per element for all of a join's tests.
__device__ __forceinline__ long long fz_position(long long i, long long period) {
  if (i < period) return i;
  if ((unsigned long long)(i | period) <= 0xffffffffull) return (long long)((unsigned)i % (unsigned)period);
  return i % period;
})";
    case Helper::take_index:
      return R"(// fz::take's index modes: a negative index counts from the end; one outside [-n, n) wraps around, is
// clamped (negative ones to 0, as NumPy's clip), or is recorded for the launcher to report (the first one:
// fault[0] set once, then the index and the extent) and becomes -1: nothing is read or added through it.
__device__ __forceinline__ long long fz_index_wrap(long long i, long long n) { const long long r = i % n; return r < 0 ? r + n : r; }
__device__ __forceinline__ long long fz_index_clip(long long i, long long n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }
__device__ __forceinline__ long long fz_index_raise(long long i, long long n, unsigned long long* fault) {
  if (i >= -n && i < n) return i < 0 ? i + n : i;
  if (atomicCAS(fault, 0ull, 1ull) == 0ull) { fault[1] = (unsigned long long)i; fault[2] = (unsigned long long)n; }
  return -1;
})";
    case Helper::scatter_add:
      return R"(// Adds v to *p atomically (a lane each: combining a warp's lanes on one element first with
// __match_any_sync cost more than it saved on uniform indices, 1160 against 890 us for 2^26 adds on an H100).
// 16-bit floats add through a 16-bit compare-and-swap (sm_70 and later): one on the 32-bit word around
// the element would read past the end of an array of odd length.
__device__ __forceinline__ int fz_scatter_add(float* p, float v) { atomicAdd(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_add(double* p, double v) { atomicAdd(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_add(int* p, int v) { atomicAdd(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_add(unsigned* p, unsigned v) { atomicAdd(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_add(unsigned long long* p, unsigned long long v) { atomicAdd(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_add(long long* p, long long v) { atomicAdd((unsigned long long*)p, (unsigned long long)v); return 0; }
template <float (*To)(unsigned short), unsigned short (*From)(float)>
__device__ __forceinline__ int fz_scatter_add_16(unsigned short* p, float v) {
  unsigned short old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, From(To(assumed) + v));
  } while (assumed != old);
  return 0;
})";
    case Helper::scatter_extreme:
      return R"(// Keeps the larger (smaller) of *p and v, atomically: NaN wins, as in fz::maximum; of equal values (0 and
// -0) *p stays. Integers have atomicMax/atomicMin; floats compare-and-swap their bits while v still wins.
__device__ __forceinline__ int fz_scatter_max(int* p, int v) { atomicMax(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_max(unsigned* p, unsigned v) { atomicMax(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_max(long long* p, long long v) { atomicMax(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_max(unsigned long long* p, unsigned long long v) { atomicMax(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_min(int* p, int v) { atomicMin(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_min(unsigned* p, unsigned v) { atomicMin(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_min(long long* p, long long v) { atomicMin(p, v); return 0; }
__device__ __forceinline__ int fz_scatter_min(unsigned long long* p, unsigned long long v) { atomicMin(p, v); return 0; }
template <bool Max, class T> __device__ __forceinline__ bool fz_scatter_wins(T v, T old) {
  return old == old && (v != v || (Max ? v > old : v < old));
}
template <bool Max, class T, class Bits> __device__ __forceinline__ int fz_scatter_extreme(T* p, T v) {
  Bits old = *(volatile Bits*)p, want;
  memcpy(&want, &v, sizeof v);
  for (;;) {
    T seen;
    memcpy(&seen, &old, sizeof old);
    if (!fz_scatter_wins<Max>(v, seen)) return 0;
    const Bits now = atomicCAS((Bits*)p, old, want);
    if (now == old) return 0;
    old = now;
  }
}
__device__ __forceinline__ int fz_scatter_max(float* p, float v) { return fz_scatter_extreme<true, float, unsigned>(p, v); }
__device__ __forceinline__ int fz_scatter_max(double* p, double v) { return fz_scatter_extreme<true, double, unsigned long long>(p, v); }
__device__ __forceinline__ int fz_scatter_min(float* p, float v) { return fz_scatter_extreme<false, float, unsigned>(p, v); }
__device__ __forceinline__ int fz_scatter_min(double* p, double v) { return fz_scatter_extreme<false, double, unsigned long long>(p, v); }
template <float (*To)(unsigned short), unsigned short (*From)(float), bool Max>
__device__ __forceinline__ int fz_scatter_extreme_16(unsigned short* p, float v) {
  unsigned short old = *(volatile unsigned short*)p;
  while (fz_scatter_wins<Max>(v, To(old))) {
    const unsigned short now = atomicCAS(p, old, From(v));
    if (now == old) break;
    old = now;
  }
  return 0;
})";
    case Helper::scatter_exact: return exact_sum_source();
    case Helper::abs_int:
      return R"(// abs of a signed integer, wrapping as NumPy's does (abs(INT_MIN) is INT_MIN). Spelled as a select or as
// PTX's abs.s32, ptxas took the result for non-negative and folded a later `(double)abs(x) < 0` to false:
// floor_divide(-3.0, abs(INT_MIN)) gave -1 (fuzz case 29000980, H100, CUDA 13.0). A predicated negation it does not.
__device__ __forceinline__ int fz_abs_int(int x) {
  int r;
  asm volatile("{ .reg .pred p; setp.lt.s32 p, %1, 0; @p sub.s32 %0, 0, %1; @!p mov.b32 %0, %1; }" : "=r"(r) : "r"(x));
  return r;
}
__device__ __forceinline__ long long fz_abs_int(long long x) {
  long long r;
  asm volatile("{ .reg .pred p; setp.lt.s64 p, %1, 0; @p sub.s64 %0, 0, %1; @!p mov.b64 %0, %1; }" : "=l"(r) : "l"(x));
  return r;
})";
    case Helper::sign:
      return R"(// -1, 0 or 1; NaN stays NaN.
template <class T> __device__ __forceinline__ T fz_sign(T a) { return a > 0 ? T(1) : (a < 0 ? T(-1) : a); })";
  }
  return "";
}

std::string scatter_identity(ir::Op op, DType d) {
  using ir::Op;
  switch (op) {
    case Op::scatter_add: return "0";
    case Op::scatter_max: return dtype_info(d).lowest;
    case Op::scatter_min: return dtype_info(d).highest;
    default: throw Error("internal: not a scatter");
  }
}

std::string scatter_function(ir::Op op) { return std::string("fz_") + ir::op_info(op).name; }

bool checks_indices(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::take_index && n.slot == static_cast<std::uint32_t>(ir::IndexMode::raise)) return true;
  return false;
}

bool is_heavy_math(ir::Op op) { return ir::op_info(op).cost == ir::Cost::heavy; }

std::string outlined_source(const std::string& f, bool binary) {
  if (binary)
    return fmt::format("template <class T> __device__ __noinline__ T fz_outlined_{0}(T a, T b) {{ return {0}(a, b); }}",
                       f);
  return fmt::format("template <class T> __device__ __noinline__ T fz_outlined_{0}(T a) {{ return {0}(a); }}", f);
}

std::string spell(const ir::Node& n, DType d, const std::string& a, const std::string& b, const std::string& c,
                  SpellContext& ctx) {
  std::set<Helper>& needs = ctx.helpers;
  using ir::Op;
  const bool fl = is_floating(d);
  const bool is_bool = d == DType::bool_;
  const std::string t(compute_type(n.dtype));
  // C++ promotes integers narrower than int before arithmetic; casting back gives the dtype's wrap-around.
  const bool narrow = !is_floating(n.dtype) && itemsize(n.dtype) < 4;
  auto wrap = [&](const std::string& e) { return narrow ? fmt::format("({})({})", t, e) : e; };
  // Signed overflow is undefined in C++ and NVRTC optimizes on it (sign(-x) became -sign(x) for
  // INT_MIN); int16 * int16 overflows the int it is promoted to. NumPy wraps: integers add, subtract,
  // multiply and negate in their unsigned type, and the cast back gives the wrap-around.
  const bool integer = !fl && !is_bool;
  const std::string u = itemsize(n.dtype) == 8 ? "unsigned long long" : "unsigned";
  // Floating +, - and * are rounded one by one, as NumPy rounds them: ptxas would otherwise fuse some
  // products into the next add (an fma) and not others, by where its schedule puts them, so one
  // expression gave different bits in different lanes of one kernel, and in a kernel of a region and
  // in its statement's own (fusion-fuzz --regions, case 11000386). Division, sqrt and the math
  // functions are correctly rounded or fixed code already.
  auto rn = [&](const char* f32, const char* f64, const std::string& x, const std::string& y) {
    return fmt::format("{}({}, {})", n.dtype == DType::float64 ? f64 : f32, x, y);
  };
  auto arith = [&](const std::string& x, const char* op, const std::string& y) {
    if (fl && op[0] == '+') return rn("__fadd_rn", "__dadd_rn", x, y);
    if (fl && op[0] == '-') return rn("__fsub_rn", "__dsub_rn", x, y);
    if (fl && op[0] == '*') return rn("__fmul_rn", "__dmul_rn", x, y);
    if (!integer) return fmt::format("{} {} {}", x, op, y);
    return fmt::format("({})(({}){} {} ({}){})", t, u, x, op, u, y);
  };
  // An ordered comparison of floats is false when either side is NaN. The CUDA 13.0 compiler (sm_90) folds
  // one whose operand it believes non-negative against a constant: `exp2f(x) >= 0.f` and `fabsf(x) >= 0.f`
  // became true for a NaN x (fusion-fuzz seed 16, case 16000780). With isnan() tests in front the fold
  // leaves them and the result is right (`x == x` tests were merged into the compare and folded with it;
  // measured on an H100 with nvcc 13.0, tests/test_fuzz_gpu.cpp keeps the case).
  auto ordered = [&](const std::string& x, const char* op, const std::string& y) {
    if (!fl) return fmt::format("({} {} {})", x, op, y);
    return fmt::format("(!isnan({0}) && !isnan({1}) && {0} {2} {1})", x, y, op);
  };
  // Costly math goes through a __noinline__ wrapper when the kernel holds many such calls.
  const bool outline = ctx.outline_heavy_math && is_heavy_math(n.op);
  auto call1 = [&](const char* f) {
    if (outline) ctx.outlined.insert(std::string("1") + f);
    return outline ? fmt::format("fz_outlined_{}({})", f, a) : fmt::format("{}({})", f, a);
  };
  auto call2 = [&](const char* f) {
    if (outline) ctx.outlined.insert(std::string("2") + f);
    return outline ? fmt::format("fz_outlined_{}({}, {})", f, a, b) : fmt::format("{}({}, {})", f, a, b);
  };
  auto helper2 = [&](Helper h, const char* f) {
    needs.insert(h);
    return fmt::format("{}<{}>({}, {})", f, compute_type(d), a, b);
  };
  if (fl && n.op == Op::tgamma) {
    needs.insert(Helper::tgamma);
    return call1("fz_tgamma");
  }
  if (fl && (n.op == Op::gelu || n.op == Op::gelu_tanh)) {
    needs.insert(Helper::gelu);
    return call1(n.op == Op::gelu ? "fz_gelu" : "fz_gelu_tanh");
  }
  if (fl && n.op == Op::log1p && ctx.fast_math && n.dtype != DType::float64) {
    needs.insert(Helper::log1p_fast);
    return fmt::format("fz_log1p_fast({})", a);
  }
  // Ops a CUDA math function computes on floating operands are spelled from the op table.
  const ir::OpInfo& info = ir::op_info(n.op);
  if (fl && *info.math) return info.arity == ir::Arity::unary ? call1(info.math) : call2(info.math);
  switch (n.op) {
    case Op::cast: {
      if (n.dtype == DType::bool_) return fmt::format("({} != 0)", a);
      if (is_16bit_float(n.dtype)) {  // rounds to the 16-bit grid, stays a float
        need_conversions(ctx, n.dtype);
        return load_conversion(n.dtype, store_conversion(d, n.dtype, a));
      }
      return fmt::format("({})({})", t, a);
    }
    case Op::neg: return integer ? arith("0", "-", a) : "-" + a;
    case Op::abs:
      if (!is_signed_int(d)) return a;
      needs.insert(Helper::abs_int);  // (8- and 16-bit operands go through int and wrap back where stored)
      return itemsize(d) == 8 ? fmt::format("fz_abs_int({})", a) : fmt::format("({})fz_abs_int((int){})", t, a);
    case Op::sign:
      needs.insert(Helper::sign);
      return fmt::format("fz_sign<{}>({})", compute_type(d), a);
    case Op::square: return is_bool ? a : arith(a, "*", a);
    case Op::reciprocal:
      return fl ? fmt::format("{}(1) / {}", t, a) : wrap(fmt::format("{0} == 0 ? 0 : 1 / {0}", a));
    case Op::floor: case Op::ceil: case Op::trunc: case Op::rint: case Op::round: return a;  // integers
    case Op::bit_not: return is_bool ? "!" + a : wrap("~" + a);
    case Op::logical_not: return "!" + a;
    case Op::isnan: return fl ? fmt::format("({0} != {0})", a) : "false";
    case Op::isinf: return fl ? fmt::format("(bool)isinf({})", a) : "false";
    case Op::isfinite: return fl ? fmt::format("(bool)isfinite({})", a) : "true";
    case Op::signbit:
      return fl ? fmt::format("(bool)signbit({})", a) : (is_signed_int(d) ? "(" + a + " < 0)" : "false");
    case Op::add: return is_bool ? fmt::format("({} || {})", a, b) : arith(a, "+", b);
    case Op::sub: return arith(a, "-", b);
    case Op::mul: return is_bool ? fmt::format("({} && {})", a, b) : arith(a, "*", b);
    case Op::div: return fmt::format("{} / {}", a, b);
    case Op::floor_divide:
      return helper2(Helper::floor_divide, fl ? "fz_floor_divide_float" : "fz_floor_divide_int");
    case Op::remainder: return helper2(Helper::remainder, fl ? "fz_remainder_float" : "fz_remainder_int");
    case Op::fmod: return helper2(Helper::fmod_int, "fz_fmod_int");
    case Op::pow: return helper2(Helper::pow_int, "fz_pow_int");
    case Op::maximum: return fl ? helper2(Helper::maximum, "fz_maximum") : fmt::format("({0} > {1} ? {0} : {1})", a, b);
    case Op::minimum: return fl ? helper2(Helper::minimum, "fz_minimum") : fmt::format("({0} < {1} ? {0} : {1})", a, b);
    case Op::fmax: return fmt::format("({0} > {1} ? {0} : {1})", a, b);
    case Op::fmin: return fmt::format("({0} < {1} ? {0} : {1})", a, b);
    case Op::bit_and: return wrap(fmt::format("{} & {}", a, b));
    case Op::bit_or: return wrap(fmt::format("{} | {}", a, b));
    case Op::bit_xor: return wrap(fmt::format("{} ^ {}", a, b));
    case Op::shl: return helper2(Helper::shifts, "fz_shl");
    case Op::shr: return helper2(Helper::shifts, "fz_shr");
    case Op::logaddexp: return helper2(Helper::logaddexp, "fz_logaddexp");
    case Op::eq: return fmt::format("({} == {})", a, b);
    case Op::ne: return fmt::format("({} != {})", a, b);
    case Op::lt: return ordered(a, "<", b);
    case Op::le: return ordered(a, "<=", b);
    case Op::gt: return ordered(a, ">", b);
    case Op::ge: return ordered(a, ">=", b);
    case Op::logical_and: return fmt::format("({} && {})", a, b);
    case Op::logical_or: return fmt::format("({} || {})", a, b);
    case Op::where: return fmt::format("({} ? {} : {})", a, b, c);
    // (an emitter writes a concatenate as branches, each computing its piece: write_values)
    case Op::leading:  // (a and b as the launcher resolves them; c, the join's own extent, is for the launcher
                       // alone; `<a>_at`, fz_position of the element's flat index, the emitter writes first)
      needs.insert(Helper::leading);
      return fmt::format("({}_at < {})", a, b);
    case Op::take_index: {
      needs.insert(Helper::take_index);
      switch (static_cast<ir::IndexMode>(n.slot)) {
        case ir::IndexMode::wrap: return fmt::format("fz_index_wrap({}, {})", a, b);
        case ir::IndexMode::clip: return fmt::format("fz_index_clip({}, {})", a, b);
        case ir::IndexMode::raise: break;
      }
      return fmt::format("fz_index_raise({}, {}, {})", a, b, kIndexFault);
    }
    case Op::scatter_add:
    case Op::scatter_max:
    case Op::scatter_min: {
      const bool add = n.op == Op::scatter_add;
      if (add && ctx.exact_sums != ExactSums::none && is_floating(n.dtype)) {  // (16-bit values add as float)
        needs.insert(Helper::scatter_exact);
        const std::string write = fmt::format("fz_scatter_exact<{}>({}, {}, ({}){}, fz_plane)",
                                              ctx.exact_sums == ExactSums::shared ? "fz_in_shared" : "fz_in_global", kScatterTarget, a,
                                              n.dtype == DType::float64 ? "double" : "float", b);
        return c.empty() ? write : fmt::format("({} < 0 ? 0 : {})", c, write);
      }
      needs.insert(add ? Helper::scatter_add : Helper::scatter_extreme);
      const std::string at = fmt::format("{} + {}", kScatterTarget, a);
      std::string write = fmt::format("{}({}, ({}){})", scatter_function(n.op), at, compute_type(n.dtype), b);
      if (is_16bit_float(n.dtype)) {
        need_conversions(ctx, n.dtype);
        const DTypeInfo& info = dtype_info(n.dtype);
        write = add ? fmt::format("fz_scatter_add_16<{}, {}>({}, {})", info.to_float, info.from_float, at, b)
                    : fmt::format("fz_scatter_extreme_16<{}, {}, {}>({}, {})", info.to_float, info.from_float,
                                  n.op == Op::scatter_max, at, b);
      }
      return c.empty() ? write : fmt::format("({} < 0 ? 0 : {})", c, write);  // a bad checked index writes nothing
    }
    // `b` names the source's pointer at this element's position in it (emitters pass gathered inputs so)
    case Op::gather:  // (a bad checked index reads nothing: 0)
      need_conversions(ctx, n.dtype);
      return c.empty() ? load_conversion(n.dtype, fmt::format("{}[{}]", b, a))
                       : fmt::format("({} < 0 ? ({})0 : {})", c, compute_type(n.dtype),
                                     load_conversion(n.dtype, fmt::format("{}[{}]", b, a)));
    case Op::call: {
      ctx.functions.insert(n.slot);
      std::string args = a;
      for (const std::string* x : {&b, &c})
        if (!x->empty()) args += ", " + *x;
      return fmt::format("{}({})", device_function(n.slot).name, args);
    }
    // Leaves are named by the emitters; reductions are spelled by the reduction emitter, never as one
    // expression; floating math calls were spelled above.
    default: break;
  }
  throw Error(fmt::format("internal: no CUDA spelling for op {}", ir::op_name(n.op)));
}

}  // namespace codegen
}  // namespace fusion
