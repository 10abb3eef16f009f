// SPDX-License-Identifier: Apache-2.0
// A standalone repro for NVIDIA (not built by CMake): with CUDA 13.0 (ptxas 13.0.88) for sm_90, a negation that is
// the second operand of an int32 max (or min) whose result feeds another max is dropped when ptxas merges the two
// into one three-way VIMNMX3: max(max(-20, -1), 7) gives 20, not 7. The PTX is right (neg.s32, max.s32, max.s32);
// the SASS reads the operand without its negation. Found by fusion-fuzz (case 2711012653); fusion now spells an
// integer negation as ~x + 1 in PTX (codegen/helper_source.cpp, fz_neg_int), which ptxas keeps.
//   nvcc -arch=sm_90 -O3 neg_max3_drop.cu -o neg_max3_drop && ./neg_max3_drop
//   nvcc -cubin -arch=sm_90 -O3 neg_max3_drop.cu && nvdisasm -c neg_max3_drop.cubin | grep MNMX
#include <cstdio>

__device__ __forceinline__ int neg_ptx(int x) {  // fusion's spelling
  int r;
  asm("{ .reg .b32 t; not.b32 t, %1; add.s32 %0, t, 1; }" : "=r"(r) : "r"(x));
  return r;
}

// max(max(-a, b), c) with the negation as the inner max's second operand, as NVVM orders it
__global__ void plain(const int* a, const int* b, int c, int* out) {
  const int x = -a[0];
  const int y = b[0] > x ? b[0] : x;
  out[0] = y > c ? y : c;
}
__global__ void through_ptx(const int* a, const int* b, int c, int* out) {
  const int x = neg_ptx(a[0]);
  const int y = b[0] > x ? b[0] : x;
  out[0] = y > c ? y : c;
}
// the largest of -v over four values read as one 16-byte vector (fz::max(-x) over int32)
__global__ void max_of_negated(const int4* v, int* out) {
  int acc = -2147483647 - 1;
  const int4 q = v[0];
  int x = -q.x; acc = acc > x ? acc : x;
  x = -q.y; acc = acc > x ? acc : x;
  x = -q.z; acc = acc > x ? acc : x;
  x = -q.w; acc = acc > x ? acc : x;
  out[0] = acc;
}

int main() {
  int *a, *b, *out;
  int4* v;
  cudaMallocManaged(&a, sizeof(int));
  cudaMallocManaged(&b, sizeof(int));
  cudaMallocManaged(&out, sizeof(int));
  cudaMallocManaged(&v, sizeof(int4));
  *a = 20, *b = -1;
  plain<<<1, 1>>>(a, b, 7, out);
  cudaDeviceSynchronize();
  const int p = *out;
  through_ptx<<<1, 1>>>(a, b, 7, out);
  cudaDeviceSynchronize();
  const int t = *out;
  *v = int4{5, 9, 3, 8};  // -5, -9, -3, -8: the largest is -3
  max_of_negated<<<1, 1>>>(v, out);
  cudaDeviceSynchronize();
  std::printf("max(max(-20, -1), 7), want 7: plain %d, through PTX ~x + 1 %d\n", p, t);
  std::printf("max of -{5, 9, 3, 8}, want -3: %d\n", *out);
  return p == 7 && t == 7 && *out == -3 ? 0 : 1;
}
