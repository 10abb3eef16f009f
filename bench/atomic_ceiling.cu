// SPDX-License-Identifier: Apache-2.0
// The ceiling of index_add's uniform case on this GPU: float atomic adds per second at random addresses with
// nothing read, beside the same adds fed from int64 ids and f32 values, and 8 lanes of a warp on one 32-byte sector.
// Not part of the build (plain CUDA, no fusion):  nvcc -arch=sm_90 -O3 bench/atomic_ceiling.cu -o /tmp/ac && /tmp/ac
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
__device__ __forceinline__ unsigned hash32(unsigned x) { x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16; return x; }
__global__ void red_only(float* bins, unsigned mask, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    atomicAdd(bins + (hash32((unsigned)i) & mask), 1.f);
}
__global__ void red_fed(float* bins, const long long* ids, const float* v, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    atomicAdd(bins + ids[i], v[i]);
}
__global__ void red_sorted_warp(float* bins, unsigned mask, long long n) {  // a warp's 32 adds into 8 sectors
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    atomicAdd(bins + ((hash32((unsigned)(i >> 3)) & mask & ~7u) | (i & 7)), 1.f);
}
__global__ void copy(float4* o, const float4* in, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) o[i] = in[i];
}
template <class F> float med(F f) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 12; ++r) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); if (r >= 3) t.push_back(ms); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
int main() {
  const long long n = 1ll << 26; const unsigned bins = 1u << 20;
  float* h; long long* ids; float* v; float4 *x, *y;
  cudaMalloc(&h, bins * 4ull); cudaMalloc(&ids, n * 8); cudaMalloc(&v, n * 4); cudaMalloc(&x, 1ull << 30); cudaMalloc(&y, 1ull << 30);
  std::vector<long long> hid(n); unsigned s = 5; for (auto& e : hid) { s = s * 1664525u + 1013904223u; e = (s >> 8) & (bins - 1); }
  cudaMemcpy(ids, hid.data(), n * 8, cudaMemcpyHostToDevice); cudaMemset(v, 0, n * 4);
  const float c = med([&] { copy<<<132 * 8, 256>>>(y, x, (1ll << 30) / 16); });
  const double bw = 2.0 * (1ull << 30) / (c * 1e-3) / 1e9;
  printf("copy %.1f GB/s\n", bw);
  for (int g : {132 * 4, 132 * 8, 132 * 16, 132 * 32}) {
    const float a = med([&] { red_only<<<g, 256>>>(h, bins - 1, n); });
    const float w = med([&] { red_sorted_warp<<<g, 256>>>(h, bins - 1, n); });
    const float f = med([&] { red_fed<<<g, 256>>>(h, ids, v, n); });
    printf("grid %5d: random adds only %.1f us (%.1f G adds/s); 8 lanes a sector %.1f us (%.1f G/s); fed from ids+values %.1f us (%.1f G/s, %.1f%% of copy on 12 B each)\n",
           g, a * 1e3, n / (a * 1e-3) / 1e9, w * 1e3, n / (w * 1e-3) / 1e9, f * 1e3, n / (f * 1e-3) / 1e9, 100.0 * 12.0 * n / (f * 1e-3) / 1e9 / bw);
  }
}
