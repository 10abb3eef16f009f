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

#include "fusion/sharded.hpp"
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

TEST_CASE("sharded arrays go to the devices and back along any axis, uneven and empty pieces included", "[gpu][sharded]") {
  const fz::Shape shape{7, 5, 3};
  const auto h = test::random<float>(105, -2, 2, 71);
  for (int axis = 0; axis < 3; ++axis) {
    const auto x = fz::Sharded<float>::from_host(h, shape, every_device(3), axis);
    CHECK(x.devices() == every_device(3));  // each piece on its device (several GPUs: different ones)
    CHECK(x.shape() == shape);
    CHECK(x.to_host() == h);
  }
  const auto uneven = fz::Sharded<float>::from_host(h, shape, every_device(3), 0, {0, 6, 1});
  CHECK(uneven.sizes() == std::vector<std::int64_t>{0, 6, 1});
  CHECK(uneven[0].size() == 0);
  CHECK(uneven.to_host() == h);
  CHECK_THROWS_AS(fz::Sharded<float>::from_host(h, shape, every_device(2), 0, {3, 3}), fz::ShapeError);
  CHECK_THROWS_AS(fz::Sharded<float>::from_host(h, {7, 5}, every_device(2)), fz::ShapeError);
}

TEST_CASE("map_shards runs one fused kernel per piece on its device, replicas broadcasting", "[gpu][sharded]") {
  const std::int64_t n = 1000, m = 37;
  const auto hx = test::random<float>(static_cast<std::size_t>(n * m), -2, 2, 72), hy = test::random<float>(static_cast<std::size_t>(n * m), -2, 2, 73);
  const auto hb = test::random<float>(static_cast<std::size_t>(m), -1, 1, 74);
  const auto devices = every_device(3);
  const auto x = fz::Sharded<float>::from_host(hx, {n, m}, devices, 0, {500, 1, 499});
  const auto y = fz::Sharded<float>::from_host(hy, {n, m}, devices, 0, {500, 1, 499});
  const auto bias = fz::Sharded<float>::replicate(fz::asarray(hb), devices);
  const auto launches = fz::stats().launches;
  const auto z = fz::map_shards([](const auto& x, const auto& y, const auto& b) { return 2.5f * x + y * b; }, x, y, bias);
  CHECK(fz::stats().launches - launches == 3);  // one kernel per piece
  CHECK(z.axis() == 0);
  CHECK(z.devices() == devices);  // each result on its piece's device
  CHECK(z.sizes() == x.sizes());
  const auto hz = z.to_host();
  int bad = 0;
  for (std::int64_t i = 0; i < n * m; ++i) {
    const double want = 2.5 * hx[static_cast<std::size_t>(i)] + double(hy[static_cast<std::size_t>(i)]) * hb[static_cast<std::size_t>(i % m)];
    bad += std::abs(hz[static_cast<std::size_t>(i)] - want) > 1e-5 * (1 + std::abs(want));
  }
  CHECK(bad == 0);
  // an empty piece computes nothing, the others as before
  const auto xe = fz::Sharded<float>::from_host(hx, {n, m}, devices, 0, {600, 0, 400});
  const auto ye = fz::Sharded<float>::from_host(hy, {n, m}, devices, 0, {600, 0, 400});
  const auto ze = fz::map_shards([](const auto& x, const auto& y, const auto& b) { return 2.5f * x + y * b; }, xe, ye, bias).to_host();
  CHECK(ze == hz);  // the same elementwise arithmetic, however the rows are split
  // pieces split differently do not pair up
  const auto other = fz::Sharded<float>::from_host(hy, {n, m}, devices, 0);
  CHECK_THROWS_AS(fz::map_shards([](const auto& a, const auto& b) { return a + b; }, x, other), fz::ShapeError);
}

TEST_CASE("a sharded sum: a fused partial per device, NCCL's all-reduce, the total on every device", "[gpu][sharded]") {
  if (!fz::nccl_available()) FAIL("NCCL is needed here and did not load: " << fz::nccl_unavailable_reason());
  const std::int64_t n = (std::int64_t{1} << 20) + 7;
  const auto hx = test::random<float>(static_cast<std::size_t>(n), -1, 1, 75), hy = test::random<float>(static_cast<std::size_t>(n), -1, 1, 76);
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
  // a dtype NCCL lacks is a TypeError naming it
  auto flags = fz::map_shards([](const auto& x) { return fz::any(x > 0.f); }, x);  // one bool per device
  CHECK_THROWS_WITH(fz::all_reduce(flags), Catch::Contains("bool"));
}

TEST_CASE("process group child: one rank, from the environment", "[.][gpu][process_group_child]") {
  auto group = fz::ProcessGroup::from_environment(30);
  auto a = fz::full<float>({1000}, static_cast<float>(group.rank() + 1));
  group.all_reduce(a);
  const float want = static_cast<float>(group.size() * (group.size() + 1) / 2);
  const auto h = a.to_host();
  CHECK(std::all_of(h.begin(), h.end(), [&](float v) { return v == want; }));
  auto b = fz::full<std::int32_t>({17}, group.rank());
  group.all_reduce(b, fz::Combine::max);
  CHECK(b.to_host()[16] == group.size() - 1);
}

TEST_CASE("several processes, one GPU each, bootstrapped through a shared file", "[gpu][sharded]") {
  if (!fz::nccl_available()) FAIL("NCCL is needed here and did not load: " << fz::nccl_unavailable_reason());
  // Two processes where there are two GPUs, else one (NCCL takes one rank per GPU); each is this test
  // binary running the child case above, started by the shell as any launcher would.
  const int world = std::min(fz::device_count(), 2);
  const std::string file = fmt::format("/tmp/fusion-nccl-id-{}", ::getpid());
  std::string cmd = "sh -c '";
  for (int r = 0; r < world; ++r)
    cmd += fmt::format("FUSION_RANK={0} FUSION_WORLD_SIZE={1} FUSION_DEVICE={0} FUSION_NCCL_ID_FILE={2} {3} --gpu \"[process_group_child]\" "
                       "> {2}.{0}.log 2>&1 & p{0}=$!; ", r, world, file, FUSION_TEST_BINARY);
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
