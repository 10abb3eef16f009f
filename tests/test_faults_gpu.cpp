// SPDX-License-Identifier: Apache-2.0
// Faults on the GPU: the memory limit reached in the middle of an unfused chain, a stream destroyed
// while its work is queued, arrays outliving a device reset done by another library, and kernels reading memory the
// pool hands out again right after host copies into it.
#include <dlfcn.h>

#include <cmath>

#include "reference.hpp"
#include "schedule/tuning.hpp"
#include "support.hpp"

TEST_CASE("faults: a kernel right after host copies into memory just freed reads what the copies wrote",
          "[gpu][faults]") {
  // Rounds of: arrays read by kernels, then freed (their memory back in the pool, lines of it perhaps still in some
  // SM's cache); new host data copied into arrays of the same sizes (the pool hands that memory out again); at once a
  // kernel reading them (a programmatic dependent launch, its inputs read through the read-only path): an elementwise
  // sum, then a generated product (mma.sync tiles) of small integers, exact in float. A kernel that saw a stale cache
  // line, or started before a copy had landed, would read the old values. (H200, 2026-12-02: the float32 check of a
  // product of this shape, just after its operands' and bias' copies, failed once at element 69 of 13,500; not
  // reproduced, cause unknown: this is the shape of the hazards that would explain it.)
  const fz::detail::Tuning saved = fz::detail::tuning();
  for (const bool overlap : {true, false}) {
    fz::detail::tuning().launch_overlap = overlap;
    INFO("launch_overlap " << overlap);
    const std::int64_t n = 64 * 90 + 6, m = 150, k = 64, cols = 90;  // (not whole vectors; the product: that case's shape)
    std::vector<float> h(static_cast<std::size_t>(n)), w(static_cast<std::size_t>(n));
    std::size_t bad_sums = 0, bad_products = 0;
    for (int round = 0; round < 150; ++round) {
      {
        const fz::Array<float> old = fz::asarray(std::vector<float>(static_cast<std::size_t>(n), -1.0f - round), {n});
        const auto old_a = fz::asarray(std::vector<fz::bfloat16>(m * k, fz::bfloat16(-3.0f)), {m, k});
        const auto old_b = fz::asarray(std::vector<fz::bfloat16>(k * cols, fz::bfloat16(5.0f)), {k, cols});
        const fz::Array<float> twice = old * 2.0f + fz::sum(old);
        fz::GeneratedProducts on;
        const fz::Array<float> p = fz::matmul(old_a, old_b).astype<float>() + 1.0f;
      }
      for (std::size_t i = 0; i < h.size(); ++i) h[i] = float(round * 8192 + static_cast<int>(i)), w[i] = float(i % 7);
      const fz::Array<float> x = fz::asarray(h, {n}), y = fz::asarray(w, {n});
      const fz::Array<float> got = x + y;
      const auto g = got.to_host();
      for (std::size_t i = 0; i < g.size(); ++i) bad_sums += g[i] != h[i] + w[i];
      // the product: a (m x k) of -1, 0, 1 by row and column, b (k x cols) of 0..2; sums of at most 128, exact
      std::vector<fz::bfloat16> ha(static_cast<std::size_t>(m * k)), hb(static_cast<std::size_t>(k * cols));
      for (std::int64_t i = 0; i < m * k; ++i) ha[static_cast<std::size_t>(i)] = fz::bfloat16(float((i + round) % 3 - 1));
      for (std::int64_t i = 0; i < k * cols; ++i) hb[static_cast<std::size_t>(i)] = fz::bfloat16(float((i * 7 + round) % 3));
      const auto a = fz::asarray(ha, {m, k}), b = fz::asarray(hb, {k, cols});
      fz::GeneratedProducts on;
      const fz::Array<float> prod = fz::matmul(a, b).astype<float>();
      const auto pg = prod.to_host();
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
          float want = 0.0f;
          for (std::int64_t q = 0; q < k; ++q)
            want += float(ha[static_cast<std::size_t>(r * k + q)]) * float(hb[static_cast<std::size_t>(q * cols + c)]);
          bad_products += pg[static_cast<std::size_t>(r * cols + c)] != want;
        }
    }
    CHECK(bad_sums == 0);
    CHECK(bad_products == 0);
  }
  fz::detail::tuning() = saved;
}

TEST_CASE("faults: the memory limit hit mid unfused chain leaves the output unwritten and leaks nothing",
          "[gpu][faults]") {
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
  const std::vector<float> all = y.to_host();
  // Every 61st element against the reference (all 2^24 took the host half a minute).
  std::vector<float> got;
  std::vector<double> want;
  for (std::size_t i = 0; i < host.size(); i += 61) {
    double v = std::sin(static_cast<double>(host[i]));
    for (int k = 0; k < 40; ++k) v = std::tanh(v * 0.5 + host[i]);
    got.push_back(all[i]);
    want.push_back(v);
  }
  CHECK(test::mismatches(got, want, fz::DType::float32) == 0);
  y = fz::Array<float>();
  fz::Device::current().synchronize();
  CHECK(pool.used_bytes() == used0);
  // memory freed on the destroyed stream is handed out again without errors
  fz::Array<float> z = fz::cos(x);
  CHECK(z.size() == n);
}

namespace {

/// What another library does with cudaDeviceReset or cuDevicePrimaryCtxReset, through its own handle on
/// the driver (fusion is not told). With `revive`, that library then uses the device again before fusion
/// does (the context comes back with a new id); without, the context stays destroyed until fusion's next call.
void reset_device_as_another_library(int ordinal, bool revive) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  auto fn = [&](const char* name) {
    void* f = dlsym(lib, name);
    REQUIRE(f != nullptr);
    return f;
  };
  // CUresult is an int, CUdevice an int, CUcontext a pointer, CUdeviceptr a 64-bit integer.
  auto device_get = reinterpret_cast<int (*)(int*, int)>(fn("cuDeviceGet"));
  auto reset = reinterpret_cast<int (*)(int)>(fn("cuDevicePrimaryCtxReset_v2"));
  int dev = -1;
  REQUIRE(device_get(&dev, ordinal) == 0);
  REQUIRE(reset(dev) == 0);
  if (revive) {
    auto retain = reinterpret_cast<int (*)(void**, int)>(fn("cuDevicePrimaryCtxRetain"));
    auto release = reinterpret_cast<int (*)(int)>(fn("cuDevicePrimaryCtxRelease_v2"));
    auto set_current = reinterpret_cast<int (*)(void*)>(fn("cuCtxSetCurrent"));
    auto alloc = reinterpret_cast<int (*)(std::uint64_t*, std::size_t)>(fn("cuMemAlloc_v2"));
    auto free = reinterpret_cast<int (*)(std::uint64_t)>(fn("cuMemFree_v2"));
    void* ctx = nullptr;
    std::uint64_t p = 0;
    REQUIRE(retain(&ctx, dev) == 0);
    REQUIRE(set_current(ctx) == 0);
    REQUIRE(alloc(&p, 1 << 20) == 0);
    REQUIRE(free(p) == 0);
    REQUIRE(release(dev) == 0);
  }
}

template <class F> void check_reset_error(F&& use, const char* what) {
  INFO(what);
  try {
    use();
    FAIL("no error");
  } catch (const fz::DeviceResetError& e) {
    CHECK_THAT(e.what(), Catch::Contains("was made before device 0 was reset") && Catch::Contains("Make it again"));
  }
}

}  // namespace

// Run only by the test below, in a child process: the reset frees everything the process made on the device.
TEST_CASE("device reset by another library (child)", "[.][gpu][child]") {
  const std::int64_t n = (1 << 16) + 3;
  const auto host = test::random<float>(static_cast<std::size_t>(n), -2, 2, 21);
  std::vector<double> want_y(host.size()), want_scaled(host.size());
  double want_sum = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    want_y[i] = std::sin(static_cast<double>(host[i])) * 2 + host[i];
    want_scaled[i] = 3.0 * host[i];
    want_sum += host[i];
  }
  fz::RawKernel scale(R"(extern "C" __global__ void scale3(const float* x, float* y, long long n) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += gridDim.x * 256ll) y[i] = 3.0f * x[i]; })",
                      "scale3");
  fz::ElementwiseKernel halve("float32 x", "float32 z", "z = x / 2", "halve");
  fz::MemoryPool& pool = fz::default_memory_pool();
  const std::size_t used_at_start = pool.used_bytes();

  // Everything fusion holds on the device, used once so that every cache has an entry: arrays, the
  // fused and reduction kernels, a user kernel, a raw kernel, a stream, an event, pinned staging blocks.
  auto checks_on_fresh_objects = [&](const char* when) {
    INFO(when);
    fz::Array<float> x = fz::asarray(host, {n});
    fz::Array<float> y = fz::sin(x) * 2.0f + x;
    CHECK(test::mismatches(y.to_host(), want_y, fz::DType::float32) == 0);
    CHECK(std::abs(static_cast<double>(fz::eval(fz::sum(x)).item()) - want_sum) <= 1e-4 * (1 + std::abs(want_sum)));
    fz::Array<float> scaled = fz::full<float>({n}, -7.0f);
    scale({64}, {256}, x, scaled, static_cast<long long>(n));
    CHECK(test::mismatches(scaled.to_host(), want_scaled, fz::DType::float32) == 0);
    fz::Array<float> halved = halve(x);
    CHECK(halved.slice({{5, 6}}).item() == host[5] / 2);
    fz::Stream s(fz::StreamOptions{.non_blocking = true});
    {
      fz::StreamScope scope(s);
      fz::Array<float> on_s = fz::cos(x);
      CHECK(on_s.slice({{7, 8}}).item() == Approx(std::cos(host[7])));
    }
    s.record().synchronize();
  };
  checks_on_fresh_objects("before any reset");
  CHECK(pool.used_bytes() == used_at_start);

  for (const bool revive : {false, true}) {
    INFO((revive ? "the other library used the device again after its reset"
                 : "the context stays destroyed until fusion's next call"));
    fz::Array<float> x = fz::asarray(host, {n});
    fz::Array<float> y = fz::sin(x) * 2.0f + x;
    fz::Stream s(fz::StreamOptions{.non_blocking = true});
    fz::Event e = s.record();
    e.synchronize();
    CHECK(pool.used_bytes() > used_at_start);

    reset_device_as_another_library(0, revive);

    // The reset freed the pool's memory: fusion's counters start again from zero.
    CHECK(pool.used_bytes() == 0);
    // What was made before the reset is refused with the reason, and nothing runs.
    check_reset_error([&] { fz::Array<float> z = x + 1.0f; }, "an old array in an expression");
    check_reset_error([&] { (void)y.to_host(); }, "reading an old array");
    check_reset_error([&] { fz::Array<float> r = fz::sum(y); }, "reducing an old array");
    check_reset_error([&] { fz::Array<float> z = halve(x); }, "an old array into a user kernel");
    check_reset_error([&] { s.synchronize(); }, "an old stream");
    check_reset_error([&] { e.synchronize(); }, "an old event");
    check_reset_error([&] { s.wait_event(fz::Event()); }, "waiting on an old stream");
    {
      fz::StreamScope scope(s);  // an old stream made current: every operation says so, and the scope is the way out
      check_reset_error([&] { fz::Array<float> z = fz::full<float>({4}, 1.0f); }, "an old current stream");
    }
    // An output made after the reset is not written when an operand is stale.
    fz::Array<float> out = fz::full<float>({n}, -7.0f);
    check_reset_error([&] { fz::copyto(out, x * 2.0f); }, "copyto from an old array");
    check_reset_error([&] { scale({64}, {256}, x, out, static_cast<long long>(n)); }, "an old array into a raw kernel");
    const std::vector<float> untouched = out.to_host();
    CHECK(std::all_of(untouched.begin(), untouched.end(), [](float v) { return v == -7.0f; }));
    CHECK(pool.used_bytes() == static_cast<std::size_t>(n) * 4);
    out = fz::Array<float>();

    // Dropping the old objects is safe (their memory and handles are not freed twice) and changes no counter.
    x = fz::Array<float>();
    y = fz::Array<float>();
    s = fz::Stream();
    e = fz::Event();
    CHECK(pool.used_bytes() == 0);

    // New work runs: the same expressions, kernels reloaded, new streams, events and staging blocks.
    checks_on_fresh_objects(revive ? "after a reset the other library recovered from" : "after a reset");
    CHECK(pool.used_bytes() == 0);
  }
}

TEST_CASE("faults: arrays, streams and events outliving a device reset by another library", "[gpu][faults]") {
  // In a child process: the reset would free every array the other tests of this process hold.
  const std::string cmd = test::self_binary() + " --gpu \"device reset by another library (child)\" 2>&1";
  const auto child = test::run_command(cmd);
  INFO(child.text);
  CHECK(child.status == 0);
  CHECK_THAT(child.text, Catch::Contains("All tests passed"));
}
