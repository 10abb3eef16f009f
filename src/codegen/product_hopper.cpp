// SPDX-License-Identifier: Apache-2.0
// The Hopper path (sm_90a) of a generated product: what codegen/emit_product.cpp writes before the kernel when
// the tiles have consumer warpgroups (codegen/product_variant.hpp).
#include "codegen/product_hopper.hpp"

#include <fmt/format.h>

#include "fusion/error.hpp"

namespace fusion::codegen {
namespace {

/// The Hopper path's block (sm_90a), persistent: it takes tiles blockIdx.x, + gridDim.x, ... in the grouped order
/// of fz_tile_at. Thread 0 issues the bulk tensor copies that fill FZ_STAGES stages of operand tiles, 128-byte
/// swizzled as wgmma's descriptors describe them, running ahead into the next tile; warpgroups 1.. (the
/// consumers) each multiply 64 rows of the tile by all its columns (wgmma m64nBNk16, accumulators in registers),
/// then round the accumulators to the operands' dtype (what the product's own step would store) into the staging
/// tile and go on with the next tile's products; warps 1-3 (the epilogue) apply the epilogue to the staged tile
/// and write it meanwhile. Mbarriers pace them: per stage `full` (the copies' bytes have landed) and `empty` (the
/// consumers are done with it); `staged` (the consumers have written the staging tile) and `drained` (the epilogue
/// has read it). With K split (FZ_SPLIT, a few tens of rows), a block's units are a tile and a slice of K each,
/// and only the last unit of a tile to finish stages anything: the sum of the tile's float partials.
constexpr const char* kLoop = R"(constexpr int FZ_CONSUMERS = 128 * FZ_WARPGROUPS, FZ_THREADS = FZ_CONSUMERS + 128, FZ_EPILOGUE = 96;
constexpr int FZ_A_STAGE = FZ_BM * FZ_BK * 2, FZ_STAGE = (FZ_BM + FZ_BN) * FZ_BK * 2, FZ_C_LD = FZ_BN + 8;
struct __align__(64) FzTensorMap { unsigned long long v[16]; };  // a CUtensorMap, built by the host

__device__ __forceinline__ unsigned fz_shared(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void fz_bar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void fz_bar_expect(unsigned bar, unsigned bytes) {  // arrive, and bytes to land
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void fz_bar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void fz_bar_wait(unsigned bar, unsigned parity) {  // until phase `parity` completes
  unsigned done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
// A box of the tensor `map` at (c0, c1, c2) into shared memory at `to`; its bytes count on `bar`.
__device__ __forceinline__ void fz_copy_box(unsigned to, const FzTensorMap* map, unsigned bar, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
               ::"r"(to), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
// ... the same box into every block of the cluster in `mask`, at the same shared address (each block's `bar`
// counts the bytes it receives)
__device__ __forceinline__ void fz_copy_box_all(unsigned to, const FzTensorMap* map, unsigned bar, int c0, int c1,
                                                int c2, unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%3, %4, %5}], [%2], %6;\n"
               ::"r"(to), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(mask) : "memory");
}
__device__ __forceinline__ unsigned fz_block_rank() {  // within the cluster
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of the cluster's blocks has arrived (shared-memory writes and barrier arrivals before it are seen)
__device__ __forceinline__ void fz_cluster_meet() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// A consumer warpgroup is done with a stage: one arrival at its `empty` barrier in every block of the cluster
// (where blocks share b's tiles, each block's copies fill the others' stages too)
__device__ __forceinline__ void fz_release(unsigned bar) {
  if constexpr (FZ_CLUSTER == 1) {
    fz_bar_arrive(bar);
  } else {
#pragma unroll
    for (unsigned r = 0; r < FZ_CLUSTER; ++r) {
      unsigned at;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(at) : "r"(bar), "r"(r));
      // (the default .release.cta order, as for a local arrival: the wgmma reads it orders are done; a .cluster
      // scope's fence here cost every step a wait)
      asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(at) : "memory");
    }
  }
}
// wgmma's descriptor of a 128-byte-swizzled operand tile at `at` (PTX ISA, "Matrix Descriptor Format"): `lbo`
// bytes between 64-element blocks of the contiguous dimension (MN-major tiles), `sbo` between 8-row groups.
__device__ __forceinline__ unsigned long long fz_desc(unsigned at, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((at & 0x3FFFF) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
         (unsigned long long)(sbo >> 4) << 32 | 1ull << 62;
}
// Two floats rounded to the operands' dtype, `lo` in the low half
__device__ __forceinline__ unsigned fz_round2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn." FZ_MMA_TYPE "x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// The product's tiles along M and N in one batch item; its work: `count` units, `split` slices of K (`slice`
// elements each, the last fewer) of every tile, a tile's slices neighbours. Unit u's tile corner and batch item:
// groups of FZ_GROUP row tiles, row fastest, so that the blocks running at once share their operands' panels in
// L2.
struct FzTiles { long long m, n, count, slice; int split; };
__device__ __forceinline__ void fz_tile_at(const FzTiles& tl, long long u, int& m0, int& n0, int& batch) {
  long long t = u / tl.split;
  const long long per_batch = tl.m * tl.n;
  batch = (int)(t / per_batch);
  t %= per_batch;
  const long long per_group = FZ_GROUP * tl.n, first = t / per_group * FZ_GROUP;
  const long long rows = tl.m - first < FZ_GROUP ? tl.m - first : FZ_GROUP;
  m0 = (int)((first + t % per_group % rows) * FZ_BM);
  n0 = (int)(t % per_group / rows * FZ_BN);
}

// The barriers (`bars`: 2 * FZ_STAGES + 2) set up; this thread's part: 0 the copies, 1 a consumer, 2 the
// epilogue, -1 none. (No setmaxnreg: ptxas allocates no more than the 168 registers a thread of 384 launches
// with anyway, and every part fits, the consumers' 128 accumulators among them: 154 for bias + GELU + residual.)
__device__ __forceinline__ int fz_hopper_role(unsigned long long* bars) {
  const unsigned full = fz_shared(bars), empty = full + 8 * FZ_STAGES, staged = empty + 8 * FZ_STAGES;
  if (threadIdx.x == 0) {
    for (int s = 0; s < FZ_STAGES; ++s) fz_bar_init(full + 8 * s, 1), fz_bar_init(empty + 8 * s, FZ_WARPGROUPS * FZ_CLUSTER);
    fz_bar_init(staged, FZ_CONSUMERS), fz_bar_init(staged + 8, FZ_EPILOGUE);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if constexpr (FZ_CLUSTER > 1) fz_cluster_meet();  // the others' barriers are set up before a copy or arrival reaches them
  return threadIdx.x >= 128 ? 1 : threadIdx.x == 0 ? 0 : threadIdx.x >= 32 ? 2 : -1;
}

// The copies of this block's tiles, FZ_STAGES ahead of the consumers.
__device__ __forceinline__ void fz_produce(unsigned base, unsigned long long* bars, const FzTensorMap* ta,
                                           const FzTensorMap* tb, long long K, const FzTiles& tl, bool batched_a,
                                           bool batched_b) {
  const unsigned full = fz_shared(bars), empty = full + 8 * FZ_STAGES;
  unsigned it = 0;  // steps issued, over all units
  for (long long unit = blockIdx.x; unit < tl.count; unit += gridDim.x) {
    int m0, n0, batch;
    fz_tile_at(tl, unit, m0, n0, batch);
    const int ba = batched_a ? batch : 0, bb = batched_b ? batch : 0;
    const long long k0 = unit % tl.split * tl.slice, k1 = k0 + tl.slice < K ? k0 + tl.slice : K;
    const int steps = (int)((k1 - k0 + FZ_BK - 1) / FZ_BK);
    for (int t = 0; t < steps; ++t, ++it) {
      const unsigned s = it % FZ_STAGES;
      fz_bar_wait(empty + 8 * s, ((it / FZ_STAGES) & 1) ^ 1);  // (a new barrier's preceding phase counts as done)
      fz_bar_expect(full + 8 * s, FZ_STAGE);
      const unsigned as = base + s * FZ_STAGE, bs = as + FZ_A_STAGE;
      const int k = (int)(k0 + t * FZ_BK);  // (a slice is whole steps: its last step's copies stop at K, not past it)
      if constexpr (FZ_A_ROWS) {
        fz_copy_box(as, ta, full + 8 * s, k, m0, ba);
      } else {
#pragma unroll
        for (int j = 0; j < FZ_BM / 64; ++j) fz_copy_box(as + j * 64 * FZ_BK * 2, ta, full + 8 * s, m0 + 64 * j, k, ba);
      }
      if constexpr (FZ_CLUSTER > 1) {  // this block's share of b's tile, into every block of the cluster
        const unsigned rank = fz_block_rank();
        constexpr unsigned short all = (1u << FZ_CLUSTER) - 1;
        if constexpr (FZ_B_ROWS) {
#pragma unroll
          for (int j = 0; j < FZ_BN / 64; ++j)
            if (j % FZ_CLUSTER == (int)rank) fz_copy_box_all(bs + j * 64 * FZ_BK * 2, tb, full + 8 * s, n0 + 64 * j, k, bb, all);
        } else {  // (the map's boxes are FZ_BN / FZ_CLUSTER columns of b: rows of 128 bytes here)
          constexpr int part = FZ_BN / FZ_CLUSTER;
          fz_copy_box_all(bs + rank * part * 128, tb, full + 8 * s, k, n0 + (int)rank * part, bb, all);
        }
      } else if constexpr (FZ_B_ROWS) {
#pragma unroll
        for (int j = 0; j < FZ_BN / 64; ++j) fz_copy_box(bs + j * 64 * FZ_BK * 2, tb, full + 8 * s, n0 + 64 * j, k, bb);
      } else {
        fz_copy_box(bs, tb, full + 8 * s, k, n0, bb);
      }
    }
  }
}

// A consumer warpgroup's products, unit after unit, each tile's 64 rows staged in `cs` (the operands' dtype,
// FZ_C_LD apart) once the epilogue has drained the one before. K split (FZ_SPLIT): each unit's float partial tile
// goes to `partials` (a tile's slices side by side); the last of a tile's units to finish (`counters`, one a
// tile) sums them in slice order, so the same bits every run, and stages the sum; the others stage nothing and
// say so in flags[1]. flags[0]: whether this unit is its tile's last.
__device__ __forceinline__ void fz_consume(unsigned short* cs, unsigned base, unsigned long long* bars, long long M,
                                           long long K, const FzTiles& tl, float* partials, unsigned* counters,
                                           volatile int* flags) {
  const unsigned full = fz_shared(bars), empty = full + 8 * FZ_STAGES, staged = empty + 8 * FZ_STAGES, drained = staged + 8;
  const int c = threadIdx.x / 128 - 1;
  // wgmma's accumulators: warp w's lane (g = lane / 4, q = lane % 4) holds, per 8 columns j, rows 16w + g and
  // 16w + g + 8, columns 8j + 2q and 8j + 2q + 1
  const int lane = threadIdx.x % 32, row = c * 64 + (threadIdx.x % 128) / 32 * 16 + lane / 4;
  unsigned it = 0, j = 0;  // steps consumed over all units; units
  for (long long unit = blockIdx.x; unit < tl.count; unit += gridDim.x, ++j) {
    const long long k0 = unit % tl.split * tl.slice, k1 = k0 + tl.slice < K ? k0 + tl.slice : K;
    const int steps = (int)((k1 - k0 + FZ_BK - 1) / FZ_BK);
    float d[FZ_BN / 2];
#pragma unroll
    for (int i = 0; i < FZ_BN / 2; ++i) d[i] = 0.0f;
    for (int t = 0; t < steps; ++t, ++it) {
      const unsigned s = it % FZ_STAGES;
      fz_bar_wait(full + 8 * s, (it / FZ_STAGES) & 1);
      const unsigned as = base + s * FZ_STAGE, bs = as + FZ_A_STAGE;
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < FZ_BK / 16; ++kk) {
        // K-major tiles (a by rows, b by columns): rows of 128 bytes, a k16 step is 32 bytes along them.
        // M/N-major tiles: blocks of 64 columns, FZ_BK rows of 128 bytes each; a k16 step is 16 rows down.
        const unsigned long long da = FZ_A_ROWS ? fz_desc(as + c * 64 * 128 + kk * 32, 16, 1024)
                                                : fz_desc(as + c * 64 * FZ_BK * 2 + kk * 2048, FZ_BK * 128, 1024);
        const unsigned long long db = FZ_B_ROWS ? fz_desc(bs + kk * 2048, FZ_BK * 128, 1024)
                                                : fz_desc(bs + kk * 32, 16, 1024);
        fz_wgmma<FZ_A_ROWS ? 0 : 1, FZ_B_ROWS ? 1 : 0>(d, da, db);
      }
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // step t - 1's products are done
      if (t > 0 && threadIdx.x % 128 == 0) fz_release(empty + 8 * ((it - 1) % FZ_STAGES));
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    if (threadIdx.x % 128 == 0) fz_release(empty + 8 * ((it - 1) % FZ_STAGES));
#pragma unroll
    for (int i = 0; i < FZ_BN / 2; ++i) asm volatile("" : "+f"(d[i])::"memory");  // (read after the wait, not before)
    bool stage = true;
    if constexpr (FZ_SPLIT) {
      int m0, n0, batch;
      fz_tile_at(tl, unit, m0, n0, batch);
      const long long tile = unit / tl.split;
      float* slices = partials + tile * tl.split * FZ_BM * FZ_BN;
      const bool r0 = m0 + row < M, r8 = m0 + row + 8 < M;  // (rows past M: not needed, not written)
#pragma unroll
      for (int q = 0; q < FZ_BN / 8; ++q) {
        float* at = slices + unit % tl.split * FZ_BM * FZ_BN + row * FZ_BN + q * 8 + lane % 4 * 2;
        if (r0) __stcg(reinterpret_cast<float2*>(at), make_float2(d[4 * q], d[4 * q + 1]));
        if (r8) __stcg(reinterpret_cast<float2*>(at + 8 * FZ_BN), make_float2(d[4 * q + 2], d[4 * q + 3]));
      }
      __threadfence();  // the partial is visible device-wide before the counter says so
      asm volatile("bar.sync 1, %0;\n" ::"n"(FZ_CONSUMERS) : "memory");
      if (threadIdx.x == 128) {
        flags[0] = atomicAdd(counters + tile, 1u) == (unsigned)tl.split - 1;
        if (flags[0]) counters[tile] = 0;  // (for the next launch)
      }
      asm volatile("bar.sync 1, %0;\n" ::"n"(FZ_CONSUMERS) : "memory");
      stage = flags[0];
      if (stage) {
        __threadfence();
#pragma unroll
        for (int i = 0; i < FZ_BN / 2; ++i) d[i] = 0.0f;
        for (int s = 0; s < tl.split; ++s)  // in slice order
#pragma unroll
          for (int q = 0; q < FZ_BN / 8; ++q) {
            const float* at = slices + s * FZ_BM * FZ_BN + row * FZ_BN + q * 8 + lane % 4 * 2;
            const float2 x = r0 ? __ldcg(reinterpret_cast<const float2*>(at)) : make_float2(0.f, 0.f);
            const float2 y = r8 ? __ldcg(reinterpret_cast<const float2*>(at + 8 * FZ_BN)) : make_float2(0.f, 0.f);
            d[4 * q] += x.x, d[4 * q + 1] += x.y, d[4 * q + 2] += y.x, d[4 * q + 3] += y.y;
          }
      }
    }
    fz_bar_wait(drained, (j & 1) ^ 1);  // the epilogue is done with the tile before
    if (stage) {
#pragma unroll
      for (int q = 0; q < FZ_BN / 8; ++q) {
        unsigned short* at = cs + row * FZ_C_LD + q * 8 + lane % 4 * 2;
        *reinterpret_cast<unsigned*>(at) = fz_round2(d[4 * q], d[4 * q + 1]);
        *reinterpret_cast<unsigned*>(at + 8 * FZ_C_LD) = fz_round2(d[4 * q + 2], d[4 * q + 3]);
      }
    }
    if (FZ_SPLIT && threadIdx.x == 128) flags[1] = !stage;
    fz_bar_arrive(staged);
  }
}
)";

}  // namespace

std::string_view hopper_loop() { return kLoop; }

std::string hopper_constants(const ProductVariant& v) {
  const ProductTiles& t = v.tiles;
  if (t.bk != kHopperBoxInner || t.bm != 64 * t.warpgroups || t.bn % 64 != 0 || t.bn > 256)
    throw Error("internal: a Hopper product tile is 64 rows a warpgroup, 64 along K, whole blocks of 64 columns");
  return fmt::format(
      "constexpr int FZ_BM = {}, FZ_BN = {}, FZ_BK = {}, FZ_WARPGROUPS = {}, FZ_STAGES = {}, FZ_GROUP = {}, FZ_AHEAD = {};\n"
      "constexpr bool FZ_SPLIT = {};\n"
      "constexpr int FZ_CLUSTER = {};  // blocks sharing b's tiles\n",
      t.bm, t.bn, t.bk, t.warpgroups, t.stages, kHopperGroup, t.ahead, v.split, v.cluster);
}

// (the wrapper's TA, TB: the operand tiles' transposes, 1 for M- or N-major)
std::string wgmma_wrapper(int bn) {
  const int r = bn / 2;
  std::string regs, outs;
  for (int i = 0; i < r; ++i) {
    regs += fmt::format("{}%{}", i ? ", " : "", i);
    outs += fmt::format("{}\"+f\"(d[{}])", i ? ", " : "", i);
  }
  return fmt::format(
      "template <int TA, int TB>\n"
      "__device__ __forceinline__ void fz_wgmma(float (&d)[{0}], unsigned long long da, unsigned long long db) {{\n"
      "  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{5}, 0;\\n\"\n"
      "               \"wgmma.mma_async.sync.aligned.m64n{1}k16.f32.\" FZ_MMA_TYPE \".\" FZ_MMA_TYPE\n"
      "               \" {{{2}}}, %{0}, %{3}, p, 1, 1, %{4}, %{6};\\n}}\\n\"\n"
      "               : {7}\n"
      "               : \"l\"(da), \"l\"(db), \"n\"(TA), \"r\"(1), \"n\"(TB));\n"
      "}}\n",
      r, bn, regs, r + 1, r + 2, r + 3, r + 4, outs);
}

}  // namespace fusion::codegen
