// SPDX-License-Identifier: Apache-2.0
// A call timed held alone for seconds, as a program that runs it over and over sees it: a large product holds the
// board at its power limit, where the clock falls below what short alternating batches see (H200, 2026-12-02:
// 1,455-1,515 MHz held, 1,545-1,620 in batches; docs/performance.md, "At the board's power limit").
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

#include "fusion/fusion.hpp"

namespace fusion_bench {

/// `run` alone for `seconds` / 2 (the clock settles), `settled()`, then the median ms a call of event-timed batches of
/// `calls` calls over `seconds`.
template <class F, class S> double held_alone_ms(F&& run, double seconds, int calls, S&& settled) {
  fusion::Event start, stop;
  const auto batches = [&](double for_seconds) {
    std::vector<double> t;
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(for_seconds);
         std::chrono::steady_clock::now() < until;) {
      start.record();
      for (int i = 0; i < calls; ++i) run();
      stop.record();
      stop.synchronize();
      t.push_back(fusion::elapsed_time(start, stop) / calls);
    }
    std::sort(t.begin(), t.end());
    return t.empty() ? 0.0 : t[t.size() / 2];
  };
  (void)batches(seconds / 2);
  settled();
  return batches(seconds);
}
template <class F> double held_alone_ms(F&& run, double seconds, int calls) {
  return held_alone_ms(run, seconds, calls, [] {});
}

}  // namespace fusion_bench
