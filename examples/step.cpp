// SPDX-License-Identifier: Apache-2.0
// A small simulation loop written as plain statements: a damped wave on a ring of cells, one time step
// per iteration. Run eagerly (one kernel per statement), in a region (fz::Lazy: one kernel for the step)
// and as a replayed step (fz::Step: one graph launch), with the kernels the region became and the time
// per step of each, checked against each other bit for bit.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "fusion/fusion.hpp"

namespace fz = fusion;

namespace {

/// One time step: velocity from the field's curvature, damping, then the field moves.
void time_step(fz::Array<float>& u, fz::Array<float>& v, const fz::Array<float>& left, const fz::Array<float>& right,
               float dt) {
  fz::Array<float> curvature = left + right - 2.0f * u;  // a temporary: never written inside a region
  fz::Array<float> force = curvature - 0.01f * v;
  v = v + dt * force;
  u = u + dt * v;
}

double us_per_step(int steps, const auto& step) {
  step();
  fz::current_stream().synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  fz::current_stream().synchronize();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / steps;
}

}  // namespace

int main() {
  if (fz::device_count() == 0) {
    fmt::print("step: no GPU ({}); the region's kernel without one:\n", fz::no_device_reason());
    auto u = fz::placeholder<float>({4096}), v = fz::placeholder<float>({4096});
    auto l = fz::placeholder<float>({4096}), r = fz::placeholder<float>({4096});
    fz::Lazy region("wave_step");
    time_step(u, v, l, r, 0.1f);
    for (const std::string& k : fz::inspect(region).plan) fmt::print("  {}\n", k);
    region.discard();
    return 0;
  }
  const std::int64_t n = 4096;
  std::vector<float> init(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    init[static_cast<std::size_t>(i)] = std::exp(-0.001f * static_cast<float>((i - n / 2) * (i - n / 2)));
  // The neighbours are fixed arrays here (a ring would read shifted views: those split into their own kernels).
  fz::Array<float> left = fz::asarray(init), right = fz::asarray(init);
  fz::Array<float> u1 = fz::asarray(init), v1 = fz::zeros<float>({n});
  fz::Array<float> u2 = u1, v2 = v1, u3 = u1, v3 = v1;  // copies
  float dt = 0.1f;

  {
    fz::Lazy region("wave_step");
    time_step(u2, v2, left, right, dt);
    fmt::print("the region's kernels:\n");
    for (const std::string& k : fz::inspect(region).plan) fmt::print("  {}\n", k);
  }
  time_step(u1, v1, left, right, dt);
  fz::Step step([&] { time_step(u3, v3, left, right, dt); });
  step();

  const int steps = 2000;
  const double eager = us_per_step(steps, [&] { time_step(u1, v1, left, right, dt); });
  const double lazy = us_per_step(steps, [&] { fz::Lazy region("wave_step"); time_step(u2, v2, left, right, dt); });
  const double stepped = us_per_step(steps, [&] { step(); });
  // Each has taken 2 + 2000 steps (the warm-up call of us_per_step included).
  const std::vector<float> a = u1.to_host(), b = u2.to_host(), c = u3.to_host();
  const bool same =
      std::memcmp(a.data(), b.data(), a.size() * 4) == 0 && std::memcmp(a.data(), c.data(), a.size() * 4) == 0;
  const double replayed = us_per_step(steps, [&] { step.replay(); });
  fmt::print("{} cells, {} steps each (wall time per step, GPU included):\n", n, steps);
  fmt::print("  eager, a kernel per statement   {:7.2f} us\n", eager);
  fmt::print("  fz::Lazy region                 {:7.2f} us\n", lazy);
  fmt::print("  fz::Step, body re-recorded      {:7.2f} us\n", stepped);
  fmt::print("  fz::Step::replay()              {:7.2f} us\n", replayed);
  fmt::print("eager, region and step results bit-identical: {}\n", same ? "yes" : "NO");
  return same ? 0 : 1;
}
