// SPDX-License-Identifier: Apache-2.0
// Devices, streams, events, graphs, host functions and the memory pools on a real GPU.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "schedule/tuning.hpp"
#include "support.hpp"

namespace {
/// Enough work on `x` (n elements) to keep the GPU busy for a while, so missing ordering shows.
fz::Array<float> slow(const fz::Array<float>& x) {
  return fz::sin(fz::sin(fz::sin(fz::sin(fz::sin(fz::sin(fz::sin(fz::sin(x)))))))) * 0.f + x * 2.f;
}
}  // namespace

TEST_CASE("device properties describe the GPU", "[gpu][runtime]") {
  REQUIRE(fz::device_count() >= 1);
  CHECK(fz::no_device_reason().empty());
  const auto& p = fz::Device(0).properties();
  CHECK_FALSE(p.name.empty());
  CHECK(p.compute_capability_major >= 7);
  CHECK(p.multiprocessor_count > 0);
  CHECK(p.total_memory > (1ull << 30));
  CHECK(p.l2_cache_bytes > 0);
  std::thread([] { CHECK(fz::Device::current().id() == 0); }).join();  // a new thread starts on device 0
  CHECK_THROWS_AS(fz::Device(fz::device_count()), fz::NoDeviceError);
  { fz::DeviceScope scope(fz::Device(0)); CHECK(fz::Device::current().id() == 0); }
}

TEST_CASE("streams: options, identity, the current stream and its scope", "[gpu][runtime]") {
  fz::Stream s(fz::StreamOptions{.non_blocking = true, .priority = -1});
  CHECK(s.is_non_blocking());
  CHECK(s.priority() <= 0);
  CHECK(s.handle() != nullptr);
  CHECK(fz::Stream::null().handle() == nullptr);
  CHECK(fz::Stream::per_thread().handle() != nullptr);
  CHECK(fz::current_stream() == fz::Stream::null());
  {
    fz::StreamScope scope(s);
    CHECK(fz::current_stream() == s);
    {
      fz::Stream inner;
      fz::StreamScope nested(inner);
      CHECK(fz::current_stream() == inner);
    }
    CHECK(fz::current_stream() == s);
  }
  CHECK(fz::current_stream() == fz::Stream::null());
  fz::Stream ext = fz::Stream::from_external(s.handle());
  CHECK(ext == s);
  CHECK(ext.is_non_blocking());
  s.synchronize();
  CHECK(s.done());
  // the current stream is per thread
  s.use();
  std::thread([&] { CHECK(fz::current_stream() == fz::Stream::null()); }).join();
  fz::Stream::null().use();
}

TEST_CASE("wait_event orders a consumer stream after a producer stream", "[gpu][runtime]") {
  const std::int64_t n = 1 << 24;
  fz::Stream producer(fz::StreamOptions{.non_blocking = true}), consumer(fz::StreamOptions{.non_blocking = true});
  fz::Array<float> x, y, z;
  {
    fz::StreamScope scope(producer);
    x = fz::asarray(test::random<float>(static_cast<std::size_t>(n), -1, 1, 7), {n});
    y = fz::full<float>({n}, -1.f);
    producer.synchronize();
    y = slow(x);  // slow on purpose: without the wait the consumer would read -1s
  }
  fz::Event done = producer.record();
  consumer.wait_event(done);
  {
    fz::StreamScope scope(consumer);
    z = y + 1.f;
    const auto zh = z.to_host();
    const auto xh = x.to_host();
    std::size_t bad = 0;
    for (std::int64_t i = 0; i < n; ++i)
      bad += zh[static_cast<std::size_t>(i)] != xh[static_cast<std::size_t>(i)] * 2.f + 1.f;
    CHECK(bad == 0);
  }
  producer.synchronize();
}

TEST_CASE("events time GPU work and refuse misuse", "[gpu][runtime]") {
  fz::Array<float> x = fz::full<float>({1 << 22}, 1.5f);
  fz::Event start, end;
  start.record();
  fz::Array<float> y = slow(x);
  end.record();
  end.synchronize();
  CHECK(end.done());
  CHECK(fz::elapsed_time(start, end) > 0.f);
  fz::Event untimed(fz::EventOptions{.disable_timing = true});
  untimed.record();
  CHECK_THROWS_AS(fz::elapsed_time(start, untimed), fz::TypeError);
  CHECK_THROWS_AS(fz::Event(fz::EventOptions{.interprocess = true}), fz::Error);
  CHECK_NOTHROW(fz::Event(fz::EventOptions{.blocking = true, .disable_timing = true, .interprocess = true}));
}

TEST_CASE("host functions run in stream order after the work before them", "[gpu][runtime]") {
  fz::Stream s;
  fz::StreamScope scope(s);
  std::mutex mu;
  std::vector<int> order;
  fz::Array<float> x = fz::full<float>({1 << 22}, 2.f);
  for (int i = 0; i < 3; ++i) {
    x = slow(x);
    s.launch_host_func([&, i] {
      std::lock_guard lock(mu);
      order.push_back(i);
    });
  }
  s.synchronize();
  CHECK(order == std::vector<int>{0, 1, 2});
  CHECK(x.slice({{0, 1}}).item() == 16.f);
}

TEST_CASE("a captured graph replays many times, on any stream", "[gpu][runtime]") {
  fz::Stream s(fz::StreamOptions{.non_blocking = true});
  fz::StreamScope scope(s);
  const std::int64_t n = 1000;
  fz::Array<float> x = fz::zeros<float>({n});  // allocated on the capturing stream
  fz::Array<float> y = fz::zeros<float>({n});
  s.synchronize();
  (void)fz::inspect(x + 1.f);  // compile outside the capture
  s.begin_capture();
  CHECK(s.is_capturing());
  y = x + 1.f;
  x = y * 2.f;
  fz::Graph g = s.end_capture();
  CHECK_FALSE(s.is_capturing());
  for (int i = 0; i < 5; ++i) g.launch();
  s.synchronize();
  float expect = 0;
  for (int i = 0; i < 5; ++i) expect = (expect + 1) * 2;
  CHECK(x.slice({{n - 1, n}}).item() == expect);
  fz::Stream other;
  g.launch(other);
  other.synchronize();
  CHECK(x.slice({{0, 1}}).item() == (expect + 1) * 2);
  CHECK_THROWS_AS(fz::Graph().launch(), fz::Error);
}

TEST_CASE("memory pool statistics follow arrays as they come and go", "[gpu][memory]") {
  fz::MemoryPool& pool = fz::default_memory_pool();
  pool.free_all_blocks();
  const std::size_t used0 = pool.used_bytes();
  {
    fz::Array<float> a = fz::empty<float>({1 << 20});
    CHECK(pool.used_bytes() == used0 + (4u << 20));
    CHECK(pool.total_bytes() >= pool.used_bytes());
  }
  CHECK(pool.used_bytes() == used0);
  CHECK(pool.total_bytes() >= (4u << 20));  // cached for reuse
  pool.free_all_blocks();
  CHECK(pool.total_bytes() < (4u << 20) + used0);
}

TEST_CASE("a memory limit raises OutOfMemoryError that says what to do, and leaks nothing", "[gpu][memory]") {
  fz::MemoryPool& pool = fz::default_memory_pool();
  const std::size_t old_limit = pool.limit();
  const std::size_t used0 = pool.used_bytes();
  pool.set_limit(used0 + (8u << 20));
  CHECK(pool.limit() == used0 + (8u << 20));
  fz::Array<float> ok = fz::empty<float>({1 << 20});
  try {
    fz::Array<float> big = fz::empty<float>({4 << 20});
    FAIL("expected OutOfMemoryError");
  } catch (const fz::OutOfMemoryError& e) {
    CHECK_THAT(e.what(), Catch::Contains("16777216 bytes") && Catch::Contains("limit") &&
                             Catch::Contains("FUSION_GPU_MEMORY_LIMIT"));
  }
  // in the middle of an unfused chain: the temporaries that were made are released again
  fz::Array<float> x = fz::full<float>({1 << 20}, 1.f);
  {
    fz::Unfused eager;
    CHECK_THROWS_AS(fz::eval(fz::sin(x) + fz::cos(x) * fz::exp(x)), fz::OutOfMemoryError);
  }
  CHECK(pool.used_bytes() == used0 + (8u << 20));
  pool.set_limit(old_limit);
  CHECK(fz::parse_memory_limit("50%", 1000) == 500);
  CHECK(fz::parse_memory_limit("123456", 1000) == 123456);
  CHECK_THROWS_AS(fz::parse_memory_limit("lots", 1000), fz::Error);
}

TEST_CASE("a request refused by the memory limit does not fail other threads' allocations meanwhile", "[gpu][memory]") {
  // fusion-soak: a thread asking for more than the limit counted its bytes as in use until it was refused, and
  // small allocations of other threads in that moment failed
  fz::MemoryPool& pool = fz::default_memory_pool();
  const std::size_t old_limit = pool.limit();
  const std::size_t limit = pool.used_bytes() + (64u << 20);
  pool.set_limit(limit);
  std::atomic<bool> done{false};
  std::atomic<int> refused{0}, failed{0};
  std::thread greedy([&] {
    fz::Stream s;
    fz::StreamScope on(s);
    while (!done) {
      try {
        fz::Array<std::uint8_t> big = fz::empty<std::uint8_t>({static_cast<std::int64_t>(limit) + 1});  // past it
      } catch (const fz::OutOfMemoryError&) {
        ++refused;
      }
    }
  });
  {
    fz::Stream s;
    fz::StreamScope on(s);
    for (int i = 0; i < 20000; ++i) {
      try {
        fz::Array<float> small = fz::empty<float>({256 + i % 1000});
      } catch (const fz::OutOfMemoryError&) {
        ++failed;
      }
    }
  }
  done = true;
  greedy.join();
  pool.set_limit(old_limit);
  CHECK(refused > 100);
  CHECK(failed == 0);
}

TEST_CASE("memory freed while another stream still reads it is not handed out early", "[gpu][memory]") {
  const std::int64_t n = 1 << 24;
  fz::Stream reader(fz::StreamOptions{.non_blocking = true});
  fz::Array<float> out;
  {
    fz::Array<float> x = fz::full<float>({n}, 3.f);  // home: the legacy stream
    fz::Stream::null().synchronize();
    fz::StreamScope scope(reader);
    fz::Array<float> acc = fz::zeros<float>({n});
    for (int i = 0; i < 200; ++i) acc += x;  // many uses on a foreign stream: one event, re-recorded
    out = slow(x) + acc * 0.f;               // reader still busy with x when x is dropped below
  }
  // x was freed on its home stream, after an event of the reader's use; a new allocation there that
  // is overwritten at once must not corrupt what the reader computes.
  fz::Array<float> clobber = fz::full<float>({n}, -7.f);
  reader.synchronize();
  const auto h = out.to_host();
  std::size_t bad = 0;
  for (float v : h) bad += v != 6.f;
  CHECK(bad == 0);
}

TEST_CASE("the pinned pool stages transfers and can be emptied", "[gpu][memory]") {
  fz::Array<int> a = fz::asarray(std::vector<int>{1, 2, 3, 4});
  CHECK(a.to_host() == std::vector<int>{1, 2, 3, 4});
  auto& pinned = fz::default_pinned_memory_pool();
  CHECK(pinned.n_free_blocks() >= 1);
  pinned.free_all_blocks();
  CHECK(pinned.n_free_blocks() == 0);
}

TEST_CASE("sixteen threads assign identical and different expressions on their own streams", "[gpu][runtime]") {
  const std::int64_t n = 100003;
  std::atomic<int> failures{0};
  std::mutex mu;
  std::string errors;  // Catch2's reporting is not thread-safe: collect, report after the join
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      try {
        fz::Stream s(fz::StreamOptions{.non_blocking = true});
        fz::StreamScope scope(s);
        fz::Array<float> x = fz::full<float>({n}, static_cast<float>(t));
        // (racecheck did not finish 20 rounds of the 16 threads in 400 s: 3 under a sanitizer)
        for (int rep = 0; rep < (test::under_sanitizer() ? 3 : 20); ++rep) {
          // the same expression type in every thread, and one that differs by thread parity
          fz::Array<float> a = x * 2.f + 1.f;
          fz::Array<double> b = t % 2 ? fz::eval(fz::cast<double>(x) - 0.5) : fz::eval(fz::cast<double>(x) * 0.5);
          const float av = a.slice({{n - 1, n}}).item();
          const double bv = b.slice({{0, 1}}).item();
          if (av != 2.f * t + 1.f || bv != (t % 2 ? t - 0.5 : t * 0.5)) ++failures;
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        errors += fmt::format("thread {}: {}\n", t, e.what());
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  INFO(errors);
  CHECK(failures == 0);
}

// Run only by the test below, in a child process with FUSION_GPU_MEMORY_LIMIT set (hidden tag).
TEST_CASE("memory limit from the environment (child)", "[.][gpu][child]") {
  const char* env = std::getenv("FUSION_GPU_MEMORY_LIMIT");
  REQUIRE(env);
  const std::size_t total = fz::Device(0).properties().total_memory;
  CHECK(fz::default_memory_pool().limit() == fz::parse_memory_limit(env, total));
  CHECK(fz::default_memory_pool().limit() > 0);
  CHECK_THROWS_AS(fz::empty<std::uint8_t>({static_cast<std::int64_t>(fz::default_memory_pool().limit()) + 1}),
                  fz::OutOfMemoryError);
}

TEST_CASE("FUSION_GPU_MEMORY_LIMIT sets the pool's limit, as bytes or a percentage", "[gpu][memory]") {
  for (const char* value : {"50%", "123456789"}) {
    const std::string cmd = std::string("FUSION_GPU_MEMORY_LIMIT=") + value + " " + test::self_binary() +
                            " --gpu \"memory limit from the environment (child)\" > /dev/null 2>&1";
    INFO("FUSION_GPU_MEMORY_LIMIT=" << value);
    CHECK(std::system(cmd.c_str()) == 0);
  }
}

TEST_CASE("record_stream keeps memory another library uses on its stream from being reused early", "[gpu][memory]") {
  // Another library's kernel (a stand-in for cuBLAS) reads `x` through a raw pointer on its own stream:
  // fusion cannot see that use, record_stream declares it.
  const fz::RawKernel spin_copy(R"(extern "C" __global__ void spin_copy(const float* x, float* y, long long n) {
    const long long t0 = clock64();
    while (clock64() - t0 < 20000000) {}  // ~10 ms: x is dropped and its memory reallocated meanwhile
    for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += gridDim.x * 256ll) y[i] = x[i];
  })", "spin_copy");
  const std::int64_t n = 1 << 22;
  fz::Stream library(fz::StreamOptions{.non_blocking = true});
  fz::Array<float> y = fz::zeros<float>({n});
  fz::current_stream().synchronize();
  {
    fz::Array<float> x = fz::full<float>({n}, 5.f);
    fz::current_stream().synchronize();
    spin_copy.launch({132}, {256}, fz::LaunchOptions{.stream = library}, x.data_ptr<float>(), y.data_ptr<float>(), n);
    x.record_stream(library);  // after enqueuing the work, as with PyTorch
  }
  fz::Array<float> poison = fz::full<float>({n}, -1.f);  // the pool would hand x's memory out here
  library.synchronize();
  std::size_t bad = 0;
  for (float v : y.to_host()) bad += v != 5.f;
  CHECK(bad == 0);
}

TEST_CASE("arrays made on another library's stream survive that stream's destruction", "[gpu][memory]") {
  CUstream raw = nullptr;
  const int here = fz::Device::current().id();
  fz::detail::ensure_context(here);
  FUSION_CU(cuStreamCreateWithPriority, &raw, CU_STREAM_NON_BLOCKING, 0);
  const std::size_t before = fz::default_memory_pool().used_bytes();
  fz::Array<float> kept;
  {
    fz::Stream ext = fz::Stream::from_external(raw);
    fz::StreamScope scope(ext);
    fz::Array<float> a = fz::full<float>({1 << 20}, 2.f);
    fz::Array<float> b = fz::exp(a) * 0.f + a;  // work on the external stream
    kept = b + 1.f;
    ext.synchronize();
  }
  FUSION_CU(cuStreamDestroy, raw);  // the library is done with its stream before fusion frees memory
  const auto h = kept.to_host();   // a, b were freed on fusion's own stream: nothing touched the dead handle
  CHECK(h.front() == 3.f);
  CHECK(h.back() == 3.f);
  kept = fz::Array<float>();
  fz::Device(here).synchronize();
  CHECK(fz::default_memory_pool().used_bytes() == before);
}

namespace {
/// A program's allocator for the test: the device pool underneath, counting what passes through.
struct CountingAllocator : fz::DeviceAllocator {
  std::atomic<int> allocations{0}, frees{0};
  std::atomic<std::int64_t> live_bytes{0};
  std::uint64_t allocate(std::size_t bytes, CUstream_st* stream) override {
    ++allocations;
    live_bytes += static_cast<std::int64_t>(bytes);
    return fz::default_memory_pool().allocate(bytes, stream);
  }
  void deallocate(std::uint64_t ptr, std::size_t bytes, CUstream_st* stream) override {
    ++frees;
    live_bytes -= static_cast<std::int64_t>(bytes);
    fz::default_memory_pool().deallocate(ptr, bytes, stream);
  }
};
struct Refusing : fz::DeviceAllocator {
  std::uint64_t allocate(std::size_t, CUstream_st*) override { return 0; }
  void deallocate(std::uint64_t, std::size_t, CUstream_st*) override {}
};
}  // namespace

TEST_CASE("set_allocator routes fusion's allocations to the program's allocator, and back", "[gpu][memory]") {
  const auto h = test::random<float>(1000, -1, 1, 71);
  const fz::Array<float> before = fz::asarray(h);  // from the pool: freed there later
  auto mine = std::make_shared<CountingAllocator>();
  fz::set_allocator(mine, fz::Device::current().id());
  {
    const fz::Array<float> x = fz::asarray(h);
    fz::Array<float> y = x * 2.f + before;
    CHECK(mine->allocations >= 2);
    CHECK(mine->live_bytes >= 8000);
    const auto got = y.to_host();
    for (std::size_t i = 0; i < h.size(); ++i) CHECK(got[i] == Approx(3.0 * h[i]));
  }
  fz::current_stream().synchronize();
  CHECK(mine->frees == mine->allocations);  // everything it made came back to it
  CHECK(mine->live_bytes == 0);
  fz::set_allocator(std::make_shared<Refusing>(), fz::Device::current().id());
  CHECK_THROWS_AS(fz::asarray(h), fz::OutOfMemoryError);
  fz::set_allocator(nullptr, fz::Device::current().id());
  const int made = mine->allocations;
  const fz::Array<float> after = fz::asarray(h);  // the pool again
  CHECK(mine->allocations == made);
}

TEST_CASE("kernels launched back to back see every write of the kernel before them (programmatic launches)",
          "[gpu][runtime]") {
  // Each kernel reads what the one before it wrote, with no host synchronization between: an elementwise step, a
  // column sum split over blocks, row maxima and a row scan in turn, 40 rounds, against the host (int64: exact).
  // A kernel starting before its predecessor's writes were visible would read stale values.
  const fz::detail::Tuning saved = fz::detail::tuning();
  for (const bool overlap : {true, false}) {
    fz::detail::tuning().launch_overlap = overlap;
    INFO("launch_overlap " << overlap);
    const std::int64_t rows = 512, cols = 256;
    const auto at = [&](std::int64_t r, std::int64_t c) { return static_cast<std::size_t>(r * cols + c); };
    std::vector<std::int64_t> h(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::int64_t>((i * 7919) % 1009);
    fz::Array<std::int64_t> x = fz::asarray(h, {rows, cols});
    fz::reset_stats();
    for (int round = 0; round < 40; ++round) {
      x = (x * 3 + 7) % 1001;
      const fz::Array<std::int64_t> col = fz::sum(x, 0, true);
      x = x + col % 13 + fz::max(x, -1, true) % 5;
      x = fz::cumsum(x, 1) % 10007;
      std::vector<std::int64_t> sums(static_cast<std::size_t>(cols), 0), maxima(static_cast<std::size_t>(rows), 0);
      for (auto& v : h) v = (v * 3 + 7) % 1001;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
          sums[static_cast<std::size_t>(c)] += h[at(r, c)];
          maxima[static_cast<std::size_t>(r)] = std::max(maxima[static_cast<std::size_t>(r)], h[at(r, c)]);
        }
      for (std::int64_t r = 0; r < rows; ++r) {
        std::int64_t run = 0;
        for (std::int64_t c = 0; c < cols; ++c) {
          run += h[at(r, c)] + sums[static_cast<std::size_t>(c)] % 13 + maxima[static_cast<std::size_t>(r)] % 5;
          h[at(r, c)] = run % 10007;
        }
      }
    }
    CHECK(fz::stats().launches >= 120);  // three kernels a round at least, none waited for by the host
    CHECK(x.to_host() == h);
  }
  fz::detail::tuning() = saved;
}
