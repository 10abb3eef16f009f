// SPDX-License-Identifier: Apache-2.0
// The CUDA text of the device helpers spelled ops call (fz_floor_divide_float, fz_abs_int, ...): each written
// once into a kernel that needs it (spell.cpp records which).
#include "codegen/exact_sum.hpp"
#include "codegen/spell.hpp"

namespace fusion {
namespace codegen {

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
      return R"(// log1p under fast math and of 16-bit results: CUDA's log1pf has no approximate form, and it is most of a
// softplus's work. Below 2^-5 in magnitude, four terms of the series (relative error under x^4 / 5 < 2^-22); above, the fast
// log of u = 1 + x, corrected for the rounding of 1 + x by x / (u - 1) (exact beyond 2^24, where u - 1 is x).
__device__ __forceinline__ float fz_log1p_fast(float x) {
  if (fabsf(x) < 0.03125f) return x * (1.f - x * (0.5f - x * (0.333333343f - x * 0.25f)));
  const float u = 1.f + x;
  return x > 16777216.f ? __logf(u) : __logf(u) * __fdividef(x, u - 1.f);  // (|u - 1| in [2^-5, 2^24])
})";
    // Math whose result is a half or a bfloat16, computed in float: the hardware's approximations over float's whole
    // range, subnormals kept (not fast math's flushing forms). Their error, at most about 1e-5 relative, is under
    // 1/200 of a half's rounding on store and 1/1000 of a bfloat16's (spell.cpp says where they are used).
    case Helper::exp16:
      return R"(// exp of a 16-bit result: ex2.approx over float's whole range, subnormals kept (error under 1e-5 relative).
__device__ __forceinline__ float fz_exp16(float x) { float y; asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(__fmul_rn(x, 1.44269504f))); return y; })";
    case Helper::div16:
      return R"(// a division of a 16-bit result: a times the approximate reciprocal (1 ulp) of b scaled into the normal range
// (2 float ulp in all, as div.full), in two parts so that a division by a row's sum computes b's part once a row.
__device__ __forceinline__ float fz_div16(float a, float b) {
  const float s = fabsf(b) > 0x1p126f ? 0.25f : (fabsf(b) < 0x1p-126f ? 0x1p24f : 1.f);  // (NaN: 1)
  float r; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b * s));
  return __fmul_rn(a * s, r);
})";
    case Helper::sqrt16:
      return R"(// sqrt of a 16-bit result: sqrt.approx, subnormals kept.
__device__ __forceinline__ float fz_sqrt16(float x) { float y; asm("sqrt.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; })";
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
// software routine). Computed once per element for all of a join's tests, or, in a rows kernel, once per row
// for an axis whose period is a whole number of rows (the element's position is then the row's plus its column).
__device__ __forceinline__ long long fz_position(long long i, long long period) {
  if (i < period) return i;
  if ((unsigned long long)(i | period) <= 0xffffffffull) return (long long)((unsigned)i % (unsigned)period);
  return i % period;
}
// Whether a position lies before a bound. In a kernel of 32-bit indices the positions are 32-bit, and so are the
// bounds (the launcher's are at most the element count).
__device__ __forceinline__ bool fz_before(long long at, long long bound) { return at < bound; }
__device__ __forceinline__ bool fz_before(int at, long long bound) { return at < (int)bound; }
// A rows kernel's form of a test (codegen/join_tests.hpp): the row lies at `row_at` along the axis, a whole number
// of rows into its period, so its element at column c lies before `bound` where c is below this limit.
__device__ __forceinline__ long long fz_row_limit(long long row_at, long long bound, long long cols) {
  const long long r = bound - row_at;
  return r < 0 ? 0 : (r < cols ? r : cols);
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
    case Helper::neg_int:
      return R"(// Integer negation, wrapping. Spelled 0 - x (PTX neg.s32), ptxas of CUDA 13.0 for sm_90 merged two maxima
// (or minima) into one three-way VIMNMX3 and dropped the negation when it was the inner one's second operand:
// max(max(-20, -1), 7) gave 20, and an int32 max of -x over 16-byte vectors lost every other negation (fuzz case
// 2711012653, H100; tests/repro/neg_max3_drop.cu). Written as ~x + 1 it keeps it (LOP3, then a fused add-max).
__device__ __forceinline__ int fz_neg_int(int x) {
  int r;
  asm("{ .reg .b32 t; not.b32 t, %1; add.s32 %0, t, 1; }" : "=r"(r) : "r"(x));
  return r;
}
// (a 64-bit negation cut to 32 bits is a 32-bit one to ptxas, dropped the same way)
__device__ __forceinline__ long long fz_neg_int(long long x) {
  long long r;
  asm("{ .reg .b64 t; not.b64 t, %1; add.s64 %0, t, 1; }" : "=l"(r) : "l"(x));
  return r;
})";
    case Helper::wrap_narrow:
      return R"(// 8- and 16-bit integer sums, differences, products and negations wrap to their width through PTX (the low
// bits, sign- or zero-extended). Spelled as a cast, NVVM rewrote (short)(x + y) != 0 as y != -x in 16 bits (PTX
// neg.s16, setp.ne.s16), which ptxas of CUDA 13.0 for sm_90 got wrong for x = y = -32768: all((!x ^ x) + x) was
// true over int16 rows holding it (fuzz case 2731011775, H100; tests/repro/narrow_sum_compare.cu). NVVM cannot
// see through the asm, so it leaves the wrap where it is.
template <int Bits> __device__ __forceinline__ int fz_wrap_s(unsigned v) {  // the low Bits, sign-extended
  int r;
  asm("{ .reg .b32 t; shl.b32 t, %1, %2; shr.s32 %0, t, %2; }" : "=r"(r) : "r"(v), "n"(32 - Bits));
  return r;
}
template <int Bits> __device__ __forceinline__ unsigned fz_wrap_u(unsigned v) {  // the low Bits
  unsigned r;
  asm("and.b32 %0, %1, %2;" : "=r"(r) : "r"(v), "n"((1 << Bits) - 1));
  return r;
})";
    case Helper::sign:
      return R"(// -1, 0 or 1; NaN stays NaN.
template <class T> __device__ __forceinline__ T fz_sign(T a) { return a > 0 ? T(1) : (a < 0 ? T(-1) : a); })";
  }
  return "";
}

}  // namespace codegen
}  // namespace fusion
