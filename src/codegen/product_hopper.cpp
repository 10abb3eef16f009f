// SPDX-License-Identifier: Apache-2.0
// The Hopper path's main loop (sm_90a) of a generated product: what codegen/emit_product.cpp writes before the
// kernel when the tiles have consumer warpgroups (codegen/product_variant.hpp).
#include "codegen/product_hopper.hpp"

#include <fmt/format.h>

namespace fusion::codegen {
namespace {

/// The Hopper path's block (sm_90a). Warpgroup 0 issues the bulk tensor copies (one thread) that fill STAGES
/// stages of operand tiles, 128-byte swizzled as wgmma's descriptors describe them; warpgroups 1.. each
/// multiply 64 rows of the block's tile by all its columns (wgmma m64nBNk16, accumulators in registers). Two
/// mbarriers a stage: `full` (the copies' bytes have landed) and `empty` (every consumer is done with it).
/// Then the consumers put the accumulators in shared memory (over the stages) for the epilogue, which they
/// alone run: the producer warpgroup has left.
constexpr const char* kLoop = R"(constexpr int FZ_THREADS = 128 * (FZ_WARPGROUPS + 1), FZ_CONSUMERS = 128 * FZ_WARPGROUPS;
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
// wgmma's descriptor of a 128-byte-swizzled operand tile at `at` (PTX ISA, "Matrix Descriptor Format"): `lbo`
// bytes between 64-element blocks of the contiguous dimension (MN-major tiles), `sbo` between 8-row groups.
__device__ __forceinline__ unsigned long long fz_desc(unsigned at, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((at & 0x3FFFF) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
         (unsigned long long)(sbo >> 4) << 32 | 1ull << 62;
}

// The tile of a·b at (m0, n0) into `cs` (float, FZ_C_LD apart); true for the consumers, false for the producer
// warpgroup (which must not touch `cs`). `bars`: 2 * FZ_STAGES mbarriers; `base`: the stages, 1024-aligned.
__device__ __forceinline__ bool fz_product_tile(float* cs, unsigned base, unsigned long long* bars,
                                                const FzTensorMap* ta, const FzTensorMap* tb, long long K, int m0,
                                                int n0, int batch_a, int batch_b) {
  const unsigned full = fz_shared(bars), empty = full + 8 * FZ_STAGES;
  const int tiles = (int)((K + FZ_BK - 1) / FZ_BK), wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < FZ_STAGES; ++s) fz_bar_init(full + 8 * s, 1), fz_bar_init(empty + 8 * s, FZ_WARPGROUPS);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {  // the producer: few registers, one thread issuing
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x != 0) return false;
    for (int t = 0; t < tiles; ++t) {
      const int s = t % FZ_STAGES;
      fz_bar_wait(empty + 8 * s, ((t / FZ_STAGES) & 1) ^ 1);  // (a new barrier's preceding phase counts as done)
      fz_bar_expect(full + 8 * s, FZ_STAGE);
      const unsigned as = base + s * FZ_STAGE, bs = as + FZ_A_STAGE;
      if constexpr (FZ_A_ROWS) {
        fz_copy_box(as, ta, full + 8 * s, t * FZ_BK, m0, batch_a);
      } else {
#pragma unroll
        for (int j = 0; j < FZ_BM / 64; ++j) fz_copy_box(as + j * 64 * FZ_BK * 2, ta, full + 8 * s, m0 + 64 * j, t * FZ_BK, batch_a);
      }
      if constexpr (FZ_B_ROWS) {
#pragma unroll
        for (int j = 0; j < FZ_BN / 64; ++j) fz_copy_box(bs + j * 64 * FZ_BK * 2, tb, full + 8 * s, n0 + 64 * j, t * FZ_BK, batch_b);
      } else {
        fz_copy_box(bs, tb, full + 8 * s, t * FZ_BK, n0, batch_b);
      }
    }
    return false;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int c = wg - 1;  // this consumer's 64 rows of the tile
  float d[FZ_BN / 2];
#pragma unroll
  for (int i = 0; i < FZ_BN / 2; ++i) d[i] = 0.0f;
  for (int t = 0; t < tiles; ++t) {
    const int s = t % FZ_STAGES;
    fz_bar_wait(full + 8 * s, (t / FZ_STAGES) & 1);
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
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // tile t - 1's products are done
    if (t > 0 && threadIdx.x % 128 == 0) fz_bar_arrive(empty + 8 * ((t - 1) % FZ_STAGES));
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < FZ_BN / 2; ++i) asm volatile("" : "+f"(d[i])::"memory");  // (read after the wait, not before)
  asm volatile("bar.sync 1, %0;\n" ::"n"(FZ_CONSUMERS) : "memory");  // every consumer is done with the stages
  // wgmma's accumulators: warp w's lane (g = lane / 4, q = lane % 4) holds, per 8 columns j, rows 16w + g and
  // 16w + g + 8, columns 8j + 2q and 8j + 2q + 1
  const int lane = threadIdx.x % 32, row = c * 64 + (threadIdx.x % 128) / 32 * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < FZ_BN / 8; ++j) {
    float* at = cs + row * FZ_C_LD + j * 8 + lane % 4 * 2;
    *reinterpret_cast<float2*>(at) = make_float2(d[4 * j], d[4 * j + 1]);
    *reinterpret_cast<float2*>(at + 8 * FZ_C_LD) = make_float2(d[4 * j + 2], d[4 * j + 3]);
  }
  asm volatile("bar.sync 1, %0;\n" ::"n"(FZ_CONSUMERS) : "memory");
  return true;
}
)";

}  // namespace

std::string_view hopper_loop() { return kLoop; }

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
