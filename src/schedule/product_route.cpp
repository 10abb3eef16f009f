// SPDX-License-Identifier: Apache-2.0
#include "schedule/product_route.hpp"

#include <algorithm>

namespace fusion::detail {
namespace {

/// The generated kernel stays where its time is at least this fraction of cuBLASLt's.
constexpr double kMargin = 0.99;
/// A candidate this far behind the fastest route after kCutAfter samples leaves the race.
constexpr double kCutBehind = 1.15;

/// A route's time: its fastest sample. A sample can be slowed (a first launch, the host's work inside it while the
/// GPU waits, neighbours, clocks) far more than sped up: H200, 256x4096x4096, cuBLASLt + the epilogue kernel timed
/// 21.1 once and 72-92 us five times in the race, 21.5 back to back.
double time_of(const std::vector<double>& t) { return *std::min_element(t.begin(), t.end()); }

}  // namespace

int route_to_time(std::span<const std::size_t> taken) {
  int best = -1;
  const int n = static_cast<int>(taken.size());
  for (int i = 1; i <= n; ++i) {  // candidates 1..n-1, then the library (route 0)
    const int r = i % n;
    const std::size_t t = taken[static_cast<std::size_t>(r)];
    if (t < kRaceSamples && (best < 0 || t < taken[static_cast<std::size_t>(best)])) best = r;
  }
  return best;
}

void race_cuts(std::span<const std::vector<double>> times, std::span<bool> out) {
  double best = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (out[i]) continue;
    if (times[i].size() < kCutAfter) return;
    const double t = time_of(times[i]);
    if (best == 0 || t < best) best = t;
  }
  for (std::size_t i = 1; i < times.size(); ++i)
    if (!out[i] && time_of(times[i]) > kCutBehind * best) out[i] = true;
}

RaceResult race_verdict(std::span<const std::vector<double>> times, std::span<const bool> out) {
  RaceResult r;
  for (std::size_t i = 0; i < times.size(); ++i)
    if (!out[i] && times[i].size() < kRaceSamples) return r;
  if (out[0] || times[0].empty()) return r;  // (the library never leaves)
  r.library_us = time_of(times[0]);
  // every candidate timed at all (one that left the race behind the others is slower than the fastest route: it
  // never decides, but where all left it names the fastest of them)
  for (std::size_t i = 1; i < times.size(); ++i) {
    if (times[i].empty()) continue;
    const double t = time_of(times[i]);
    if (r.fastest == 0 || t < r.generated_us) r.fastest = static_cast<int>(i), r.generated_us = t;
  }
  r.verdict = r.fastest > 0 && r.generated_us < kMargin * r.library_us ? Verdict::generated : Verdict::library;
  return r;
}

}  // namespace fusion::detail
