// SPDX-License-Identifier: Apache-2.0
// How the default route of a product with an epilogue is decided from measurements (runtime/exec/product_race
// takes them): which route the next call is timed on, and the verdict once both have their samples. Pure
// functions of the counts and times, so that the policy is tested without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fusion::detail {

enum class Verdict : std::uint8_t { none, library, generated };

/// Calls timed per route once the generated kernel is ready; the first of each is dropped (a first launch, clocks
/// ramping) and the median of the rest decides.
inline constexpr std::size_t kRaceSamples = 6;

/// Which route a call of an unsettled race is timed on, given the samples each has taken (done or in flight):
/// the generated kernel and cuBLASLt alternate, so that both see the same clocks and neighbours. `none`: neither
/// needs another sample (the last ones are still in flight): the call runs cuBLASLt untimed.
Verdict route_to_time(std::size_t library_taken, std::size_t generated_taken);

/// The verdict from each route's call times (microseconds, in the order taken), once both have kRaceSamples:
/// the generated kernel where its median is at least 1% below cuBLASLt's (the library is the default where the
/// two are level), else the library; `none` before. `median` gets the medians used ([0] library, [1] generated).
Verdict race_verdict(const std::vector<double>& library, const std::vector<double>& generated, double median[2]);

}  // namespace fusion::detail
