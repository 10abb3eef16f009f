// SPDX-License-Identifier: Apache-2.0
// What a generated product's epilogue costs it (issue 36): relu(a @ b + bias) * 0.5 + residual, the same without
// the residual, or a scale alone, through fz::GeneratedProducts on its planned tiles, each against the bare
// cuBLASLt product in alternating batches of 10 event-timed calls (medians of 15); the operands' values vary, the
// bias and residual are constants. (The results of 2026-12-01, docs/performance.md, were taken with the same data by
// its scratch predecessor, which timed the batches on the host around a synchronize.)
// Built with the benchmarks:
//   fusion-epilogue-probe M N K [res|bias|scale] [--tune name=value]...   e.g. 8192 14336 4096 res --tune product_hopper=2
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fusion/fusion.hpp"
#include "schedule/tuning.hpp"

namespace fz = fusion;

namespace {

// operand values that vary along the rows and columns (i * factor % mod steps of 0.01 about zero)
std::vector<fz::bfloat16> varied(std::int64_t count, std::int64_t factor, std::int64_t mod, float offset) {
  std::vector<fz::bfloat16> v(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = fz::bfloat16(float(i * factor % mod) * 0.01f - offset);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fmt::print(stderr, "usage: fusion-epilogue-probe M N K [res|bias|scale] [--tune name=value]...\n");
    return 2;
  }
  const std::int64_t m = std::atoll(argv[1]), n = std::atoll(argv[2]), k = std::atoll(argv[3]);
  const std::string epilogue = argc > 4 && argv[4][0] != '-' ? argv[4] : "res";
  std::string tuned;
  for (int i = 4; i < argc; ++i)
    if (std::strcmp(argv[i], "--tune") == 0 && i + 1 < argc) fz::detail::set_tuning(argv[i + 1]), tuned += fmt::format(" {}", argv[++i]);
  auto a = fz::asarray(varied(m * k, 7, 13, 0.06f), {m, k});
  auto b = fz::asarray(varied(k * n, 5, 11, 0.05f), {k, n});
  auto bias = fz::asarray(std::vector<fz::bfloat16>(static_cast<std::size_t>(n), fz::bfloat16(0.5f)), {n});
  auto residual = fz::asarray(std::vector<fz::bfloat16>(static_cast<std::size_t>(m * n), fz::bfloat16(1.0f)), {m, n});
  auto out = fz::empty<fz::bfloat16>({m, n});
  const auto full = fz::maximum(fz::matmul(a, b) + bias, 0.0f) * 0.5f + residual;
  const auto no_residual = fz::maximum(fz::matmul(a, b) + bias, 0.0f);
  const auto scale = fz::matmul(a, b) * 0.5f;
  auto generated = [&] {
    fz::GeneratedProducts on;
    if (epilogue == "bias") out = no_residual;
    else if (epilogue == "scale") out = scale;
    else out = full;
  };
  auto bare = [&] { out = fz::matmul(a, b); };
  for (int i = 0; i < 3; ++i) generated(), bare();
  fz::Event start, stop;
  const auto batch = [&](auto&& run) {
    start.record();
    for (int i = 0; i < 10; ++i) run();
    stop.record();
    stop.synchronize();
    return 1e3 * fz::elapsed_time(start, stop) / 10;
  };
  std::vector<double> g, c;
  for (int rep = 0; rep < 15; ++rep) g.push_back(batch(generated)), c.push_back(batch(bare));
  std::sort(g.begin(), g.end());
  std::sort(c.begin(), c.end());
  const double flop = 2.0 * double(m) * double(n) * double(k);
  fmt::print("{}x{}x{} {}{}: generated {:.1f} us ({:.0f} TFLOPS), bare {:.1f} us ({:.0f}), ratio {:.3f} [fastest {:.1f} / {:.1f}]\n", m,
             n, k, epilogue, tuned, g[7], flop / g[7] * 1e-6, c[7], flop / c[7] * 1e-6, g[7] / c[7], g[0], c[0]);
  fz::GeneratedProducts on;
  const fz::KernelInfo info = epilogue == "bias" ? fz::inspect(no_residual) : epilogue == "scale" ? fz::inspect(scale) : fz::inspect(full);
  fmt::print("  {}\n", info.variant);
}
