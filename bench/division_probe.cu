// SPDX-License-Identifier: Apache-2.0
// What a bfloat16 softmax over rows of 4,096 could gain from dividing by the row's sum through its reciprocal,
// still correctly rounded (H200, 2026-11-28: fusion 71-72% of the copy limit, issue-bound; the SASS of the generated
// kernel, 2026-11-29: about 33 instructions an element, 16 of them in the last pass, where each element's IEEE
// division is a MUFU.RCP, six FFMA, an FCHK and a branch around the slow path).
//
// The quotient x / s for a row-constant s: y = RN(1 / s) once per row, then per element q = RN(x * y),
// r = fma(-s, q, x) (exact), q' = RN(q + r * y) = fma(r, y, q). With y the correctly rounded reciprocal this is the
// correctly rounded quotient (Markstein's theorem) wherever nothing leaves the normal range: 400,000,000 random pairs
// with |x| in [2^-100, 2^100] and s in [2^-20, 2^20], all-ones significands drawn often, matched a double division
// rounded to float bit for bit on the development machine (2026-11-29; outside those ranges an overflowing quotient
// came out NaN and x near 2^-126 misrounded). So a row whose sum lies in [2^-20, 2^20] takes
//   q = x * y; if (|x| in [2^-100, 2^100]) q = fma(fma(-s, q, x), y, q); else if (x != 0) q = x / s;
// (x * y keeps a zero's sign; the correction would not) and any other row divides element by element.
//
// Four kernels compute the same softmax, structured as fusion's layer kernel (a block of 128 threads per row, the
// row kept in shared memory as bfloat16 and exp(x - max) beside it as float32, three passes, 16-byte vectors):
//   ieee       x / s per element (what fusion generates today);
//   hoisted    the reciprocal once per row and the guarded correction per element;
//   nan_max    hoisted, and the row maximum with PTX max.NaN.f32 (one FMNMX.NAN) instead of compare-and-select;
//   fast       __fdividef and __expf (fz::FastMath's kind: the bound from below, not a candidate for the default).
// First, on the GPU, the hoisted division against __fdiv_rn for 2^26 random pairs in the guarded range and 2^24 in
// the fallback's; then each kernel is checked bit for bit against `ieee` (fast: within 2 bfloat16 ulps) and timed
// (events around 10 calls, median of 9) beside a copy of the same bytes.
// Not part of the build (plain CUDA):  nvcc -arch=sm_90 -O3 bench/division_probe.cu -o /tmp/div && /tmp/div
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "probe_timing.cuh"

namespace {

constexpr int kRows = 16384, kCols = 4096, kThreads = 128, kVec = 8;

enum class Division { ieee, hoisted, fast };
enum class Maximum { select, nan };

__device__ __forceinline__ float bf16_to_float(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short float_to_bf16(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// The reciprocal a row's quotients use, or 0 where its sum lies outside [2^-20, 2^20] (then x / s per element).
__device__ __forceinline__ float row_reciprocal(float s) {
  return fabsf(s) >= 0x1p-20f && fabsf(s) <= 0x1p20f ? __frcp_rn(s) : 0.f;
}
__device__ __forceinline__ float divided(float x, float s, float y) {
  float q = x * y;
  const float ax = fabsf(x);
  if (ax >= 0x1p-100f && ax <= 0x1p100f) q = fmaf(fmaf(-s, q, x), y, q);
  else if (x != 0.f) q = x / s;  // (subnormal, huge, infinite or NaN x: the exact division)
  return q;
}

__device__ __forceinline__ float maximum(float a, float b, Maximum m) {
  if (m == Maximum::nan) {
    float d;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
  }
  return (a > b || a != a) ? a : b;  // fusion's combine: a NaN wins
}

template <Maximum M> __device__ float block_max(float a, float* scratch) {
  for (int d = 16; d > 0; d >>= 1) a = maximum(a, __shfl_down_sync(0xffffffffu, a, d), M);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = a;
  __syncthreads();
  a = threadIdx.x % 32 < kThreads / 32 ? scratch[threadIdx.x % 32] : -INFINITY;
  for (int d = 2; d > 0; d >>= 1) a = maximum(a, __shfl_down_sync(0xffffffffu, a, d), M);
  return __shfl_sync(0xffffffffu, a, 0);
}
__device__ float block_sum(float a, float* scratch) {
  for (int d = 16; d > 0; d >>= 1) a += __shfl_down_sync(0xffffffffu, a, d);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = a;
  __syncthreads();
  a = threadIdx.x % 32 < kThreads / 32 ? scratch[threadIdx.x % 32] : 0.f;
  for (int d = 2; d > 0; d >>= 1) a += __shfl_down_sync(0xffffffffu, a, d);
  return __shfl_sync(0xffffffffu, a, 0);
}

struct alignas(16) Bf8 { unsigned short v[8]; };
struct alignas(16) F8 { float v[8]; };

// The last pass: each kept exp(x - max) divided by the row's sum `s` (its reciprocal `y` where hoisted), written.
template <Division D>
__device__ __forceinline__ void write_row(const float* kept, unsigned short* out, float s, float y) {
#pragma unroll 4
  for (int j = threadIdx.x * kVec; j < kCols; j += kThreads * kVec) {
    const F8 k = *reinterpret_cast<const F8*>(kept + j);
    Bf8 o;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float q = D == Division::ieee ? k.v[e] / s : D == Division::fast ? __fdividef(k.v[e], s) : divided(k.v[e], s, y);
      o.v[e] = float_to_bf16(q);
    }
    *reinterpret_cast<Bf8*>(out + j) = o;
  }
}

template <Division D, Maximum M>
__global__ void __launch_bounds__(kThreads, 9) softmax(const unsigned short* __restrict__ in, unsigned short* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char cache[];
  __shared__ float scratch0[4], scratch1[4];
  unsigned short* const row_in = reinterpret_cast<unsigned short*>(cache);
  float* const kept = reinterpret_cast<float*>(cache + kCols * sizeof(unsigned short));
  const long long base = (long long)blockIdx.x * kCols;
  float m = -INFINITY;
#pragma unroll 4
  for (int j = threadIdx.x * kVec; j < kCols; j += kThreads * kVec) {
    const Bf8 v = *reinterpret_cast<const Bf8*>(in + base + j);
    *reinterpret_cast<Bf8*>(row_in + j) = v;
#pragma unroll
    for (int e = 0; e < kVec; ++e) m = maximum(m, bf16_to_float(v.v[e]), M);
  }
  m = block_max<M>(m, scratch0);
  float s = 0;
#pragma unroll 4
  for (int j = threadIdx.x * kVec; j < kCols; j += kThreads * kVec) {
    const Bf8 v = *reinterpret_cast<const Bf8*>(row_in + j);
    F8 k;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float t = bf16_to_float(v.v[e]) - m;
      k.v[e] = D == Division::fast ? __expf(t) : expf(t);
      s += k.v[e];
    }
    *reinterpret_cast<F8*>(kept + j) = k;
  }
  s = block_sum(s, scratch1);
  if (D != Division::hoisted) return write_row<D>(kept, out + base, s, 0.f);
  const float y = row_reciprocal(s);  // (a row whose sum is out of range divides element by element)
  if (y != 0.f) write_row<Division::hoisted>(kept, out + base, s, y);
  else write_row<Division::ieee>(kept, out + base, s, 0.f);
}

// The hoisted division against __fdiv_rn for `n` pairs (x from `xs`, s from `ss`, cycled): mismatches counted.
__global__ void check_division(const float* xs, const float* ss, long long n, unsigned long long* wrong) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float x = xs[i], s = ss[i % 4096];
    const float y = row_reciprocal(s);
    const float got = y != 0.f ? divided(x, s, y) : x / s, want = __fdiv_rn(x, s);
    if (__float_as_uint(got) != __float_as_uint(want) && !(got != got && want != want)) atomicAdd(wrong, 1ull);
  }
}

unsigned rng_state = 12345;
unsigned next() { return rng_state = rng_state * 1664525u + 1013904223u; }
float bits(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }

}  // namespace

int main() {
  probe_warm_up();  // (its run of 2026-11-29 was in the machine's first minute, before this)
  // 1. the hoisted division against the device's own correctly rounded one
  {
    const long long n = 1ll << 26;
    std::vector<float> xs(n), ss(4096);
    for (auto& s : ss) s = bits((127u - 20 + next() % 41) << 23 | (next() % 8 == 0 ? 0x7fffffu : next() & 0x7fffffu));
    for (long long i = 0; i < n; ++i) {
      const unsigned e = i < (1ll << 24) ? next() % 256 : 127u - 100 + next() % 201;  // the first 2^24: any exponent
      xs[i] = bits((next() & 0x80000000u) | e << 23 | (next() % 8 == 0 ? 0x7fffffu : next() & 0x7fffffu));
    }
    xs[0] = 0.f, xs[1] = -0.f, xs[2] = INFINITY, xs[3] = NAN;
    float *dx, *ds;
    unsigned long long* dw;
    PROBE_CHECK(cudaMalloc(&dx, n * 4));
    PROBE_CHECK(cudaMalloc(&ds, 4096 * 4));
    PROBE_CHECK(cudaMalloc(&dw, 8));
    PROBE_CHECK(cudaMemcpy(dx, xs.data(), n * 4, cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(ds, ss.data(), 4096 * 4, cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemset(dw, 0, 8));
    check_division<<<1024, 256>>>(dx, ds, n, dw);
    unsigned long long wrong = 0;
    PROBE_CHECK(cudaMemcpy(&wrong, dw, 8, cudaMemcpyDeviceToHost));
    std::printf("hoisted division against __fdiv_rn: %lld pairs, %llu differ\n", n, wrong);
    cudaFree(dx), cudaFree(ds), cudaFree(dw);
  }
  // 2. the softmax kernels, checked and timed
  const long long n = (long long)kRows * kCols;
  std::vector<unsigned short> h(n);
  for (auto& v : h) {  // values in about [-8, 8], as bfloat16
    const float f = (static_cast<float>(next() % 65536) / 65536.f - 0.5f) * 16.f;
    unsigned u;
    std::memcpy(&u, &f, 4);
    v = static_cast<unsigned short>(u >> 16);
  }
  unsigned short *in, *out, *ref;
  PROBE_CHECK(cudaMalloc(&in, n * 2));
  PROBE_CHECK(cudaMalloc(&out, n * 2));
  PROBE_CHECK(cudaMalloc(&ref, n * 2));
  PROBE_CHECK(cudaMemcpy(in, h.data(), n * 2, cudaMemcpyHostToDevice));
  const int shared = kCols * 2 + kCols * 4;
  const double bytes = 4.0 * n;  // read once, written once
  const float copy_ms = median_ms([&] { probe_copy<<<132 * 8, 256>>>(reinterpret_cast<const uint4*>(in), reinterpret_cast<uint4*>(out), n * 2 / 16); });
  const double limit = bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("copy of %.0f MB: %.1f us, %.0f GB/s\n", bytes / 1e6, copy_ms * 1e3, limit);
  std::vector<unsigned short> want(n), got(n);
  auto run = [&](const char* name, auto kernel, bool exact) {
    PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    PROBE_CHECK(cudaMemset(out, 0xff, n * 2));
    kernel<<<kRows, kThreads, shared>>>(in, out);
    PROBE_CHECK(cudaDeviceSynchronize());
    PROBE_CHECK(cudaMemcpy(got.data(), out, n * 2, cudaMemcpyDeviceToHost));
    long long differ = 0;
    for (long long i = 0; i < n; ++i)
      differ += exact ? got[i] != want[i] : std::abs(static_cast<int>(got[i]) - static_cast<int>(want[i])) > 2;
    const float ms = median_ms([&] { kernel<<<kRows, kThreads, shared>>>(in, out); });
    std::printf("%-8s %8.1f us  %6.1f%% of the copy limit  %lld elements %s\n", name, ms * 1e3,
                100.0 * bytes / (ms * 1e-3) / 1e9 / limit, differ, exact ? "differ from ieee" : "off by more than 2 ulps");
  };
  PROBE_CHECK(cudaFuncSetAttribute(softmax<Division::ieee, Maximum::select>, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
  softmax<Division::ieee, Maximum::select><<<kRows, kThreads, shared>>>(in, ref);
  PROBE_CHECK(cudaDeviceSynchronize());
  PROBE_CHECK(cudaMemcpy(want.data(), ref, n * 2, cudaMemcpyDeviceToHost));
  run("ieee", softmax<Division::ieee, Maximum::select>, true);
  run("hoisted", softmax<Division::hoisted, Maximum::select>, true);
  run("nan_max", softmax<Division::hoisted, Maximum::nan>, true);
  run("fast", softmax<Division::fast, Maximum::select>, false);
  return 0;
}
