// SPDX-License-Identifier: Apache-2.0
// Why fz::random's generators run below the write limit on an H200: the same Philox-4x32-10 stream and the same
// uniform / normal values as src/runtime/exec/random.cpp, written several ways, timed beside a plain store of 2^26
// floats, each checked bit for bit against the first way.
// Not part of the build (plain CUDA, no fusion):
//   nvcc -arch=sm_90 -O3 bench/random_probe.cu -o /tmp/rp && /tmp/rp && cuobjdump -sass /tmp/rp | ...
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "probe_philox.cuh"  // Block, philox_hilo: as fusion writes it today

// Both words of each product from one 32x32->64 multiply (mul.wide.u32).
__device__ __forceinline__ Block philox_wide(unsigned long long seed, unsigned long long offset,
                                             unsigned long long blk) {
  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
  unsigned c0 = (unsigned)offset, c1 = (unsigned)(offset >> 32), c2 = (unsigned)blk, c3 = (unsigned)(blk >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const unsigned long long p0 = (unsigned long long)c0 * 0xD2511F53u, p1 = (unsigned long long)c2 * 0xCD9E8D57u;
    c0 = (unsigned)(p1 >> 32) ^ c1 ^ k0;
    c1 = (unsigned)p1;
    c2 = (unsigned)(p0 >> 32) ^ c3 ^ k1;
    c3 = (unsigned)p0;
  }
  return {c0, c1, c2, c3};
}

// The same with mul.wide spelled in PTX, in case the compiler splits the C++ form back into two.
__device__ __forceinline__ void mulwide(unsigned a, unsigned b, unsigned& hi, unsigned& lo) {
  unsigned long long p;
  asm("mul.wide.u32 %0, %1, %2;" : "=l"(p) : "r"(a), "r"(b));
  hi = (unsigned)(p >> 32);
  lo = (unsigned)p;
}
__device__ __forceinline__ Block philox_ptx(unsigned long long seed, unsigned long long offset,
                                            unsigned long long blk) {
  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
  unsigned c0 = (unsigned)offset, c1 = (unsigned)(offset >> 32), c2 = (unsigned)blk, c3 = (unsigned)(blk >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    unsigned hi0, lo0, hi1, lo1;
    mulwide(0xD2511F53u, c0, hi0, lo0);
    mulwide(0xCD9E8D57u, c2, hi1, lo1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return {c0, c1, c2, c3};
}

template <int Way>
__device__ __forceinline__ Block philox(unsigned long long s, unsigned long long o, unsigned long long b) {
  if constexpr (Way == 0)
    return philox_hilo(s, o, b);
  else if constexpr (Way == 1)
    return philox_wide(s, o, b);
  else
    return philox_ptx(s, o, b);
}

// uniform<float>: element 4v + k is word k of block v, 24 bits.
template <int Way>
__global__ void __launch_bounds__(256) uniform(float4* out, unsigned long long seed, unsigned long long off, int nv) {
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x) {
    const Block b = philox<Way>(seed, off, (unsigned long long)v);
    const float s = 5.9604644775390625e-8f;
    out[v] =
        make_float4((float)(b.c0 >> 8) * s, (float)(b.c1 >> 8) * s, (float)(b.c2 >> 8) * s, (float)(b.c3 >> 8) * s);
  }
}

// normal<float>: element 2b + j takes words (2j, 2j + 1) of block b: sqrt(-2 log u1) cospi(2 u2).
__device__ __forceinline__ float box_muller(unsigned lo, unsigned hi) {
  const float u1 = ((float)(lo >> 8) + 1.f) * 5.9604644775390625e-8f;
  const float u2 = (float)(hi >> 8) * 5.9604644775390625e-8f;
  return sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
}
template <int Way>
__global__ void __launch_bounds__(256) normal(float4* out, unsigned long long seed, unsigned long long off, int nv) {
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x) {
    const Block a = philox<Way>(seed, off, 2ull * v), b = philox<Way>(seed, off, 2ull * v + 1);
    out[v] =
        make_float4(box_muller(a.c0, a.c1), box_muller(a.c2, a.c3), box_muller(b.c0, b.c1), box_muller(b.c2, b.c3));
  }
}

// normal<float> from both of Box-Muller's outputs (cuRAND's pairing): words (c0, c1) give elements 4v, 4v + 1 as
// r cos, r sin; (c2, c3) give 4v + 2, 4v + 3: one Philox block, two logs and two sincospi for four values.
template <bool Fast>
__device__ __forceinline__ float2 box_muller_pair(unsigned lo, unsigned hi) {
  const float u1 = ((float)(lo >> 8) + 1.f) * 5.9604644775390625e-8f;
  const float u2 = (float)(hi >> 8) * 5.9604644775390625e-8f;
  const float r = sqrtf(-2.f * logf(u1));
  float s, c;
  if constexpr (Fast)
    __sincosf(6.2831853071795865f * u2, &s, &c);
  else
    sincospif(2.f * u2, &s, &c);
  return make_float2(r * c, r * s);
}
template <bool Fast>
__global__ void __launch_bounds__(256)
    normal_pairs(float4* out, unsigned long long seed, unsigned long long off, int nv) {
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x) {
    const Block a = philox<0>(seed, off, (unsigned long long)v);
    const float2 p = box_muller_pair<Fast>(a.c0, a.c1), q = box_muller_pair<Fast>(a.c2, a.c3);
    out[v] = make_float4(p.x, p.y, q.x, q.y);
  }
}
// normal<double>: today one block per element (53-bit u1 from c0,c1 and u2 from c2,c3, r cospi); as pairs, r cospi
// and r sinpi from the same block give two elements.
__global__ void __launch_bounds__(256) normal64(double2* out, unsigned long long seed, unsigned long long off, int n2) {
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n2; v += gridDim.x * blockDim.x) {
    double e[2];
    for (int j = 0; j < 2; ++j) {
      const Block b = philox<0>(seed, off, 2ull * v + j);
      const unsigned long long x = ((unsigned long long)b.c1 << 32) | b.c0, y = ((unsigned long long)b.c3 << 32) | b.c2;
      const double u1 = ((double)(x >> 11) + 1.0) * 1.1102230246251565e-16,
                   u2 = (double)(y >> 11) * 1.1102230246251565e-16;
      e[j] = sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
    }
    out[v] = make_double2(e[0], e[1]);
  }
}
__global__ void __launch_bounds__(256)
    normal64_pairs(double2* out, unsigned long long seed, unsigned long long off, int n2) {
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n2; v += gridDim.x * blockDim.x) {
    const Block b = philox<0>(seed, off, (unsigned long long)v);
    const unsigned long long x = ((unsigned long long)b.c1 << 32) | b.c0, y = ((unsigned long long)b.c3 << 32) | b.c2;
    const double u1 = ((double)(x >> 11) + 1.0) * 1.1102230246251565e-16,
                 u2 = (double)(y >> 11) * 1.1102230246251565e-16;
    const double r = sqrt(-2.0 * log(u1));
    double s, c;
    sincospi(2.0 * u2, &s, &c);
    out[v] = make_double2(r * c, r * s);
  }
}

__global__ void store(float4* out, int nv) {
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x)
    out[v] = make_float4(1, 2, 3, 4);
}

template <class F>
float median_ms(F f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 15; ++r) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (r >= 3) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  const int n = 1 << 26, nv = n / 4;
  float4 *out, *ref;
  cudaMalloc(&out, n * 4ull);
  cudaMalloc(&ref, n * 4ull);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::vector<float> h(n), r(n);
  const double bytes = n * 4.0;
  const float st = median_ms([&] { store<<<sms * 8, 256>>>(out, nv); });
  std::printf("store of 2^26 float32: %.1f us (%.0f GB/s), %d SMs\n", st * 1e3, bytes / (st * 1e-3) / 1e9, sms);
  auto run = [&](const char* name, auto kernel, int grid, bool first) {
    const float ms = median_ms([&] { kernel<<<grid, 256>>>(out, 7ull, 3ull, nv); });
    cudaMemcpy(h.data(), out, n * 4ull, cudaMemcpyDeviceToHost);
    if (first) r = h;
    const bool same = std::memcmp(h.data(), r.data(), n * 4ull) == 0;
    std::printf("%-28s grid %6d: %7.1f us  %5.1f%% of the store  %s\n", name, grid, ms * 1e3, 100.0 * st / ms,
                same ? "bits equal" : "BITS DIFFER");
  };
  for (int g : {sms * 8, sms * 16, nv / 256}) {
    run("uniform mul.hi+mul.lo", uniform<0>, g, true);
    run("uniform wide (C++)", uniform<1>, g, false);
    run("uniform wide (PTX)", uniform<2>, g, false);
  }
  for (int g : {sms * 8, sms * 16, nv / 256}) {
    run("normal mul.hi+mul.lo", normal<0>, g, true);
    run("normal wide (C++)", normal<1>, g, false);
    run("normal wide (PTX)", normal<2>, g, false);
  }
  for (int g : {sms * 8, sms * 16, nv / 256}) {
    run("normal pairs, sincospif", normal_pairs<false>, g, true);
    run("normal pairs, __sincosf", normal_pairs<true>, g, false);
  }
  // float64: 2^26 doubles (512 MiB written; the store's rate stands for the limit)
  double2* d;
  cudaMalloc(&d, n * 8ull);
  for (int g : {sms * 8, sms * 16, n / 2 / 256}) {
    const float a = median_ms([&] { normal64<<<g, 256>>>(d, 7ull, 3ull, n / 2); });
    const float b = median_ms([&] { normal64_pairs<<<g, 256>>>(d, 7ull, 3ull, n / 2); });
    std::printf(
        "normal<double> grid %6d: one block a value %7.1f us (%5.1f%%), pairs %7.1f us (%5.1f%% of the store's rate)\n",
        g, a * 1e3, 200.0 * st / a, b * 1e3, 200.0 * st / b);
  }
  return cudaGetLastError() != cudaSuccess;
}
