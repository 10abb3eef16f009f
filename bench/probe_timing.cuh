// SPDX-License-Identifier: Apache-2.0
// What the plain-CUDA probes in bench/ share (division_probe.cu, bulk_row_probe.cu, register_row_probe.cu,
// normal_probe.cu, embedding_probe.cu, batch_norm_persistent_probe.cu, phase_bandwidth_probe.cu): a CUDA call checked
// (the probe exits naming it), a copy of the same bytes as the limit, the machine warmed (a fresh GPU
// machine populates its memory lazily in its first minute), and the timing: events around 10 calls after 3 warm-up
// calls, the median of 9; a 16-bit result checked against a reference; a layer kernel's block sum.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define PROBE_CHECK(x)                                                                   \
  do {                                                                                   \
    cudaError_t e = (x);                                                                 \
    if (e != cudaSuccess) {                                                              \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));      \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

/// The block's sum of `a` (warps by shuffles, then the warps' totals in `scratch` by warp 0's lanes), in the order a
/// generated layer kernel of T threads a row combines them; every thread gets it.
template <int T> __device__ __forceinline__ float block_sum(float a, float* scratch) {
  #pragma unroll
  for (int d = 16; d > 0; d >>= 1) a += __shfl_down_sync(0xffffffffu, a, d);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = a;
  __syncthreads();
  a = threadIdx.x % 32 < T / 32 ? scratch[threadIdx.x % 32] : 0.f;
  #pragma unroll
  for (int d = T / 64; d > 0; d >>= 1) a += __shfl_down_sync(0xffffffffu, a, d);
  return __shfl_sync(0xffffffffu, a, 0);
}

/// n 16-byte vectors from `in` to `out`, a grid-stride loop (launch it with 132 x 8 blocks of 512)
__global__ void probe_copy(const uint4* __restrict__ in, uint4* __restrict__ out, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    out[i] = in[i];
}

/// A 16-bit result of `launch` against `want`, both as stored: `out` poisoned first, then launched once and read back
/// into `got`; the elements that differ, those more than one unit in the last place apart, and the launch's time.
struct Checked16 {
  long long differ = 0, far = 0;
  float ms = 0;
};
template <class F>
Checked16 check_and_time16(unsigned short* out, std::vector<unsigned short>& got, const std::vector<unsigned short>& want,
                           F&& launch);

/// 200 GB of memsets first: the timings after it are the warm machine's
inline void probe_warm_up() {
  void* w = nullptr;
  PROBE_CHECK(cudaMalloc(&w, std::size_t{1} << 30));
  for (int i = 0; i < 200; ++i) PROBE_CHECK(cudaMemset(w, i, std::size_t{1} << 30));
  PROBE_CHECK(cudaDeviceSynchronize());
  PROBE_CHECK(cudaFree(w));
}

/// Milliseconds a call of `f` takes on the GPU
template <class F> float median_ms(F&& f) {
  cudaEvent_t a, b;
  PROBE_CHECK(cudaEventCreate(&a));
  PROBE_CHECK(cudaEventCreate(&b));
  for (int w = 0; w < 3; ++w) f();
  std::vector<float> t;
  for (int r = 0; r < 9; ++r) {
    PROBE_CHECK(cudaEventRecord(a));
    for (int c = 0; c < 10; ++c) f();
    PROBE_CHECK(cudaEventRecord(b));
    PROBE_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PROBE_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / 10);
  }
  PROBE_CHECK(cudaEventDestroy(a));
  PROBE_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[4];
}

template <class F>
Checked16 check_and_time16(unsigned short* out, std::vector<unsigned short>& got, const std::vector<unsigned short>& want,
                           F&& launch) {
  PROBE_CHECK(cudaMemset(out, 0xff, got.size() * 2));
  launch();
  PROBE_CHECK(cudaDeviceSynchronize());
  PROBE_CHECK(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost));
  Checked16 c;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const int d = std::abs((int)got[i] - (int)want[i]);
    c.differ += d != 0, c.far += d > 1;
  }
  c.ms = median_ms(launch);
  return c;
}
