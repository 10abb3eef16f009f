// SPDX-License-Identifier: Apache-2.0
// Column sums of one-wave matrices (issue 35: sum(m, 0) of 2,048^2 / 4,096^2 float32 at >= 90 / 95% of the copy limit).
// fusion's kernel splits each tile of 128 columns over blocks of row ranges whose partials the last block to arrive
// combines after a fence and a counter: its tail (shared-memory combine, fence, counter, partials read back) follows
// the loads, and at these sizes the loads take only 4-16 us. The designs timed here, all launched as fusion launches
// (griddepcontrol.wait first, a programmatic dependent of the kernel before), all deterministic but `atomic`:
//   floor       a grid-stride read of the whole matrix (what the loads alone cost)
//   split       fusion's design, the loads issued BATCH at a time, the block's row groups combined in one barrier
//   cluster     the row ranges of a tile are the blocks of one cluster, combined through distributed shared memory
//               at a cluster barrier: no fence, no counter, no partials in global memory
//   atomic      partials added with atomics (not deterministic; the tail's lower bound)
// Not part of the build (plain CUDA):  nvcc -arch=sm_90a -O3 -std=c++17 bench/column_sum_probe.cu -o /tmp/cs && /tmp/cs
#include <cooperative_groups.h>

#include <cmath>
#include <cstring>

#include "probe_timing.cuh"

namespace cg = cooperative_groups;

__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ float4 operator+(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }

/// Rows r0 + ty, r0 + ty + G, ... below r1 of columns c..c+3, summed in row order, BATCH loads in flight a thread.
template <int G, int BATCH>
__device__ __forceinline__ float4 rows_part(const float* __restrict__ m, int cols, int c, int r0, int r1, int ty) {
  float4 a = make_float4(0, 0, 0, 0);
  int r = r0 + ty;
  for (; r + (BATCH - 1) * G < r1; r += BATCH * G) {
    float4 v[BATCH];
#pragma unroll
    for (int i = 0; i < BATCH; ++i) v[i] = __ldg(reinterpret_cast<const float4*>(m + (long long)(r + i * G) * cols + c));
#pragma unroll
    for (int i = 0; i < BATCH; ++i) a = a + v[i];
  }
  for (; r < r1; r += G) a = a + __ldg(reinterpret_cast<const float4*>(m + (long long)r * cols + c));
  return a;
}

/// The block's G row groups combined in order into row group 0 (one barrier: float4 slots)
template <int L, int G> __device__ __forceinline__ float4 groups_combine(float4 a, int tx, int ty) {
  __shared__ float4 part[G][L];
  part[ty][tx] = a;
  __syncthreads();
  if (ty == 0)
    for (int g = 1; g < G; ++g) a = a + part[g][tx];
  return a;
}

template <int MINB>
__global__ void __launch_bounds__(256, MINB) floor_read(const float4* __restrict__ in, float* out, long long n) {
  grid_wait();
  float4 a = make_float4(0, 0, 0, 0);
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (; i + 7 * step < n; i += 8 * step) {
    float4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = __ldg(in + i + k * step);
#pragma unroll
    for (int k = 0; k < 8; ++k) a = a + v[k];
  }
  for (; i < n; i += step) a = a + __ldg(in + i);
  if (a.x + a.y + a.z + a.w == 12345.f) out[0] = a.x;
}

/// fusion's split: grid (column tiles, S); block y takes rows [y chunk, (y + 1) chunk); the last block of a tile
/// combines the S partials in order.
template <int L, int G, int BATCH, int MINB>
__global__ void __launch_bounds__(L * G, MINB) split(float* __restrict__ out, const float* __restrict__ m, int rows, int cols,
                                               int chunk, float* __restrict__ partials, unsigned* __restrict__ counters) {
  grid_wait();
  const int tx = threadIdx.x % L, ty = threadIdx.x / L, c = (blockIdx.x * L + tx) * 4;
  const int r0 = blockIdx.y * chunk, r1 = min(r0 + chunk, rows);
  float4 a = groups_combine<L, G>(rows_part<G, BATCH>(m, cols, c, r0, r1, ty), tx, ty);
  if (ty == 0) *reinterpret_cast<float4*>(partials + (long long)blockIdx.y * cols + c) = a;
  __threadfence();
  __syncthreads();
  __shared__ bool last;
  if (threadIdx.x == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  a = make_float4(0, 0, 0, 0);
  for (unsigned s = ty; s < gridDim.y; s += G) a = a + __ldcg(reinterpret_cast<const float4*>(partials + (long long)s * cols + c));
  __syncthreads();  // (part is reused)
  a = groups_combine<L, G>(a, tx, ty);
  if (ty == 0) *reinterpret_cast<float4*>(out + c) = a;
  if (threadIdx.x == 0) counters[blockIdx.x] = 0;
}

/// A cluster of CL blocks a tile of L * 4 columns, block rank q taking the q-th of CL row ranges; the ranks'
/// partials combined in rank order through distributed shared memory, each rank writing L / CL lanes' columns.
template <int L, int G, int BATCH, int CL, int MINB>
__global__ void __launch_bounds__(L * G, MINB) cluster_sum(float* __restrict__ out, const float* __restrict__ m, int rows, int cols) {
  grid_wait();
  cg::cluster_group cluster = cg::this_cluster();
  const int q = static_cast<int>(cluster.block_rank()), tile = blockIdx.x / CL;
  const int tx = threadIdx.x % L, ty = threadIdx.x / L, c = (tile * L + tx) * 4;
  const int chunk = (rows + CL - 1) / CL, r0 = q * chunk, r1 = min(r0 + chunk, rows);
  __shared__ float4 block_part[L];
  const float4 a = groups_combine<L, G>(rows_part<G, BATCH>(m, cols, c, r0, r1, ty), tx, ty);
  if (ty == 0) block_part[tx] = a;
  cluster.sync();
  constexpr int kLanesPerRank = L >= CL ? L / CL : 1;
  if (threadIdx.x < kLanesPerRank && (L >= CL || q < L)) {
    const int lane = L >= CL ? q * kLanesPerRank + static_cast<int>(threadIdx.x) : q;
    float4 s = make_float4(0, 0, 0, 0);
#pragma unroll
    for (int p = 0; p < CL; ++p) s = s + cluster.map_shared_rank(block_part, p)[lane];
    *reinterpret_cast<float4*>(out + (tile * L + lane) * 4) = s;
  }
  cluster.sync();  // the other ranks' block_part stays until read
}

template <int L, int G, int BATCH>
__global__ void __launch_bounds__(L * G, 4) atomic_sum(float* __restrict__ out, const float* __restrict__ m, int rows, int cols, int chunk) {
  grid_wait();
  const int tx = threadIdx.x % L, ty = threadIdx.x / L, c = (blockIdx.x * L + tx) * 4;
  const int r0 = blockIdx.y * chunk, r1 = min(r0 + chunk, rows);
  const float4 a = groups_combine<L, G>(rows_part<G, BATCH>(m, cols, c, r0, r1, ty), tx, ty);
  if (ty == 0) atomicAdd(reinterpret_cast<float4*>(out + c), a);
}

template <class K, class... A> void launch(dim3 grid, dim3 block, int cluster, K kernel, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = static_cast<unsigned>(cluster);
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cluster > 1 ? 2 : 1;
  PROBE_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

struct Problem {
  int rows, cols;
  float *m, *out, *partials;
  unsigned* counters;
  std::vector<double> want;
  double copy_gbs;
  double limit_us() const { return (double(rows) * cols * 4 + cols * 4.0) / copy_gbs / 1e3; }
};

/// Checks one call against the float64 sums (out poisoned first), then times it; prints us and % of the limit.
template <class F> void report(const Problem& P, const char* name, F&& f, bool zero_first = false) {
  PROBE_CHECK(cudaMemset(P.out, 0xff, P.cols * 4));
  if (zero_first) PROBE_CHECK(cudaMemset(P.out, 0, P.cols * 4));
  f();
  PROBE_CHECK(cudaDeviceSynchronize());
  std::vector<float> got(P.cols);
  PROBE_CHECK(cudaMemcpy(got.data(), P.out, P.cols * 4, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int c = 0; c < P.cols; ++c) bad += !(std::fabs(got[c] - P.want[c]) <= 1e-4 * P.rows);
  const float ms = median_ms(f);
  std::printf("  %-34s %7.2f us  %6.1f%%%s\n", name, ms * 1e3, P.limit_us() / (ms * 1e3) * 100, bad ? "  WRONG" : "");
  std::fflush(stdout);
}

template <int L, int G, int BATCH, int CL, int MINB> void time_cluster(const Problem& P) {
  auto k = cluster_sum<L, G, BATCH, CL, MINB>;
  if (CL > 8) PROBE_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  char name[64];
  std::snprintf(name, sizeof name, "cluster %2d, %3d cols x %2d groups, %d/%d", CL, L * 4, G, BATCH, MINB);
  const int tiles = P.cols / (L * 4);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(tiles * CL);
  cfg.blockDim = dim3(L * G);
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = CL, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, k, &cfg) != cudaSuccess || clusters == 0) {
    std::printf("  %-34s does not fit\n", name);
    return;
  }
  std::snprintf(name + std::strlen(name), sizeof name - std::strlen(name), " (%d)", clusters);
  report(P, name, [&] { launch(dim3(tiles * CL), dim3(L * G), CL, k, P.out, (const float*)P.m, P.rows, P.cols); });
}

template <int L, int G, int BATCH, int MINB> void time_split(const Problem& P, int S) {
  char name[64];
  std::snprintf(name, sizeof name, "split %3d, %3d cols x %2d groups, %d/%d", S, L * 4, G, BATCH, MINB);
  const int chunk = (P.rows + S - 1) / S, tiles = P.cols / (L * 4);
  report(P, name, [&] {
    launch(dim3(tiles, (P.rows + chunk - 1) / chunk), dim3(L * G), 1, split<L, G, BATCH, MINB>, P.out, (const float*)P.m, P.rows,
           P.cols, chunk, P.partials, P.counters);
  });
}

int main() {
  probe_warm_up();
  float *big_a, *big_b;
  PROBE_CHECK(cudaMalloc(&big_a, 256 << 20));
  PROBE_CHECK(cudaMalloc(&big_b, 256 << 20));
  const float copy_ms = median_ms([&] { PROBE_CHECK(cudaMemcpyAsync(big_b, big_a, 256 << 20, cudaMemcpyDeviceToDevice)); });
  const double copy_gbs = 2.0 * (256 << 20) / copy_ms / 1e6;
  std::printf("copy of 256 MiB: %.0f GB/s (read + write), the limit\n", copy_gbs);
  for (int n : {2048, 4096, 8192}) {
    Problem P{n, n};
    P.copy_gbs = copy_gbs;
    std::vector<float> h(std::size_t(n) * n);
    unsigned s = 12345u + n;
    for (auto& x : h) s = s * 1664525u + 1013904223u, x = float(s >> 8) / float(1 << 24) * 2.f - 1.f;
    P.want.assign(n, 0.0);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < n; ++c) P.want[c] += h[std::size_t(r) * n + c];
    PROBE_CHECK(cudaMalloc(&P.m, h.size() * 4));
    PROBE_CHECK(cudaMalloc(&P.out, n * 4));
    PROBE_CHECK(cudaMalloc(&P.partials, std::size_t(256) * n * 4));
    PROBE_CHECK(cudaMalloc(&P.counters, 4096 * 4));
    PROBE_CHECK(cudaMemset(P.counters, 0, 4096 * 4));
    PROBE_CHECK(cudaMemcpy(P.m, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    std::printf("sum(m, 0) of %d^2 float32: the limit %.2f us\n", n, P.limit_us());
    for (int blocks : {132 * 4, 132 * 8}) {
      for (int minb : {8, 4}) {
        char name[64];
        std::snprintf(name, sizeof name, "floor (read only, %d blocks, %d)", blocks, minb);
        auto k = minb == 8 ? floor_read<8> : floor_read<4>;
        const float ms = median_ms([&] { launch(dim3(blocks), dim3(256), 1, k, (const float4*)P.m, P.out, (long long)n * n / 4); });
        std::printf("  %-34s %7.2f us  %6.1f%%\n", name, ms * 1e3, P.limit_us() / (ms * 1e3) * 100);
      }
    }
    // (MINB: the blocks an SM the registers must allow; 8 of 256 threads leaves ptxas 32 registers, and it then
    // holds fewer loads in flight than BATCH asks: 4 leaves it 64)
    const int fusion_split = n == 2048 ? 32 : n == 4096 ? 17 : 1;  // what fusion plans (8 row groups, 132 x 4 blocks)
    for (int S : {fusion_split, 16, 32, 64})
      if (S > 1) time_split<32, 8, 4, 8>(P, S), time_split<32, 8, 8, 4>(P, S);
    time_split<32, 8, 16, 2>(P, 16);
    time_split<32, 8, 16, 2>(P, 32);
    time_split<16, 16, 8, 4>(P, 16);
    time_split<16, 16, 8, 4>(P, 32);
    time_cluster<32, 8, 8, 4, 8>(P);
    time_cluster<32, 8, 8, 4, 4>(P);
    time_cluster<32, 8, 8, 8, 8>(P);
    time_cluster<32, 8, 8, 8, 4>(P);
    time_cluster<32, 8, 8, 16, 4>(P);
    time_cluster<32, 8, 16, 8, 2>(P);
    time_cluster<32, 8, 16, 16, 2>(P);
    time_cluster<16, 16, 8, 4, 4>(P);
    time_cluster<16, 16, 8, 8, 4>(P);
    time_cluster<16, 16, 8, 16, 4>(P);
    time_cluster<32, 16, 8, 8, 2>(P);
    time_cluster<32, 16, 8, 16, 2>(P);
    time_cluster<8, 32, 8, 8, 4>(P);
    time_cluster<8, 32, 8, 16, 4>(P);
    for (int S : {16, 32}) {
      const int chunk = (n + S - 1) / S;
      char name[64];
      std::snprintf(name, sizeof name, "atomic %d, 128 cols x 8 groups, 8", S);
      report(P, name, [&] {
        launch(dim3(n / 128, S), dim3(256), 1, atomic_sum<32, 8, 8>, P.out, (const float*)P.m, n, n, chunk);
      }, true);
    }
    PROBE_CHECK(cudaFree(P.m));
    PROBE_CHECK(cudaFree(P.out));
    PROBE_CHECK(cudaFree(P.partials));
    PROBE_CHECK(cudaFree(P.counters));
  }
}
