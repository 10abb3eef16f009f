// SPDX-License-Identifier: Apache-2.0
// Kernels written by hand, in CuPy's terms: an ElementwiseKernel, a ReductionKernel, a RawKernel and a
// user function inside a fused expression. Each runs once and is checked against a host reference.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <random>
#include <vector>

#include "fusion/fusion.hpp"

namespace fz = fusion;

int main() {
  const unsigned n = 1 << 20;
  if (fz::device_count() == 0) {  // the kernels are still generated and compiled, over placeholder arrays
    const auto x = fz::placeholder<float>({n}), y = fz::placeholder<float>({n}), z = fz::placeholder<float>({n});
    fz::ElementwiseKernel squared_diff("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "squared_diff");
    fz::ReductionKernel l2norm("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm");
    auto sq_r = fz::function<float(float, float)>("sq_r", "(float x, float y) { return x * x + y * y; }");
    std::cout << squared_diff.inspect(x, y, z) << "\n" << l2norm.inspect(x) << "\n"
              << fz::inspect(fz::sqrt(sq_r(x, y)) + 1.f) << "\n";
    fmt::print("No GPU here ({})\nThe kernels above were generated and compiled; running them needs a GPU.\n",
               fz::no_device_reason());
    return 0;
  }
  std::vector<float> hx(n), hy(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  for (unsigned i = 0; i < n; ++i) hx[i] = uniform(rng), hy[i] = uniform(rng);
  fz::Array<float> x = fz::asarray(hx), y = fz::asarray(hy);
  int failures = 0;
  auto report = [&](const char* what, double worst, double tolerance) {
    fmt::print("{:<34} max relative error {:.2e} {}\n", what, worst, worst <= tolerance ? "ok" : "FAILED");
    failures += worst > tolerance;
  };
  auto rel = [](double got, double want) { return std::abs(got - want) / std::max(std::abs(want), 1e-30); };

  // 1. ElementwiseKernel: the code between fusion's loop and addressing; z allocated here, passed in.
  fz::ElementwiseKernel squared_diff("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "squared_diff");
  fz::Array<float> z = fz::empty<float>({n});
  squared_diff(x, y, z);
  {
    const auto got = z.to_host();
    double worst = 0;
    for (unsigned i = 0; i < n; ++i)
      worst = std::max(worst, rel(got[i], (double(hx[i]) - hy[i]) * (double(hx[i]) - hy[i])));
    report("ElementwiseKernel squared_diff", worst, 1e-6);
  }

  // 2. ReductionKernel: T binds to float32 here; the same object runs for any dtype.
  fz::ReductionKernel l2norm("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm");
  fz::Array<float> r = l2norm(x);
  fz::Array<float> rows = l2norm(x.reshape({1024, 1024}), fz::Axes(1));
  {
    double ss = 0, worst_rows = 0;
    for (float v : hx) ss += double(v) * v;
    const auto got = rows.to_host();
    for (unsigned i = 0; i < 1024; ++i) {
      double s = 0;
      for (unsigned j = 0; j < 1024; ++j) s += double(hx[i * 1024 + j]) * hx[i * 1024 + j];
      worst_rows = std::max(worst_rows, rel(got[i], std::sqrt(s)));
    }
    report("ReductionKernel l2norm (all)", rel(r.item(), std::sqrt(ss)), 1e-5);
    report("ReductionKernel l2norm (rows)", worst_rows, 1e-5);
  }

  // 3. RawKernel: your own CUDA; Arrays pass their device pointers, values pass as they are.
  fz::RawKernel square(R"(extern "C" __global__ void elementwise_square(const float* x, float* y, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] * x[i]; })",
                       "elementwise_square");
  fz::Array<float> sq = fz::empty<float>({n});
  square({128}, {1024}, x, sq, n);
  {
    const auto got = sq.to_host();
    double worst = 0;
    for (unsigned i = 0; i < n; ++i) worst = std::max(worst, rel(got[i], double(hx[i]) * hx[i]));
    report("RawKernel elementwise_square", worst, 1e-6);
    const fz::KernelAttributes a = square.attributes();
    fmt::print("  {} registers/thread, up to {} threads/block, {} B local memory\n", a.registers,
               a.max_threads_per_block, a.local_bytes);
  }

  // 4. A user function inside a fused expression: one kernel, the function defined once in it.
  auto sq_r = fz::function<float(float, float)>("sq_r", "(float x, float y) { return x * x + y * y; }");
  fz::reset_stats();
  fz::Array<float> r2 = fz::sqrt(sq_r(x, y)) + 1.f;
  const auto launches = fz::stats().launches;
  {
    const auto got = r2.to_host();
    double worst = 0;
    for (unsigned i = 0; i < n; ++i)
      worst = std::max(worst, rel(got[i], std::sqrt(double(hx[i]) * hx[i] + double(hy[i]) * hy[i]) + 1));
    report("fz::function sq_r, fused", worst, 1e-6);
    fmt::print("  {} kernel launch(es): {}\n", launches, fz::inspect(fz::sqrt(sq_r(x, y)) + 1.f).name);
  }
  fmt::print("{}\n", failures ? "user_kernels: FAILED" : "user_kernels: all results match the host reference");
  return failures ? 1 : 0;
}
