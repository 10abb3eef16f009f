// SPDX-License-Identifier: Apache-2.0
// The mma.sync path (sm_80 and later) of a generated product: what codegen/emit_product.cpp writes before the kernel
// when the tiles have no consumer warpgroups (codegen/product_variant.hpp).
#include "codegen/product_mma_sync.hpp"

namespace fusion::codegen {
namespace {

/// The block's product tile, the same for every kernel. Operand tiles lie in shared memory as their
/// operand lies in memory (its contiguous dimension inner, padded by 8 elements so that ldmatrix's eight
/// rows of a piece fall in different banks); STAGES of them are in flight. Then the float accumulators
/// go to shared memory (over the pipeline's tiles) for the epilogue to read in row order.
constexpr const char* kProductLoop = R"(constexpr int FZ_THREADS = FZ_WARPS_M * FZ_WARPS_N * 32;
constexpr int FZ_WTM = FZ_BM / FZ_WARPS_M, FZ_WTN = FZ_BN / FZ_WARPS_N;  // one warp's tile
constexpr int FZ_FM = FZ_WTM / 16, FZ_FN = FZ_WTN / 16;                  // its 16x16 fragments
constexpr int FZ_A_OUTER = FZ_A_ROWS ? FZ_BM : FZ_BK, FZ_A_INNER = FZ_A_ROWS ? FZ_BK : FZ_BM;
constexpr int FZ_B_OUTER = FZ_B_ROWS ? FZ_BK : FZ_BN, FZ_B_INNER = FZ_B_ROWS ? FZ_BN : FZ_BK;
constexpr int FZ_A_LD = FZ_A_INNER + 8, FZ_B_LD = FZ_B_INNER + 8, FZ_C_LD = FZ_BN + 4;
constexpr int FZ_A_TILE = FZ_A_OUTER * FZ_A_LD, FZ_B_TILE = FZ_B_OUTER * FZ_B_LD;

// Tensor-core fragments of mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), loaded from the
// shared tiles by ldmatrix: a lane's four 8x8 pieces of A (rows 0-7 and 8-15, k 0-7 and 8-15) and two of B.
// `.trans` where the tile lies the other way (A by columns, B by rows): the pieces arrive transposed.
__device__ __forceinline__ void fz_ldmatrix4(unsigned (&r)[4], const unsigned short* p) {
  const unsigned at = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
}
__device__ __forceinline__ void fz_ldmatrix4_trans(unsigned (&r)[4], const unsigned short* p) {
  const unsigned at = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
}
__device__ __forceinline__ void fz_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." FZ_MMA_TYPE "." FZ_MMA_TYPE
               ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// OUTER x INNER elements of an operand (rows `ld` apart) from (outer0, inner0) into shared memory at `s`;
// what lies at or past (outer_end, inner_end) reads as zero.
template <int OUTER, int INNER, int LD>
__device__ __forceinline__ void fz_load_tile(unsigned short* s, const unsigned short* g, long long ld, long long outer0,
                                             long long inner0, long long outer_end, long long inner_end) {
  if constexpr (FZ_ASYNC) {  // 16 bytes a copy (inner_end is a multiple of 8): a chunk lies wholly in or out
    constexpr int CHUNKS = OUTER * INNER / 8;
#pragma unroll
    for (int c0 = 0; c0 < CHUNKS; c0 += FZ_THREADS) {
      const int c = c0 + threadIdx.x;
      if (CHUNKS % FZ_THREADS != 0 && c >= CHUNKS) break;
      const int o = c / (INNER / 8), i = c % (INNER / 8) * 8;
      const bool in = outer0 + o < outer_end && inner0 + i < inner_end;
      const unsigned short* from = in ? g + (outer0 + o) * ld + inner0 + i : g;
      const unsigned to = (unsigned)__cvta_generic_to_shared(s + o * LD + i);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from), "r"(in ? 16 : 0));
    }
  } else {
    for (int e = threadIdx.x; e < OUTER * INNER; e += FZ_THREADS) {
      const int o = e / INNER, i = e % INNER;
      s[o * LD + i] = outer0 + o < outer_end && inner0 + i < inner_end ? g[(outer0 + o) * ld + inner0 + i]
                                                                       : (unsigned short)0;
    }
  }
}
__device__ __forceinline__ void fz_commit() {
  if constexpr (FZ_ASYNC) asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void fz_wait() {
  if constexpr (FZ_ASYNC) asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The tile of a·b at (m0, n0) over k in [k_begin, k_end) into `cs` (float, FZ_C_LD apart), through the
// pipeline in `smem`.
__device__ __forceinline__ void fz_product_tile(float* cs, unsigned short* smem, const unsigned short* a,
                                                const unsigned short* b, long long M, long long N, long long k_begin,
                                                long long k_end, long long lda, long long ldb, long long m0,
                                                long long n0) {
  unsigned short* as = smem;
  unsigned short* bs = smem + FZ_STAGES * FZ_A_TILE;
  const int warp = threadIdx.x / 32, wm = warp / FZ_WARPS_N, wn = warp % FZ_WARPS_N, lane = threadIdx.x % 32;
  float acc[FZ_FM][FZ_FN * 2][4];  // per 16-row and 8-column piece of the warp's tile: mma's d fragment
#pragma unroll
  for (int i = 0; i < FZ_FM; ++i)
#pragma unroll
    for (int j = 0; j < FZ_FN * 2; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
  // Where this lane's row of each 8x8 piece starts, relative to a fragment's corner (ldmatrix: lanes 8q..8q+7
  // address piece q's rows). A pieces in order (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15);
  // B pieces (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15): two n8 fragments.
  const int q = lane / 8, row = lane % 8;
  const int a_at = FZ_A_ROWS ? (q % 2 * 8 + row) * FZ_A_LD + q / 2 * 8 : (q / 2 * 8 + row) * FZ_A_LD + q % 2 * 8;
  const int b_at = FZ_B_ROWS ? (q % 2 * 8 + row) * FZ_B_LD + q / 2 * 8 : (q / 2 * 8 + row) * FZ_B_LD + q % 2 * 8;
  const long long tiles = (k_end - k_begin + FZ_BK - 1) / FZ_BK;
  auto load = [&](long long t, int stage) {
    const long long k0 = k_begin + t * FZ_BK;
    if constexpr (FZ_A_ROWS)
      fz_load_tile<FZ_A_OUTER, FZ_A_INNER, FZ_A_LD>(as + stage * FZ_A_TILE, a, lda, m0, k0, M, k_end);
    else
      fz_load_tile<FZ_A_OUTER, FZ_A_INNER, FZ_A_LD>(as + stage * FZ_A_TILE, a, lda, k0, m0, k_end, M);
    if constexpr (FZ_B_ROWS)
      fz_load_tile<FZ_B_OUTER, FZ_B_INNER, FZ_B_LD>(bs + stage * FZ_B_TILE, b, ldb, k0, n0, k_end, N);
    else
      fz_load_tile<FZ_B_OUTER, FZ_B_INNER, FZ_B_LD>(bs + stage * FZ_B_TILE, b, ldb, n0, k0, N, k_end);
  };
#pragma unroll
  for (int s = 0; s < FZ_STAGES - 1; ++s) {
    if (s < tiles) load(s, s);
    fz_commit();
  }
  for (long long t = 0; t < tiles; ++t) {
    fz_wait<FZ_STAGES - 2>();  // tile t has landed
    __syncthreads();           // ... for every thread, and every warp is done with tile t - 1's stage
    if (t + FZ_STAGES - 1 < tiles) load(t + FZ_STAGES - 1, (int)((t + FZ_STAGES - 1) % FZ_STAGES));
    fz_commit();
    const int stage = (int)(t % FZ_STAGES);
    const unsigned short* at = as + stage * FZ_A_TILE;
    const unsigned short* bt = bs + stage * FZ_B_TILE;
#pragma unroll
    for (int kk = 0; kk < FZ_BK; kk += 16) {
      unsigned fa[FZ_FM][4], fb[FZ_FN][4];  // fb[j]: the b fragments of n8 pieces 2j and 2j + 1
#pragma unroll
      for (int i = 0; i < FZ_FM; ++i) {
        const int r = wm * FZ_WTM + i * 16;  // the fragment's corner: (r, kk)
        if constexpr (FZ_A_ROWS) fz_ldmatrix4(fa[i], at + r * FZ_A_LD + kk + a_at);
        else fz_ldmatrix4_trans(fa[i], at + kk * FZ_A_LD + r + a_at);
      }
#pragma unroll
      for (int j = 0; j < FZ_FN; ++j) {
        const int c = wn * FZ_WTN + j * 16;  // the corner: (kk, c)
        if constexpr (FZ_B_ROWS) fz_ldmatrix4_trans(fb[j], bt + kk * FZ_B_LD + c + b_at);
        else fz_ldmatrix4(fb[j], bt + c * FZ_B_LD + kk + b_at);
      }
#pragma unroll
      for (int i = 0; i < FZ_FM; ++i)
#pragma unroll
        for (int j = 0; j < FZ_FN; ++j) {
          fz_mma(acc[i][2 * j], fa[i], fb[j][0], fb[j][1]);
          fz_mma(acc[i][2 * j + 1], fa[i], fb[j][2], fb[j][3]);
        }
    }
  }
  fz_wait<0>();
  __syncthreads();  // the pipeline's memory becomes the result tile
  // d fragment: lane (g = lane / 4, c = lane % 4) holds rows g and g + 8, columns 2c and 2c + 1
#pragma unroll
  for (int i = 0; i < FZ_FM; ++i)
#pragma unroll
    for (int j = 0; j < FZ_FN * 2; ++j) {
      float* at = cs + (wm * FZ_WTM + i * 16 + lane / 4) * FZ_C_LD + wn * FZ_WTN + j * 8 + lane % 4 * 2;
      *reinterpret_cast<float2*>(at) = make_float2(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<float2*>(at + 8 * FZ_C_LD) = make_float2(acc[i][j][2], acc[i][j][3]);
    }
  __syncthreads();
}

// K split over `split` blocks per tile: this block's slice of the tile goes to `partials` (its tile's
// `split` slices side by side); the last block of the tile to arrive sums them in slice order into `cs` and
// returns true (and resets the tile's counter for the next launch); the others return false.
__device__ __forceinline__ bool fz_sum_slices(float* cs, float* partials, unsigned* counter, int split, int slice) {
  __shared__ bool fz_last;
  constexpr int QUADS = FZ_BM * FZ_BN / 4;  // 16-byte pieces of a tile (FZ_BN and FZ_C_LD are multiples of 4)
  float4* mine = reinterpret_cast<float4*>(partials + (long long)slice * FZ_BM * FZ_BN);
  for (int e = threadIdx.x; e < QUADS; e += FZ_THREADS)
    __stcg(mine + e, *reinterpret_cast<const float4*>(cs + e * 4 / FZ_BN * FZ_C_LD + e * 4 % FZ_BN));
  __threadfence();  // the slice is visible device-wide before the counter says so
  __syncthreads();
  if (threadIdx.x == 0) {
    fz_last = atomicAdd(counter, 1u) == (unsigned)split - 1;
    if (fz_last) *counter = 0;
  }
  __syncthreads();
  if (!fz_last) return false;
  __threadfence();
  const float4* all = reinterpret_cast<const float4*>(partials);
  for (int e = threadIdx.x; e < QUADS; e += FZ_THREADS) {
    float4 s = __ldcg(all + e);
#pragma unroll 4
    for (int q = 1; q < split; ++q) {  // (in slice order: the same sums every run)
      const float4 t = __ldcg(all + (long long)q * QUADS + e);
      s.x += t.x, s.y += t.y, s.z += t.z, s.w += t.w;
    }
    *reinterpret_cast<float4*>(cs + e * 4 / FZ_BN * FZ_C_LD + e * 4 % FZ_BN) = s;
  }
  __syncthreads();
  return true;
}
)";


}  // namespace

std::string_view mma_sync_loop() { return kProductLoop; }

}  // namespace fusion::codegen
