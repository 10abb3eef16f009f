// SPDX-License-Identifier: Apache-2.0
// The README's main example: two expressions, the kernels fusion generates for them, and what fusion
// buys (fused vs one kernel per operation). Without a GPU it still generates and compiles the kernels
// (filling the disk cache) and says that running them needs one.
#include <fusion/fusion.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <cstdio>
#include <iostream>
#include <vector>

namespace fz = fusion;

namespace {

/// Median GPU time of `fn` in microseconds.
template <class F> double time_us(F&& fn) {
  fn();  // warm-up (and compile)
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    fz::Event start, end;
    start.record();
    fn();
    end.record();
    end.synchronize();
    ms.push_back(fz::elapsed_time(start, end));
  }
  std::sort(ms.begin(), ms.end());
  return 1000.0 * ms[ms.size() / 2];
}

}  // namespace

int main() {
  const std::int64_t n = std::int64_t{1} << 24;
  const bool gpu = fz::device_count() > 0;

  // Placeholders have a shape and dtype but no memory: enough to see (and compile) the kernels.
  auto px = fz::placeholder<float>({n}), py = fz::placeholder<float>({n}), pz = fz::placeholder<float>({n});
  std::cout << "== elementwise_computation: sin(x) + cos(y) / sqrt(z)\n"
            << fz::inspect(fz::sin(px) + fz::cos(py) / fz::sqrt(pz)) << "\n";
  std::cout << "== squared_diff: (x - y) * (x - y)\n"
            << fz::inspect(fz::named("squared_diff", (px - py) * (px - py))) << "\n";

  if (!gpu) {
    std::cout << "No GPU here (" << fz::no_device_reason() << ")\n"
              << "The kernels above were generated and compiled into the disk cache; running them needs a GPU.\n";
    return 0;
  }

  std::vector<float> hx(static_cast<std::size_t>(n)), hy(hx.size()), hz(hx.size());
  for (std::size_t i = 0; i < hx.size(); ++i) {
    hx[i] = 0.001f * static_cast<float>(i % 1000);
    hy[i] = 0.002f * static_cast<float>(i % 777);
    hz[i] = 1.0f + 0.003f * static_cast<float>(i % 555);
  }
  fz::Array<float> x = fz::asarray(hx), y = fz::asarray(hy), z = fz::asarray(hz);
  fz::Array<float> out = fz::empty<float>({n});

  auto seed = [&] { out = fz::sin(x) + fz::cos(y) / fz::sqrt(z); };
  auto sqdiff = [&] { out = fz::named("squared_diff", (x - y) * (x - y)); };
  std::printf("\n%-28s %12s %12s %9s\n", "n = 2^24 float32", "fused (us)", "unfused (us)", "speedup");
  for (auto& [name, fn] : std::vector<std::pair<const char*, std::function<void()>>>{
           {"elementwise_computation", seed}, {"squared_diff", sqdiff}}) {
    const double fused = time_us(fn);
    double unfused;
    {
      fz::Unfused eager;  // the same math, one kernel per operation
      unfused = time_us(fn);
    }
    std::printf("%-28s %12.1f %12.1f %8.2fx\n", name, fused, unfused, unfused / fused);
  }
  seed();
  const float first = out.slice({{0, 1}}).item();
  std::printf("\nout[0] = %.6f (expected %.6f)\n", first, std::sin(hx[0]) + std::cos(hy[0]) / std::sqrt(hz[0]));
  std::cout << fz::stats() << "\n";
  return 0;
}
