// SPDX-License-Identifier: Apache-2.0
// Where fz::pad's time goes on a Hopper, and what the next kernel shape could buy: a constant pad of an
// 8,192 x 4,096 float32 matrix by (1, 1) rows and (2, 2) columns (H200, 2026-11-28: fusion 48.5% of the copy
// limit, torch.compile 87.8%). Four kernels write the same result:
//   generic  what fusion generates today, over a linear grid (fusion's is a rows grid calling the same per-element
//            function): per element four axis tests (expr::Pad::kAxes, two of them unused here, each a remainder
//            of the flat index by a run-time period) and a scalar load under a branch;
//   two_axes the same with only the two padded axes tested (a plan specialised to the padded axes);
//   rows     a thread per 16-byte output vector in a rows layout: the row test once per row, the column known
//            (no remainder), still scalar loads for the misaligned source;
//   shifted  as rows, but the source (2 columns off the 16-byte grid) read as the two aligned vectors around each
//            output vector and shifted in registers.
// Each is checked against `generic` bit for bit, then timed (events around 10 calls, median of 9) beside a copy of
// the same bytes. Not part of the build (plain CUDA):  nvcc -arch=sm_90 -O3 bench/pad_probe.cu -o /tmp/pad && /tmp/pad
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int kRows = 8192, kCols = 4096, kTop = 1, kLeft = 2;
constexpr int kOutRows = kRows + 2 * kTop, kOutCols = kCols + 2 * kLeft;

__device__ __forceinline__ long long position(long long i, long long period) {
  if (i < period) return i;
  if ((unsigned long long)(i | period) <= 0xffffffffull) return (long long)((unsigned)i % (unsigned)period);
  return i % period;
}

// One axis test as fusion spells it: the element lies in [start, end) along the axis of `period` (its extent
// times the extents after it), start and end scaled the same way.
__device__ __forceinline__ bool inside(long long i, long long period, long long start, long long end) {
  const long long at = position(i, period);
  return !(at < start) && at < end;
}

struct Tests {
  long long period[4], start[4], end[4];
};

template <int Axes>
__global__ void __launch_bounds__(256)
    generic(float* __restrict__ out, const float* __restrict__ in, Tests t, float fill) {
  const long long n = (long long)kOutRows * kOutCols;
  for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v * 4 < n;
       v += (long long)gridDim.x * blockDim.x) {
    float4 r;
    float* rv = &r.x;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const long long i = v * 4 + k;
      bool ok = true;
#pragma unroll
      for (int a = 0; a < Axes; ++a) ok = ok && inside(i, t.period[a], t.start[a], t.end[a]);
      const long long row = i / kOutCols, col = i % kOutCols;  // (the placed view's offset, as its strides give it)
      rv[k] = ok ? in[(row - kTop) * kCols + (col - kLeft)] : fill;
    }
    reinterpret_cast<float4*>(out)[v] = r;
  }
}

// A block per row (grid-stride over rows), each thread 16-byte output vectors along it.
template <bool Shifted>
__global__ void __launch_bounds__(256) rows(float* __restrict__ out, const float* __restrict__ in, float fill) {
  for (int row = blockIdx.x; row < kOutRows; row += gridDim.x) {
    const bool row_inside = row >= kTop && row < kTop + kRows;
    const float* src = in + (long long)(row - kTop) * kCols;
    float4* dst = reinterpret_cast<float4*>(out + (long long)row * kOutCols);
    for (int v = threadIdx.x; v < kOutCols / 4; v += blockDim.x) {
      const int col = v * 4;  // output columns col..col+3 read source columns col-2..col+1
      float4 r = make_float4(fill, fill, fill, fill);
      if (row_inside) {
        if (Shifted && col >= 4 && col + 4 <= kCols) {
          // the aligned vectors holding source columns col-4..col-1 and col..col+3
          const float4 a = reinterpret_cast<const float4*>(src)[(col - 4) / 4];
          const float4 b = reinterpret_cast<const float4*>(src)[col / 4];
          r = make_float4(a.z, a.w, b.x, b.y);
        } else {
          float* rv = &r.x;
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const int c = col + k - kLeft;
            if (c >= 0 && c < kCols) rv[k] = src[c];
          }
        }
      }
      dst[v] = r;
    }
  }
}

__global__ void copy(float4* __restrict__ o, const float4* __restrict__ in, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    o[i] = in[i];
}

template <class F>
float median_us(F launch) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int w = 0; w < 3; ++w) launch();
  std::vector<float> t;
  for (int rep = 0; rep < 9; ++rep) {
    cudaEventRecord(a);
    for (int k = 0; k < 10; ++k) launch();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 100.f);  // us per call
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  const size_t in_n = (size_t)kRows * kCols, out_n = (size_t)kOutRows * kOutCols;
  std::vector<float> host(in_n);
  for (size_t i = 0; i < in_n; ++i) host[i] = (float)(i % 1000) * 0.5f - 17.f;
  float *in, *out, *ref, *big_a, *big_b;
  if (const cudaError_t e = cudaMalloc(&in, in_n * 4); e != cudaSuccess) {
    std::printf("no device memory: %s\n", cudaGetErrorString(e));
    return 2;
  }
  cudaMalloc(&out, out_n * 4);
  cudaMalloc(&ref, out_n * 4);
  const size_t copy_bytes = (in_n + out_n) * 4 / 2;  // a copy moving the pad's bytes: read half, write half
  cudaMalloc(&big_a, copy_bytes);
  cudaMalloc(&big_b, copy_bytes);
  cudaMemcpy(in, host.data(), in_n * 4, cudaMemcpyHostToDevice);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const float fill = -1.5f;

  // fusion's scalars for the two padded axes (rows: period the whole result; columns: the row's length), then
  // two unused tests that always pass
  Tests t{};
  const long long whole = (long long)kOutRows * kOutCols;
  t.period[0] = whole, t.start[0] = (long long)kTop * kOutCols, t.end[0] = (long long)(kTop + kRows) * kOutCols;
  t.period[1] = kOutCols, t.start[1] = kLeft, t.end[1] = kLeft + kCols;
  for (int a = 2; a < 4; ++a) t.period[a] = 0x7fffffffffffffffll, t.start[a] = 0, t.end[a] = 0x7fffffffffffffffll;

  const int linear_blocks = sms * 8;
  auto run_generic4 = [&] { generic<4><<<linear_blocks, 256>>>(out, in, t, fill); };
  auto run_generic2 = [&] { generic<2><<<linear_blocks, 256>>>(out, in, t, fill); };
  auto run_rows = [&] { rows<false><<<sms * 8, 256>>>(out, in, fill); };
  auto run_shifted = [&] { rows<true><<<sms * 8, 256>>>(out, in, fill); };
  auto run_copy = [&] { copy<<<sms * 8, 256>>>((float4*)big_b, (const float4*)big_a, (long long)(copy_bytes / 16)); };

  generic<4><<<linear_blocks, 256>>>(ref, in, t, fill);
  std::vector<float> want(out_n), got(out_n);
  cudaMemcpy(want.data(), ref, out_n * 4, cudaMemcpyDeviceToHost);
  // (the reference itself against the host's pad, a corner and an edge)
  bool ok = want[0] == fill && want[(size_t)kTop * kOutCols + kLeft] == host[0] &&
            want[(size_t)kTop * kOutCols + kLeft + kCols - 1] == host[kCols - 1] && want[out_n - 1] == fill;
  std::printf("generic against the host's pad: %s\n", ok ? "same" : "DIFFERS");

  const double bytes = (double)(in_n + out_n) * 4;
  const double copy_us = median_us(run_copy);
  const double limit = 2.0 * copy_bytes / copy_us * 1e-3;  // GB/s, read + write
  std::printf("copy of the same bytes: %.1f us, %.0f GB/s\n", copy_us, limit);
  auto report = [&](const char* name, auto launch) {
    cudaMemset(out, 0xff, out_n * 4);
    launch();
    cudaMemcpy(got.data(), out, out_n * 4, cudaMemcpyDeviceToHost);
    const bool same = std::memcmp(got.data(), want.data(), out_n * 4) == 0;
    const double us = median_us(launch);
    std::printf("%-10s %8.1f us  %6.1f%% of the copy  %s\n", name, us, 100.0 * bytes / us * 1e-3 / limit,
                same ? "same bits" : "DIFFERS");
  };
  report("generic", run_generic4);
  report("two_axes", run_generic2);
  report("rows", run_rows);
  report("shifted", run_shifted);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess && ok ? 0 : 1;
}
