// SPDX-License-Identifier: Apache-2.0
// Batch normalization, forward pass in training mode, on an (8, 64, 112, 112) float32 tensor:
// per-channel mean and variance over N, H and W, normalize, scale and shift, and update the running
// statistics in place. Fused it is two kernels (y, the mean and the variance from one layer kernel through
// fz::tie; both running statistics through fz::tie); unfused, every operation is its own kernel (16).
// Checked against a float64 host reference.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <random>

#include "fusion/fusion.hpp"

namespace fz = fusion;

struct BatchNorm {
  fz::Array<float> gamma, beta, running_mean, running_var;
  float eps = 1e-5f, momentum = 0.1f;

  /// y = (x - mean) / sqrt(var + eps) * gamma + beta, statistics over every axis but the channel axis 1.
  fz::Array<float> forward(const fz::Array<float>& x) {
    const fz::Axes nhw{0, 2, 3};
    const double count = static_cast<double>(x.size() / x.shape()[1]);
    // One kernel: each channel's elements (N and H*W around C) read once into the shared memory of a
    // cluster of blocks, its mean and variance (biased, as PyTorch normalizes), then y; the statistics,
    // (1, C, 1, 1) each, come out of the same kernel.
    const auto mu = fz::mean(x, nhw, fz::keepdims);
    const auto sigma2 = fz::var(x, nhw, fz::keepdims);
    fz::Array<float> y, mean, var;
    fz::tie(y, mean, var) = std::make_tuple((x - mu) * fz::rsqrt(sigma2 + eps) * gamma + beta, mu, sigma2);
    // the running variance takes the unbiased estimate; both updates in one kernel
    const auto m = mean.reshape({x.shape()[1]}), v = var.reshape({x.shape()[1]});
    fz::tie(running_mean, running_var) =
        std::forward_as_tuple((1 - momentum) * running_mean + momentum * m,
                              (1 - momentum) * running_var + momentum * static_cast<float>(count / (count - 1)) * v);
    return y;
  }
};

/// What the forward pass compiles to: the layer in one kernel (y, the mean and the variance), then the running
/// statistics' update. Works on placeholder arrays without a GPU.
void show_kernels(const fz::Array<float>& x, const BatchNorm& bn) {
  const fz::Axes nhw{0, 2, 3};
  const auto mu = fz::mean(x, nhw, true);
  const auto sigma2 = fz::var(x, nhw, true);
  const fz::KernelInfo layer = fz::inspect((x - mu) * fz::rsqrt(sigma2 + 1e-5f) * bn.gamma + bn.beta, mu, sigma2);
  fmt::print("  {} kernel(s): {}\n    ({})\n", layer.kernels, layer.name, layer.variant);
}

int main() {
  const std::int64_t N = 8, C = 64, H = 112, W = 112;
  if (fz::device_count() == 0) {  // the kernels are still generated and compiled (into the disk cache)
    const auto channel = [&] { return fz::placeholder<float>({1, C, 1, 1}); };
    show_kernels(fz::placeholder<float>({N, C, H, W}),
                 BatchNorm{channel(), channel(), fz::placeholder<float>({C}), fz::placeholder<float>({C})});
    fmt::print("No GPU here ({})\nThe kernel above was generated and compiled; running and timing the forward pass "
               "needs a GPU.\n", fz::no_device_reason());
    return 0;
  }
  std::vector<float> hx(static_cast<std::size_t>(N * C * H * W)), hg(C), hb(C);
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (std::size_t i = 0; i < hx.size(); ++i)
    hx[i] = 3.f + 2.f * normal(rng) + static_cast<float>((i / (H * W)) % C) * 0.1f;
  for (std::int64_t c = 0; c < C; ++c) hg[c] = 1.f + 0.01f * c, hb[c] = -0.5f + 0.02f * c;
  const auto x = fz::asarray(hx, {N, C, H, W});
  auto make = [&] {
    return BatchNorm{fz::asarray(hg, {1, C, 1, 1}), fz::asarray(hb, {1, C, 1, 1}), fz::zeros<float>({C}),
                     fz::ones<float>({C})};
  };

  // One step, checked against float64 on the host.
  BatchNorm bn = make();
  const auto y = bn.forward(x).to_host();
  const auto rm = bn.running_mean.to_host(), rv = bn.running_var.to_host();
  double worst_y = 0, worst_stat = 0;
  const double n = static_cast<double>(N * H * W);
  for (std::int64_t c = 0; c < C; ++c) {
    double s = 0, ss = 0;
    for (std::int64_t b = 0; b < N; ++b)
      for (std::int64_t k = 0; k < H * W; ++k) s += hx[static_cast<std::size_t>((b * C + c) * H * W + k)];
    const double mean = s / n;
    for (std::int64_t b = 0; b < N; ++b)
      for (std::int64_t k = 0; k < H * W; ++k) {
        const double d = hx[static_cast<std::size_t>((b * C + c) * H * W + k)] - mean;
        ss += d * d;
      }
    const double var = ss / n;
    for (std::int64_t b = 0; b < N; b += 3)
      for (std::int64_t k = 0; k < H * W; k += 97) {
        const std::size_t i = static_cast<std::size_t>((b * C + c) * H * W + k);
        const double want = (hx[i] - mean) / std::sqrt(var + 1e-5) * hg[c] + hb[c];
        worst_y = std::max(worst_y, std::abs(y[i] - want));
      }
    worst_stat = std::max(worst_stat, std::abs(rm[c] - 0.1 * mean));
    worst_stat = std::max(worst_stat, std::abs(rv[c] - (0.9 + 0.1 * var * n / (n - 1))) / (0.9 + 0.1 * var));
  }
  const bool ok = worst_y < 1e-4 && worst_stat < 1e-5;
  fmt::print("batchnorm forward (8, 64, 112, 112) float32 vs float64 host reference: max |y error| {:.2e}, "
             "running statistics {:.2e} -> {}\n", worst_y, worst_stat, ok ? "OK" : "MISMATCH");

  show_kernels(x, bn);

  // Fused against unfused: the same forward pass, timed on the GPU.
  BatchNorm timed = make();
  const auto cmp = fz::compare_fusion("batchnorm forward", [&] { return timed.forward(x); });
  std::cout << cmp;
  return ok && cmp.agree ? 0 : 1;
}
