// SPDX-License-Identifier: Apache-2.0
// The Hopper path's main loop on its own (issue 36): the loop codegen/emit_product.cpp generates (tensor copies
// into 128-byte-swizzled stages, a producer warpgroup, two consumer warpgroups of wgmma), here with the
// accumulators stored straight to a bfloat16 result, checked against a float32 reference kernel in every layout
// and at edge sizes, and timed beside cuBLAS in the same process: what "the bare main loop reaches 0.935x cuBLAS"
// in docs/performance.md measures. Not part of the build (it needs sm_90a and cuBLAS):
//   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 [-DFZ_BN=128 -DFZ_STAGES=5] \
//        bench/hopper_product_probe.cu -o hopper_probe -lcublas -lcuda && ./hopper_probe
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>

#define FZ_MMA_TYPE "bf16"
#ifndef FZ_BN
#define FZ_BN 256
#endif
#ifndef FZ_STAGES
#define FZ_STAGES 3
#endif
#ifndef FZ_CONSUMERS
#define FZ_CONSUMERS 2
#endif
#ifndef FZ_GROUP
#define FZ_GROUP 16
#endif
constexpr int BM = 64 * FZ_CONSUMERS, BN = FZ_BN, BK = 64, STAGES = FZ_STAGES, THREADS = 128 * (FZ_CONSUMERS + 1);
constexpr int A_STAGE = BM * BK * 2, B_STAGE = BN * BK * 2, STAGE = A_STAGE + B_STAGE;

struct alignas(64) TMap { unsigned long long v[16]; };

// wgmma m64n256k16 / m64n128k16 over 128 / 64 float accumulators (asm takes no arrays: every register named)
template <int TA, int TB> __device__ __forceinline__ void fz_wgmma_n128(float (&d)[64], unsigned long long da, unsigned long long db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n" "wgmma.mma_async.sync.aligned.m64n128k16.f32." FZ_MMA_TYPE "." FZ_MMA_TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, %66, %67;\n" "}\n"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
    : "l"(da), "l"(db), "n"(TA), "n"(TB), "r"(1));
}
template <int TA, int TB> __device__ __forceinline__ void fz_wgmma_n256(float (&d)[128], unsigned long long da, unsigned long long db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %132, 0;\n" "wgmma.mma_async.sync.aligned.m64n256k16.f32." FZ_MMA_TYPE "." FZ_MMA_TYPE " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, %130, %131;\n" "}\n"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
    : "l"(da), "l"(db), "n"(TA), "n"(TB), "r"(1));
}

__device__ __forceinline__ unsigned smem_at(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void bar_expect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
__device__ __forceinline__ void tma_load(unsigned dst, const TMap* map, unsigned bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
      ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
// A shared-memory matrix descriptor of a 128-byte-swizzled tile (wgmma: "Matrix Descriptor Format").
__device__ __forceinline__ unsigned long long desc(unsigned at, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((at & 0x3FFFF) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
         (unsigned long long)(sbo >> 4) << 32 | 1ull << 62;
}

template <bool A_K, bool B_K>
__global__ void __launch_bounds__(THREADS, 1)
    gemm(const __grid_constant__ TMap ta, const __grid_constant__ TMap tb, __nv_bfloat16* c, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long bars[2 * STAGES];
  const unsigned base = (smem_at(smem_raw) + 1023) & ~1023u;
  const unsigned full = smem_at(bars), empty = full + 8 * STAGES;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  // grouped order: FZ_GROUP row tiles share their column tiles' operand panels in L2
  const int b = blockIdx.x, per_group = FZ_GROUP * tiles_n, group = b / per_group;
  const int first = group * FZ_GROUP, rows = min(FZ_GROUP, tiles_m - first);
  const int tm = first + (b % per_group) % rows, tn = (b % per_group) / rows;
  const int m0 = tm * BM, n0 = tn * BN, batch = blockIdx.y;
  const int ktiles = (K + BK - 1) / BK;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) bar_init(full + 8 * s, 1), bar_init(empty + 8 * s, FZ_CONSUMERS);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      for (int t = 0; t < ktiles; ++t) {
        const int s = t % STAGES;
        bar_wait(empty + 8 * s, ((t / STAGES) & 1) ^ 1);
        bar_expect(full + 8 * s, STAGE);
        const unsigned as = base + s * STAGE, bs = as + A_STAGE;
        if (A_K) tma_load(as, &ta, full + 8 * s, t * BK, m0, batch);
        else for (int j = 0; j < BM / 64; ++j) tma_load(as + j * 64 * BK * 2, &ta, full + 8 * s, m0 + 64 * j, t * BK, batch);
        if (B_K) tma_load(bs, &tb, full + 8 * s, t * BK, n0, batch);
        else for (int j = 0; j < BN / 64; ++j) tma_load(bs + j * 64 * BK * 2, &tb, full + 8 * s, n0 + 64 * j, t * BK, batch);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = wg - 1;
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
    for (int t = 0; t < ktiles; ++t) {
      const int s = t % STAGES;
      bar_wait(full + 8 * s, (t / STAGES) & 1);
      const unsigned as = base + s * STAGE, bs = as + A_STAGE;
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        // K-major: this warpgroup's 64 rows of 128 bytes, k16 steps 32 bytes on; M/N-major: 64-wide column
        // blocks BK rows of 128 bytes, k16 steps 16 rows on
        const unsigned long long da = A_K ? desc(as + cw * 64 * 128 + kk * 32, 16, 1024)
                                          : desc(as + cw * 64 * BK * 2 + kk * 2048, BK * 128, 1024);
        const unsigned long long db = B_K ? desc(bs + kk * 32, 16, 1024) : desc(bs + kk * 2048, BK * 128, 1024);
        if constexpr (BN == 256) fz_wgmma_n256<A_K ? 0 : 1, B_K ? 0 : 1>(d, da, db);
        else fz_wgmma_n128<A_K ? 0 : 1, B_K ? 0 : 1>(d, da, db);
      }
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      if (t > 0 && threadIdx.x % 128 == 0) bar_arrive(empty + 8 * ((t - 1) % STAGES));
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) asm volatile("" : "+f"(d[i])::"memory");
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
    const int r = m0 + cw * 64 + warp * 16 + lane / 4;
    __nv_bfloat16* cb = c + (long long)batch * M * N;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = n0 + j * 8 + lane % 4 * 2;
      if (col < N) {
        if (r < M) *reinterpret_cast<__nv_bfloat162*>(cb + (long long)r * N + col) = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
        if (r + 8 < M) *reinterpret_cast<__nv_bfloat162*>(cb + (long long)(r + 8) * N + col) = __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
      }
    }
  }
}

__global__ void reference(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c, int M, int N, int K, long long am,
                          long long ak, long long bk, long long bn) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
  if (n >= N) return;
  float s = 0;
  for (int k = 0; k < K; ++k) s += __bfloat162float(a[m * am + k * ak]) * __bfloat162float(b[k * bk + n * bn]);
  c[(long long)m * N + n] = s;
}

#define CK(x) do { auto e_ = (x); if (e_ != 0) { printf("%s failed: %d (line %d)\n", #x, (int)e_, __LINE__); exit(1); } } while (0)

// inner: the contiguous extent; box {64, outer_box}
static TMap make_map(const void* p, int inner, int outer, int outer_box) {
  TMap m;
  cuuint64_t dims[3] = {(cuuint64_t)inner, (cuuint64_t)outer, 1};
  cuuint64_t strides[2] = {(cuuint64_t)inner * 2, (cuuint64_t)inner * 2 * outer};
  cuuint32_t box[3] = {64, (cuuint32_t)outer_box, 1};
  cuuint32_t es[3] = {1, 1, 1};
  CK(cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(&m), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(p),
                            dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return m;
}

template <bool A_K, bool B_K>
double run(int M, int N, int K, bool check, int reps) {
  std::vector<__nv_bfloat16> ha((size_t)M * K), hb((size_t)K * N);
  srand(M + N + K);
  for (auto& x : ha) x = __float2bfloat16((rand() % 17 - 8) / 8.0f);
  for (auto& x : hb) x = __float2bfloat16((rand() % 13 - 6) / 4.0f);
  __nv_bfloat16 *a, *b, *c;
  float* ref;
  CK(cudaMalloc(&a, ha.size() * 2));
  CK(cudaMalloc(&b, hb.size() * 2));
  CK(cudaMalloc(&c, (size_t)M * N * 2));
  CK(cudaMalloc(&ref, (size_t)M * N * 4));
  CK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
  // A_K: a is M x K row-major; else K x M row-major (a column-major M x K). B_K: b is N x K row-major; else K x N.
  TMap ta = A_K ? make_map(a, K, M, BM) : make_map(a, M, K, BK);
  TMap tb = B_K ? make_map(b, K, N, BN) : make_map(b, N, K, BK);
  const int smem = STAGES * STAGE + 1024;
  auto kern = gemm<A_K, B_K>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  CK(cudaMemset(c, 0xFF, (size_t)M * N * 2));
  kern<<<tiles, THREADS, smem>>>(ta, tb, c, M, N, K);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  double worst = 0;
  if (check) {
    reference<<<dim3((N + 127) / 128, M), 128>>>(a, b, ref, M, N, K, A_K ? K : 1, A_K ? 1 : M, B_K ? 1 : N, B_K ? K : 1);
    CK(cudaDeviceSynchronize());
    std::vector<float> hr((size_t)M * N);
    std::vector<__nv_bfloat16> hc((size_t)M * N);
    CK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hc.data(), c, hc.size() * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < hr.size(); ++i) {
      const double e = std::fabs((double)__bfloat162float(hc[i]) - hr[i]) / (1 + std::fabs(hr[i]));
      if (!(e <= worst)) worst = std::isnan(e) ? 1e30 : e;
    }
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0);
    kern<<<tiles, THREADS, smem>>>(ta, tb, c, M, N, K);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t;
    cudaEventElapsedTime(&t, e0, e1);
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double med = reps ? ms[ms.size() / 2] : 0;
  // cuBLAS (row-major C = A B, B_MN A_K case only) in the same run
  double cub = 0;
  if (reps && A_K && !B_K) {
    cublasHandle_t h;
    cublasCreate(&h);
    float one = 1, zero = 0;
    std::vector<float> cm;
    for (int r = 0; r < reps; ++r) {
      cudaEventRecord(e0);
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_16BF, N, a, CUDA_R_16BF, K, &zero, c, CUDA_R_16BF,
                   N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float t;
      cudaEventElapsedTime(&t, e0, e1);
      cm.push_back(t);
    }
    std::sort(cm.begin(), cm.end());
    cub = cm[cm.size() / 2];
    cublasDestroy(h);
  }
  const double flops = 2.0 * M * N * K;
  printf("A_%s B_%s %5d x %5d x %5d  max rel err %.3g  %8.3f ms  %6.1f TFLOPS", A_K ? "K " : "MN", B_K ? "K " : "MN", M,
         N, K, worst, med, reps ? flops / med / 1e9 : 0.0);
  if (cub) printf("   cuBLAS %8.3f ms %6.1f TFLOPS  ratio %.3f", cub, flops / cub / 1e9, cub / med);
  printf("\n");
  cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(ref);
  return worst;
}

int main() {
  bool bad = false;
  const int shapes[][3] = {{256, 512, 128}, {200, 304, 96}, {128, 256, 64}, {1000, 776, 336}, {64, 1024, 40}, {520, 264, 1000}};
  for (auto& s : shapes) {
    bad |= run<true, true>(s[0], s[1], s[2], true, 0) > 0.02;
    bad |= run<true, false>(s[0], s[1], s[2], true, 0) > 0.02;
    bad |= run<false, true>(s[0], s[1], s[2], true, 0) > 0.02;
    bad |= run<false, false>(s[0], s[1], s[2], true, 0) > 0.02;
  }
  printf(bad ? "CHECK FAILED\n" : "all checks pass\n");
  run<true, false>(8192, 8192, 8192, true, 20);
  run<true, true>(8192, 8192, 8192, false, 20);
  run<true, false>(4096, 4096, 4096, false, 30);
  run<true, false>(8192, 14336, 4096, false, 20);
  return bad;
}
