// SPDX-License-Identifier: Apache-2.0
// Measuring: timings with CPU and GPU statistics, a recorder of what the engine launched, and the
// fused-vs-unfused comparison users come for.
#pragma once
#include <functional>
#include <iosfwd>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "fusion/array.hpp"
#include "fusion/event.hpp"
#include "fusion/inspect.hpp"
#include "fusion/stream.hpp"

namespace fusion {

struct BenchmarkOptions {
  int n_repeat = 10000;  ///< timed repeats (fewer when max_duration runs out first)
  int n_warmup = 10;     ///< untimed calls first (compilation, caches, clocks)
  double max_duration = std::numeric_limits<double>::infinity();  ///< seconds of timed repeats at most
  /// Calls between one pair of events (each sample is their GPU time divided by this). 1 times a call
  /// alone, with the host's time to its first launch; more let that hide behind queued work, as in a
  /// loop, and as bench/peers times PyTorch and JAX (10).
  int calls_per_sample = 1;
  /// Before each sample, read a buffer of twice the device's L2 on the stream (one sum kernel), outside the
  /// events, so that each sample starts with none of fn's data in L2 and no dirty lines to write back. Inputs
  /// smaller than L2 (16 MB of a 2,048^2 float matrix on a 50-60 MB L2) otherwise stay there between calls and
  /// read faster than memory delivers, by a margin that changes from process to process. The read also keeps
  /// the GPU busy while the host enqueues the first call, so calls_per_sample = 1 times the call alone.
  bool flush_l2 = false;
};

/// Summary of samples in microseconds.
struct TimeStats {
  std::vector<double> samples_us;
  double mean = 0, std = 0, min = 0, max = 0, median = 0;
};
TimeStats summarize(std::vector<double> samples_us);

struct BenchmarkResult {
  std::string name;
  TimeStats cpu;  ///< host time to issue `fn` (what the caller waits for)
  TimeStats gpu;  ///< device time between events around `fn` on the current stream
  int device = 0;
};
/// Prints like cupyx.profiler.benchmark: `name : CPU: ... us +/- ... (min: ... / max: ...) us  GPU-0: ...`.
std::ostream& operator<<(std::ostream& os, const BenchmarkResult& r);

/// Warm up, then time each repeat with a host-clock pair and an event pair on the current stream.
BenchmarkResult benchmark(std::string name, const std::function<void()>& fn, BenchmarkOptions options = {});

/// Counts what the engine does while it is alive (compiles, cache hits, launches, bytes moved).
class Recorder {
 public:
  Recorder() : start_(fusion::stats()) {}  // qualified: inside the class, stats() names the member
  Stats stats() const;  ///< since construction

 private:
  Stats start_;
};

/// Device-to-device copy bandwidth in GB/s (bytes read + written), measured once per device and process.
double copy_bandwidth_gbs();

/// One mode of a comparison.
struct ModeResult {
  std::uint64_t kernels = 0;  ///< kernels one call launches
  double bytes = 0;           ///< bytes one call reads and writes
  double gpu_us = 0;          ///< median GPU time per call
  double gbs = 0;             ///< bytes / time
  double pct_of_copy = 0;     ///< gbs against copy_bandwidth_gbs()
  double min_bytes = 0;       ///< the least one call could move: each input read once, each output written once
  double pct_of_limit = 0;    ///< min_bytes / time against copy_bandwidth_gbs(): the honest figure
};

struct FusionComparison {
  std::string name;
  ModeResult fused, unfused;
  double speedup = 0;      ///< unfused time / fused time
  bool checked = false;    ///< the function returned an array, and both modes' results were compared
  bool agree = true;       ///< ... and they agreed within the dtype's tolerance
  std::string mismatch;    ///< where they did not
};
std::ostream& operator<<(std::ostream& os, const FusionComparison& c);

namespace detail {
/// Empty when both arrays hold the same values (floats within a dtype-aware tolerance).
std::string compare_arrays(const ArrayBase& a, const ArrayBase& b);
ModeResult measure_mode(const std::function<void()>& fn, const BenchmarkOptions& options);
}  // namespace detail

/// Runs `fn` fused and under fz::Unfused and reports both. When `fn` returns an Array, the two results
/// must agree (a fused kernel that computes something else is a bug, not a speedup).
template <class F>
FusionComparison compare_fusion(std::string name, F&& fn, BenchmarkOptions options = {.n_repeat = 30, .n_warmup = 3}) {
  FusionComparison c;
  c.name = std::move(name);
  using R = std::invoke_result_t<F&>;
  if constexpr (std::is_base_of_v<ArrayBase, R>) {
    const R fused = fn();
    R eager;
    {
      Unfused scope;
      eager = fn();
    }
    c.checked = true;
    c.mismatch = detail::compare_arrays(fused, eager);
    c.agree = c.mismatch.empty();
  }
  c.fused = detail::measure_mode([&] { (void)fn(); }, options);
  {
    Unfused scope;
    c.unfused = detail::measure_mode([&] { (void)fn(); }, options);
  }
  c.speedup = c.unfused.gpu_us / c.fused.gpu_us;
  return c;
}

}  // namespace fusion
