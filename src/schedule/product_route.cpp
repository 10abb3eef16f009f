// SPDX-License-Identifier: Apache-2.0
#include "schedule/product_route.hpp"

#include <algorithm>

namespace fusion::detail {
namespace {

/// The generated kernel stays where its median is at least this fraction of cuBLASLt's.
constexpr double kMargin = 0.99;

double median_after_first(std::vector<double> t) {
  t.erase(t.begin());
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

}  // namespace

Verdict route_to_time(std::size_t library_taken, std::size_t generated_taken) {
  if (generated_taken < kRaceSamples && generated_taken <= library_taken) return Verdict::generated;
  if (library_taken < kRaceSamples) return Verdict::library;
  return Verdict::none;
}

Verdict race_verdict(const std::vector<double>& library, const std::vector<double>& generated, double median[2]) {
  if (library.size() < kRaceSamples || generated.size() < kRaceSamples) return Verdict::none;
  median[0] = median_after_first(library);
  median[1] = median_after_first(generated);
  return median[1] < kMargin * median[0] ? Verdict::generated : Verdict::library;
}

}  // namespace fusion::detail
