// SPDX-License-Identifier: Apache-2.0
// What bounds fz::random::normal<float> below the write limit: the Box-Muller transform of src/runtime/exec/random.cpp
// (one Philox-4x32-10 block gives four values, r cos and r sin of two pairs of words) with its logarithm, square root
// and sine/cosine each written several ways, timed beside a plain store of 2^26 floats, and each checked against the
// same transform in float64 (the worst error over the pair's radius, as tests/test_random_gpu.cpp measures it).
// The specialised functions use what the transform knows: u1 = k 2^-24 with k in [1, 2^24] (never subnormal,
// never 0), the angle a 24-bit fraction of a turn (its quadrant and remainder exact in integers), the square root's
// argument in [0, 34).
// Not part of the build (plain CUDA, no fusion):
//   nvcc -arch=sm_90 -O3 bench/normal_probe.cu -o /tmp/np && /tmp/np && cuobjdump -sass /tmp/np | ...
// (bench/results/random/h200-2026-11-29-normal-probe.txt was timed before the probe took probe_timing.cuh's median:
// one call between events, the median of 12 after 3.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "probe_philox.cuh"
#include "probe_timing.cuh"

__device__ __forceinline__ uint4 philox(unsigned long long seed, unsigned long long offset, unsigned long long blk) {
  const Block b = philox_hilo(seed, offset, blk);
  return make_uint4(b.c0, b.c1, b.c2, b.c3);
}

// ln(u) for u = k 2^-24, k in [1, 2^24]: u = 2^e f with f in [2/3, 4/3), ln(1 + x) = x - x^2/2 + x^3 R(x) for
// x = f - 1 in [-1/3, 1/3) (exact), R a degree-7 fit (mpmath chebyfit: 1.7e-8 relative at the ends).
__device__ __forceinline__ float log_unit(float u) {
  const int b = __float_as_int(u);
  const int e = (b - 0x3f2aaaab) & (int)0xff800000;
  const float x = __int_as_float(b - e) - 1.f;
  const float ef = (float)(e >> 23);
  float p = -0.12125580650711652387f;
  p = fmaf(p, x, 0.13425749011418575903f);
  p = fmaf(p, x, -0.12346190245128490002f);
  p = fmaf(p, x, 0.14118309902655240719f);
  p = fmaf(p, x, -0.16670140691401690342f);
  p = fmaf(p, x, 0.20003780322455602882f);
  p = fmaf(p, x, -0.2499998790125585383f);
  p = fmaf(p, x, 0.33333320168349619894f);
  p = fmaf(p, x, -0.5f);
  p = fmaf(p, x * x, x);
  return fmaf(ef, 0.693145752f, fmaf(ef, 1.42860677e-06f, p));  // ln 2 in two parts: e ln2_hi exact
}

// sqrt(x) for x in [0, 34): the approximate reciprocal root, one Newton correction of the product (x = 0 gives 0).
__device__ __forceinline__ float sqrt_small(float x) {
  const float y = rsqrtf(fmaxf(x, 1e-30f));
  const float r = x * y;
  return fmaf(fmaf(-r, r, x), 0.5f * y, r);
}

// sin and cos of 2 pi m 2^-24 for m in [0, 2^24): quadrant q = round(m / 2^22), t = m 2^-24 - q/4 in [-1/8, 1/8]
// (exact); sin(2 pi t) = t P(t^2), cos(2 pi t) = 1 + t^2 Q(t^2) (chebyfit: 3.1e-9, 4.7e-11), then the quadrant's
// swap and signs as integer operations.
__device__ __forceinline__ void sincos_turns(unsigned m, float* s, float* c) {
  const unsigned q = (m + (1u << 21)) >> 22;
  const float t = (float)(int)(m - (q << 22)) * 5.9604644775390625e-8f;
  const float z = t * t;
  float ps = -75.401612702747458455f;
  ps = fmaf(ps, z, 81.592542871301543294f);
  ps = fmaf(ps, z, -41.341662570547954912f);
  ps = fmaf(ps, z, 6.2831852878129467414f);
  const float sn = ps * t;
  float pc = 59.220168958296096218f;
  pc = fmaf(pc, z, -85.442844673081659515f);
  pc = fmaf(pc, z, 64.939316135709049629f);
  pc = fmaf(pc, z, -19.739208650130595513f);
  const float cs = fmaf(pc, z, 1.f);
  const bool swap = q & 1;
  const float a = swap ? cs : sn, b = swap ? sn : cs;
  *s = __int_as_float(__float_as_int(a) ^ ((q & 2) << 30));
  *c = __int_as_float(__float_as_int(b) ^ (((q + 1) & 2) << 30));
}

// The transform of one pair of words, way W:
//   0 fusion today: sqrtf(-2 logf(u1)), sincospif(2 u2)
//   1 cuRAND's curand_normal on the device: sqrtf, logf, __sincosf(2 pi u2)
//   2 sincos_turns with logf and sqrtf
//   3 sincos_turns and log_unit with sqrtf
//   4 sincos_turns, log_unit and sqrt_small
//   5 everything approximate: __logf, sqrt.approx, __sincosf (an upper bound, not a candidate)
template <int W> __device__ __forceinline__ float2 transform(unsigned lo, unsigned hi) {
  const float u1 = ((float)(lo >> 8) + 1.f) * 5.9604644775390625e-8f;
  const float u2 = (float)(hi >> 8) * 5.9604644775390625e-8f;
  float r, s, c;
  if constexpr (W == 0 || W == 1 || W == 2) r = sqrtf(-2.f * logf(u1));
  if constexpr (W == 3) r = sqrtf(-2.f * log_unit(u1));
  if constexpr (W == 4) r = sqrt_small(-2.f * log_unit(u1));
  if constexpr (W == 5) {
    const float v = -2.f * __logf(u1);
    r = v * rsqrtf(fmaxf(v, 1e-30f));
  }
  if constexpr (W == 0) sincospif(2.f * u2, &s, &c);
  if constexpr (W == 1 || W == 5) __sincosf(6.2831853071795865f * u2, &s, &c);
  if constexpr (W >= 2 && W <= 4) sincos_turns(hi >> 8, &s, &c);
  return make_float2(r * c, r * s);
}

template <int W>
__global__ void __launch_bounds__(256) normal(float4* out, unsigned long long seed, unsigned long long off, int nv) {
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x) {
    const uint4 b = philox(seed, off, (unsigned long long)v);
    const float2 p = transform<W>(b.x, b.y), q = transform<W>(b.z, b.w);
    out[v] = make_float4(p.x, p.y, q.x, q.y);
  }
}

// The float64 reference: the same words, the transform in double; also each pair's radius.
__global__ void reference(double* out, double2* radius, unsigned long long seed, unsigned long long off, int nv) {
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x) {
    const uint4 b = philox(seed, off, (unsigned long long)v);
    double e[4], rr[2];
    const unsigned w[4] = {b.x, b.y, b.z, b.w};
    for (int j = 0; j < 2; ++j) {
      const double u1 = ((double)(w[2 * j] >> 8) + 1.0) * 0x1p-24, u2 = (double)(w[2 * j + 1] >> 8) * 0x1p-24;
      const double r = sqrt(-2.0 * log(u1));
      double s, c;
      sincospi(2.0 * u2, &s, &c);
      e[2 * j] = r * c;
      e[2 * j + 1] = r * s;
      rr[j] = r;
    }
    for (int j = 0; j < 4; ++j) out[4 * v + j] = e[j];
    radius[v] = make_double2(rr[0], rr[1]);
  }
}

// Every input of the specialised functions against double: the largest error in float ulps of the true value
// (for sin/cos near 0: in ulps of 2^-24, the error relative to the radius the test measures).
__global__ void exhaustive(unsigned* worst) {
  const int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= (1 << 24)) return;
  float s, c;
  sincos_turns((unsigned)m, &s, &c);
  double ws, wc;
  sincospi(2.0 * m * 0x1p-24, &ws, &wc);
  const double es = fabs(s - ws) / fmax(fabs(ws), 0x1p-1) * 0x1p24, ec = fabs(c - wc) / fmax(fabs(wc), 0x1p-1) * 0x1p24;
  const float u = ((float)m + 1.f) * 5.9604644775390625e-8f;
  const double wl = log((double)u), el = m + 1 == (1 << 24) ? fabs(log_unit(u)) : fabs(log_unit(u) - wl) / fabs(wl) * 0x1p24;
  const double lf = m + 1 == (1 << 24) ? fabs(logf(u)) : fabs(logf(u) - wl) / fabs(wl) * 0x1p24;
  const float x = 34.f * m * 0x1p-24f;
  const double er = x == 0 ? sqrt_small(x) : fabs(sqrt_small(x) - sqrt((double)x)) / sqrt((double)x) * 0x1p24;
  atomicMax(worst + 0, (unsigned)(es * 1000));
  atomicMax(worst + 1, (unsigned)(ec * 1000));
  atomicMax(worst + 2, (unsigned)(el * 1000));
  atomicMax(worst + 3, (unsigned)(lf * 1000));
  atomicMax(worst + 4, (unsigned)(er * 1000));
}

__global__ void store(float4* out, int nv) {
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x)
    out[v] = make_float4(1, 2, 3, 4);
}

int main() {
  const int n = 1 << 26, nv = n / 4;
  float4* out;
  double* ref;
  double2* rad;
  unsigned* worst;
  cudaMalloc(&out, n * 4ull);
  cudaMalloc(&ref, n * 8ull);
  cudaMalloc(&rad, n * 4ull);
  cudaMalloc(&worst, 5 * 4);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaMemset(worst, 0, 5 * 4);
  exhaustive<<<(1 << 24) / 256, 256>>>(worst);
  unsigned hw[5];
  cudaMemcpy(hw, worst, sizeof hw, cudaMemcpyDeviceToHost);
  std::printf("every input, worst error in float ulps: sincos_turns sin %.3f cos %.3f, log_unit %.3f (logf %.3f), "
              "sqrt_small on [0, 34) %.3f\n", hw[0] / 1e3, hw[1] / 1e3, hw[2] / 1e3, hw[3] / 1e3, hw[4] / 1e3);
  reference<<<sms * 8, 256>>>(ref, rad, 7ull, 3ull, nv);
  std::vector<float> h(n);
  std::vector<double> want(n), r(n / 2);
  cudaMemcpy(want.data(), ref, n * 8ull, cudaMemcpyDeviceToHost);
  cudaMemcpy(r.data(), rad, n * 4ull, cudaMemcpyDeviceToHost);
  const double bytes = n * 4.0;
  const float st = median_ms([&] { store<<<sms * 8, 256>>>(out, nv); });
  std::printf("store of 2^26 float32: %.1f us (%.0f GB/s), %d SMs\n", st * 1e3, bytes / (st * 1e-3) / 1e9, sms);
  const char* names[] = {"sincospif, logf, sqrtf (today)", "__sincosf, logf, sqrtf (cuRAND)", "turns, logf, sqrtf",
                         "turns, log_unit, sqrtf", "turns, log_unit, sqrt_small", "__sincosf, __logf, sqrt.approx"};
  auto run = [&](int w, auto kernel) {
    for (int g : {sms * 8, sms * 16, sms * 32}) {
      const float ms = median_ms([&] { kernel<<<g, 256>>>(out, 7ull, 3ull, nv); });
      cudaMemcpy(h.data(), out, n * 4ull, cudaMemcpyDeviceToHost);
      double worst_err = 0;
      for (int i = 0; i < n; ++i) worst_err = std::max(worst_err, std::fabs(h[i] - want[i]) / std::max(r[i / 2], 1e-30));
      std::printf("%-34s grid %5d: %7.1f us  %5.1f%% of the store  worst error / radius %.3g (%.2f x 2^-24)\n",
                  names[w], g, ms * 1e3, 100.0 * st / ms, worst_err, worst_err * 0x1p24);
    }
  };
  run(0, normal<0>);
  run(1, normal<1>);
  run(2, normal<2>);
  run(3, normal<3>);
  run(4, normal<4>);
  run(5, normal<5>);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
