// SPDX-License-Identifier: Apache-2.0
// Faults on the GPU: the memory limit reached in the middle of an unfused chain, a stream destroyed
// while its work is queued, and arrays outliving a device reset done by another library.
#include <dlfcn.h>

#include <cmath>

#include "reference.hpp"
#include "support.hpp"

TEST_CASE("faults: the memory limit hit mid unfused chain leaves the output unwritten and leaks nothing", "[gpu][faults]") {
  fz::MemoryPool& pool = fz::default_memory_pool();
  const std::size_t old_limit = pool.limit();
  const auto host = test::random<float>(1 << 20, -2, 2, 5);
  const fz::Array<float> x = fz::asarray(host, {1 << 20});
  fz::Array<float> out = fz::full<float>({1 << 20}, -123.0f);
  fz::Device::current().synchronize();
  const std::size_t used0 = pool.used_bytes();
  pool.set_limit(used0 + (6u << 20));  // room for one 4 MiB temporary; the chain needs several
  {
    fz::Unfused eager;
    CHECK_THROWS_AS(fz::copyto(out, fz::sin(x) + fz::cos(x) * fz::exp(x) - x), fz::OutOfMemoryError);
  }
  CHECK(pool.used_bytes() == used0);  // the temporaries it made are released
  const std::vector<float> untouched = out.to_host();
  CHECK(std::all_of(untouched.begin(), untouched.end(), [](float v) { return v == -123.0f; }));
  pool.set_limit(old_limit);
  {
    fz::Unfused eager;
    fz::copyto(out, fz::sin(x) + fz::cos(x) * fz::exp(x) - x);  // with room, the same chain runs
  }
  std::vector<double> want(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    const double v = host[i];
    want[i] = std::sin(v) + std::cos(v) * std::exp(v) - v;
  }
  CHECK(test::mismatches(out.to_host(), want, fz::DType::float32) == 0);
}

TEST_CASE("faults: a stream destroyed while its work is queued finishes that work", "[gpu][faults]") {
  const std::int64_t n = 1 << 24;
  const auto host = test::random<float>(static_cast<std::size_t>(n), -1, 1, 9);
  const fz::Array<float> x = fz::asarray(host, {n});
  fz::Array<float> y;
  fz::MemoryPool& pool = fz::default_memory_pool();
  const std::size_t used0 = pool.used_bytes();
  {
    fz::Stream s(fz::StreamOptions{.non_blocking = true});
    fz::StreamScope scope(s);
    y = fz::sin(x);
    for (int i = 0; i < 40; ++i) {
      fz::Array<float> t = y * 0.5f + x;  // temporaries freed on s, in its order
      y = fz::tanh(t);
    }
  }  // s destroyed with most of the 81 kernels still queued
  // The queued work still runs. A non-blocking stream is not ordered with the null stream, so its
  // results are read after a device synchronize (the only handle left once the stream is gone).
  fz::Device::current().synchronize();
  const std::vector<float> got = y.to_host();
  std::vector<double> want(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    double v = std::sin(static_cast<double>(host[i]));
    for (int k = 0; k < 40; ++k) v = std::tanh(v * 0.5 + host[i]);
    want[i] = v;
  }
  CHECK(test::mismatches(got, want, fz::DType::float32) == 0);
  y = fz::Array<float>();
  fz::Device::current().synchronize();
  CHECK(pool.used_bytes() == used0);
  // memory freed on the destroyed stream is handed out again without errors
  fz::Array<float> z = fz::cos(x);
  CHECK(z.size() == n);
}
