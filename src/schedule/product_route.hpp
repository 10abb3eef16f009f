// SPDX-License-Identifier: Apache-2.0
// How the default route of a product with an epilogue is decided from measurements (runtime/exec/product_race
// takes them): which route the next call is timed on, and the verdict once every route has its samples. The
// routes are numbered: 0 the library (cuBLASLt + the epilogue kernel), 1... the generated kernel's candidate
// layouts (schedule/product_layout's order). Pure functions of the counts and times, so that the policy is
// tested without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace fusion::detail {

enum class Verdict : std::uint8_t { none, library, generated };

/// Calls timed per route once the generated kernels are ready; the fastest of each counts.
inline constexpr std::size_t kRaceSamples = 6;

/// Which route a call of an unsettled race is timed on, given the samples each has taken (done or in flight;
/// a route out of the race counts kRaceSamples): the one with the fewest, the candidates in order before the
/// library where they tie, so that the routes take turns and see the same clocks and neighbours. -1: none
/// needs another sample (the last ones are still in flight): the call runs cuBLASLt untimed.
int route_to_time(std::span<const std::size_t> taken);

/// Samples every route in a race has before candidates far behind leave it (race_cuts).
inline constexpr std::size_t kCutAfter = 2;

/// The candidates that leave the race early (`out[r]` set; the library never leaves): once every route still in it
/// has kCutAfter samples, each candidate whose fastest is more than 15% behind the fastest route's, so that a
/// program pays few calls of a slow layout (H200, 8192^3: 64x128 tiles 1.75x, 128x128 1.30x the fastest).
void race_cuts(std::span<const std::vector<double>> times, std::span<bool> out);

/// What a race decided: the verdict, the fastest candidate (1...; 0 where every one left the race) and the times
/// behind it. The generated verdict keeps that candidate.
struct RaceResult {
  Verdict verdict = Verdict::none;
  int fastest = 0;
  double library_us = 0, generated_us = 0;  ///< the library's time and the fastest candidate's
};

/// The verdict from each route's call times (microseconds, in the order taken; `out[r]`: route r left the race,
/// its build failed or it fell behind (race_cuts): no more samples are waited for), once every route in it has
/// kRaceSamples: a route's time is its fastest sample (samples are
/// slowed, by a first launch, the host's work inside them, neighbours, clocks, far more than sped up); the
/// fastest candidate where it is at least 1% below cuBLASLt (the library is the default where they are level),
/// else the library; `none` before.
RaceResult race_verdict(std::span<const std::vector<double>> times, std::span<const bool> out);

}  // namespace fusion::detail
