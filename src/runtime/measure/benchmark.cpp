// SPDX-License-Identifier: Apache-2.0
#include "fusion/benchmark.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <ostream>

#include "fusion/reductions.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/stream_state.hpp"

namespace fusion {

TimeStats summarize(std::vector<double> samples_us) {
  TimeStats t;
  t.samples_us = std::move(samples_us);
  const auto& s = t.samples_us;
  if (s.empty()) return t;
  const double n = static_cast<double>(s.size());
  t.mean = std::accumulate(s.begin(), s.end(), 0.0) / n;
  double var = 0;
  for (double x : s) var += (x - t.mean) * (x - t.mean);
  t.std = std::sqrt(var / n);
  auto sorted = s;
  std::sort(sorted.begin(), sorted.end());
  t.min = sorted.front();
  t.max = sorted.back();
  const std::size_t m = sorted.size() / 2;
  t.median = sorted.size() % 2 ? sorted[m] : 0.5 * (sorted[m - 1] + sorted[m]);
  return t;
}

std::ostream& operator<<(std::ostream& os, const BenchmarkResult& r) {
  auto part = [](const TimeStats& t) {
    return fmt::format("{:>10.3f} us +/- {:>8.3f} (min: {:>10.3f} / max: {:>10.3f}) us", t.mean, t.std, t.min, t.max);
  };
  return os << fmt::format("{:<20}:    CPU: {}     GPU-{}: {}", r.name, part(r.cpu), r.device, part(r.gpu));
}

BenchmarkResult benchmark(std::string name, const std::function<void()>& fn, BenchmarkOptions options) {
  using Clock = std::chrono::steady_clock;
  if (options.calls_per_sample < 1)
    throw Error(fmt::format("benchmark: calls_per_sample is {}; it must be at least 1", options.calls_per_sample));
  BenchmarkResult r;
  r.name = std::move(name);
  r.device = Device::current().id();
  const Stream stream = current_stream();
  for (int i = 0; i < options.n_warmup; ++i) fn();
  stream.synchronize();
  std::vector<double> cpu, gpu;
  Event start, end;
  // The flush is a read (a sum of the buffer), not a memset: a memset leaves L2 full of dirty lines whose
  // write-back then competes with the sample's own reads (H200: a 4,096^2 column sum 18 -> 27 us after one).
  std::optional<Array<float>> flush, flushed;  // (allocated once: their allocation is not what a sample should time)
  if (options.flush_l2) {
    const std::size_t l2 = Device::current().properties().l2_cache_bytes;
    flush = zeros<float>({static_cast<std::int64_t>(std::max<std::size_t>(l2, std::size_t{1} << 20) / 2)});
    flushed = Array<float>(sum(*flush));
  }
  const auto began = Clock::now();
  const double calls = options.calls_per_sample;
  for (int i = 0; i < options.n_repeat; ++i) {
    if (flush) *flushed = sum(*flush);
    start.record(stream);
    const auto t0 = Clock::now();
    for (int c = 0; c < options.calls_per_sample; ++c) fn();
    const auto t1 = Clock::now();
    end.record(stream);
    end.synchronize();
    cpu.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
    gpu.push_back(1000.0 * elapsed_time(start, end) / calls);
    if (std::chrono::duration<double>(Clock::now() - began).count() > options.max_duration) break;
  }
  r.cpu = summarize(std::move(cpu));
  r.gpu = summarize(std::move(gpu));
  return r;
}

Stats Recorder::stats() const {
  const Stats now = fusion::stats();
  return Stats{now.compiles - start_.compiles,     now.memory_hits - start_.memory_hits,
               now.disk_hits - start_.disk_hits,   now.launches - start_.launches,
               now.bytes_read - start_.bytes_read, now.bytes_written - start_.bytes_written,
               now.compile_ms - start_.compile_ms,   now.min_bytes - start_.min_bytes};
}

double copy_bandwidth_gbs() {
  static std::mutex mu;
  static std::map<int, double> measured;
  const int dev = detail::enter_current_device();
  {
    std::lock_guard lock(mu);
    if (auto it = measured.find(dev); it != measured.end()) return it->second;
  }
  // 256 MiB each way: far beyond L2, long enough that launch overhead does not count.
  const std::int64_t n = std::int64_t{1} << 26;
  Array<float> a = full<float>({n}, 1.f), b = empty<float>({n});
  const CUstream s = detail::current_stream_state()->handle;
  const BenchmarkResult r = benchmark("copy", [&] {
    FUSION_CU(cuMemcpyDtoDAsync, b.data_ptr(), a.data_ptr(), a.nbytes(), s);
  }, {.n_repeat = 30, .n_warmup = 3});
  const double gbs = 2.0 * static_cast<double>(a.nbytes()) / (r.gpu.median * 1e3);
  std::lock_guard lock(mu);
  measured[dev] = gbs;
  return gbs;
}

namespace detail {

ModeResult measure_mode(const std::function<void()>& fn, const BenchmarkOptions& options) {
  fn();  // compile and allocate outside the counted call
  ModeResult m;
  {
    Recorder rec;
    fn();
    const Stats s = rec.stats();
    m.kernels = s.launches;
    m.bytes = static_cast<double>(s.bytes_read + s.bytes_written);
    m.min_bytes = static_cast<double>(s.min_bytes);
  }
  m.gpu_us = benchmark("", fn, options).gpu.median;
  m.gbs = m.bytes / (m.gpu_us * 1e3);
  m.pct_of_copy = 100.0 * m.gbs / copy_bandwidth_gbs();
  m.pct_of_limit = 100.0 * m.min_bytes / (m.gpu_us * 1e3) / copy_bandwidth_gbs();
  return m;
}

std::string compare_arrays(const ArrayBase& a, const ArrayBase& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape()))
    return fmt::format("results differ in dtype or shape: {} {} vs {} {}", dtype_name(a.dtype()), to_string(a.shape()),
                       dtype_name(b.dtype()), to_string(b.shape()));
  const std::size_t n = static_cast<std::size_t>(a.size()), w = itemsize(a.dtype());
  std::vector<unsigned char> x(n * w), y(n * w);
  a.download(x.data());
  b.download(y.data());
  const DType d = a.dtype();
  auto value = [&](const std::vector<unsigned char>& v, std::size_t i) -> double {
    return detail::visit_dtype(d, [&]<class T>(T) -> double {
      if constexpr (std::is_floating_point_v<T> || NarrowFloat<T>) {
        T f;
        std::memcpy(&f, v.data() + i * w, sizeof f);
        if constexpr (NarrowFloat<T>) return static_cast<float>(f);
        else return f;
      } else {
        return 0;  // integers compare bit for bit below
      }
    });
  };
  // Fused code keeps 16-bit intermediates in float while unfused rounds each one, and either may
  // cancel differently near zero: the tolerance is relative, plus a part scaled to the largest value
  // (16-bit: 10 epsilons, float32: 100; float64 1e-12, as its math functions may differ in the last bits).
  const double eps = dtype_info(d).epsilon;
  const double rtol = is_16bit_float(d) ? 10 * eps : std::max(1e-12, 100 * eps);
  double scale = 0;
  if (is_floating(d))
    for (std::size_t i = 0; i < n; ++i)
      if (std::isfinite(value(x, i))) scale = std::max(scale, std::abs(value(x, i)));
  const double atol = rtol * scale;
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_floating(d)) {
      if (std::memcmp(x.data() + i * w, y.data() + i * w, w) != 0) return fmt::format("element {} differs", i);
      continue;
    }
    const double u = value(x, i), v = value(y, i);
    if (std::isnan(u) && std::isnan(v)) continue;
    if (!(std::abs(u - v) <= rtol * std::max(std::abs(u), std::abs(v)) + atol))
      return fmt::format("element {}: fused {} vs unfused {}", i, u, v);
  }
  return {};
}

}  // namespace detail

std::ostream& operator<<(std::ostream& os, const FusionComparison& c) {
  os << fmt::format(
      "{}{}\n", c.name,
      c.checked ? (c.agree ? "  (fused and unfused results agree)" : "  RESULTS DIFFER: " + c.mismatch) : "");
  os << fmt::format("  {:<8} {:>8} {:>14} {:>14} {:>12} {:>10} {:>9}\n", "mode", "kernels", "bytes moved", "at least",
                    "GPU us", "GB/s", "% limit");
  for (const auto& [label, m] : {std::pair{"fused", &c.fused}, std::pair{"unfused", &c.unfused}})
    os << fmt::format("  {:<8} {:>8} {:>14.0f} {:>14.0f} {:>12.1f} {:>10.0f} {:>8.1f}%\n", label, m->kernels, m->bytes,
                      m->min_bytes, m->gpu_us, m->gbs, m->pct_of_limit);
  os << "  (% limit: the least bytes, each input read and each output written once, over the time, against the\n"
        "   device-to-device copy bandwidth; a plan that re-reads its input moves more but never counts it)\n";
  return os << fmt::format("  speedup {:.2f}x\n", c.speedup);
}

}  // namespace fusion
