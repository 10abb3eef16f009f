// SPDX-License-Identifier: Apache-2.0
#include <sstream>

#include "support.hpp"

TEST_CASE("timing statistics", "[measure]") {
  const fz::TimeStats t = fz::summarize({4, 1, 3, 2});
  CHECK(t.mean == 2.5);
  CHECK(t.median == 2.5);
  CHECK(t.min == 1);
  CHECK(t.max == 4);
  CHECK(t.std == Approx(std::sqrt(1.25)));
  CHECK(fz::summarize({5, 1, 9}).median == 5);
  CHECK(fz::summarize({}).mean == 0);
}

TEST_CASE("results print like cupyx.profiler.benchmark", "[measure]") {
  fz::BenchmarkResult r;
  r.name = "seed";
  r.cpu = fz::summarize({12.0, 13.0});
  r.gpu = fz::summarize({480.0, 482.0});
  std::ostringstream os;
  os << r;
  const std::string s = os.str();
  CHECK_THAT(s, Catch::StartsWith("seed"));
  CHECK_THAT(s, Catch::Contains("CPU:     12.500 us +/-    0.500 (min:     12.000 / max:     13.000) us"));
  CHECK_THAT(s, Catch::Contains("GPU-0:    481.000 us"));

  fz::FusionComparison c;
  c.name = "sin(x)+cos(y)/sqrt(z)";
  c.fused = {1, 16e6, 10.0, 1600, 55.0};
  c.unfused = {5, 48e6, 30.0, 1600, 55.0};
  c.speedup = 3.0;
  c.checked = true;
  std::ostringstream cs;
  cs << c;
  CHECK_THAT(cs.str(), Catch::Contains("agree") && Catch::Contains("speedup 3.00x") && Catch::Contains("unfused"));
}

TEST_CASE("benchmark times GPU work with events and honours its limits", "[gpu][measure]") {
  fz::Array<float> x = fz::full<float>({1 << 22}, 1.f), y = fz::empty<float>({1 << 22});
  const auto r = fz::benchmark("axpy", [&] { y = 2.f * x + 1.f; }, {.n_repeat = 50, .n_warmup = 2});
  CHECK(r.gpu.samples_us.size() == 50);
  CHECK(r.gpu.min > 0);
  CHECK(r.gpu.median >= r.gpu.min);
  CHECK(r.cpu.median > 0);
  const auto short_run =
      fz::benchmark("axpy", [&] { y = 2.f * x + 1.f; }, {.n_repeat = 100000, .n_warmup = 1, .max_duration = 0.05});
  CHECK(short_run.gpu.samples_us.size() < 100000);
  if (!test::under_sanitizer()) CHECK(fz::copy_bandwidth_gbs() > 100);
  // Several calls per sample: each sample is their time divided by their number.
  int calls = 0;
  const auto batched = fz::benchmark("axpy",
                                     [&] {
                                       ++calls;
                                       y = 2.f * x + 1.f;
                                     },
                                     {.n_repeat = 7, .n_warmup = 2, .calls_per_sample = 10});
  CHECK(calls == 2 + 7 * 10);
  CHECK(batched.gpu.samples_us.size() == 7);
  CHECK(batched.gpu.median > 0);
  if (!test::under_sanitizer()) CHECK(batched.gpu.median < 3 * r.gpu.median);  // per call, not per ten
  CHECK_THROWS_AS(fz::benchmark("axpy", [] {}, {.n_repeat = 1, .calls_per_sample = 0}), fz::Error);
}

TEST_CASE("benchmark with flush_l2 starts each sample with L2 cold, the read of L2 outside the events", "[gpu][measure]") {
  // 4 MiB in, 4 MiB out: both fit in L2 (50-60 MB on an H100 / H200), so warm samples read it from there.
  const std::int64_t n = 1 << 20;
  fz::Array<float> x = fz::asarray(test::random<float>(n, -3, 3, 5)), y = fz::empty<float>({n});
  int calls = 0;
  const auto step = [&] { ++calls, y = x * 3.f + 1.f; };
  // (warm: 10 calls a sample, so that the host's launch gap, which the cold samples' flush hides, does not count)
  const auto warm = fz::benchmark("warm", step, {.n_repeat = 10, .n_warmup = 3, .calls_per_sample = 10});
  const auto cold = fz::benchmark("cold", step, {.n_repeat = 30, .n_warmup = 3, .flush_l2 = true});
  CHECK(calls == 3 + 10 * 10 + 3 + 30);
  CHECK(cold.gpu.samples_us.size() == 30);
  const double l2 = static_cast<double>(fz::Device::current().properties().l2_cache_bytes);
  const double flush_us = 2 * l2 / (fz::copy_bandwidth_gbs() * 1e3);  // reading twice L2, about
  INFO("warm " << warm.gpu.median << " us, cold " << cold.gpu.median << " us, reading twice L2 about " << flush_us);
  if (!test::under_sanitizer()) {
    CHECK(cold.gpu.median < 0.5 * flush_us);          // the read of L2 is not inside the timed part
    CHECK(cold.gpu.median >= 0.9 * warm.gpu.median);  // ... but it did leave L2 without x
  }
  const auto host = y.to_host();  // the last sample's result: the flush read a buffer of its own
  const auto in = x.to_host();
  for (std::int64_t i = 0; i < n; i += 997) CHECK(host[i] == Approx(in[i] * 3.f + 1.f));
}

TEST_CASE("the recorder counts launches and bytes of a scope", "[gpu][measure]") {
  const std::int64_t n = 1 << 20;
  fz::Array<float> x = fz::full<float>({n}, 1.f), y = fz::full<float>({n}, 2.f), z = fz::empty<float>({n});
  z = x + y;
  fz::Recorder rec;
  z = fz::sin(x) + fz::cos(y) / fz::sqrt(y);
  CHECK(rec.stats().launches == 1);
  CHECK(rec.stats().bytes_read == 2 * 4 * n);  // y is read once though used twice
  CHECK(rec.stats().bytes_written == 4 * n);
}

TEST_CASE("compare_fusion runs both modes, checks they agree and reports the difference", "[gpu][measure]") {
  const std::int64_t n = 1 << 22;
  auto x = fz::asarray(test::random<float>(n, -3, 3, 1)), y = fz::asarray(test::random<float>(n, -3, 3, 2)),
       z = fz::asarray(test::random<float>(n, 0.5, 3, 3));
  const auto c = fz::compare_fusion("seed", [&] { return fz::eval(fz::sin(x) + fz::cos(y) / fz::sqrt(z)); });
  CHECK(c.checked);
  CHECK(c.agree);
  CHECK(c.fused.kernels == 1);
  CHECK(c.unfused.kernels == 5);
  CHECK(c.fused.bytes == 16.0 * n);
  CHECK(c.unfused.bytes == 48.0 * n);
  CHECK(c.fused.gpu_us > 0);
  if (!test::under_sanitizer()) {
    CHECK(c.speedup > 1.5);
    CHECK(c.fused.pct_of_copy > 10);
  }
  // a function that returns nothing is measured but not checked
  fz::Array<float> out = fz::empty<float>({n});
  const auto v = fz::compare_fusion("void", [&] { out = x * y; });
  CHECK_FALSE(v.checked);
  CHECK(v.fused.kernels == 1);
  // a mismatch is reported, not hidden
  CHECK_FALSE(fz::detail::compare_arrays(fz::eval(x + 1.f), fz::eval(x + 1.001f)).empty());
  CHECK(fz::detail::compare_arrays(fz::eval(x * 2.f), fz::eval(x + x)).empty());
}
