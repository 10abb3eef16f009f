// SPDX-License-Identifier: Apache-2.0
// Where an embedding lookup with RMSNorm loses its last points to the copy limit (issue 38: bf16(rms_norm(table[ids] +
// pos) * w), table 32,768 x 4,096, 16,384 ids, at 95.9-96.4% on the H200; the same RMSNorm without the gather 100.6%).
// The kernel fusion generates holds a row in registers: a block of 128 threads a row, each thread 4 vectors of 8 of
// the table's row and of pos, its id read first (112 registers, 4 blocks an SM). The variants here, each checked bit
// for bit against `one` (same threads, same order of the sums) and timed beside a copy of the same bytes:
//   one<T>            a block a row, T threads (as generated at T = 128)
//   one, ids in order the same kernel with ids 0, 1, 2, ...: the dependent load stays, the rows are read in order
//   one, no id        the row's index itself: no dependent load
//   rows<T, P, D>     a block takes P consecutive rows, its ids loaded at once before the first; D: the next row's loads
//                     issued before this row's reduction (two rows of registers)
// Not part of the build (plain CUDA):  nvcc -arch=sm_90 -O3 bench/embedding_probe.cu -o /tmp/emb && /tmp/emb
#include <cmath>
#include <cstdint>
#include <cstring>

#include "probe_timing.cuh"

__device__ __forceinline__ float bf2f(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short f2bf(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
template <class T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };
using V8 = Vec<unsigned short, 8>;

constexpr long long kCols = 4096;


/// A thread's vectors of a row: table row `id` plus pos row `row`.
template <int T> struct Part {
  static constexpr int R = kCols / 8 / T;
  V8 t[R], p[R];
  __device__ __forceinline__ void load(const unsigned short* table, const unsigned short* pos, long long id, long long row) {
    #pragma unroll
    for (int r = 0; r < R; ++r) {
      const long long j = (r * T + threadIdx.x) * 8;
      t[r] = *reinterpret_cast<const V8*>(table + id * kCols + j);
      p[r] = *reinterpret_cast<const V8*>(pos + row * kCols + j);
    }
  }
  __device__ __forceinline__ float squares() const {
    float a = 0.f;
    #pragma unroll
    for (int r = 0; r < R; ++r)
      #pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float x = __fadd_rn(bf2f(t[r].v[e]), bf2f(p[r].v[e]));
        a = __fadd_rn(a, __fmul_rn(x, x));
      }
    return a;
  }
  __device__ __forceinline__ void store(unsigned short* out, const unsigned short* w, long long row, float scale) const {
    #pragma unroll
    for (int r = 0; r < R; ++r) {
      const long long j = (r * T + threadIdx.x) * 8;
      const V8 wv = *reinterpret_cast<const V8*>(w + j);
      V8 o;
      #pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float x = __fadd_rn(bf2f(t[r].v[e]), bf2f(p[r].v[e]));
        o.v[e] = f2bf(__fmul_rn(__fmul_rn(x, scale), bf2f(wv.v[e])));
      }
      *reinterpret_cast<V8*>(out + row * kCols + j) = o;
    }
  }
};

__device__ __forceinline__ float scale_of(float sum) { return rsqrt(__fadd_rn(sum / (float)kCols, 1e-6f)); }

/// mode 0: ids[row]; 1: no id (the row itself)
template <int T, int mode>
__global__ void __launch_bounds__(T) one(const int* __restrict__ ids, const unsigned short* __restrict__ table,
                                         const unsigned short* __restrict__ pos, const unsigned short* __restrict__ w,
                                         unsigned short* __restrict__ out) {
  __shared__ float scratch[T / 32];
  const long long row = blockIdx.x;
  const long long id = mode == 0 ? ids[row] : row;
  Part<T> q;
  q.load(table, pos, id, row);
  const float s = block_sum<T>(q.squares(), scratch);
  q.store(out, w, row, scale_of(s));
}

template <int T, int P, bool D>
__global__ void __launch_bounds__(T) rows(const int* __restrict__ ids, const unsigned short* __restrict__ table,
                                          const unsigned short* __restrict__ pos, const unsigned short* __restrict__ w,
                                          unsigned short* __restrict__ out) {
  static_assert(P <= 32 && P % 2 == 0, "a warp's lanes hold the block's ids; rows go in pairs");
  __shared__ float scratch[2][T / 32];
  const long long first = (long long)blockIdx.x * P;
  const int mine = threadIdx.x % 32 < P ? ids[first + threadIdx.x % 32] : 0;  // every warp holds the block's ids
  const auto id = [&](int p) { return (long long)__shfl_sync(0xffffffffu, mine, p); };
  Part<T> a, b;  // rows p and p + 1 (named, not indexed: an array indexed in a loop would live in local memory)
  a.load(table, pos, id(0), first);
  if (D) b.load(table, pos, id(1), first + 1);
  #pragma unroll 1
  for (int p = 0; p < P; p += 2) {
    const float sa = block_sum<T>(a.squares(), scratch[0]);
    a.store(out, w, first + p, scale_of(sa));
    if (D && p + 2 < P) a.load(table, pos, id(p + 2), first + p + 2);
    if (!D) b.load(table, pos, id(p + 1), first + p + 1);
    const float sb = block_sum<T>(b.squares(), scratch[1]);
    b.store(out, w, first + p + 1, scale_of(sb));
    if (p + 2 < P) (D ? b : a).load(table, pos, id(p + (D ? 3 : 2)), first + p + (D ? 3 : 2));
  }
}

int main() {
  probe_warm_up();
  constexpr long long kVocab = 32768, kIds = 16384;
  const long long n = kIds * kCols;
  std::vector<unsigned short> htable(kVocab * kCols), hpos(n), hw(kCols);
  std::vector<int> hids(kIds), horder(kIds);
  unsigned s = 777;
  auto bf = [](float f) { unsigned u; std::memcpy(&u, &f, 4); return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); };
  auto next = [&] { return s = s * 1664525u + 1013904223u, s >> 8; };
  for (auto& v : htable) v = bf((float)(next() % 60000) / 10000.0f - 3.0f);
  for (auto& v : hpos) v = bf((float)(next() % 20000) / 10000.0f - 1.0f);
  for (auto& v : hw) v = bf((float)(next() % 20000) / 10000.0f);
  for (long long i = 0; i < kIds; ++i) hids[i] = (int)(next() % kVocab), horder[i] = (int)i;
  unsigned short *table, *pos, *w, *ref, *out, *spare;
  int *ids, *order;
  PROBE_CHECK(cudaMalloc(&table, kVocab * kCols * 2));
  PROBE_CHECK(cudaMalloc(&pos, n * 2));
  PROBE_CHECK(cudaMalloc(&w, kCols * 2));
  PROBE_CHECK(cudaMalloc(&ref, n * 2));
  PROBE_CHECK(cudaMalloc(&out, n * 2));
  PROBE_CHECK(cudaMalloc(&spare, n * 3));
  PROBE_CHECK(cudaMalloc(&ids, kIds * 4));
  PROBE_CHECK(cudaMalloc(&order, kIds * 4));
  PROBE_CHECK(cudaMemcpy(table, htable.data(), kVocab * kCols * 2, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(pos, hpos.data(), n * 2, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(w, hw.data(), kCols * 2, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(ids, hids.data(), kIds * 4, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(order, horder.data(), kIds * 4, cudaMemcpyHostToDevice));

  const double bytes = 3.0 * n * 2 + kIds * 4 + kCols * 2;  // a table row and a pos row read, a row written, per id
  // the limit: a copy of the same bytes (3 n of the table's read, as many written)
  const float copy_ms = median_ms([&] { probe_copy<<<132 * 8, 512>>>((const uint4*)table, (uint4*)spare, n * 3 / 16); });
  const double limit = bytes / copy_ms / 1e6;
  std::printf("embedding + RMSNorm bf16, %lld ids of a %lld x %lld table: copy of the same bytes %.1f us (%.0f GB/s)\n",
              kIds, kVocab, kCols, copy_ms * 1e3, limit);
  std::vector<unsigned short> want(n), got(n);
  auto reference = [&](const int* which) {
    one<128, 0><<<kIds, 128>>>(which, table, pos, w, ref);
    PROBE_CHECK(cudaDeviceSynchronize());
    PROBE_CHECK(cudaMemcpy(want.data(), ref, n * 2, cudaMemcpyDeviceToHost));
  };
  auto report = [&](const char* name, auto&& launch) {
    const Checked16 c = check_and_time16(out, got, want, launch);
    std::printf("  %-36s %7.1f us  %6.1f%% of the copy limit  %lld differ from one<128>, %lld by more than 1 ulp\n", name,
                c.ms * 1e3, bytes / c.ms / 1e6 / limit * 100, c.differ, c.far);
  };
  reference(ids);
  report("one<128> (as generated)", [&] { one<128, 0><<<kIds, 128>>>(ids, table, pos, w, out); });
  report("one<256>", [&] { one<256, 0><<<kIds, 256>>>(ids, table, pos, w, out); });
  report("rows<128, 2, prefetch ids>", [&] { rows<128, 2, false><<<kIds / 2, 128>>>(ids, table, pos, w, out); });
  report("rows<128, 4, prefetch ids>", [&] { rows<128, 4, false><<<kIds / 4, 128>>>(ids, table, pos, w, out); });
  report("rows<128, 16, prefetch ids>", [&] { rows<128, 16, false><<<kIds / 16, 128>>>(ids, table, pos, w, out); });
  report("rows<128, 4, two rows in flight>", [&] { rows<128, 4, true><<<kIds / 4, 128>>>(ids, table, pos, w, out); });
  report("rows<128, 16, two rows in flight>", [&] { rows<128, 16, true><<<kIds / 16, 128>>>(ids, table, pos, w, out); });
  report("rows<256, 4, two rows in flight>", [&] { rows<256, 4, true><<<kIds / 4, 256>>>(ids, table, pos, w, out); });
  report("rows<256, 16, two rows in flight>", [&] { rows<256, 16, true><<<kIds / 16, 256>>>(ids, table, pos, w, out); });
  reference(order);
  report("one<128>, ids in order", [&] { one<128, 0><<<kIds, 128>>>(order, table, pos, w, out); });
  report("one<128>, no id (the row itself)", [&] { one<128, 1><<<kIds, 128>>>(order, table, pos, w, out); });
  report("rows<128, 16, two in flight>, in order", [&] { rows<128, 16, true><<<kIds / 16, 128>>>(order, table, pos, w, out); });
  return 0;
}
