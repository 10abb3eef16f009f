// SPDX-License-Identifier: Apache-2.0
// Sharded arrays on the GPU: pieces from and back to the host along any axis (uneven and empty pieces),
// map_shards' per-device kernels against the host, partial reductions combined by NCCL's all-reduce.
// On a machine with one GPU the pieces share it (a device list of {0, 0, 0}); NCCL then runs with one
// rank, the 2-GPU machine runs the same with two.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <numeric>
#include <thread>

#include "fusion/process_group.hpp"
#include "fusion/sharded.hpp"
#include "fusion/step.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/memory/storage.hpp"
#include "support.hpp"

namespace {
std::vector<int> every_device(int pieces) {
  const int n = fz::device_count();
  std::vector<int> d;
  for (int i = 0; i < pieces; ++i) d.push_back(i % n);
  return d;
}
std::vector<int> distinct_devices() {
  std::vector<int> d(static_cast<std::size_t>(fz::device_count()));
  std::iota(d.begin(), d.end(), 0);
  return d;
}
}  // namespace

TEST_CASE("sharded arrays go to the devices and back along any axis, uneven and empty pieces included",
          "[gpu][sharded]") {
  const fz::Shape shape{7, 5, 3};
  const auto h = test::random<float>(105, -2, 2, 71);
  for (int axis = 0; axis < 3; ++axis) {
    const auto x = fz::Sharded<float>::from_host(h, shape, every_device(3), axis);
    CHECK(x.devices() == every_device(3));  // each piece on its device (several GPUs: different ones)
    CHECK(x.shape() == shape);
    CHECK(x.to_host() == h);
  }
  // bool (std::vector<bool> packs bits: fusion stages it) and 16-bit elements
  const auto mask = test::random<bool>(105, 0, 1, 78);
  const auto m = fz::Sharded<bool>::from_host(mask, shape, every_device(3), 2);
  CHECK(m.to_host() == mask);
  const auto inverted = fz::map_shards([](const auto& m) { return !m; }, m).to_host();
  int bad = 0;
  for (std::size_t i = 0; i < mask.size(); ++i) bad += inverted[i] == mask[i];
  CHECK(bad == 0);
  const auto hb = test::random<fz::bfloat16>(105, -2, 2, 79);
  CHECK(fz::Sharded<fz::bfloat16>::from_host(hb, shape, every_device(2), 1).to_host() == hb);
  const auto uneven = fz::Sharded<float>::from_host(h, shape, every_device(3), 0, {0, 6, 1});
  CHECK(uneven.sizes() == std::vector<std::int64_t>{0, 6, 1});
  CHECK(uneven[0].size() == 0);
  CHECK(uneven.to_host() == h);
  CHECK_THROWS_AS(fz::Sharded<float>::from_host(h, shape, every_device(2), 0, {3, 3}), fz::ShapeError);
  CHECK_THROWS_AS(fz::Sharded<float>::from_host(h, {7, 5}, every_device(2)), fz::ShapeError);
}

TEST_CASE("scatter splits a device array over devices and gather puts the pieces back on one",
          "[gpu][sharded][transfer]") {
  const fz::Shape shape{9, 6, 5};
  const auto h = test::random<float>(270, -2, 2, 77);
  const auto whole = fz::asarray(h, shape);
  for (int axis = 0; axis < 3; ++axis)
    for (const fz::CopyRoute route : {fz::CopyRoute::automatic, fz::CopyRoute::staged}) {
      const auto s = fz::Sharded<float>::scatter(whole, every_device(3), axis, {}, route);
      CHECK(s.devices() == every_device(3));
      CHECK(s.axis() == axis);
      CHECK(s.to_host() == h);
      for (int d = 0; d < fz::device_count(); ++d) {
        const auto back = s.gather(d, route);
        CHECK(back.device() == d);
        fz::DeviceScope on{fz::Device(d)};
        CHECK(back.to_host() == h);
      }
    }
  const auto uneven = fz::Sharded<float>::scatter(whole, every_device(3), 1, {6, 0, 0});
  CHECK(uneven.sizes() == std::vector<std::int64_t>{6, 0, 0});
  CHECK(uneven.gather(0).to_host() == h);
  CHECK_THROWS_AS(fz::Sharded<float>::scatter(whole, every_device(2), 3), fz::ShapeError);
  CHECK_THROWS_AS(fz::Sharded<float>::scatter(whole, every_device(2), 0, {4, 4}), fz::ShapeError);
  const auto r = fz::Sharded<float>::replicate(whole, every_device(2));
  CHECK(r.gather(0).to_host() == h);
}

TEST_CASE("map_shards runs one fused kernel per piece on its device, replicas broadcasting", "[gpu][sharded]") {
  const std::int64_t n = 1000, m = 37;
  const auto hx = test::random<float>(static_cast<std::size_t>(n * m), -2, 2, 72),
             hy = test::random<float>(static_cast<std::size_t>(n * m), -2, 2, 73);
  const auto hb = test::random<float>(static_cast<std::size_t>(m), -1, 1, 74);
  const auto devices = every_device(3);
  const auto x = fz::Sharded<float>::from_host(hx, {n, m}, devices, 0, {500, 1, 499});
  const auto y = fz::Sharded<float>::from_host(hy, {n, m}, devices, 0, {500, 1, 499});
  const auto bias = fz::Sharded<float>::replicate(fz::asarray(hb), devices);
  const auto launches = fz::stats().launches;
  const auto z =
      fz::map_shards([](const auto& x, const auto& y, const auto& b) { return 2.5f * x + y * b; }, x, y, bias);
  CHECK(fz::stats().launches - launches == 3);  // one kernel per piece
  CHECK(z.axis() == 0);
  CHECK(z.devices() == devices);  // each result on its piece's device
  CHECK(z.sizes() == x.sizes());
  const auto hz = z.to_host();
  int bad = 0;
  for (std::int64_t i = 0; i < n * m; ++i) {
    const double want = 2.5 * hx[static_cast<std::size_t>(i)] +
                        double(hy[static_cast<std::size_t>(i)]) * hb[static_cast<std::size_t>(i % m)];
    bad += std::abs(hz[static_cast<std::size_t>(i)] - want) > 1e-5 * (1 + std::abs(want));
  }
  CHECK(bad == 0);
  // an empty piece computes nothing, the others as before
  const auto xe = fz::Sharded<float>::from_host(hx, {n, m}, devices, 0, {600, 0, 400});
  const auto ye = fz::Sharded<float>::from_host(hy, {n, m}, devices, 0, {600, 0, 400});
  const auto ze =
      fz::map_shards([](const auto& x, const auto& y, const auto& b) { return 2.5f * x + y * b; }, xe, ye, bias)
          .to_host();
  CHECK(ze == hz);  // the same elementwise arithmetic, however the rows are split
  // pieces split differently do not pair up
  const auto other = fz::Sharded<float>::from_host(hy, {n, m}, devices, 0);
  CHECK_THROWS_AS(fz::map_shards([](const auto& a, const auto& b) { return a + b; }, x, other), fz::ShapeError);
}

TEST_CASE("a product of row-sharded pieces with a replicated matrix runs per device, epilogue included",
          "[gpu][sharded][matmul]") {
  const std::int64_t n = 1000, k = 64, m = 48;
  const auto hx = test::random<float>(static_cast<std::size_t>(n * k), -1, 1, 91);
  const auto hw = test::random<float>(static_cast<std::size_t>(k * m), -1, 1, 92);
  const auto hb = test::random<float>(static_cast<std::size_t>(m), -1, 1, 93);
  const auto devices = every_device(3);
  const auto w = fz::asarray(hw, {k, m}), b = fz::asarray(hb, {m});  // plain arrays: a replica per device
  auto layer = [](const auto& x, const auto& w, const auto& b) { return fz::maximum(fz::matmul(x, w) + b, 0.0f); };
  auto check = [&](const fz::Sharded<float>& z) {
    CHECK(z.axis() == 0);
    CHECK(z.devices() == devices);
    const auto hz = z.to_host();
    REQUIRE(hz.size() == static_cast<std::size_t>(n * m));
    int bad = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < m; ++j) {
        double s = hb[static_cast<std::size_t>(j)], scale = 1;
        for (std::int64_t t = 0; t < k; ++t) {
          const double term = double(hx[static_cast<std::size_t>(i * k + t)]) * hw[static_cast<std::size_t>(t * m + j)];
          s += term, scale += std::abs(term);
        }
        bad += !(std::abs(hz[static_cast<std::size_t>(i * m + j)] - std::max(s, 0.0)) <= 2e-6 * scale);
      }
    CHECK(bad == 0);
  };
  const auto x = fz::Sharded<float>::from_host(hx, {n, k}, devices, 0, {500, 1, 499});
  const auto z = fz::map_shards(layer, x, w, b);
  CHECK(z.sizes() == x.sizes());
  {  // each piece's work: one cuBLASLt call with its bias+ReLU epilogue, no kernel of fusion's
    fz::DeviceScope on{fz::Device(x.device(2))};
    const auto launches = fz::stats().launches;
    const fz::Array<float> piece = layer(x[2], w, b);
    CHECK(fz::stats().launches == launches);
  }
  check(z);
  const auto plans = fz::inspect_shards(layer, x, w, b);
  REQUIRE(plans.size() == 3);
  CHECK_THAT(plans[1].plan[0], Catch::Contains("(m, n, k) = (1, 48, 64)") && Catch::Contains("bias+relu"));
  // an empty piece multiplies nothing; the others as before
  check(fz::map_shards(layer, fz::Sharded<float>::from_host(hx, {n, k}, devices, 0, {600, 0, 400}), w, b));
}

TEST_CASE("map_shards takes plain arrays: broadcast against every piece, copied to other devices once",
          "[gpu][sharded][transfer]") {
  const std::int64_t n = 300, m = 40;
  const auto hx = test::random<float>(static_cast<std::size_t>(n * m), -2, 2, 91),
             hb = test::random<float>(static_cast<std::size_t>(m), -1, 1, 92);
  const auto devices = every_device(3);
  const auto x = fz::Sharded<float>::from_host(hx, {n, m}, devices, 0);
  auto bias = fz::asarray(hb);  // on device 0
  auto scaled = [](const auto& x, const auto& b) { return x * b + 1.f; };
  auto check = [&](const fz::Sharded<float>& z, const std::vector<float>& b) {
    const auto hz = z.to_host();
    int bad = 0;
    for (std::int64_t i = 0; i < n * m; ++i)
      bad +=
          hz[static_cast<std::size_t>(i)] != hx[static_cast<std::size_t>(i)] * b[static_cast<std::size_t>(i % m)] + 1.f;
    return bad;
  };
  fz::forget_replicas();
  CHECK(check(fz::map_shards(scaled, x, bias), hb) == 0);
  CHECK(check(fz::map_shards([](const auto& b, const auto& x) { return x * b + 1.f; }, bias, x), hb) ==
        0);  // in any position
  // every other device holds one copy, made by the first call and reused by the second
  const auto others =
      static_cast<std::size_t>(std::min(fz::device_count(), 3) - 1);  // devices of the pieces but the bias's
  CHECK(fz::forget_replicas() == others);
  // a write fusion makes is seen: the next call copies the new values
  CHECK(check(fz::map_shards(scaled, x, bias), hb) == 0);
  bias *= 2.f;
  std::vector<float> doubled = hb;
  for (float& v : doubled) v *= 2;
  CHECK(check(fz::map_shards(scaled, x, bias), doubled) == 0);
  // memory whose address was handed out is copied every time (its writes are not fusion's to see)
  (void)bias.data_ptr<float>();
  CHECK(check(fz::map_shards(scaled, x, bias), doubled) == 0);
  fz::forget_replicas();
  CHECK(check(fz::map_shards(scaled, x, bias), doubled) == 0);
  CHECK(fz::forget_replicas() == 0);  // escaped: nothing cached
  // a split argument that does not pair up is still refused; an array with a shape that does not broadcast too
  CHECK_THROWS_AS(fz::map_shards(scaled, x, fz::asarray(test::random<float>(7, -1, 1, 93))), fz::ShapeError);
}

TEST_CASE("fusion counts every write it makes to an array, so cached replicas know when they are stale",
          "[gpu][sharded][transfer]") {
  // The replica cache compares these counts; with one GPU it never copies (replicas on the array's own
  // device are the array), so the counting is checked here directly, path by path.
  auto a = fz::asarray(test::random<float>(1000, -1, 1, 95));
  const auto& storage = *a.storage();
  std::uint64_t seen = storage.writes;
  auto wrote = [&] {
    const bool more = storage.writes > seen;
    seen = storage.writes;
    return more;
  };
  const fz::Array<float> other = fz::asarray(test::random<float>(1000, -1, 1, 96));
  fz::Array<float> r = a * 2.f;  // reading a writes r, not a
  CHECK_FALSE(wrote());
  a += other;  // an elementwise kernel's output
  CHECK(wrote());
  fz::copyto(a, fz::sum(other, fz::Axes{}, true));  // a reduction broadcast into it
  CHECK(wrote());
  fz::PinnedBuffer<float> host(1000);
  std::fill(host.begin(), host.end(), 0.25f);
  a.copy_from(host);  // an upload
  host.synchronize();
  CHECK(wrote());
  fz::Step step([&] { a *= 0.5f; });
  step();
  CHECK(wrote());
  step.replay();  // the recorded graph writes it again
  CHECK(wrote());
  CHECK_FALSE(storage.escaped);
  (void)a.data_ptr<float>();  // handed out: never cached again
  CHECK(storage.escaped);
}

TEST_CASE("a sharded sum: a fused partial per device, NCCL's all-reduce, the total on every device", "[gpu][sharded]") {
  if (!fz::nccl_available()) FAIL("NCCL is needed here and did not load: " << fz::nccl_unavailable_reason());
  const std::int64_t n = (std::int64_t{1} << 20) + 7;
  const auto hx = test::random<float>(static_cast<std::size_t>(n), -1, 1, 75),
             hy = test::random<float>(static_cast<std::size_t>(n), -1, 1, 76);
  const auto devices = distinct_devices();  // one rank per GPU: 1 here, 2 on the two-GPU machine
  const auto x = fz::Sharded<float>::from_host(hx, {n}, devices);
  const auto y = fz::Sharded<float>::from_host(hy, {n}, devices);
  auto dot = fz::map_shards([](const auto& x, const auto& y) { return fz::sum(x * y); }, x, y);
  CHECK(dot.axis() == -1);
  fz::all_reduce(dot);
  double want = 0, magnitude = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    want += double(hx[static_cast<std::size_t>(i)]) * hy[static_cast<std::size_t>(i)];
    magnitude += std::abs(double(hx[static_cast<std::size_t>(i)]) * hy[static_cast<std::size_t>(i)]);
  }
  std::vector<float> first;
  for (int i = 0; i < dot.count(); ++i) {
    const float got = dot[i].item();
    CHECK(std::abs(got - want) <= 1e-6 * magnitude);
    if (i == 0) first = {got};
    CHECK(got == first[0]);  // every device holds the same total
  }
  // bit-identical run to run
  auto again = fz::map_shards([](const auto& x, const auto& y) { return fz::sum(x * y); }, x, y);
  fz::all_reduce(again);
  CHECK(again[0].item() == first[0]);
  // max and min combine too, and integer arrays
  auto hi = fz::map_shards([](const auto& x) { return fz::max(x, 0, true); }, x);
  fz::all_reduce(hi, fz::Combine::max);
  CHECK(hi[0].item() == *std::max_element(hx.begin(), hx.end()));
  const std::vector<std::int64_t> counts(static_cast<std::size_t>(n), 3);
  const auto c = fz::Sharded<std::int64_t>::from_host(counts, {n}, devices);
  auto total = fz::map_shards([](const auto& c) { return fz::sum(c); }, c);
  fz::all_reduce(total);
  CHECK(total[0].item() == 3 * n);
  // reduce_to writes the total into one device's array only
  auto partial = fz::map_shards([](const auto& x, const auto& y) { return fz::sum(x * y); }, x, y);
  const int root = partial.count() - 1;
  fz::reduce_to(partial, root);
  CHECK(partial[root].item() == first[0]);  // the same NCCL sum as the all-reduce's
  CHECK_THROWS_WITH(fz::reduce_to(partial, partial.count()), Catch::Contains("root"));
  // a dtype NCCL lacks is a TypeError naming it
  auto flags = fz::map_shards([](const auto& x) { return fz::any(x > 0.f); }, x);  // one bool per device
  CHECK_THROWS_WITH(fz::all_reduce(flags), Catch::Contains("bool"));
}

namespace {
/// sum, prod, max or min (op 0..3) of rows [r0, r1) x columns [c0, c1) of the C-ordered R x C matrix `h`:
/// everything (axis -1), down the rows (axis 0: one value per column) or along them (axis 1).
std::vector<double> host_reduce(const std::vector<double>& h, std::int64_t C, std::int64_t r0, std::int64_t r1,
                                std::int64_t c0, std::int64_t c1, int axis, int op) {
  auto start = [&] { return op == 0 ? 0.0 : op == 1 ? 1.0 : op == 2 ? -1e300 : 1e300; };
  auto fold = [&](double a, double v) {
    return op == 0 ? a + v : op == 1 ? a * v : op == 2 ? std::max(a, v) : std::min(a, v);
  };
  std::vector<double> out(axis < 0    ? 1
                          : axis == 0 ? static_cast<std::size_t>(c1 - c0)
                                      : static_cast<std::size_t>(r1 - r0),
                          start());
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t c = c0; c < c1; ++c) {
      double& o = out[axis < 0 ? 0 : axis == 0 ? static_cast<std::size_t>(c - c0) : static_cast<std::size_t>(r - r0)];
      o = fold(o, h[static_cast<std::size_t>(r * C + c)]);
    }
  return out;
}
bool near(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-12 * (1 + std::abs(want[i]))) return false;
  return true;
}
}  // namespace

TEST_CASE(
    "every reduction of a split matrix: along the split axis (a partial per piece, NCCL combines) and along kept ones",
    "[gpu][sharded]") {
  const std::int64_t R = 61, C = 47;
  const auto h = test::random<double>(static_cast<std::size_t>(R * C), 0.8, 1.2, 90);  // a product of 61 stays near 1
  const fz::Combine combine[] = {fz::Combine::sum, fz::Combine::prod, fz::Combine::max, fz::Combine::min};
  auto reduce = [](int op, fz::Axes axes) {
    return [op, axes](const auto& a) {
      switch (op) {
        case 0: return fz::Array<double>(fz::sum(a, axes));
        case 1: return fz::Array<double>(fz::prod(a, axes));
        case 2: return fz::Array<double>(fz::max(a, axes));
        default: return fz::Array<double>(fz::min(a, axes));
      }
    };
  };
  const bool nccl = fz::nccl_available();
  // three pieces (on one GPU they share it: partials checked one by one), then one piece per GPU (NCCL)
  for (const std::vector<int>& devices : {every_device(3), distinct_devices()})
    for (int split = 0; split < 2; ++split) {
      const auto x = fz::Sharded<double>::from_host(h, {R, C}, devices, split, {});
      const bool distinct = devices == distinct_devices();
      for (int op = 0; op < 4; ++op) {
        INFO("split along axis " << split << ", " << devices.size() << " piece(s), op " << op);
        std::int64_t begin = 0;
        std::vector<std::pair<std::int64_t, std::int64_t>> rows, cols;  // each piece's extent
        for (std::int64_t size : x.sizes()) {
          rows.push_back(split == 0 ? std::make_pair(begin, begin + size) : std::make_pair(std::int64_t{0}, R));
          cols.push_back(split == 1 ? std::make_pair(begin, begin + size) : std::make_pair(std::int64_t{0}, C));
          begin += size;
        }
        for (const int axis : {-1, split}) {  // the split axis is reduced: a partial per piece
          auto partial = fz::map_shards(reduce(op, axis < 0 ? fz::Axes{} : fz::Axes{axis}), x);
          CHECK(partial.axis() == -1);
          for (int i = 0; i < partial.count(); ++i) {
            fz::DeviceScope on{fz::Device(partial.device(i))};
            CHECK(near(partial[i].to_host(),
                       host_reduce(h, C, rows[i].first, rows[i].second, cols[i].first, cols[i].second, axis, op)));
          }
          if (distinct && nccl) {
            fz::all_reduce(partial, combine[op]);
            for (int i = 0; i < partial.count(); ++i) {
              fz::DeviceScope on{fz::Device(partial.device(i))};
              CHECK(near(partial[i].to_host(), host_reduce(h, C, 0, R, 0, C, axis, op)));
            }
          }
        }
        // the kept axis is reduced: each piece's result is a piece of the whole result (f evaluates
        // inside here, so map_shards judges by the results' shapes; `.along` says it for one piece)
        const int kept = 1 - split;
        const auto pieces = fz::map_shards(reduce(op, fz::Axes{kept}), x).along(0);
        CHECK(near(pieces.to_host(), host_reduce(h, C, 0, R, 0, C, kept, op)));
      }
      // f returning an expression: map_shards finds the result's split axis itself, also for even splits
      const int kept = 1 - split;
      const auto sums = fz::map_shards([kept](const auto& a) { return fz::sum(a, kept); }, x);
      CHECK(sums.axis() == 0);
      CHECK(near(sums.to_host(), host_reduce(h, C, 0, R, 0, C, kept, 0)));
      const auto kept_dims = fz::map_shards([kept](const auto& a) { return fz::max(a, kept, true) * 2.0; }, x);
      CHECK(kept_dims.axis() == split);  // keepdims: the split axis keeps its place
      std::vector<double> twice = host_reduce(h, C, 0, R, 0, C, kept, 2);
      for (double& v : twice) v *= 2;
      CHECK(near(kept_dims.to_host(), twice));
      const auto totals = fz::map_shards([split](const auto& a) { return fz::min(a, split); }, x);
      CHECK(totals.axis() == -1);  // the split axis reduced away: a partial per piece
    }
}

TEST_CASE("to_device copies between devices: same device, peer and staged, in both streams' order",
          "[gpu][sharded][transfer]") {
  // Every ordered pair of devices (one GPU: device 0 to itself, where the staged route still runs through
  // the host), every route the pair allows. Sizes: empty, one element, odd, and 3.3 staging chunks of
  // 8 MiB, so the two staging buffers are each reused.
  const int n_dev = fz::device_count();
  for (int from = 0; from < n_dev; ++from)
    for (int to = 0; to < n_dev; ++to) {
      std::vector<fz::CopyRoute> routes = {fz::CopyRoute::automatic, fz::CopyRoute::staged};
      if (from != to && fz::describe_copy_route(from, to).starts_with("peer")) routes.push_back(fz::CopyRoute::peer);
      for (const fz::CopyRoute route : routes)
        for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1001}, std::int64_t{7'000'001}}) {
          INFO("device " << from << " to " << to << ", " << fz::describe_copy_route(from, to, route) << ", " << n
                         << " elements");
          const auto h = test::random<float>(static_cast<std::size_t>(n), -3, 3, static_cast<unsigned>(80 + n % 97));
          fz::Array<float> a, b;
          {
            fz::DeviceScope on{fz::Device(from)};
            a = fz::asarray(h, {n});
          }
          b = fz::to_device(a, to, route);
          CHECK(b.device() == to);
          CHECK(b.shape() == a.shape());
          CHECK(b.memory_identity() != a.memory_identity());  // a copy, also on the same device
          fz::DeviceScope on{fz::Device(to)};
          CHECK(b.to_host() == h);
        }
    }
  const int last = n_dev - 1;
  SECTION("a view is copied C-ordered, other dtypes byte for byte") {
    const auto h = test::random<float>(300 * 257, -3, 3, 81);
    const auto m = fz::asarray(h, {300, 257});
    const auto t = fz::to_device(m.transpose(), last, fz::CopyRoute::staged);
    CHECK(t.shape() == fz::Shape{257, 300});
    CHECK(t.is_contiguous());
    fz::DeviceScope on{fz::Device(last)};
    const auto ht = t.to_host();
    int bad = 0;
    for (int i = 0; i < 257; ++i)
      for (int j = 0; j < 300; ++j)
        bad += ht[static_cast<std::size_t>(i * 300 + j)] != h[static_cast<std::size_t>(j * 257 + i)];
    CHECK(bad == 0);
    const auto hb = test::random<fz::bfloat16>(4099, -3, 3, 82);
    const auto hi = test::random<std::int64_t>(4099, -1e12, 1e12, 83);
    fz::Array<fz::bfloat16> b16;
    fz::Array<std::int64_t> i64;
    {
      fz::DeviceScope src{fz::Device(0)};
      b16 = fz::to_device(fz::asarray(hb), last);
      i64 = fz::to_device(fz::asarray(hi), last, fz::CopyRoute::staged);
    }
    CHECK(b16.to_host() == hb);
    CHECK(i64.to_host() == hi);
  }
  SECTION("the copy sees the source as it was when enqueued, and later writes to the source wait for it") {
    // Nothing waits on the host between the source's kernel, the copy and the overwrite: only the
    // events between the two devices' current streams keep them in order.
    const std::int64_t n = 9'000'000;
    fz::Array<float> a, b;
    {
      fz::DeviceScope on{fz::Device(0)};
      fz::Stream s;
      fz::StreamScope with{s};
      a = fz::empty<float>({n});
      fz::copyto(a, fz::cast<float>(fz::arange<std::int32_t>(n) % 1000) * 0.5f);
      b = fz::to_device(a, last, fz::CopyRoute::staged);
      fz::copyto(a, -1.f);
      s.synchronize();
    }
    fz::DeviceScope on{fz::Device(last)};
    const auto hb = b.to_host();
    int bad = 0;
    for (std::int64_t i = 0; i < n; ++i) bad += hb[static_cast<std::size_t>(i)] != static_cast<float>(i % 1000) * 0.5f;
    CHECK(bad == 0);
  }
  SECTION("an expression mixing devices is refused, naming both") {
    if (n_dev >= 2) {
      const auto a = fz::asarray(std::vector<float>{1, 2, 3});
      fz::Array<float> b;
      {
        fz::DeviceScope on{fz::Device(1)};
        b = fz::asarray(std::vector<float>{4, 5, 6});
      }
      CHECK_THROWS_WITH(fz::Array<float>(a + b), Catch::Contains("device 1") && Catch::Contains("device 0"));
      // reading another device's array on the host waits for that device's current stream, views too
      CHECK(b.to_host() == std::vector<float>{4, 5, 6});
      CHECK(b.slice({fz::Slice{0, 3, 2}}).to_host() == std::vector<float>{4, 6});
      CHECK(fz::Array<float>(a + fz::to_device(b, 0)).to_host() == std::vector<float>{5, 7, 9});  // copied first: fine
      // writing another device's array from the host goes on that device's stream, pinned or not
      fz::PinnedBuffer<float> host(3);
      host[0] = 7, host[1] = 8, host[2] = 9;
      b.copy_from(host);
      host.synchronize();
      CHECK(b.to_host() == std::vector<float>{7, 8, 9});
      std::fill(host.begin(), host.end(), 0.f);
      b.copy_to(host);
      host.synchronize();
      CHECK(std::vector<float>(host.begin(), host.end()) == std::vector<float>{7, 8, 9});
      // another library's stream is taken for the device it was made on, and refused for another
      CUstream raw = nullptr;
      fz::detail::ensure_context(0);
      FUSION_CU(cuStreamCreateWithPriority, &raw, CU_STREAM_NON_BLOCKING, 0);
      CHECK_THROWS_WITH(fz::Stream::from_external(raw, 1), Catch::Contains("not made in device 1's primary context"));
      CHECK(fz::Stream::from_external(raw, 0).device() == 0);
      FUSION_CU(cuStreamDestroy, raw);
      // an event belongs to its device's streams
      fz::Event on0;
      fz::DeviceScope on{fz::Device(1)};
      CHECK_THROWS_WITH(fz::Stream().record(on0),
                        Catch::Contains("an event of device 0 cannot be recorded on a stream of device 1"));
    }
  }
  SECTION("errors name what to fix") {
    CHECK_THROWS_AS(fz::to_device(fz::asarray(std::vector<float>{1, 2}), n_dev), fz::NoDeviceError);
    CHECK_THROWS_WITH(fz::to_device(fz::placeholder<float>({3}), 0), Catch::Contains("placeholder"));
    CHECK_THROWS_WITH(fz::to_device(fz::Array<float>(), 0), Catch::Contains("empty"));
    CHECK_THAT(fz::describe_copy_route(0, 0), Catch::StartsWith("same device"));
    CHECK_THAT(fz::describe_copy_route(0, 0, fz::CopyRoute::staged), Catch::StartsWith("staged"));
  }
}

TEST_CASE("a peer copy maps the source's pool into the target device, or the driver copies through the host",
          "[gpu][sharded][transfer]") {
  // cuCtxEnablePeerAccess covers cuMemAlloc's memory, not a memory pool's: without the pool's own access
  // grant, cuMemcpyPeerAsync still copies fusion's arrays, but staged through the host by the driver (38
  // GB/s where NVLink gives hundreds). The grant is what a peer copy needs; the bench shows the speed.
  const int n_dev = fz::device_count();
  CHECK_THROWS_AS(fz::memory_pool(0).allow_access_from(n_dev), fz::NoDeviceError);
  fz::memory_pool(0).allow_access_from(0);  // its own memory: nothing to do
  auto access = [](const fz::ArrayBase& a, int device) {
    CUmemoryPool pool = nullptr;
    FUSION_CU(cuPointerGetAttribute, &pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a.data_ptr());
    CUmemLocation where{};
    where.type = CU_MEM_LOCATION_TYPE_DEVICE;
    where.id = device;
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    FUSION_CU(cuMemPoolGetAccess, &flags, pool, &where);
    return flags;
  };
  int pairs = 0;
  for (int from = 0; from < n_dev; ++from)
    for (int to = 0; to < n_dev; ++to) {
      if (from == to || !fz::describe_copy_route(from, to).starts_with("peer")) continue;
      INFO("device " << from << " to " << to);
      const auto h = test::random<float>(300'001, -3, 3, 99);
      fz::Array<float> a;
      {
        fz::DeviceScope on{fz::Device(from)};
        a = fz::asarray(h);
      }
      CHECK(access(a, from) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
      const fz::Array<float> b = fz::to_device(a, to);
      CHECK(access(a, to) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
      CHECK(b.to_host() == h);
      ++pairs;
    }
  INFO(pairs << " ordered pair(s) of devices with peer access checked");
  CHECK(pairs == (n_dev > 1 && fz::describe_copy_route(0, 1).starts_with("peer") ? n_dev * (n_dev - 1) : 0));
}

TEST_CASE("the virtual-GPU stand-in shows one GPU as two devices, each with its own context",
          "[.][gpu][child][virtual_gpus]") {
  // [child]: runs only where its caller set it up, here scripts/gpu-check's `virtual` stage, through
  // tests/tools/virtual_gpus.cpp. It checks that the stand-in is in place, so the [sharded] run beside it
  // really went over two devices.
  REQUIRE(fz::device_count() >= 2);
  CHECK_THAT(fz::Device(1).properties().name, Catch::Contains("(virtual device 1)"));
  CHECK_THAT(fz::Device(0).properties().name, !Catch::Contains("virtual"));
  CHECK(fz::Device(1).properties().multiprocessor_count == fz::Device(0).properties().multiprocessor_count);
  const char* peer = std::getenv("FUSION_VIRTUAL_PEER");
  CHECK_THAT(fz::describe_copy_route(0, 1), Catch::StartsWith(peer && std::string(peer) == "0" ? "staged" : "peer"));
  const auto h = test::random<float>(4099, -2, 2, 97);
  fz::Array<float> a0 = fz::asarray(h), a1;
  {
    fz::DeviceScope on{fz::Device(1)};
    a1 = fz::asarray(h);
  }
  CHECK(a1.device() == 1);
  CHECK(a1.memory_identity() != a0.memory_identity());
  const fz::Array<float> r0 = a0 * 2.f + 1.f;  // one kernel, loaded for each device's context
  fz::Array<float> r1;
  {
    fz::DeviceScope on{fz::Device(1)};
    r1 = a1 * 2.f + 1.f;
  }
  CHECK(r1.device() == 1);
  CHECK(r1.to_host() == r0.to_host());
}

TEST_CASE("process group child: one rank, from the environment", "[.][gpu][child][process_group_child]") {
  auto group = fz::ProcessGroup::from_environment(test::under_sanitizer() ? 300 : 30);  // (NCCL starts slowly under a sanitizer)
  CHECK(fz::Device::current().id() == group.device());  // the group's GPU is this process's current one
  auto a = fz::full<float>({1000}, static_cast<float>(group.rank() + 1));
  group.all_reduce(a);
  const float want = static_cast<float>(group.size() * (group.size() + 1) / 2);
  const auto h = a.to_host();
  CHECK(std::all_of(h.begin(), h.end(), [&](float v) { return v == want; }));
  auto b = fz::full<std::int32_t>({17}, group.rank());
  group.all_reduce(b, fz::Combine::max);
  CHECK(b.to_host()[16] == group.size() - 1);
  // this rank's piece of a host matrix split by columns, as Sharded::from_host splits over devices
  const auto hm = test::random<float>(9 * 7, -1, 1, 94);
  const auto piece = group.local_piece(hm, {9, 7}, 1);
  const auto split = fz::Sharded<float>::from_host(
      hm, {9, 7}, std::vector<int>(static_cast<std::size_t>(group.size()), group.device()), 1);
  CHECK(piece.device() == group.device());
  CHECK(piece.to_host() == split[group.rank()].to_host());
  auto c = fz::full<double>({5}, 0.5 * (group.rank() + 1));
  group.reduce_to(c, 0);
  if (group.rank() == 0) CHECK(c.to_host()[4] == 0.25 * group.size() * (group.size() + 1));
  CHECK_THROWS_WITH(group.reduce_to(c, group.size()), Catch::Contains("root"));

  // A matrix split over the ranks along either axis, unevenly (array_split's rule: 7 and 6 rows of 13) and,
  // with two ranks, with rank 0's piece empty. Each rank reduces its piece along the split axis (a partial:
  // NCCL combines them into the whole matrix's result) and along the kept axis (its piece of the result).
  const std::int64_t R = 13, C = 29;
  const auto hd =
      test::random<double>(static_cast<std::size_t>(R * C), 0.8, 1.2, 96);  // products of 13 or 29 stay moderate
  for (int axis = 0; axis < 2; ++axis)
    for (const bool empty_first : {false, true}) {
      if (empty_first && group.size() != 2) continue;
      const fz::Shape whole = {R, C};
      std::vector<std::int64_t> given;  // empty: array_split's rule
      if (empty_first) given = {0, whole[axis]};
      const auto sizes = fz::detail::split_plan("test", whole, axis, static_cast<std::size_t>(group.size()), given);
      std::int64_t begin = 0;
      for (int r = 0; r < group.rank(); ++r) begin += sizes[static_cast<std::size_t>(r)];
      const std::int64_t end = begin + sizes[static_cast<std::size_t>(group.rank())];
      INFO("split along axis " << axis << ", this rank's piece [" << begin << ", " << end << ")");
      const auto x = group.local_piece(hd, whole, axis, given);
      CHECK(x.shape()[axis] == end - begin);
      const std::int64_t r0 = axis == 0 ? begin : 0, r1 = axis == 0 ? end : R, c0 = axis == 1 ? begin : 0,
                         c1 = axis == 1 ? end : C;
      fz::Array<double> total = fz::sum(x, axis), product = fz::prod(x, axis);
      CHECK(near(total.to_host(), host_reduce(hd, C, r0, r1, c0, c1, axis, 0)));  // this rank's partial
      group.all_reduce(total);
      group.all_reduce(product, fz::Combine::prod);
      CHECK(near(total.to_host(), host_reduce(hd, C, 0, R, 0, C, axis, 0)));
      CHECK(near(product.to_host(), host_reduce(hd, C, 0, R, 0, C, axis, 1)));
      const int kept = 1 - axis;
      const fz::Array<double> mine = fz::max(x, kept);
      CHECK(near(mine.to_host(), host_reduce(hd, C, r0, r1, c0, c1, kept, 2)));
    }
}

TEST_CASE("a process group's ranks run on the GPUs they are given (two ranks as two threads of one process)",
          "[gpu][sharded]") {
  if (!fz::nccl_available()) FAIL("NCCL is needed here and did not load: " << fz::nccl_unavailable_reason());
  // NCCL takes a rank's GPU from the CUDA runtime's current device: ranks that fusion put on their devices
  // but whose threads had no context current all claimed device 0, and NCCL refused the second one
  // ("invalid usage"). Rank r takes device world - 1 - r, so neither may land on its rank's number by luck.
  const int world = std::min(fz::device_count(), 2);
  const fz::NcclId id = fz::ProcessGroup::new_id();
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::vector<float>> sums(static_cast<std::size_t>(world));
  std::vector<int> devices(static_cast<std::size_t>(world), -1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      try {
        fz::ProcessGroup group(id, r, world, world - 1 - r);
        auto a = fz::full<float>({4099}, static_cast<float>(r + 1));
        devices[i] = a.device();
        group.all_reduce(a);
        sums[i] = a.to_host();
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  const float want = static_cast<float>(world * (world + 1) / 2);
  for (int r = 0; r < world; ++r) {
    const auto i = static_cast<std::size_t>(r);
    INFO("rank " << r);
    CHECK(errors[i].empty());
    CHECK(devices[i] == world - 1 - r);
    CHECK(sums[i].size() == 4099);
    CHECK(std::all_of(sums[i].begin(), sums[i].end(), [&](float v) { return v == want; }));
  }
}

TEST_CASE("several processes, one GPU each, bootstrapped through a shared file", "[gpu][sharded]") {
  if (!fz::nccl_available()) FAIL("NCCL is needed here and did not load: " << fz::nccl_unavailable_reason());
  // Two processes where there are two GPUs, else one (NCCL takes one rank per GPU); each is this test
  // binary running the child case above, started by the shell as any launcher would.
  const int world = std::min(fz::device_count(), 2);
  const std::string file = fmt::format("/tmp/fusion-nccl-id-{}", ::getpid());
  std::string cmd = "sh -c '";
  for (int r = 0; r < world; ++r)
    cmd += fmt::format(
        "FUSION_RANK={0} FUSION_WORLD_SIZE={1} FUSION_DEVICE={0} FUSION_NCCL_ID_FILE={2} {3} --gpu "
        "\"[process_group_child]\" "
        "> {2}.{0}.log 2>&1 & p{0}=$!; ",
        r, world, file, test::self_binary());
  cmd += "s=0; ";
  for (int r = 0; r < world; ++r) cmd += fmt::format("wait $p{} || s=1; ", r);
  cmd += "exit $s'";
  const int status = std::system(cmd.c_str());
  for (int r = 0; r < world; ++r) {
    std::ifstream log(fmt::format("{}.{}.log", file, r));
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    INFO("rank " << r << ":\n" << text);
    CHECK_THAT(text, Catch::Contains("All tests passed"));
    std::remove(fmt::format("{}.{}.log", file, r).c_str());
  }
  CHECK(status == 0);
  CHECK_FALSE(std::ifstream(file).good());  // rank 0 removed the id once every rank had joined
}

TEST_CASE("bad input over devices: a clear error naming what to fix, and nothing written", "[gpu][sharded]") {
  // One GPU runs the parts that need no second device; scripts/gpu-check's `virtual` stage (one GPU shown as
  // two) and the two-GPU kind run all of it.
  const int last = fz::device_count() - 1;
  const auto h = test::random<float>(64, -2, 2, 41);
  // sharded arrays split differently are refused before any kernel: along different axes, into other sizes
  const auto rows = fz::Sharded<float>::from_host(h, {8, 8}, every_device(2), 0);
  const auto cols = fz::Sharded<float>::from_host(h, {8, 8}, every_device(2), 1);
  const auto uneven = fz::Sharded<float>::from_host(h, {8, 8}, every_device(2), 0, {3, 5});
  auto add = [](const auto& a, const auto& b) { return a + b; };
  CHECK_THROWS_AS(fz::map_shards(add, rows, cols), fz::ShapeError);
  CHECK_THROWS_WITH(fz::map_shards(add, rows, uneven), Catch::Contains("split both alike"));
  // a group whose other rank never comes: rank 0 gives up after its timeout instead of waiting for good
  if (fz::nccl_available() && fz::nccl_version() >= fz::Version{2, 14, 0}) {
    const auto start = std::chrono::steady_clock::now();
    try {
      fz::ProcessGroup alone(fz::ProcessGroup::new_id(), 0, 2, 0, 2.0);
      FAIL("a group of 2 formed with one rank");
    } catch (const fz::NcclError& e) {
      CHECK_THAT(e.what(), Catch::Contains("gave up") && Catch::Contains("start all 2 processes"));
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(waited >= 2.0);
    CHECK(waited < (test::under_sanitizer() ? 300.0 : 30.0));  // (NCCL starts slowly under a sanitizer)
    // the device is still usable after NCCL gave up
    CHECK(fz::eval(fz::asarray(h) * 2.f).to_host()[5] == h[5] * 2.f);
  }
  CHECK_THROWS_WITH(fz::ProcessGroup(fz::NcclId{}, 0, 2, 0, 0.0), Catch::Contains("positive number of seconds"));
  if (last == 0) return;
  // arrays of two devices in one expression: refused, naming fz::DeviceScope; the output keeps its values
  fz::Array<float> a0 = fz::asarray(h), a1;
  {
    fz::DeviceScope on{fz::Device(last)};
    a1 = fz::asarray(h);
  }
  auto out = fz::full<float>({64}, 7.f);
  CHECK_THROWS_WITH(fz::copyto(out, a0 + a1), Catch::Contains("fz::DeviceScope") && Catch::Contains("device " + std::to_string(last)));
  CHECK_THROWS_WITH(fz::copyto(out, fz::sum(a1) + a0), Catch::Contains("fz::DeviceScope"));
  CHECK(out.to_host() == std::vector<float>(64, 7.f));
  {
    fz::DeviceScope on{fz::Device(last)};
    CHECK_THROWS_WITH(fz::copyto(out, a1 * 2.f), Catch::Contains("the output lives on device 0"));
  }
  CHECK(out.to_host() == std::vector<float>(64, 7.f));
  // map_shards over pieces on different devices: they must pair up device by device
  const auto here = fz::Sharded<float>::from_host(h, {8, 8}, {0, last}, 0);
  const auto swapped = fz::Sharded<float>::from_host(h, {8, 8}, {last, 0}, 0);
  CHECK_THROWS_WITH(fz::map_shards(add, here, swapped), Catch::Contains("device by device"));
  // one array per device whose shapes differ (what all_reduce would combine): refused as it is made, before NCCL
  fz::Array<float> b0 = fz::asarray(h), b1;
  {
    fz::DeviceScope on{fz::Device(last)};
    b1 = fz::asarray(std::vector<float>(h.begin(), h.begin() + 32));
  }
  // (a copy of device `last`'s array, made while device 0 is current, lives on device `last`: the pieces above
  // are copied into the Sharded; on two H100s that copy was refused before the shapes were looked at)
  const fz::Array<float> copied = b1;
  CHECK(copied.device() == last);
  CHECK(copied.to_host() == std::vector<float>(h.begin(), h.begin() + 32));
  CHECK(fz::Device::current().id() == 0);
  CHECK_THROWS_WITH(fz::Sharded<float>({b0, b1}, -1), Catch::Contains("equal shapes"));
  CHECK(b0.to_host() == h);
}
