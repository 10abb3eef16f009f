// SPDX-License-Identifier: Apache-2.0
// fz::Lazy and fz::Step on a GPU: every region's results bit-identical to running its statements one by
// one, kernels and bytes as promised, barriers in the middle, errors that write nothing, threads, and
// steps replayed with new scalars and arrays.
#include <cstring>
#include <thread>

#include "support.hpp"

namespace {

template <class T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T> fz::Array<T> random_array(std::int64_t n, double lo, double hi, unsigned seed) {
  return fz::asarray(test::random<T>(static_cast<std::size_t>(n), lo, hi, seed));
}

/// An Adam update written as four statements (the way the paper writes it).
template <class T> void adam(fz::Array<T>& p, fz::Array<T>& m, fz::Array<T>& v, const fz::Array<T>& g, float lr) {
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  m = b1 * m + (1 - b1) * g;
  v = b2 * v + (1 - b2) * g * g;
  fz::Array<T> update = m / (fz::sqrt(v) + eps);
  p -= lr * update;
}

}  // namespace

TEST_CASE("a region's results are bit-identical to its statements run one by one", "[gpu][region]") {
  const std::int64_t n = (1 << 20) + 5;
  fz::Array<float> g = random_array<float>(n, -1, 1, 1);
  fz::Array<float> p1 = random_array<float>(n, -1, 1, 2), m1 = random_array<float>(n, -0.1, 0.1, 3),
                   v1 = random_array<float>(n, 0, 0.01, 4);
  fz::Array<float> p2 = p1, m2 = m1, v2 = v1;  // copies
  for (int it = 0; it < 3; ++it) {
    adam(p1, m1, v1, g, 1e-3f * static_cast<float>(it + 1));  // eager: 4 kernels
    fz::reset_stats();
    {
      fz::Lazy region;
      adam(p2, m2, v2, g, 1e-3f * static_cast<float>(it + 1));
      CHECK(fz::stats().launches == 0);  // recorded, not run
    }
    CHECK(fz::stats().launches == 1);
    // p, m, v, g read once; p, m, v written once; `update` (a temporary) never written
    CHECK(fz::stats().bytes_read == 4u * 4u * static_cast<std::uint64_t>(n));
    CHECK(fz::stats().bytes_written == 3u * 4u * static_cast<std::uint64_t>(n));
  }
  CHECK(same_bits(p1.to_host(), p2.to_host()));
  CHECK(same_bits(m1.to_host(), m2.to_host()));
  CHECK(same_bits(v1.to_host(), v2.to_host()));
}

TEST_CASE("regions keep bits across products, 16-bit stores, casts and integer outputs", "[gpu][region]") {
  const std::int64_t n = 100003;
  fz::Array<float> a = random_array<float>(n, -3, 3, 5), b = random_array<float>(n, -3, 3, 6),
                   c = random_array<float>(n, -3, 3, 7);
  fz::Array<double> da = random_array<double>(n, -3, 3, 8), db = random_array<double>(n, -3, 3, 9);
  auto statements = [&](fz::Array<float>& t, fz::Array<float>& u, fz::Array<fz::half>& h, fz::Array<float>& w,
                        fz::Array<std::int32_t>& k, fz::Array<double>& d) {
    t = a * b;            // a product read by the next statement: never contracted with its add
    u = t + c;
    h = u * 0.37f;        // stored as half: read back rounded
    w = h.astype<float>() * a - t;
    k = (w * 100.0f).astype<std::int32_t>();
    d = -(da * db);       // a negated double product
    d = d + da;
  };
  fz::Array<float> t1, u1, w1, t2, u2, w2;
  fz::Array<fz::half> h1, h2;
  fz::Array<std::int32_t> k1, k2;
  fz::Array<double> d1, d2;
  statements(t1, u1, h1, w1, k1, d1);
  fz::reset_stats();
  {
    fz::Lazy region;
    statements(t2, u2, h2, w2, k2, d2);
  }
  CHECK(fz::stats().launches == 1);
  CHECK(same_bits(t1.to_host(), t2.to_host()));
  CHECK(same_bits(u1.to_host(), u2.to_host()));
  CHECK(same_bits(h1.to_host(), h2.to_host()));
  CHECK(same_bits(w1.to_host(), w2.to_host()));
  CHECK(same_bits(k1.to_host(), k2.to_host()));
  CHECK(same_bits(d1.to_host(), d2.to_host()));
}

TEST_CASE("regions with hazards split and still give NumPy's answer", "[gpu][region]") {
  const std::int64_t r = 300, c = 300;
  fz::Array<float> x = random_array<float>(r * c, -2, 2, 10).reshape({r, c});
  fz::Array<float> row = random_array<float>(c, -2, 2, 11);
  auto statements = [&](fz::Array<float>& a, fz::Array<float>& b, fz::Array<float>& s) {
    a = x + 1.0f;
    b = a.transpose() * 2.0f + a;   // a in another layout: from memory, after a is written
    a = b.transpose() - row;        // written over while b's transpose is read: NumPy reads first
    s = row * 2.0f;                 // another shape
    b += s;                         // broadcast read of s
  };
  fz::Array<float> a1 = x, b1 = x, s1, a2 = x, b2 = x, s2;  // copies
  statements(a1, b1, s1);
  fz::Lazy region;
  statements(a2, b2, s2);
  CHECK(fz::inspect(region).kernels >= 3);
  region.run();
  CHECK(region.pending() == 0);
  CHECK(same_bits(a1.to_host(), a2.to_host()));
  CHECK(same_bits(b1.to_host(), b2.to_host()));
  CHECK(same_bits(s1.to_host(), s2.to_host()));
}

TEST_CASE("a region runs what it recorded when a result is needed", "[gpu][region]") {
  fz::Array<float> x = random_array<float>(4096, -1, 1, 12);
  fz::Array<float> y, z;
  fz::Lazy region;
  y = x * 2.0f;
  CHECK(region.pending() == 1);
  const std::vector<float> yh = y.to_host();  // a host read: runs the region first
  CHECK(region.pending() == 0);
  const std::vector<float> xh = x.to_host();
  for (std::size_t i = 0; i < xh.size(); ++i) REQUIRE(yh[i] == xh[i] * 2.0f);
  z = y + 1.0f;
  CHECK(fz::sum(z).item() == Approx(fz::sum(y).item() + 4096.0).epsilon(1e-5));  // a reduction reads z
  CHECK(region.pending() == 0);
  y = x - 1.0f;
  (void)y.data_ptr<float>();  // a raw pointer: the memory must hold the result
  CHECK(region.pending() == 0);
  y = x + 3.0f;
  fz::current_stream().synchronize();
  CHECK(region.pending() == 0);
  fz::Stream other;
  y = x * 5.0f;
  {
    fz::StreamScope on(other);
    z = x * 7.0f;  // another stream: y's statement runs first, on its own stream
    CHECK(region.pending() == 1);
  }
  region.run();
  other.synchronize();
  const std::vector<float> y5 = y.to_host(), z7 = z.to_host();
  for (std::size_t i = 0; i < xh.size(); ++i) {
    REQUIRE(y5[i] == xh[i] * 5.0f);
    REQUIRE(z7[i] == xh[i] * 7.0f);
  }
}

TEST_CASE("an exception leaving a region writes nothing", "[gpu][region]") {
  fz::Array<float> x = random_array<float>(1000, -1, 1, 13);
  fz::Array<float> a = x;  // a copy
  const std::vector<float> before = a.to_host();
  fz::reset_stats();
  try {
    fz::Lazy region;
    a = a * 2.0f + 1.0f;
    a += x;
    throw std::runtime_error("user code failed");
  } catch (const std::runtime_error&) {
  }
  CHECK(fz::stats().launches == 0);
  CHECK(same_bits(a.to_host(), before));
  // A statement that fails (here: shapes) is not recorded; the region goes on and runs the rest.
  fz::Array<float> short_one = random_array<float>(7, 0, 1, 14);
  {
    fz::Lazy region;
    a = x + 1.0f;
    CHECK_THROWS_AS(a += short_one, fz::ShapeError);
    CHECK(region.pending() == 1);
  }
  const std::vector<float> xh = x.to_host(), ah = a.to_host();
  for (std::size_t i = 0; i < xh.size(); ++i) REQUIRE(ah[i] == xh[i] + 1.0f);
}

TEST_CASE("regions on 16 threads, each on its own stream", "[gpu][region]") {
  const std::int64_t n = 1 << 16;
  fz::Array<float> x = random_array<float>(n, -1, 1, 15);
  const std::vector<float> xh = x.to_host();
  std::vector<int> bad(16, -1);
  std::vector<std::thread> threads;
  const fz::Device device = fz::Device::current();  // x's: a new thread starts on device 0
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      fz::DeviceScope here{device};
      fz::Stream s;
      fz::StreamScope on(s);
      fz::Array<float> a, b;
      for (int it = 0; it < 20; ++it) {
        fz::Lazy region;
        a = x * static_cast<float>(t);
        b = a + static_cast<float>(it);
        a = b * 2.0f;
      }
      const std::vector<float> ah = a.to_host();
      int wrong = 0;
      for (std::size_t i = 0; i < ah.size(); ++i)
        wrong += ah[i] != (xh[i] * static_cast<float>(t) + 19.0f) * 2.0f;
      bad[static_cast<std::size_t>(t)] = wrong;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 16; ++t) CHECK(bad[static_cast<std::size_t>(t)] == 0);
}

TEST_CASE("a step replays as one graph, with new scalars and new arrays", "[gpu][region][step]") {
  const std::int64_t n = 50000;
  fz::Array<float> g = random_array<float>(n, -1, 1, 16);
  fz::Array<float> p1 = random_array<float>(n, -1, 1, 17), m1 = fz::zeros<float>({n}), v1 = fz::zeros<float>({n});
  fz::Array<float> p2 = p1, m2 = m1, v2 = v1;  // copies
  float lr = 1e-3f;
  fz::Array<float> grad = g;
  fz::Step step([&] {
    adam(p2, m2, v2, grad, lr);
    fz::Array<float> norm = fz::sum(p2 * p2);  // a reduction inside the step, into an array made inside
    p2 *= 1.0f / (1.0f + 0.0f * norm);         // (multiplies by 1: keeps the comparison exact)
  });
  for (int it = 0; it < 5; ++it) {
    lr = 1e-3f * static_cast<float>(it + 1);  // a new scalar each step
    adam(p1, m1, v1, g, lr);
    fz::Array<float> norm = fz::sum(p1 * p1);
    p1 *= 1.0f / (1.0f + 0.0f * norm);
    step();
  }
  CHECK(step.builds() == 1);
  CHECK(step.kernels() == 3);  // the adam region, the sum, the scaling
  CHECK(same_bits(p1.to_host(), p2.to_host()));
  CHECK(same_bits(m1.to_host(), m2.to_host()));
  // New arrays of the same shape: the same graph, new addresses.
  grad = random_array<float>(n, -1, 1, 18);
  adam(p1, m1, v1, grad, lr);
  p1 *= 1.0f / (1.0f + 0.0f * fz::Array<float>(fz::sum(p1 * p1)));
  step();
  CHECK(step.builds() == 1);
  CHECK(same_bits(p1.to_host(), p2.to_host()));
  // replay(): the graph as it stands (same scalars, same arrays)
  for (int it = 0; it < 3; ++it) {
    adam(p1, m1, v1, grad, lr);
    p1 *= 1.0f / (1.0f + 0.0f * fz::Array<float>(fz::sum(p1 * p1)));
    step.replay();
  }
  CHECK(same_bits(p1.to_host(), p2.to_host()));
  // Another shape: rebuilt.
  fz::Array<float> small_p = random_array<float>(1000, -1, 1, 19), small_m = fz::zeros<float>({1000}),
                   small_v = fz::zeros<float>({1000}), small_g = random_array<float>(1000, -1, 1, 20);
  fz::Step other([&] { adam(small_p, small_m, small_v, small_g, lr); });
  other();
  grad = random_array<float>(n / 2, -1, 1, 21);
  p2 = random_array<float>(n / 2, -1, 1, 22);
  m2 = fz::zeros<float>({n / 2});
  v2 = fz::zeros<float>({n / 2});
  step();
  CHECK(step.builds() == 2);
}

TEST_CASE("a step refuses what cannot be part of a graph and stays as it was", "[gpu][region][step]") {
  fz::Array<float> x = random_array<float>(1000, -1, 1, 23);
  fz::Array<float> y = fz::zeros<float>({1000});
  bool read = false;
  fz::Step step([&] {
    y = x + 1.0f;
    if (read) (void)y.to_host();
  });
  step();
  read = true;
  CHECK_THROWS_WITH(step(), Catch::Contains("inside an fz::Step body"));
  read = false;
  step();
  const std::vector<float> xh = x.to_host(), yh = y.to_host();
  for (std::size_t i = 0; i < xh.size(); ++i) REQUIRE(yh[i] == xh[i] + 1.0f);
  CHECK(step.builds() == 1);
  fz::Step empty([] {});
  empty();
  CHECK(empty.kernels() == 0);
  empty.replay();
}

TEST_CASE("a region run again finds the plan of what it records now: held arrays, aliases, sizes", "[gpu][region]") {
  // A loop body recorded again reuses the plan of its signature; each change below must give another
  // plan, and the results of running the statements one by one.
  fz::Array<float> kept;
  auto body = [&](const fz::Array<float>& x, fz::Array<float>& y, bool keep) {
    fz::Array<float> t = x * 1.5f + y;
    y = t * t - x;
    if (keep) kept = std::move(t);  // the program holds t after the region: it must be written
  };
  for (int it = 0; it < 8; ++it) {
    const std::int64_t n = it < 6 ? 4099 : 517;  // and a new size at the end
    const bool keep = it % 2 == 1, alias = it % 3 == 2;
    const fz::Array<float> x0 = random_array<float>(n, -1, 1, 20 + it), y0 = random_array<float>(n, -1, 1, 40 + it);
    fz::Array<float> xa = x0, ya = y0, xb = x0, yb = y0;
    body(alias ? ya : xa, ya, keep);  // statement by statement
    const std::vector<float> kept_eager = keep ? kept.to_host() : std::vector<float>{};
    fz::reset_stats();
    {
      fz::Lazy region;
      body(alias ? yb : xb, yb, keep);
    }
    CAPTURE(it, keep, alias);
    CHECK(fz::stats().launches == 1);
    CHECK(fz::stats().bytes_written == (keep ? 2u : 1u) * 4u * static_cast<std::uint64_t>(n));
    CHECK(same_bits(ya.to_host(), yb.to_host()));
    if (keep) CHECK(same_bits(kept_eager, kept.to_host()));
  }
}

TEST_CASE("a region gathers from an array it wrote only after writing it (a kernel boundary), and scatters in order",
          "[gpu][region]") {
  // found by the region fuzzer: of an array of extent 1 along the gather's axis, the written value was handed
  // to the gather as if it were the array (NVRTC: "expression must have pointer-to-object type")
  const auto x = fz::asarray(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {8, 1});
  const auto idx = fz::asarray(std::vector<std::int32_t>{0, 3, -1, 2, 0, 1, 5, 0}, {8, 1});
  fz::Array<float> a = fz::zeros<float>({8, 1}), b = fz::zeros<float>({8, 1});
  fz::Array<std::int32_t> counts = fz::zeros<std::int32_t>({3});
  {
    fz::Lazy region;
    a = x + 1.f;
    b = fz::take_along_axis<fz::IndexMode::wrap>(a, idx, 1) * 2.f;
    fz::scatter_add(counts, 0, fz::asarray(std::vector<std::int32_t>{0, 2, 2}, {3}), 1);  // runs what came before
    a = b + 1.f;  // after the gather read it
  }
  CHECK(b.to_host() == std::vector<float>{4, 6, 8, 10, 12, 14, 16, 18});
  CHECK(a.to_host() == std::vector<float>{5, 7, 9, 11, 13, 15, 17, 19});
  CHECK(counts.to_host() == std::vector<std::int32_t>{1, 0, 2});
}

TEST_CASE("a region holding joins: bit-identical to its statements one by one, a join read through its result",
          "[gpu][region][joining]") {
  const std::int64_t R = 33, C1 = 100, C2 = 28;
  const fz::Array<float> x = fz::asarray(test::random<float>(R * C1, -1, 1, 71), {R, C1});
  const fz::Array<float> y = fz::asarray(test::random<float>(R * C2, -1, 1, 72), {R, C2});
  const fz::Array<float> w = fz::asarray(test::random<float>(C1 + C2, -1, 1, 73), {C1 + C2});
  auto statements = [&](fz::Array<float>& h, fz::Array<float>& out, fz::Array<float>& swapped) {
    h = fz::concatenate(1, x * 2.f, fz::exp(y));
    out = h * w + 1.f;                             // reads the join's result
    swapped = fz::concatenate(1, y, h.slice({fz::Slice{}, fz::Slice{0, C1}})) - 1.f;  // a piece of it, joined again
  };
  fz::Array<float> h1 = fz::zeros<float>({R, C1 + C2}), o1 = h1, s1 = h1;
  fz::Array<float> h2 = h1, o2 = h1, s2 = h1;
  fz::reset_stats();
  statements(h1, o1, s1);
  const auto eager = fz::stats().launches;
  fz::reset_stats();
  {
    fz::Lazy region;
    statements(h2, o2, s2);
  }
  CHECK(fz::stats().launches <= eager);
  CHECK(same_bits(h1.to_host(), h2.to_host()));
  CHECK(same_bits(o1.to_host(), o2.to_host()));
  CHECK(same_bits(s1.to_host(), s2.to_host()));
  // and against the host: the swapped join's first columns are y's, less one
  const auto hs = s2.to_host(), hy = y.to_host();
  CHECK(hs[0] == hy[0] - 1.f);
  CHECK(hs[static_cast<std::size_t>(C2 - 1)] == hy[static_cast<std::size_t>(C2 - 1)] - 1.f);
}
