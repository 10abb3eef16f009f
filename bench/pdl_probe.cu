// SPDX-License-Identifier: Apache-2.0
// What programmatic dependent launch (PDL) buys back-to-back kernels: each kernel waits for the one before it
// (griddepcontrol.wait) before touching memory, and lets the next one launch as soon as all its own blocks run
// (griddepcontrol.launch_dependents), so the next kernel's launch and ramp overlap this one's tail. Timed as
// fusion-bench times (10 calls between events, medians) for a copy and a one-wave column sum, with and without.
// Not part of the build (plain CUDA, no fusion):  nvcc -arch=sm_90 -O3 bench/pdl_probe.cu -o /tmp/pp && /tmp/pp
#include <algorithm>
#include <cstdio>
#include <vector>

// When each block lets the next kernel launch: 0 never (at its exit), 1 at its start, 2 after its loads (colsum).
__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void grid_release() { asm volatile("griddepcontrol.launch_dependents;"); }
template <int Release>
__device__ __forceinline__ void wait_and_release() {
  grid_wait();
  if (Release == 1) grid_release();
}

template <int Release>
__global__ void __launch_bounds__(256) copy(float4* __restrict__ o, const float4* __restrict__ in, int n) {
  wait_and_release<Release>();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) o[i] = in[i];
}

// Column sums of a rows x cols float32 matrix: 32 lanes of 4 columns and 8 row groups a block, blockIdx.y
// splitting the rows; partial sums added atomically (the probe times the memory, not the combine).
template <int Release>
__global__ void __launch_bounds__(256)
    colsum(float* __restrict__ out, const float* __restrict__ m, int rows, int cols, int chunk) {
  wait_and_release<Release>();
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  const int c = (blockIdx.x * 32 + tx) * 4;
  const int r0 = blockIdx.y * chunk, r1 = min(r0 + chunk, rows);
  float4 a = make_float4(0, 0, 0, 0);
#pragma unroll 4
  for (int r = r0 + ty; r < r1; r += 8) {
    const float4 v = *reinterpret_cast<const float4*>(m + (long long)r * cols + c);
    a.x += v.x, a.y += v.y, a.z += v.z, a.w += v.w;
  }
  if (Release == 2) grid_release();
  __shared__ float4 part[8][32];
  part[ty][tx] = a;
  __syncthreads();
  if (ty == 0) {
    for (int g = 1; g < 8; ++g) a.x += part[g][tx].x, a.y += part[g][tx].y, a.z += part[g][tx].z, a.w += part[g][tx].w;
    atomicAdd(out + c, a.x), atomicAdd(out + c + 1, a.y), atomicAdd(out + c + 2, a.z), atomicAdd(out + c + 3, a.w);
  }
}

template <class F>
float median_ms(F f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 23; ++r) {
    cudaEventRecord(a);
    for (int k = 0; k < 10; ++k) f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (r >= 3) t.push_back(ms / 10);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class K, class... A>
void launch(bool pdl, dim3 grid, K kernel, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(256);
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl ? 1 : 0;
  cudaLaunchKernelEx(&cfg, kernel, args...);
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const long long most = 1ll << 26;
  float *x, *y;
  cudaMalloc(&x, most * 4);
  cudaMalloc(&y, most * 4);
  cudaMemset(x, 0, most * 4);
  const float big =
      median_ms([&] { launch(false, dim3(most / 4 / 256), copy<0>, (float4*)y, (const float4*)x, (int)(most / 4)); });
  const double limit = 2.0 * most * 4 / (big * 1e-3) / 1e9;
  std::printf("copy limit (2^26 float32 each way, no PDL): %.0f GB/s\n", limit);
  for (int e : {18, 20, 22, 24}) {
    const long long n = 1ll << e;
    const char* names[] = {"plain", "PDL, released at exit", "PDL, released at start"};
    for (int way = 0; way < 3; ++way) {
      auto k = way == 2 ? copy<1> : copy<0>;
      const float ms =
          median_ms([&] { launch(way > 0, dim3(n / 4 / 256), k, (float4*)y, (const float4*)x, (int)(n / 4)); });
      std::printf("copy 2^%d float32   %-24s %7.2f us  %5.1f%% of the limit\n", e, names[way], ms * 1e3,
                  100.0 * 2.0 * n * 4 / (ms * 1e-3) / 1e9 / limit);
    }
  }
  for (int side : {2048, 4096, 8192}) {
    const int tiles = side / 128, splits = std::max(1, (sms * 4 + tiles - 1) / tiles),
              chunk = (side + splits - 1) / splits;
    const char* names[] = {"plain", "PDL, released at exit", "PDL, released at start", "PDL, released after loads"};
    for (int way = 0; way < 4; ++way) {
      auto k = way == 2 ? colsum<1> : way == 3 ? colsum<2> : colsum<0>;
      const float ms =
          median_ms([&] { launch(way > 0, dim3(tiles, splits), k, y, (const float*)x, side, side, chunk); });
      std::printf("colsum %d^2   %-26s %7.2f us  %5.1f%% of the limit (grid %d x %d)\n", side, names[way], ms * 1e3,
                  100.0 * (double)side * side * 4 / (ms * 1e-3) / 1e9 / limit, tiles, splits);
    }
  }
  return cudaGetLastError() != cudaSuccess;
}
