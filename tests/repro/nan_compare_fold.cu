// SPDX-License-Identifier: Apache-2.0
// A standalone repro for NVIDIA (not built by CMake): with CUDA 13.0 for sm_90, an ordered comparison of
// exp2f(x) or fabsf(x) with a constant 0 is folded to true, so it holds for a NaN x. Found by fusion-fuzz
// (seed 16, case 16000780); fusion now spells float comparisons with isnan() tests first (codegen/spell.cpp).
//   nvcc -arch=sm_90 -O3 nan_compare_fold.cu -o nan_compare_fold && ./nan_compare_fold
// Measured on an H100 (driver 580.159.04), for x = NaN (IEEE: all false but the != line):
//   exp2f(x) >= 0: 1   exp2f(x) > -1: 1   fabsf(x) >= 0: 1   expf(x) >= 0: 0   sqrtf(x) >= 0: 0
//   x == x && x >= 0 (x = exp2f): 1   !isnan(x) && x >= 0: 0   exp2f(x) != exp2f(x): 1
#include <cmath>
#include <cstdio>

__global__ void compare(const float* in, int* out) {
  const float x = in[0], e = exp2f(x), a = fabsf(x);
  out[0] = e >= 0.f;
  out[1] = e > -1.f;
  out[2] = a >= 0.f;
  out[3] = expf(x) >= 0.f;
  out[4] = sqrtf(x) >= 0.f;
  out[5] = e == e && e >= 0.f;
  out[6] = !isnan(e) && e >= 0.f;
  out[7] = e != e;
}

int main() {
  const float nan = NAN;
  float* in;
  int* out;
  int host[8];
  cudaMalloc(&in, sizeof nan);
  cudaMalloc(&out, sizeof host);
  cudaMemcpy(in, &nan, sizeof nan, cudaMemcpyHostToDevice);
  compare<<<1, 1>>>(in, out);
  cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost);
  const char* what[8] = {"exp2f(x) >= 0", "exp2f(x) > -1", "fabsf(x) >= 0", "expf(x) >= 0", "sqrtf(x) >= 0",
                         "e == e && e >= 0", "!isnan(e) && e >= 0", "e != e"};
  int wrong = 0;
  for (int i = 0; i < 8; ++i) {
    const int want = i == 7;
    std::printf("%-22s %d (IEEE: %d)%s\n", what[i], host[i], want, host[i] == want ? "" : "  <- wrong");
    wrong += host[i] != want;
  }
  return wrong != 0;
}
