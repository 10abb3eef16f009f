// SPDX-License-Identifier: Apache-2.0
// What a phase of loads or of stores alone moves at the sizes of a one-wave kernel (issue 35: batch norm of 25.7 MB reads
// it all, then writes it all): a grid-stride loop of 16-byte stores, of loads, cudaMemset and a copy, at 25.7 / 51.4 /
// 268 MB. On the H200 (2026-12-01) a copy takes about as long as the loads and the stores each alone: reads and
// writes share the memory bandwidth, and at 25.7 MB neither alone reaches the large-copy rate.
// Not part of the build (plain CUDA):  nvcc -arch=sm_90 -O3 bench/phase_bandwidth_probe.cu -o /tmp/pb && /tmp/pb
#include "probe_timing.cuh"
__global__ void store(float4* __restrict__ out, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    out[i] = make_float4(1.f, 2.f, 3.f, (float)i);
}
__global__ void load(const float4* __restrict__ in, float* out, long long n) {
  float a = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float4 v = in[i]; a += v.x + v.y + v.z + v.w;
  }
  if (a == 12345.f) out[0] = a;
}
int main() {
  probe_warm_up();
  float4 *a, *b;
  PROBE_CHECK(cudaMalloc(&a, 1ll << 30)); PROBE_CHECK(cudaMalloc(&b, 1ll << 30));
  for (long long bytes : {25690112ll, 51380224ll, 268435456ll}) {
    const long long n = bytes / 16;
    const float w = median_ms([&] { store<<<132 * 4, 512>>>(a, n); });
    const float r = median_ms([&] { load<<<132 * 4, 512>>>(a, (float*)b, n); });
    const float m = median_ms([&] { PROBE_CHECK(cudaMemsetAsync(a, 0, bytes)); });
    const float c = median_ms([&] { probe_copy<<<132 * 8, 512>>>((const uint4*)a, (uint4*)b, n); });
    std::printf("%9.1f MB: stores %7.1f us (%5.0f GB/s)  loads %7.1f us (%5.0f GB/s)  memset %7.1f us (%5.0f GB/s)  copy %7.1f us (%5.0f GB/s each way)\n",
                bytes / 1e6, w * 1e3, bytes / w / 1e6, r * 1e3, bytes / r / 1e6, m * 1e3, bytes / m / 1e6, c * 1e3, bytes / c / 1e6);
  }
}
