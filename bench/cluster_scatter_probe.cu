// SPDX-License-Identifier: Apache-2.0
// index_add of 2^26 float32 values into 2^20 bins (uniform random int64 ids): global atomics (fusion's kernel today,
// at the L2's rate of random atomics) against bins held in a cluster's distributed shared memory: a cluster of C
// blocks holds 1/G of the bins (G groups of clusters; each group reads every value, adds the ones in its range with
// shared::cluster atomics, then adds its bins to the global ones coalesced). 16 blocks of 128 KB hold half the bins,
// so each value is read twice; 8 blocks a quarter, four times.
// Not part of the build (plain CUDA):  nvcc -arch=sm_90 -O3 bench/cluster_scatter_probe.cu -o /tmp/cs && /tmp/cs
#include <cooperative_groups.h>
#include <cstdint>
#include <cmath>
#include "probe_timing.cuh"
namespace cg = cooperative_groups;

__global__ void atomics_fed(float* bins, const long long* __restrict__ ids, const float* __restrict__ v, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    atomicAdd(bins + ids[i], v[i]);
}

__device__ __forceinline__ void red_cluster(float* local, int rank, int off, float x) {
  unsigned a = (unsigned)__cvta_generic_to_shared(local + off), r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  asm volatile("red.shared::cluster.add.f32 [%0], %1;" :: "r"(r), "f"(x) : "memory");
}

template <bool kPtx>
__global__ void cluster_bins(float* bins, const long long* __restrict__ ids, const float* __restrict__ v, long long n,
                             int groups, int per_block) {
  extern __shared__ float sbins[];
  cg::cluster_group cluster = cg::this_cluster();
  const int csize = (int)cluster.num_blocks(), rank = (int)cluster.block_rank();
  const int cid = blockIdx.x / csize, nclusters = gridDim.x / csize;
  const int group = cid % groups, slice = cid / groups, slices = nclusters / groups;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) sbins[i] = 0;
  cluster.sync();
  const long long range = (long long)per_block * csize, lo = range * group;
  const long long chunk = (n + slices - 1) / slices, b = slice * chunk, e = b + chunk < n ? b + chunk : n;
  for (long long i = b + (long long)rank * blockDim.x + threadIdx.x; i < e; i += (long long)csize * blockDim.x) {
    const unsigned long long id = (unsigned long long)(ids[i] - lo);
    if (id < (unsigned long long)range) {
      const int r = (int)(id / per_block), off = (int)(id % per_block);
      if (kPtx) red_cluster(sbins, r, off, v[i]);
      else atomicAdd(cluster.map_shared_rank(sbins, r) + off, v[i]);
    }
  }
  cluster.sync();
  for (int i = threadIdx.x; i < per_block; i += blockDim.x)
    if (sbins[i] != 0.f) atomicAdd(bins + lo + (long long)rank * per_block + i, sbins[i]);
}

int main() {
  probe_warm_up();
  const long long n = 1ll << 26;
  const int nbins = 1 << 20;
  float *bins, *v, *ref;
  long long* ids;
  PROBE_CHECK(cudaMalloc(&bins, nbins * 4ull));
  PROBE_CHECK(cudaMalloc(&ref, nbins * 4ull));
  PROBE_CHECK(cudaMalloc(&ids, n * 8));
  PROBE_CHECK(cudaMalloc(&v, n * 4));
  std::vector<long long> hid(n);
  std::vector<float> hv(n);
  unsigned s = 5;
  for (long long i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u; hid[i] = (s >> 8) & (nbins - 1);
    s = s * 1664525u + 1013904223u; hv[i] = (float)(s >> 8) * 0x1p-24f;
  }
  PROBE_CHECK(cudaMemcpy(ids, hid.data(), n * 8, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(v, hv.data(), n * 4, cudaMemcpyHostToDevice));
  uint4 *cx, *cy;
  PROBE_CHECK(cudaMalloc(&cx, 1ull << 30));
  PROBE_CHECK(cudaMalloc(&cy, 1ull << 30));
  const float c = median_ms([&] { probe_copy<<<132 * 8, 512>>>(cx, cy, (1ll << 30) / 16); });
  const double bw = 2.0 * (1ull << 30) / (c * 1e-3) / 1e9;
  std::printf("copy %.1f GB/s; index_add's least bytes 12 a value: limit %.1f us\n", bw, 12.0 * n / bw / 1e3);
  std::vector<float> want(nbins), got(nbins);
  PROBE_CHECK(cudaMemset(ref, 0, nbins * 4ull));
  atomics_fed<<<132 * 8, 256>>>(ref, ids, v, n);
  PROBE_CHECK(cudaMemcpy(want.data(), ref, nbins * 4ull, cudaMemcpyDeviceToHost));
  const float base = median_ms([&] { atomics_fed<<<132 * 8, 256>>>(bins, ids, v, n); });
  std::printf("global atomics fed: %.1f us (%.1f%% of the limit)\n", base * 1e3, 100.0 * 12.0 * n / bw / 1e3 / (base * 1e3));
  for (int csize : {16, 8}) {
    for (int threads : {1024, 512}) {
      for (int ptx : {1, 0}) {
        const int per_block = 32768, groups = nbins / (per_block * csize);
        auto kernel = ptx ? cluster_bins<true> : cluster_bins<false>;
        PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, per_block * 4));
        PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = csize; attr[0].val.clusterDim.y = 1; attr[0].val.clusterDim.z = 1;
        cfg.blockDim = dim3(threads); cfg.dynamicSmemBytes = per_block * 4; cfg.attrs = attr; cfg.numAttrs = 1;
        cfg.gridDim = dim3(csize);
        int active = 0;
        PROBE_CHECK(cudaOccupancyMaxActiveClusters(&active, (void*)kernel, &cfg));
        const int nclusters = active / groups * groups;
        if (nclusters == 0) { std::printf("C=%d: no cluster fits\n", csize); continue; }
        cfg.gridDim = dim3(nclusters * csize);
        auto launch = [&] { PROBE_CHECK(cudaLaunchKernelEx(&cfg, kernel, bins, (const long long*)ids, (const float*)v, n, groups, per_block)); };
        PROBE_CHECK(cudaMemset(bins, 0, nbins * 4ull));
        launch();
        PROBE_CHECK(cudaDeviceSynchronize());
        PROBE_CHECK(cudaMemcpy(got.data(), bins, nbins * 4ull, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int i = 0; i < nbins; ++i) worst = std::max(worst, std::fabs((double)got[i] - want[i]) / std::max(1.0, std::fabs((double)want[i])));
        const float t = median_ms(launch);
        std::printf("C=%2d G=%d threads %4d %s: %2d clusters (%d active), %.1f us (%.2fx the atomics, %.1f%% of the limit), worst rel diff %.2g\n",
                    csize, groups, threads, ptx ? "red.shared::cluster" : "atomicAdd generic ", nclusters, active, t * 1e3, base / t,
                    100.0 * 12.0 * n / bw / 1e3 / (t * 1e3), worst);
      }
    }
  }
}
