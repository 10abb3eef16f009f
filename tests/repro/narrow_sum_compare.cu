// SPDX-License-Identifier: Apache-2.0
// A standalone repro for NVIDIA (not built by CMake): with CUDA 13.0 for sm_90, a 16-bit sum compared with zero,
// (short)(x + y) != 0, where y = x ^ (x == 0) (so y = x for x != 0), is true for x = -32768 although the sum wraps
// to 0. NVVM rewrites the test as y != -x in 16 bits (PTX xor.b16, neg.s16, setp.ne.s16), which is right in 16-bit
// arithmetic; the SASS is not. Found by fusion-fuzz (case 2731011775: all((!x ^ x) + x) over int16 rows holding
// -32768); fusion now wraps 8- and 16-bit results through PTX (codegen/helper_source.cpp, fz_wrap_s), which NVVM
// cannot see through.
//   nvcc -arch=sm_90 -O3 narrow_sum_compare.cu -o narrow_sum_compare && ./narrow_sum_compare
//   nvcc -cubin -arch=sm_90 -O3 narrow_sum_compare.cu && nvdisasm -c narrow_sum_compare.cubin
#include <cstdio>

__device__ __forceinline__ int wrap_ptx(unsigned v) {  // fusion's spelling
  int r;
  asm("{ .reg .b32 t; shl.b32 t, %1, 16; shr.s32 %0, t, 16; }" : "=r"(r) : "r"(v));
  return r;
}

__global__ void plain(const short* v, int n, bool* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const short x = v[i];
  const short y = (short)(x ^ (short)(x == 0));
  out[i] = (short)((unsigned)x + (unsigned)y) != 0;
}
__global__ void wrapped(const short* v, int n, bool* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const short x = v[i];
  const short y = (short)(x ^ (short)(x == 0));
  out[i] = (short)wrap_ptx((unsigned)x + (unsigned)y) != 0;
}
// the PTX NVVM makes of `plain`, written out
__global__ void as_ptx(const short* v, int n, bool* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const short x = v[i];
  const short y = (short)(x ^ (short)(x == 0));
  int p;
  asm("{ .reg .b16 m; .reg .pred q; neg.s16 m, %1; setp.ne.s16 q, %2, m; selp.s32 %0, 1, 0, q; }"
      : "=r"(p) : "h"(x), "h"(y));
  out[i] = p != 0;
}

int main() {
  const short host[4] = {-32768, 5, 0, -7};  // sums: 0 (wrapped), 10, 1, -14
  short* v;
  bool* out;
  cudaMallocManaged(&v, sizeof host);
  cudaMallocManaged(&out, 4);
  for (int i = 0; i < 4; ++i) v[i] = host[i];
  int bad = 0;
  auto show = [&](const char* name) {
    cudaDeviceSynchronize();
    std::printf("%-8s want 0 1 1 1: %d %d %d %d\n", name, out[0], out[1], out[2], out[3]);
    bad += out[0] != 0 || !out[1] || !out[2] || !out[3];
  };
  plain<<<1, 32>>>(v, 4, out);
  show("plain");
  as_ptx<<<1, 32>>>(v, 4, out);
  show("as PTX");
  wrapped<<<1, 32>>>(v, 4, out);
  show("wrapped");
  return bad;
}
