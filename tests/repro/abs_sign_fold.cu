// SPDX-License-Identifier: Apache-2.0
// A standalone repro for NVIDIA (not built by CMake): with CUDA 13.0 for sm_90, the integer abs of INT_MIN is
// INT_MIN (PTX's abs.s32 says so), yet a sign test of it converted to double is folded as if it were
// non-negative: NumPy's floor_divide(-3.0, abs(INT_MIN)) is 0, the folded code gives -1. Found by fusion-fuzz
// (case 29000980); fusion now spells integer abs as a predicated negation (codegen/helper_source.cpp).
//   nvcc -arch=sm_90 -O3 abs_sign_fold.cu -o abs_sign_fold && ./abs_sign_fold
// Measured on an H100 (2026-11-27), for x = INT_MIN, then x = -7 (want 0, then -1):
//   select x < 0 ? -x : x (through fusion's kernel): -1 -1   asm abs.s32: -1 -1   llabs of the widened value: -1 -1
//   asm predicated negation: 0 -1   xor-subtract through asm: 0 -1   abs.s32 then an identity prmt: 0 -1
// 64-bit integers likewise: abs.s64 gives -1, the predicated negation (setp.lt.s64, sub.s64) 0.
#include <climits>
#include <cstdio>

// NumPy's floor_divide for floats, as fusion spells it.
__device__ __forceinline__ double floor_divide(double a, double b) {
  if (b == 0) return a / b;
  const double mod = fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysign(0.0, a / b);
  double q = floor(div);
  if (div - q > 0.5) q += 1;
  return q;
}

__device__ __forceinline__ int abs_select(int x) { return x < 0 ? (int)(0u - (unsigned)x) : x; }
__device__ __forceinline__ int abs_ptx(int x) {
  int r;
  asm("abs.s32 %0, %1;" : "=r"(r) : "r"(x));
  return r;
}
__device__ __forceinline__ int abs_wide(int x) { return (int)(unsigned)llabs((long long)x); }
__device__ __forceinline__ int abs_predicated(int x) {
  int r;
  asm volatile("{ .reg .pred p; setp.lt.s32 p, %1, 0; @p sub.s32 %0, 0, %1; @!p mov.b32 %0, %1; }" : "=r"(r) : "r"(x));
  return r;
}
__device__ __forceinline__ int abs_xor(int x) {
  const int s = x >> 31;
  int r;
  asm volatile("xor.b32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(s));
  return r - s;
}
__device__ __forceinline__ int abs_prmt(int x) { return __byte_perm(abs_ptx(x), 0, 0x3210); }

__global__ void divide(const int* x, double* out) {
  const int v = x[threadIdx.x];
  double* o = out + 6 * threadIdx.x;
  o[0] = floor_divide(-3.0, (double)abs_select(v));
  o[1] = floor_divide(-3.0, (double)abs_ptx(v));
  o[2] = floor_divide(-3.0, (double)abs_wide(v));
  o[3] = floor_divide(-3.0, (double)abs_predicated(v));
  o[4] = floor_divide(-3.0, (double)abs_xor(v));
  o[5] = floor_divide(-3.0, (double)abs_prmt(v));
}

int main() {
  const int host[2] = {INT_MIN, -7};
  int* x;
  double* out;
  double got[12];
  cudaMalloc(&x, sizeof host);
  cudaMalloc(&out, sizeof got);
  cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice);
  divide<<<1, 2>>>(x, out);
  cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost);
  const char* names[6] = {"select x < 0 ? -x : x", "asm abs.s32", "llabs of the widened value",
                          "asm predicated negation", "xor-subtract through asm", "abs.s32 then an identity prmt"};
  for (int k = 0; k < 6; ++k) std::printf("%-30s INT_MIN: %g (want 0)   -7: %g (want -1)\n", names[k], got[k], got[6 + k]);
}
