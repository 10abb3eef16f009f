// SPDX-License-Identifier: Apache-2.0
// A probe of a scatter with no global atomic per element, for index_add's uniform case (2^26 f32 from int64 ids
// into 2^20 bins), whose atomics stop at 32-37% of the copy limit (bench/atomic_ceiling.cu). The values go in
// chunks small enough that their partitions stay in L2: pass 1 reads a chunk's (id, value) pairs, ranks them by
// partition of S bins in shared memory and writes each partition's run (a warp writes neighbouring entries of one
// run); pass 2 sums each partition's run in a shared-memory histogram of S bins and adds it into the bins with
// coalesced atomics (8 lanes a sector). DRAM sees the 12 bytes an element once; the runs live in L2.
// Not part of the build (plain CUDA, no fusion):  nvcc -arch=sm_90 -O3 bench/partition_scatter_probe.cu -o /tmp/ps
//
// H100 (bench/results/indexing/h100-2026-11-27-partition-probe.txt): 977 us at best (29.4% of the limit, 0.91x
// the fed atomics' 885 us). Pass 1 alone takes ~700 us: ranking 2^26 elements with shared-memory atomics that
// return a value runs at about one per SM per clock; pass 2 alone 280-450 us (shared float atomics). A block
// radix rank (ballots per bit, as CUB ranks keys) for pass 1 and a warp-private histogram for pass 2 are what it
// would take; near bandwidth both, the two passes would be ~65% of the limit (2x PyTorch).
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cmath>

constexpr int THREADS = 256;

__global__ void red_fed(float* bins, const long long* ids, const float* v, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    atomicAdd(bins + ids[i], v[i]);
}
__global__ void copy(float4* o, const float4* in, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) o[i] = in[i];
}

// Pass 1: the chunk's (id, value) pairs into one run per partition of bins, sorted by partition in shared memory
// first so that a warp writes neighbouring entries of one run; a run's overflow adds straight in.  P <= THREADS.
template <int ITEMS>
__global__ void __launch_bounds__(THREADS) partition_chunk(const long long* __restrict__ ids, const float* __restrict__ v,
                                                           long long begin, long long end, uint2* __restrict__ scratch,
                                                           unsigned cap, unsigned* __restrict__ cursor,
                                                           float* __restrict__ bins, int log_s, int P) {
  constexpr int TILE = THREADS * ITEMS;
  __shared__ unsigned count[THREADS], base[THREADS], offset[THREADS], warp_sum[THREADS / 32];
  __shared__ uint2 sorted[TILE];
  __shared__ unsigned short pid[TILE];
  const unsigned smask = (1u << log_s) - 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (long long t0 = begin + (long long)blockIdx.x * TILE; t0 < end; t0 += (long long)gridDim.x * TILE) {
    count[threadIdx.x] = 0;
    __syncthreads();
    long long id[ITEMS];
    float val[ITEMS];
    unsigned rank[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long i = t0 + k * THREADS + threadIdx.x;
      if (i < end) { id[k] = __ldcs(ids + i); val[k] = __ldcs(v + i); }
    }
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long i = t0 + k * THREADS + threadIdx.x;
      if (i < end) rank[k] = atomicAdd(&count[id[k] >> log_s], 1u);
    }
    __syncthreads();
    // exclusive scan of the counts (a thread a partition), and the runs reserved in the chunk's scratch
    const unsigned c = count[threadIdx.x];
    unsigned x = c;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) { const unsigned y = __shfl_up_sync(~0u, x, d); if (lane >= d) x += y; }
    if (lane == 31) warp_sum[warp] = x;
    if (threadIdx.x < P && c) base[threadIdx.x] = atomicAdd(&cursor[threadIdx.x], c);
    __syncthreads();
    unsigned before = 0;
    for (int w = 0; w < warp; ++w) before += warp_sum[w];
    offset[threadIdx.x] = before + x - c;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long i = t0 + k * THREADS + threadIdx.x;
      if (i < end) {
        const unsigned p = unsigned(id[k] >> log_s);
        const unsigned at = offset[p] + rank[k];
        sorted[at] = make_uint2(unsigned(id[k]) & smask, __float_as_uint(val[k]));
        pid[at] = (unsigned short)p;
      }
    }
    __syncthreads();
    const int n_tile = end - t0 < TILE ? int(end - t0) : TILE;
    for (int j = threadIdx.x; j < n_tile; j += THREADS) {
      const unsigned p = pid[j];
      const unsigned at = base[p] + (j - offset[p]);
      const uint2 e = sorted[j];
      if (at < cap) __stcg(reinterpret_cast<unsigned long long*>(scratch + (size_t)p * cap + at), (unsigned long long)e.x | ((unsigned long long)e.y << 32));
      else atomicAdd(bins + ((size_t)p << log_s) + e.x, __uint_as_float(e.y));
    }
    __syncthreads();
  }
}

// Pass 2: split blocks per partition; each sums its share of the run in shared memory, then adds its bins in
// with coalesced atomics (contiguous addresses: 8 lanes a sector).
__global__ void __launch_bounds__(THREADS) accumulate(const uint2* __restrict__ scratch, unsigned cap, unsigned* __restrict__ cursor,
                                                      float* __restrict__ bins, int log_s, int split, unsigned* next_cursor, int P) {
  extern __shared__ float hist[];
  if (blockIdx.x == 0) for (int q = threadIdx.x; q < P; q += THREADS) next_cursor[q] = 0;
  const int S = 1 << log_s;
  const int p = blockIdx.x / split, part = blockIdx.x % split;
  for (int i = threadIdx.x; i < S; i += THREADS) hist[i] = 0.f;
  __syncthreads();
  const unsigned n = min(cursor[p], cap);
  const unsigned per = (n + split - 1) / split;
  const unsigned lo = part * per, hi = min(n, lo + per);
  const uint2* run = scratch + (size_t)p * cap;
  unsigned i = lo + threadIdx.x;
  for (; i + 3 * THREADS < hi; i += 4 * THREADS) {
    uint2 e[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) e[k] = run[i + k * THREADS];
#pragma unroll
    for (int k = 0; k < 4; ++k) atomicAdd(&hist[e[k].x], __uint_as_float(e[k].y));
  }
  for (; i < hi; i += THREADS) { const uint2 e = run[i]; atomicAdd(&hist[e.x], __uint_as_float(e.y)); }
  __syncthreads();
  float* out = bins + (size_t)p * S;
  for (int j = threadIdx.x; j < S; j += THREADS)
    if (hist[j] != 0.f) atomicAdd(out + j, hist[j]);
}
__global__ void reset(unsigned* cursor, int P) { for (int p = threadIdx.x; p < P; p += blockDim.x) cursor[p] = 0; }

template <class F> float med(F f) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 12; ++r) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); if (r >= 3) t.push_back(ms); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
constexpr int ITEMS = 16;
int main() {
  const long long n = 1ll << 26; const unsigned B = 1u << 20;
  float* h; long long* ids; float* v; float4 *x, *y; uint2* scratch; unsigned* cursor;
  cudaMalloc(&h, B * 4ull); cudaMalloc(&ids, n * 8); cudaMalloc(&v, n * 4); cudaMalloc(&x, 1ull << 30); cudaMalloc(&y, 1ull << 30);
  cudaMalloc(&scratch, 64ull << 20); cudaMalloc(&cursor, 8192 * 4); cudaMemset(cursor, 0, 8192 * 4);
  std::vector<long long> hid(n); std::vector<float> hv(n);
  unsigned s = 5; for (long long i = 0; i < n; ++i) { s = s * 1664525u + 1013904223u; hid[i] = (s >> 8) & (B - 1); hv[i] = float((i % 7) - 3) * 0.25f; }
  cudaMemcpy(ids, hid.data(), n * 8, cudaMemcpyHostToDevice); cudaMemcpy(v, hv.data(), n * 4, cudaMemcpyHostToDevice);
  std::vector<double> ref(B, 0.0); for (long long i = 0; i < n; ++i) ref[hid[i]] += hv[i];
  const float c = med([&] { copy<<<132 * 8, 256>>>(y, x, (1ll << 30) / 16); });
  const double bw = 2.0 * (1ull << 30) / (c * 1e-3) / 1e9;
  const double limit_us = 12.0 * n / bw / 1e3;
  printf("copy %.1f GB/s; index_add limit %.1f us\n", bw, limit_us);
  const float f = med([&] { red_fed<<<132 * 8, 256>>>(h, ids, v, n); });
  printf("atomics fed: %.1f us = %.1f%%\n", f * 1e3, 100 * limit_us / (f * 1e3));
  cudaFuncSetAttribute(accumulate, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10);
  for (int log_s : {12, 13, 14}) for (int log_c : {21, 22}) for (int split : {2, 4}) {
    const int P = B >> log_s; const long long C = 1ll << log_c;
    const unsigned cap = unsigned(2 * C / P);  // twice the uniform share
    if ((size_t)P * cap * 8 > (64ull << 20)) continue;
    const int g1 = 132 * 2;
    auto run = [&] {
      reset<<<1, 1024>>>(cursor, P);
      int k = 0;
      for (long long b = 0; b < n; b += C, ++k) {
        unsigned* cur = cursor + (k % 2) * P;
        unsigned* nxt = cursor + ((k + 1) % 2) * P;
        partition_chunk<ITEMS><<<g1, THREADS>>>(ids, v, b, std::min(n, b + C), scratch, cap, cur, h, log_s, P);
        accumulate<<<P * split, THREADS, (1 << log_s) * 4>>>(scratch, cap, cur, h, log_s, split, nxt, P);
      }
    };
    const float t = med(run);
    const float t1 = med([&] { int k = 0; for (long long b = 0; b < n; b += C, ++k) { reset<<<1, 1024>>>(cursor, 2 * P);
      partition_chunk<ITEMS><<<g1, THREADS>>>(ids, v, b, std::min(n, b + C), scratch, cap, cursor, h, log_s, P); } });
    const float t2 = med([&] { for (long long b = 0; b < n; b += C)
      accumulate<<<P * split, THREADS, (1 << log_s) * 4>>>(scratch, cap, cursor, h, log_s, split, cursor + P, P); });
    cudaMemset(h, 0, B * 4); run(); std::vector<float> got(B); cudaMemcpy(got.data(), h, B * 4, cudaMemcpyDeviceToHost);
    double err = 0; for (unsigned i = 0; i < B; ++i) err = std::max(err, std::fabs(got[i] - ref[i]));
    cudaError_t e = cudaGetLastError();
    printf("[pass1 %.1f us, pass2 %.1f us] S=2^%d P=%d chunk=2^%d split=%d: %.1f us = %.1f%% of limit (%.2fx atomics)  max err %.3g %s\n", t1 * 1e3, t2 * 1e3, log_s, P, log_c,
           split, t * 1e3, 100 * limit_us / (t * 1e3), f / t, err, cudaGetErrorString(e));
  }
}
