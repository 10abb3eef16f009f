// SPDX-License-Identifier: Apache-2.0
// Softmax, layer norm and RMSNorm written the way a user writes them. Each is one kernel: a warp or a
// block owns a row, reads it once into shared memory, runs the reductions over it in order (max, then
// the sum of exp(x - max)) and writes the result. Printed: each kernel's name and strategy (and the
// softmax kernel's source); with a GPU, each is checked against a float64 host reference and timed
// fused, as the plan of one kernel per reduction that fusion ran before (fz::SeparateReductions), and
// unfused, as % of the memory limit (each input read once, each output written once).
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <random>

#include "fusion/fusion.hpp"

namespace fz = fusion;

namespace {

// The layers, over the last axis of (rows, D) arrays.
auto softmax(const fz::Array<float>& x) {
  return fz::exp(x - fz::max(x, -1, true)) / fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true);
}
auto layer_norm(const fz::Array<float>& x, const fz::Array<float>& w, const fz::Array<float>& b) {
  return (x - fz::mean(x, -1, true)) * fz::rsqrt(fz::var(x, -1, true) + 1e-5f) * w + b;
}
auto rms_norm(const fz::Array<fz::bfloat16>& x, const fz::Array<fz::bfloat16>& w) {  // bfloat16 in, float math
  auto xf = fz::cast<float>(x);
  return fz::cast<fz::bfloat16>(xf * fz::rsqrt(fz::mean(xf * xf, -1, true) + 1e-6f) * fz::cast<float>(w));
}

/// The float64 answer for row r of each layer.
void reference(const std::vector<double>& x, std::int64_t D, std::int64_t r, const std::vector<double>& w,
               const std::vector<double>& b, std::vector<double>& sm, std::vector<double>& ln,
               std::vector<double>& rms) {
  const double* a = &x[static_cast<std::size_t>(r * D)];
  double m = -INFINITY, s = 0, mean = 0, var = 0, ms = 0;
  for (std::int64_t j = 0; j < D; ++j) m = std::max(m, a[j]), mean += a[j], ms += a[j] * a[j];
  mean /= static_cast<double>(D);
  ms /= static_cast<double>(D);
  for (std::int64_t j = 0; j < D; ++j) s += std::exp(a[j] - m), var += (a[j] - mean) * (a[j] - mean);
  var /= static_cast<double>(D);
  for (std::int64_t j = 0; j < D; ++j) {
    sm[static_cast<std::size_t>(j)] = std::exp(a[j] - m) / s;
    ln[static_cast<std::size_t>(j)] =
        (a[j] - mean) / std::sqrt(var + 1e-5) * w[static_cast<std::size_t>(j)] + b[static_cast<std::size_t>(j)];
    rms[static_cast<std::size_t>(j)] = a[j] / std::sqrt(ms + 1e-6) * w[static_cast<std::size_t>(j)];
  }
}

}  // namespace

int main() {
  const std::int64_t R = 16384, D = 4096;  // 2^26 elements
  // What each layer compiles to (no GPU needed for this part).
  {
    auto x = fz::placeholder<float>({R, D}), w = fz::placeholder<float>({D}), b = fz::placeholder<float>({D});
    auto xb = fz::placeholder<fz::bfloat16>({R, D}), wb = fz::placeholder<fz::bfloat16>({D});
    const fz::KernelInfo k_sm = fz::inspect(softmax(x));
    for (const auto& [name, k] : {std::pair<const char*, fz::KernelInfo>{"softmax", k_sm},
                                  {"layer norm", fz::inspect(layer_norm(x, w, b))},
                                  {"RMSNorm (bfloat16)", fz::inspect(rms_norm(xb, wb))}})
      fmt::print("{}: {} kernel(s): {}\n  {}\n", name, k.kernels, k.name, k.variant);
    fmt::print("\nThe softmax kernel:\n{}\n", k_sm.source);
  }
  if (fz::device_count() == 0) {
    fmt::print("running and timing the layers needs an NVIDIA GPU: {}\n", fz::no_device_reason());
    return 0;
  }

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.f, 3.f), uw(0.5f, 1.5f);
  std::vector<float> hx(static_cast<std::size_t>(R * D)), hw(static_cast<std::size_t>(D)),
      hb(static_cast<std::size_t>(D));
  for (float& v : hx) v = u(rng);
  for (std::size_t j = 0; j < hw.size(); ++j) hw[j] = uw(rng), hb[j] = u(rng) / 3;
  std::vector<fz::bfloat16> hxb(hx.begin(), hx.end()), hwb(hw.begin(), hw.end());
  const auto x = fz::asarray(hx, {R, D}), w = fz::asarray(hw), b = fz::asarray(hb);
  const auto xb = fz::asarray(hxb, {R, D}), wb = fz::asarray(hwb);

  // Checked against float64 on a sample of rows (bfloat16 input rounded as the GPU sees it).
  const fz::Array<float> sm = softmax(x), ln = layer_norm(x, w, b);
  const fz::Array<fz::bfloat16> rms = rms_norm(xb, wb);
  const auto gsm = sm.to_host(), gln = ln.to_host();
  const auto grms = rms.to_host();
  std::vector<double> dx(hx.begin(), hx.end()), dw(hw.begin(), hw.end()), db(hb.begin(), hb.end());
  std::vector<double> dxb(hxb.begin(), hxb.end()), dwb(hwb.begin(), hwb.end());
  double e_sm = 0, e_ln = 0, e_rms = 0;
  std::vector<double> sm_r(D), ln_r(D), rms_r(D), unused(D);
  for (std::int64_t r = 0; r < R; r += 1021) {
    reference(dx, D, r, dw, db, sm_r, ln_r, unused);
    reference(dxb, D, r, dwb, db, unused, unused, rms_r);
    for (std::int64_t j = 0; j < D; ++j) {
      const std::size_t i = static_cast<std::size_t>(r * D + j);
      e_sm = std::max(
          e_sm, std::abs(gsm[i] - sm_r[static_cast<std::size_t>(j)]) / (sm_r[static_cast<std::size_t>(j)] + 1e-30));
      e_ln = std::max(e_ln, std::abs(gln[i] - ln_r[static_cast<std::size_t>(j)]));
      e_rms = std::max(e_rms, std::abs(static_cast<float>(grms[i]) - rms_r[static_cast<std::size_t>(j)]) /
                                  (std::abs(rms_r[static_cast<std::size_t>(j)]) + 1e-3));
    }
  }
  const bool ok = e_sm < 1e-5 && e_ln < 1e-4 && e_rms < 1e-2;
  fmt::print("against float64: softmax max relative error {:.1e}, layer norm max error {:.1e}, RMSNorm (bfloat16) "
             "max relative error {:.1e} -> {}\n\n", e_sm, e_ln, e_rms, ok ? "OK" : "MISMATCH");

  // Timed: fused, the plan of one kernel per reduction, unfused; % of the limit from the least bytes.
  const double copy = fz::copy_bandwidth_gbs();
  const fz::BenchmarkOptions opts{.n_repeat = 20, .n_warmup = 3};
  fmt::print("{:<20} {:>14} {:>20} {:>14}   (GPU us, % of the memory limit; copy {:.0f} GB/s)\n", "", "fused",
             "a kernel/reduction", "unfused", copy);
  auto row = [&](const char* name, double min_bytes, auto&& fn) {
    const double fused = fz::benchmark(name, fn, opts).gpu.median;
    double separate, unfused;
    {
      fz::SeparateReductions s;
      separate = fz::benchmark(name, fn, opts).gpu.median;
    }
    {
      fz::Unfused s;
      unfused = fz::benchmark(name, fn, opts).gpu.median;
    }
    auto pct = [&](double us) { return 100.0 * min_bytes / (us * 1e3) / copy; };
    fmt::print("{:<20} {:>7.1f} {:>5.1f}% {:>13.1f} {:>5.1f}% {:>7.1f} {:>5.1f}%\n", name, fused, pct(fused), separate,
               pct(separate), unfused, pct(unfused));
  };
  const double n = static_cast<double>(R * D);
  fz::Array<float> out_f = fz::empty<float>({R, D});
  fz::Array<fz::bfloat16> out_b = fz::empty<fz::bfloat16>({R, D});
  row("softmax", 8 * n, [&] { out_f = softmax(x); });
  row("layer norm", 8 * n + 8 * static_cast<double>(D), [&] { out_f = layer_norm(x, w, b); });
  row("RMSNorm (bfloat16)", 4 * n + 2 * static_cast<double>(D), [&] { out_b = rms_norm(xb, wb); });
  return ok ? 0 : 1;
}
