// SPDX-License-Identifier: Apache-2.0
// What a 16-bit layer kernel could gain from holding its row in registers instead of shared memory (issue 35:
// bfloat16 RMSNorm over rows of 4,096 at 89-94% of the copy limit on the H200, latency and issue together).
// `rms_smem` is the kernel fusion generates for bf16(x * rsqrt(mean(x * x) + eps) * w), x bfloat16 16,384 x 4,096
// computed in float32 (fz::inspect at 82c6ab7): a block of 128 threads per row, the row kept in shared memory.
// `rms_regs<T, R>` holds it in registers instead: T threads a row, R 16-byte vectors of 8 each, every load issued
// before the first is used. Each is checked against `rms_smem` (bit for bit where the sums' order is the same: 128
// threads; else within one bfloat16 ulp) and timed (events around 10 calls, median of 9) beside a copy of the
// same bytes.
// Not part of the build (plain CUDA):  nvcc -arch=sm_90 -O3 bench/register_row_probe.cu -o /tmp/regs && /tmp/regs
#include <cmath>
#include <cstring>

#include "probe_timing.cuh"

// bfloat16 <-> float, rounding to nearest even (PTX cvt from sm_80; before it, integer arithmetic).
__device__ __forceinline__ float fz_bfloat16_to_float(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short fz_float_to_bfloat16(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  const unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN stays NaN, quiet
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}

struct FzKept { long long v[1]; };
template <class T, int N> struct alignas(sizeof(T) * N) FzVec { T v[N]; };

// reduction 0: mean (wave 1)
__device__ __forceinline__ float fz_identity0() { return (float)0; }
__device__ __forceinline__ float fz_lift0(float x, long long r) { return x; }
__device__ __forceinline__ float fz_combine0(float a, float b) {
  return (float)(a + b);
}
// One more element in a thread's accumulator.
__device__ __forceinline__ float fz_step0(float a, float x, long long r) {
  return fz_combine0(a, fz_lift0(x, r));
}
// A thread's accumulator, ready to combine with another's.
__device__ __forceinline__ float fz_settle0(float a) {
  return a;
}
// The group's accumulators combined in a fixed order; every thread of the group gets the result.
__device__ __forceinline__ float fz_row_reduce0(float a, float* scratch) {
  a = fz_settle0(a);
  #pragma unroll
  for (int d = 16; d > 0; d >>= 1) a = fz_combine0(a, __shfl_down_sync(0xffffffffu, a, d));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = a;
  __syncthreads();
  a = threadIdx.x % 32 < 4 ? scratch[threadIdx.x % 32] : fz_identity0();
  #pragma unroll
  for (int d = 2; d > 0; d >>= 1) a = fz_combine0(a, __shfl_down_sync(0xffffffffu, a, d));
  {
    const int fz_lane0 = 0;
    a = __shfl_sync(0xffffffffu, a, fz_lane0);
  }
  return a;
}
__device__ __forceinline__ float fz_result0(float a, double divisor) { return a / (float)divisor; }
extern "C" __global__ void __launch_bounds__(128) rms_smem(const unsigned short* __restrict__ in0, const unsigned short* __restrict__ in1, unsigned short* __restrict__ out0, const float s0, const long long n_rows, const long long n_red, const double divisor0, const FzKept kshape, const FzKept kst0, const FzKept kst1, const FzKept kst_out0) {
  #if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");  // the kernel before this one has finished
  #endif
  extern __shared__ __align__(16) unsigned char fz_row_cache[];
  __shared__ float fz_scratch0[4];
  const int lane = threadIdx.x % 128;
  const long long row = (long long)blockIdx.x * 1 + threadIdx.x / 128;
  if (row >= n_rows) return;  // uniform over the group: the whole block
  long long k0 = 0;
  long long k1 = 0;
  long long ko0 = 0;
  {
    long long rest = row;
    k0 += rest * kst0.v[0];
    k1 += rest * kst1.v[0];
    ko0 += rest * kst_out0.v[0];
  }
  // The row's cached inputs: 1 rows per block, each padded to 16 elements.
  const long long fz_pad = (n_red + 15) / 16 * 16;
  unsigned char* fz_at = fz_row_cache;
  unsigned short* const c0 = reinterpret_cast<unsigned short*>(fz_at) + (threadIdx.x / 128) * fz_pad;
  fz_at += 1 * fz_pad * sizeof(unsigned short);
  const long long n_vec = n_red / 8 * 8;
  // Pass 1: reduction 0 (mean).
  float a0 = fz_identity0();
  #pragma unroll 4
  for (long long j = (long long)lane * 8; j < n_vec; j += 128 * 8) {
    const FzVec<unsigned short, 8> v0 = *reinterpret_cast<const FzVec<unsigned short, 8>*>(in0 + k0 + j);
    *reinterpret_cast<FzVec<unsigned short, 8>*>(c0 + j) = v0;
    #pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float x0 = fz_bfloat16_to_float(v0.v[e]);
      const float t1 = (float)(x0);
      const float t2 = __fmul_rn(t1, t1);
      a0 = fz_step0(a0, t2, j + e);
    }
  }
  for (long long j = n_vec + lane; j < n_red; j += 128) {
    const unsigned short raw0 = in0[k0 + j];
    c0[j] = raw0;
    const float x0 = fz_bfloat16_to_float(raw0);
    const float t1 = (float)(x0);
    const float t2 = __fmul_rn(t1, t1);
    a0 = fz_step0(a0, t2, j);
  }
  const float r0 = fz_result0(fz_row_reduce0(a0, fz_scratch0), divisor0);
  // Last pass: the per-element outputs.
  #pragma unroll 4
  for (long long j = (long long)lane * 8; j < n_vec; j += 128 * 8) {
    const FzVec<unsigned short, 8> v0 = *reinterpret_cast<const FzVec<unsigned short, 8>*>(c0 + j);
    const FzVec<unsigned short, 8> v1 = *reinterpret_cast<const FzVec<unsigned short, 8>*>(in1 + k1 + j);
    FzVec<unsigned short, 8> o0;
    #pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float x0 = fz_bfloat16_to_float(v0.v[e]);
      const float x1 = fz_bfloat16_to_float(v1.v[e]);
      const float t1 = (float)(x0);
      const float t5 = __fadd_rn(r0, s0);
      const float t6 = rsqrt(t5);
      const float t7 = __fmul_rn(t1, t6);
      const float t9 = (float)(x1);
      const float t10 = __fmul_rn(t7, t9);
      const float t11 = fz_bfloat16_to_float(fz_float_to_bfloat16((float)(t10)));
      o0.v[e] = fz_float_to_bfloat16((float)(t10));
    }
    *reinterpret_cast<FzVec<unsigned short, 8>*>(out0 + ko0 + j) = o0;
  }
  for (long long j = n_vec + lane; j < n_red; j += 128) {
    const float x0 = fz_bfloat16_to_float(c0[j]);
    const float x1 = fz_bfloat16_to_float(in1[k1 + j]);
    const float t1 = (float)(x0);
    const float t5 = __fadd_rn(r0, s0);
    const float t6 = rsqrt(t5);
    const float t7 = __fmul_rn(t1, t6);
    const float t9 = (float)(x1);
    const float t10 = __fmul_rn(t7, t9);
    const float t11 = fz_bfloat16_to_float(fz_float_to_bfloat16((float)(t10)));
    out0[ko0 + j] = fz_float_to_bfloat16((float)(t10));
  }
}




template <int T, int R>
__global__ void __launch_bounds__(T) rms_regs(const unsigned short* __restrict__ in0, const unsigned short* __restrict__ in1,
                                               unsigned short* __restrict__ out0, const float s0, const long long n_rows,
                                               const long long n_red, const double divisor0) {
  #if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  #endif
  __shared__ float scratch[T / 32];
  const long long row = blockIdx.x;
  const unsigned short* x = in0 + row * n_red;
  FzVec<unsigned short, 8> keep[R];
  #pragma unroll
  for (int r = 0; r < R; ++r) keep[r] = *reinterpret_cast<const FzVec<unsigned short, 8>*>(x + (r * T + threadIdx.x) * 8);
  float a = 0.f;
  #pragma unroll
  for (int r = 0; r < R; ++r)
    #pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float v = fz_bfloat16_to_float(keep[r].v[e]);
      a = __fadd_rn(a, __fmul_rn(v, v));
    }
  const float r0 = (T == 128 ? fz_row_reduce0(a, scratch) : block_sum<T>(a, scratch)) / (float)divisor0;
  const float scale = rsqrt(__fadd_rn(r0, s0));
  #pragma unroll
  for (int r = 0; r < R; ++r) {
    const long long j = (r * T + threadIdx.x) * 8;
    const FzVec<unsigned short, 8> w = *reinterpret_cast<const FzVec<unsigned short, 8>*>(in1 + j);
    FzVec<unsigned short, 8> o;
    #pragma unroll
    for (int e = 0; e < 8; ++e)
      o.v[e] = fz_float_to_bfloat16(__fmul_rn(__fmul_rn(fz_bfloat16_to_float(keep[r].v[e]), scale), fz_bfloat16_to_float(w.v[e])));
    *reinterpret_cast<FzVec<unsigned short, 8>*>(out0 + row * n_red + j) = o;
  }
}


constexpr long long kRows = 16384, kCols = 4096;

int main() {
  probe_warm_up();
  const long long n = kRows * kCols;
  std::vector<unsigned short> hx(n), hw(kCols);
  unsigned s = 777;
  auto bf = [](float f) { unsigned u; std::memcpy(&u, &f, 4); return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); };
  for (auto& v : hx) s = s * 1664525u + 1013904223u, v = bf((float)((s >> 8) % 60000) / 10000.0f - 3.0f);
  for (auto& v : hw) s = s * 1664525u + 1013904223u, v = bf((float)((s >> 8) % 20000) / 10000.0f);
  unsigned short *x, *w, *ref, *out;
  PROBE_CHECK(cudaMalloc(&x, n * 2));
  PROBE_CHECK(cudaMalloc(&w, kCols * 2));
  PROBE_CHECK(cudaMalloc(&ref, n * 2));
  PROBE_CHECK(cudaMalloc(&out, n * 2));
  PROBE_CHECK(cudaMemcpy(x, hx.data(), n * 2, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(w, hw.data(), kCols * 2, cudaMemcpyHostToDevice));
  FzKept shape{{kRows}}, st{{kCols}}, zero{{0}};
  const float eps = 1e-6f;
  const double divisor = (double)kCols;
  auto smem = [&] { rms_smem<<<kRows, 128, kCols * 2>>>(x, w, ref, eps, kRows, kCols, divisor, shape, st, zero, st); };
  smem();
  PROBE_CHECK(cudaDeviceSynchronize());
  std::vector<unsigned short> want(n), got(n);
  PROBE_CHECK(cudaMemcpy(want.data(), ref, n * 2, cudaMemcpyDeviceToHost));
  const double bytes = 2.0 * n * 2 + kCols * 2;
  const float copy_ms = median_ms([&] { probe_copy<<<132 * 8, 512>>>((const uint4*)x, (uint4*)out, n / 8); });
  const double limit = bytes / copy_ms / 1e6;
  std::printf("bfloat16 RMSNorm %lld x %lld: copy %.1f us (%.0f GB/s)\n", kRows, kCols, copy_ms * 1e3, limit);
  auto report = [&](const char* name, auto&& launch) {
    const Checked16 c = check_and_time16(out, got, want, launch);
    std::printf("  %-24s %7.1f us  %6.1f%% of the copy limit  %lld differ from rms_smem, %lld by more than 1 ulp\n", name,
                c.ms * 1e3, bytes / c.ms / 1e6 / limit * 100, c.differ, c.far);
  };
  report("smem (generated)", [&] { rms_smem<<<kRows, 128, kCols * 2>>>(x, w, out, eps, kRows, kCols, divisor, shape, st, zero, st); });
  report("registers 128 x 4", [&] { rms_regs<128, 4><<<kRows, 128>>>(x, w, out, eps, kRows, kCols, divisor); });
  report("registers 256 x 2", [&] { rms_regs<256, 2><<<kRows, 256>>>(x, w, out, eps, kRows, kCols, divisor); });
  report("registers 512 x 1", [&] { rms_regs<512, 1><<<kRows, 512>>>(x, w, out, eps, kRows, kCols, divisor); });
  return 0;
}
