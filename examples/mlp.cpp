// SPDX-License-Identifier: Apache-2.0
// One MLP layer, written as the math reads: y = gelu(x @ w1 + b1) @ w2 + b2 + x (bfloat16, batch 8192,
// 4096 -> 14336 -> 4096, GELU's tanh form). Each statement is one cuBLASLt call: the bias and GELU, and the
// second bias and the residual, run inside the product's call as its epilogue. Printed: the plan
// (fz::inspect), the result checked against a float64 host reference on sampled rows, and fused against
// unfused timings, once the products' races (against the kernels fusion generates) have their verdicts.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <random>

#include "fusion/fusion.hpp"

namespace fz = fusion;
using T = fz::bfloat16;

namespace {

std::vector<T> random_values(std::int64_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (T& x : v) x = T(d(rng));
  return v;
}

double gelu_ref(double h) { return 0.5 * h * (1 + std::tanh(0.7978845608 * (h + 0.044715 * h * h * h))); }

}  // namespace

int main() {
  const std::int64_t B = 8192, D = 4096, H = 14336;
  const auto hx = random_values(B * D, 1.0f, 1), hw1 = random_values(D * H, 0.02f, 2), hw2 = random_values(H * D, 0.02f, 3);
  const auto hb1 = random_values(H, 0.1f, 4), hb2 = random_values(D, 0.1f, 5);
  // What runs (no GPU needed for this part): each statement is one cuBLASLt call with its epilogue.
  {
    auto x = fz::placeholder<T>({B, D}), w1 = fz::placeholder<T>({D, H}), w2 = fz::placeholder<T>({H, D});
    auto b1 = fz::placeholder<T>({H}), b2 = fz::placeholder<T>({D});
    fmt::print("hidden = gelu(x @ w1 + b1):\n  {}\n", fmt::join(fz::inspect(fz::gelu_tanh(fz::matmul(x, w1) + b1)).plan, "\n  "));
    auto hidden = fz::placeholder<T>({B, H});
    fmt::print("y = hidden @ w2 + b2 + x:\n  {}\n", fmt::join(fz::inspect(fz::matmul(hidden, w2) + b2 + x).plan, "\n  "));
  }
  if (fz::device_count() == 0) {
    fmt::print("no GPU here ({}): the plan above is what would run\n", fz::no_device_reason());
    return 0;
  }
  const auto x = fz::asarray(hx, {B, D}), w1 = fz::asarray(hw1, {D, H}), w2 = fz::asarray(hw2, {H, D});
  const auto b1 = fz::asarray(hb1, {H}), b2 = fz::asarray(hb2, {D});
  fz::Array<T> hidden, y;
  auto layer = [&] {
    hidden = fz::gelu_tanh(fz::matmul(x, w1) + b1);
    y = fz::matmul(hidden, w2) + b2 + x;
  };
  layer();
  // A product new to the process is raced, on its first calls, against the kernels fusion would generate for it
  // (the tile layouts that fill this GPU; docs/tour.md): the layer runs until both statements have a verdict
  // (kept in the kernel cache: the next run starts with it), so that the times below are the route kept.
  auto racing = [&] {
    for (const auto& k : {fz::inspect(fz::gelu_tanh(fz::matmul(x, w1) + b1)), fz::inspect(fz::matmul(hidden, w2) + b2 + x)})
      for (const std::string& step : k.plan)
        if (step.find("cuBLASLt until") != std::string::npos) return true;
    return false;
  };
  int race_calls = 0;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       racing() && std::chrono::steady_clock::now() < until; ++race_calls)
    layer();
  fmt::print("after {} more call(s) of the layer, its products' routes:\n  {}\n  {}\n", race_calls,
             fz::inspect(fz::gelu_tanh(fz::matmul(x, w1) + b1)).plan[0], fz::inspect(fz::matmul(hidden, w2) + b2 + x).plan[0]);
  // float64 reference on sampled rows (from the same bfloat16 inputs; the hidden layer rounded to bfloat16
  // as fusion stores it)
  const auto hy = y.to_host();
  double worst = 0;
  for (std::int64_t r : {std::int64_t{0}, B / 3, B - 1}) {
    std::vector<double> h(static_cast<std::size_t>(H));
    for (std::int64_t j = 0; j < H; ++j) {
      double s = hb1[static_cast<std::size_t>(j)];
      for (std::int64_t k = 0; k < D; ++k) s += double(float(hx[static_cast<std::size_t>(r * D + k)])) * float(hw1[static_cast<std::size_t>(k * H + j)]);
      h[static_cast<std::size_t>(j)] = float(T(float(gelu_ref(s))));
    }
    for (std::int64_t j = 0; j < D; ++j) {
      double s = double(float(hb2[static_cast<std::size_t>(j)])) + float(hx[static_cast<std::size_t>(r * D + j)]);
      double scale = std::abs(s);
      for (std::int64_t k = 0; k < H; ++k) {
        const double t = h[static_cast<std::size_t>(k)] * float(hw2[static_cast<std::size_t>(k * D + j)]);
        s += t, scale += std::abs(t);
      }
      worst = std::max(worst, std::abs(float(hy[static_cast<std::size_t>(r * D + j)]) - s) / scale);
    }
  }
  fmt::print("y against a float64 host reference on 3 rows: worst error {:.2e} of sum |terms| ({})\n", worst,
             worst < 1.6e-2 ? "OK" : "TOO LARGE");
  // fused against unfused (every operation its own kernel), GPU time per layer
  fz::Event start, stop;
  auto time = [&](auto&& run) {
    run();
    start.record();
    for (int i = 0; i < 5; ++i) run();
    stop.record();
    stop.synchronize();
    return fz::elapsed_time(start, stop) / 5;
  };
  const double fused = time(layer);
  const double unfused = time([&] {
    fz::Unfused baseline;
    layer();
  });
  const double flop = 4.0 * double(B) * double(D) * double(H);
  fmt::print("MLP layer: fused {:.3f} ms ({:.0f} TFLOPS over both products), unfused {:.3f} ms ({:.0f} TFLOPS): {:.2f}x\n",
             fused, flop / fused / 1e9, unfused, flop / unfused / 1e9, unfused / fused);
  return worst < 1.6e-2 ? 0 : 1;
}
