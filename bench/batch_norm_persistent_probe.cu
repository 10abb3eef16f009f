// SPDX-License-Identifier: Apache-2.0
// A batch norm as one grid-persistent kernel (issue 35: training-forward batch norm of (8, 64, 112, 112) float32 at
// 59% of the copy limit on the H200 as fusion generates it, clusters of 8 blocks a channel; target 80%). The tensor
// (25.7 MB) fits the SMs' shared memory together, so each of one block per SM copies its part of the tensor into
// shared memory once (cp.async, every copy in flight), computes the exact mean and sum of squared deviations of each
// (n, c) segment it holds (two passes over shared memory), publishes them, waits at a grid barrier, combines the 8
// segments of each of its channels (Chan's formula, in double, in a fixed order) and writes y = x * scale + shift
// from shared memory: the input read once, the output written once, one barrier in between. bn_pipelined does the same
// for the two halves of the channels out of step, so that the memory stays busy through each half's statistics.
// Timed (events around 10 launches, median of 9) beside a copy of the same bytes; checked against float64 on the host.
// Not part of the build (plain CUDA):  nvcc -arch=sm_90 -O3 bench/batch_norm_persistent_probe.cu -o /tmp/bnp && /tmp/bnp
#include <cmath>
#include <cstdint>

#include "probe_timing.cuh"

constexpr int kN = 8, kC = 64, kHW = 112 * 112, kSegments = kN * kC;  // a segment: (n, c), kHW contiguous floats
constexpr int kVec = kHW / 4;                                             // float4s a segment
constexpr int kMaxSegments = 4;                                           // a block's, at most (512 over >= 128 SMs)

struct Barrier {
  unsigned count[2];  // each grows by the grid's size a launch: a launch waits for the next multiple
};

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <int T> __device__ __forceinline__ void block_sums(float (&a)[kMaxSegments], float* scratch) {
  #pragma unroll
  for (int s = 0; s < kMaxSegments; ++s) {
    #pragma unroll
    for (int d = 16; d > 0; d >>= 1) a[s] += __shfl_down_sync(0xffffffffu, a[s], d);
  }
  if (threadIdx.x % 32 == 0)
    #pragma unroll
    for (int s = 0; s < kMaxSegments; ++s) scratch[s * (T / 32) + threadIdx.x / 32] = a[s];
  __syncthreads();
  #pragma unroll
  for (int s = 0; s < kMaxSegments; ++s) {
    float v = threadIdx.x % 32 < T / 32 ? scratch[s * (T / 32) + threadIdx.x % 32] : 0.f;
    #pragma unroll
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    a[s] = __shfl_sync(0xffffffffu, v, 0);
  }
  __syncthreads();  // scratch is reused
}

/// The grid's barrier: every block arrives (after its writes, fenced), then waits for the launch's last arrival.
__device__ __forceinline__ void grid_wait(unsigned* count) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned ticket = atomicAdd(count, 1u);
    const unsigned target = (ticket / gridDim.x + 1) * gridDim.x;
    while ((int)(load_acquire(count) - target) < 0) __nanosleep(32);
  }
  __syncthreads();
}

/// Queues the copies of segment `seg` into shared slot `slot` (16 bytes each, no registers staging them).
template <int T> __device__ __forceinline__ void copy_segment(float4* held, int slot, const float* x, int seg) {
  const float4* src = reinterpret_cast<const float4*>(x) + (long long)seg * kVec;
  for (int i = threadIdx.x; i < kVec; i += T) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(held + slot * kVec + i);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + i) : "memory");
  }
}

/// The exact mean and sum of squared deviations of slots [0, count) of `held` (two passes over shared memory), published
/// as stats[seg[k]] by thread k.
template <int T>
__device__ __forceinline__ void publish_stats(const float4* held, int count, const int (&seg)[kMaxSegments], float2* stats,
                                              float* scratch) {
  float a[kMaxSegments];
  #pragma unroll
  for (int s = 0; s < kMaxSegments; ++s) {
    a[s] = 0.f;
    if (s < count)
      for (int i = threadIdx.x; i < kVec; i += T) {
        const float4 v = held[s * kVec + i];
        a[s] += (v.x + v.y) + (v.z + v.w);
      }
  }
  block_sums<T>(a, scratch);
  float mean[kMaxSegments];
  #pragma unroll
  for (int s = 0; s < kMaxSegments; ++s) {
    mean[s] = a[s] / kHW;
    a[s] = 0.f;
    if (s < count)
      for (int i = threadIdx.x; i < kVec; i += T) {
        const float4 v = held[s * kVec + i];
        const float dx = v.x - mean[s], dy = v.y - mean[s], dz = v.z - mean[s], dw = v.w - mean[s];
        a[s] += (dx * dx + dy * dy) + (dz * dz + dw * dw);
      }
  }
  block_sums<T>(a, scratch);
  #pragma unroll
  for (int s = 0; s < kMaxSegments; ++s)
    if (threadIdx.x == s && s < count) {
      stats[seg[s]] = make_float2(mean[s], a[s]);
      __threadfence();  // (each writer: seen before the barrier's arrival)
    }
}

/// Thread k < count: the scale and shift of segment seg[k]'s channel, its 8 segments combined in order of n (Chan's
/// formula, equal counts, in double).
__device__ __forceinline__ void channel_scales(int count, const int (&seg)[kMaxSegments], const float2* stats,
                                               const float* gamma, const float* beta, float2* scale_shift) {
  #pragma unroll
  for (int s = 0; s < kMaxSegments; ++s)
    if (threadIdx.x == s && s < count) {
      const int c = seg[s] % kC;
      double m = 0, m2 = 0, means[kN];
      for (int n = 0; n < kN; ++n) {
        const float2 st = __ldcg(stats + n * kC + c);
        means[n] = st.x, m += st.x, m2 += st.y;
      }
      m /= kN;
      for (int n = 0; n < kN; ++n) m2 += (double)kHW * (means[n] - m) * (means[n] - m);
      const double scale = (double)gamma[c] / sqrt(m2 / ((double)kN * kHW) + 1e-5);
      scale_shift[s] = make_float2((float)scale, (float)((double)beta[c] - m * scale));
    }
}

/// y of slots [0, count) of `held`, segment seg[k] from slot k.
template <int T>
__device__ __forceinline__ void write_segments(const float4* held, int count, const int (&seg)[kMaxSegments],
                                               const float2* scale_shift, float* y) {
  for (int s = 0; s < count; ++s) {
    const float2 ss = scale_shift[s];
    float4* dst = reinterpret_cast<float4*>(y) + (long long)seg[s] * kVec;
    for (int i = threadIdx.x; i < kVec; i += T) {
      const float4 v = held[s * kVec + i];
      dst[i] = make_float4(fmaf(v.x, ss.x, ss.y), fmaf(v.y, ss.x, ss.y), fmaf(v.z, ss.x, ss.y), fmaf(v.w, ss.x, ss.y));
    }
  }
}

/// A block's shared memory beside the held segments: the block sums' scratch, the channels' scales and shifts.
template <int T> struct Staging {
  float scratch[kMaxSegments * (T / 32)];
  float2 scale_shift[kMaxSegments];
};

/// This block's share [first, first + count) of n items split evenly over the grid.
__device__ __forceinline__ int2 block_share(int n) {
  const int first = (int)((long long)blockIdx.x * n / gridDim.x), last = (int)((long long)(blockIdx.x + 1) * n / gridDim.x);
  return make_int2(first, last - first);
}

/// Every channel at once: all copies, the statistics, one barrier, all writes. barrier: 0 leaves the barrier out
/// (wrong results; the barrier's cost by difference).
template <int T, bool barrier>
__global__ void __launch_bounds__(T, 1) bn_persistent(const float* __restrict__ x, const float* __restrict__ gamma,
                                                      const float* __restrict__ beta, float* __restrict__ y,
                                                      float2* __restrict__ stats, Barrier* bar) {
  extern __shared__ __align__(16) float4 held[];
  __shared__ Staging<T> st;
  const auto [first, mine] = block_share(kSegments);  // segments [first, first + mine): one contiguous span of memory
  int seg[kMaxSegments];
  #pragma unroll
  for (int s = 0; s < kMaxSegments; ++s) seg[s] = first + s;
  for (int s = 0; s < mine; ++s) copy_segment<T>(held, s, x, seg[s]);
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  publish_stats<T>(held, mine, seg, stats, st.scratch);
  if (barrier) grid_wait(&bar->count[0]);
  channel_scales(mine, seg, stats, gamma, beta, st.scale_shift);
  __syncthreads();
  write_segments<T>(held, mine, seg, st.scale_shift, y);
}

/// Channels out of step: the first half of the channels, then the second. Each block queues the copies of its
/// segments of both halves at once; as the first half's land it takes their statistics and waits for theirs from
/// every block while the second half's still land, then writes the first half while it takes the second's
/// statistics: the memory stays busy through both waits.
template <int T>
__global__ void __launch_bounds__(T, 1) bn_pipelined(const float* __restrict__ x, const float* __restrict__ gamma,
                                                     const float* __restrict__ beta, float* __restrict__ y,
                                                     float2* __restrict__ stats, Barrier* bar) {
  extern __shared__ __align__(16) float4 held[];
  __shared__ Staging<T> st;
  constexpr int kHalf = kSegments / 2, kHalfC = kC / 2;
  const auto [first, mine] = block_share(kHalf);  // of each half's kHalf segments (at most 2)
  // half h's segment k: n = k / 32, c = 32 h + k % 32
  int seg[2][kMaxSegments];
  #pragma unroll
  for (int h = 0; h < 2; ++h)
    #pragma unroll
    for (int s = 0; s < kMaxSegments; ++s) {
      const int k = first + s;
      seg[h][s] = (k / kHalfC) * kC + h * kHalfC + k % kHalfC;
    }
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < mine; ++s) copy_segment<T>(held + h * 2 * kVec, s, x, seg[h][s]);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  for (int h = 0; h < 2; ++h) {
    if (h == 0) asm volatile("cp.async.wait_group 1;" ::: "memory");
    else asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    publish_stats<T>(held + h * 2 * kVec, mine, seg[h], stats, st.scratch);
    grid_wait(&bar->count[h]);
    channel_scales(mine, seg[h], stats, gamma, beta, st.scale_shift);
    __syncthreads();
    write_segments<T>(held + h * 2 * kVec, mine, seg[h], st.scale_shift, y);
    __syncthreads();  // scale_shift is reused
  }
}

int main() {
  probe_warm_up();
  int sms = 0;
  PROBE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const long long n = (long long)kSegments * kHW;
  std::vector<float> hx(n), hg(kC), hb(kC), hy(n);
  unsigned s = 4242;
  auto next = [&] { return s = s * 1664525u + 1013904223u, (float)(s >> 8) / 16777216.0f; };
  for (long long i = 0; i < n; ++i) hx[i] = 3.0f * next() - 1.0f + (float)((i / kHW) % kC) * 0.25f;  // per-channel offsets
  for (int c = 0; c < kC; ++c) hg[c] = 0.5f + next(), hb[c] = next() - 0.5f;
  float *x, *g, *b, *y, *spare;
  float2* stats;
  Barrier* bar;
  PROBE_CHECK(cudaMalloc(&x, n * 4));
  PROBE_CHECK(cudaMalloc(&y, n * 4));
  PROBE_CHECK(cudaMalloc(&spare, n * 4));
  PROBE_CHECK(cudaMalloc(&g, kC * 4));
  PROBE_CHECK(cudaMalloc(&b, kC * 4));
  PROBE_CHECK(cudaMalloc(&stats, kSegments * sizeof(float2)));
  PROBE_CHECK(cudaMalloc(&bar, sizeof(Barrier)));
  PROBE_CHECK(cudaMemset(bar, 0, sizeof(Barrier)));
  PROBE_CHECK(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(g, hg.data(), kC * 4, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(b, hb.data(), kC * 4, cudaMemcpyHostToDevice));
  // float64 reference
  std::vector<double> want(n);
  for (int c = 0; c < kC; ++c) {
    double m = 0, v = 0;
    for (int k = 0; k < kN; ++k)
      for (int j = 0; j < kHW; ++j) m += hx[((long long)k * kC + c) * kHW + j];
    m /= (double)kN * kHW;
    for (int k = 0; k < kN; ++k)
      for (int j = 0; j < kHW; ++j) v += (hx[((long long)k * kC + c) * kHW + j] - m) * (hx[((long long)k * kC + c) * kHW + j] - m);
    v /= (double)kN * kHW;
    for (int k = 0; k < kN; ++k)
      for (int j = 0; j < kHW; ++j) {
        const long long i = ((long long)k * kC + c) * kHW + j;
        want[i] = (hx[i] - m) / std::sqrt(v + 1e-5) * hg[c] + hb[c];
      }
  }
  const double bytes = 2.0 * n * 4 + 2 * kC * 4;
  const float copy_ms = median_ms([&] { probe_copy<<<132 * 8, 512>>>((const uint4*)x, (uint4*)spare, n / 4); });
  const float memcpy_ms = median_ms([&] { PROBE_CHECK(cudaMemcpyAsync(spare, x, n * 4, cudaMemcpyDeviceToDevice)); });
  std::printf("batch norm (8, 64, 112, 112) float32, %d SMs: copy of the same bytes %.1f us (%.0f GB/s), cudaMemcpy %.1f us (%.0f GB/s)\n",
              sms, copy_ms * 1e3, bytes / copy_ms / 1e6, memcpy_ms * 1e3, bytes / memcpy_ms / 1e6);
  auto run = [&](const char* name, auto kernel, int threads) {
    const int shared = kMaxSegments * kVec * 16;
    PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    int per_sm = 0;
    PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared));
    if (per_sm < 1) { std::printf("  %s: does not fit an SM\n", name); return; }
    auto launch = [&] {
      void* args[] = {&x, &g, &b, &y, &stats, &bar};
      PROBE_CHECK(cudaLaunchCooperativeKernel((const void*)kernel, dim3(sms), dim3(threads), args, shared, 0));
    };
    PROBE_CHECK(cudaMemset(y, 0xff, n * 4));  // poisoned
    launch();
    PROBE_CHECK(cudaDeviceSynchronize());
    PROBE_CHECK(cudaMemcpy(hy.data(), y, n * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (long long i = 0; i < n; ++i) worst = std::fmax(worst, std::fabs(hy[i] - want[i]) / (1.0 + std::fabs(want[i])));
    const float t = median_ms(launch);
    std::printf("  %-40s %6.1f us  %6.0f GB/s  %5.1f%% of the copy  worst error %.2e (relative to 1 + |y|)\n", name, t * 1e3,
                bytes / t / 1e6, bytes / t / 1e6 / (bytes / copy_ms / 1e6) * 100, worst);
  };
  run("persistent, 1024 threads a block", bn_persistent<1024, true>, 1024);
  run("persistent, 512 threads a block", bn_persistent<512, true>, 512);
  run("  without the barrier (wrong; its cost)", bn_persistent<1024, false>, 1024);
  run("pipelined halves, 1024 threads a block", bn_pipelined<1024>, 1024);
  run("pipelined halves, 512 threads a block", bn_pipelined<512>, 512);
  run("persistent, 1024 threads a block (again)", bn_persistent<1024, true>, 1024);
  run("pipelined halves, 1024 threads a block (again)", bn_pipelined<1024>, 1024);
  return 0;
}
