// SPDX-License-Identifier: Apache-2.0
#include "codegen/kernel_frame.hpp"
#include "codegen/exact_sum.hpp"

#include <fmt/format.h>

#include "codegen/launch_shape.hpp"
#include "codegen/signature.hpp"
#include "codegen/source_writer.hpp"
#include "codegen/spell.hpp"
#include "common/hash.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {

int exact_sum_words(DType d) {
  if (!is_floating(d)) return 0;
  return d == DType::float64 ? 66 + 1 : 9 + 1;
}

const char* exact_sum_source() {
  return R"(// Exact sums (fz::Deterministic): an element's words are FzExact<T>::digits 32-bit digits, digit k of weight
// 2^(32k + low) with 2^low the smallest subnormal, each summed in a 64-bit word (room for 2^31 adds), and a
// word of flags (1: +inf, 2: -inf, 4: NaN). A finite value is a mantissa m at bit `pos` above 2^low: it adds
// to at most three words, as integers, so the sum is exact and the same whatever order the adds run in.
template <class T> struct FzExact;
template <> struct FzExact<float> { static constexpr int digits = 9, low = -149; };
template <> struct FzExact<double> { static constexpr int digits = 66, low = -1074; };
__device__ __forceinline__ unsigned fz_exact_split(float v, unsigned long long& m, int& pos, bool& neg) {
  const unsigned b = __float_as_uint(v), e = (b >> 23) & 0xffu;
  neg = (b >> 31) != 0;
  if (e == 0xffu) return (b & 0x7fffffu) ? 4u : (neg ? 2u : 1u);
  m = b & 0x7fffffu;
  pos = e ? (int)e - 1 : 0;
  if (e) m |= 0x800000u;
  return 0u;
}
__device__ __forceinline__ unsigned fz_exact_split(double v, unsigned long long& m, int& pos, bool& neg) {
  const unsigned long long b = (unsigned long long)__double_as_longlong(v);
  const unsigned e = (unsigned)(b >> 52) & 0x7ffu;
  neg = (b >> 63) != 0;
  if (e == 0x7ffu) return (b & 0xfffffffffffffull) ? 4u : (neg ? 2u : 1u);
  m = b & 0xfffffffffffffull;
  pos = e ? (int)e - 1 : 0;
  if (e) m |= 0x10000000000000ull;
  return 0u;
}
// Where the words are: in registers (plain adds), global memory (64-bit atomics) or a block's shared memory,
// where a 64-bit atomic add is a compare-and-swap loop on Hopper: there two 32-bit ones, the low half's carry
// added into the high half (the sum stays exact modulo 2^64, as a 64-bit add).
enum FzWords { fz_in_registers, fz_in_global, fz_in_shared };
template <int Where> __device__ __forceinline__ void fz_exact_word(long long* w, unsigned long long digit, bool neg) {
  if (digit == 0) return;
  const unsigned long long x = neg ? 0ull - digit : digit;
  if (Where == fz_in_global) {
    atomicAdd((unsigned long long*)w, x);
  } else if (Where == fz_in_shared) {
    unsigned* const half = (unsigned*)w;
    const unsigned lo = (unsigned)x, old = atomicAdd(half, lo);
    const unsigned hi = (unsigned)(x >> 32) + ((unsigned)(old + lo) < old ? 1u : 0u);
    if (hi) atomicAdd(half + 1, hi);
  } else {
    *w = (long long)((unsigned long long)*w + x);
  }
}
// Word k of the element at w is w[k * plane]: in memory each word has a plane of its own, so that the planes
// no value reaches (most of them: a bin's values span a few digits) stay out of the caches.
template <int Where, class T> __device__ __forceinline__ void fz_exact_add(long long* w, long long plane, T v) {
  unsigned long long m = 0;
  int pos = 0;
  bool neg = false;
  if (const unsigned flag = fz_exact_split(v, m, pos, neg)) {
    long long* const flags = w + FzExact<T>::digits * plane;
    if (Where == fz_in_registers) *flags |= flag;
    else atomicOr((unsigned*)flags, flag);  // (the low half holds them)
    return;
  }
  const int k = pos >> 5, s = pos & 31;
  const unsigned long long rest = m >> (32 - s);  // the digits above digit k (s = 0: m >> 32)
  fz_exact_word<Where>(w + k * plane, (m << s) & 0xffffffffull, neg);
  fz_exact_word<Where>(w + (k + 1) * plane, rest & 0xffffffffull, neg);
  fz_exact_word<Where>(w + (k + 2) * plane, rest >> 32, neg);  // (float: always 0; double: at most the top digit)
}
// fz_expr's scatter: element `at` of the words from `element0` on.
template <int Where, class T> __device__ __forceinline__ int fz_scatter_exact(long long* element0, long long at, T v, long long plane) {
  fz_exact_add<Where>(element0 + at, plane, v);
  return 0;
}
// Every word but the top one into [0, 2^32), the carries moved up.
template <int D> __device__ __forceinline__ void fz_exact_carry(long long* w) {
  for (int k = 0; k + 1 < D; ++k) {
    const long long c = w[k] >> 32;
    w[k] = (long long)((unsigned long long)w[k] & 0xffffffffull);
    w[k + 1] += c;
  }
}
// m * 2^e rounded to T (m to nearest first: its sticky low bit makes that the only rounding, subnormals aside).
__device__ __forceinline__ float fz_exact_scale(unsigned long long m, int e, float) { return ldexpf(__ull2float_rn(m), e); }
__device__ __forceinline__ double fz_exact_scale(unsigned long long m, int e, double) { return ldexp(__ull2double_rn(m), e); }
// The sum in w, rounded to nearest (its words normalized in place).
template <class T> __device__ T fz_exact_value(long long* w) {
  constexpr int D = FzExact<T>::digits;
  const T inf = (T)__longlong_as_double(0x7ff0000000000000ll);
  if (const unsigned long long f = (unsigned long long)w[D]) return (f & 4) || (f & 3) == 3 ? inf - inf : (f & 1 ? inf : -inf);
  fz_exact_carry<D>(w);
  const bool neg = w[D - 1] < 0;
  if (neg) {
    for (int k = 0; k < D; ++k) w[k] = -w[k];
    fz_exact_carry<D>(w);
  }
  int h = D - 1;
  while (h >= 0 && w[h] == 0) --h;
  if (h < 0) return (T)0;
  if (w[h] >> 32) return neg ? -inf : inf;  // past the largest finite value
  // The top 64 bits, the leading one first, and a sticky bit for every one below them.
  const unsigned long long next = h >= 1 ? (unsigned long long)w[h - 1] : 0, below = h >= 2 ? (unsigned long long)w[h - 2] : 0;
  const int lz = __clzll((long long)(((unsigned long long)w[h] << 32) | next));
  unsigned long long m = (((unsigned long long)w[h] << 32) | next) << lz;
  if (lz) m |= below >> (32 - lz);
  bool sticky = ((below << lz) & 0xffffffffull) != 0;
  for (int k = 0; k + 2 < h; ++k) sticky = sticky || w[k] != 0;
  const int e = 32 * (h - 1) + FzExact<T>::low - lz;
  const T r = fz_exact_scale(m | (sticky ? 1ull : 0ull), e, (T)0);
  return neg ? -r : r;
})";
}

GeneratedKernel exact_sum_finish_kernel(DType d) {
  const int words = exact_sum_words(d);
  if (words == 0) throw Error("internal: exact sums are for floating dtypes");
  const char* acc = d == DType::float64 ? "double" : "float";
  GeneratedKernel k;
  SpellContext ctx;
  need_conversions(ctx, d);
  SourceWriter w;
  for (DType c : ctx.conversions) w.line("{}", conversion_source(c)).blank();
  w.line("{}", exact_sum_source()).blank();
  k.signature.add(ArgSource::pointer, 0, fmt::format("{}* __restrict__ target", storage_type(d)));
  k.signature.add(ArgSource::pointer, 1, "const long long* __restrict__ words");
  k.signature.add(Count::n, "const long long n");
  StableHasher h;
  h.add(w.str());
  h.add(std::string(dtype_tag(d)));
  k.hash = h.digest();
  k.name = fmt::format("fz_exact_sum_{}_{}", dtype_tag(d), hex16(k.hash));
  {
    auto kernel = w.block("extern \"C\" __global__ void __launch_bounds__({}) {}({})", kBlockThreads, k.name,
                          k.signature.list());
    write_wait_for_previous_kernel(w);
    w.line("const long long step = (long long)gridDim.x * blockDim.x;");
    auto loop = w.block("for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += step)");
    w.line("long long w[{}];", words);
    w.line("bool any = false;");
    w.line("for (int k = 0; k < {}; ++k) any = (w[k] = words[p + k * n]) != 0 || any;", words);
    w.line("if (!any) continue;  // nothing added here (or not an element of the target's view)");
    w.line("fz_exact_add<fz_in_registers>(w, 1, ({}){});", acc, load_conversion(d, "target[p]"));
    w.line("target[p] = {};", store_conversion(is_16bit_float(d) ? DType::float32 : d, d,
                                                 fmt::format("fz_exact_value<{}>(w)", acc)));
  }
  k.source = w.str();
  return k;
}

}  // namespace fusion::codegen
