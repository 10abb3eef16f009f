// SPDX-License-Identifier: Apache-2.0
// Sharded arrays, the GPU-free pieces: host slabs along an axis, the checks on pieces and on map_shards'
// arguments, and all_reduce's refusals (before any NCCL call).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "fusion/process_group.hpp"
#include "fusion/sharded.hpp"
#include "support.hpp"

TEST_CASE("host slabs along any axis round-trip, uneven and empty ones included", "[sharded]") {
  const fz::Shape shape{4, 5, 3};
  std::vector<int> whole(60);
  for (int i = 0; i < 60; ++i) whole[static_cast<std::size_t>(i)] = i;
  for (int axis = 0; axis < 3; ++axis) {
    const auto sizes = fz::split_sizes(shape[axis], 3);  // 2,1,1 / 2,2,1 / 1,1,1
    std::vector<int> back(60, -1);
    std::int64_t begin = 0;
    for (std::int64_t size : sizes) {
      fz::Shape piece = shape;
      piece[axis] = size;
      std::vector<int> slab(static_cast<std::size_t>(fz::numel(piece)), -1);
      fz::detail::extract_slab(whole.data(), shape, axis, begin, size, sizeof(int), slab.data());
      // the slab's first element is the whole's element at `begin` along the axis
      if (!slab.empty()) CHECK(slab[0] == begin * (axis == 0 ? 15 : axis == 1 ? 3 : 1));
      fz::detail::insert_slab(slab.data(), shape, axis, begin, size, sizeof(int), back.data());
      begin += size;
    }
    CHECK(back == whole);
  }
  std::vector<int> none;  // an empty slab copies nothing
  fz::detail::extract_slab(whole.data(), shape, 1, 5, 0, sizeof(int), none.data());
  // the middle row along axis 1: elements 3..5 of each of the 4 outer rows
  std::vector<int> mid(12);
  fz::detail::extract_slab(whole.data(), shape, 1, 1, 1, sizeof(int), mid.data());
  CHECK(mid == std::vector<int>{3, 4, 5, 18, 19, 20, 33, 34, 35, 48, 49, 50});
}

TEST_CASE("pieces must agree off the split axis, and map_shards' arguments piece by piece", "[sharded]") {
  auto a = fz::placeholder<float>({4, 3}), b = fz::placeholder<float>({2, 3}), c = fz::placeholder<float>({4, 2});
  CHECK_NOTHROW(fz::Sharded<float>({a, b}, 0));
  CHECK_THROWS_WITH(fz::Sharded<float>({a, c}, 0), Catch::Contains("only axis 0 may differ"));
  CHECK_THROWS_WITH(fz::Sharded<float>({a, b}, -1), Catch::Contains("equal shapes"));
  CHECK_THROWS_AS(fz::Sharded<float>({a, b}, 2), fz::ShapeError);
  CHECK_THROWS_AS(fz::Sharded<float>(std::vector<fz::Array<float>>{}, 0), fz::Error);
  const fz::Sharded<float> s({a, b}, 0);
  CHECK(s.shape() == fz::Shape{6, 3});
  CHECK(s.sizes() == std::vector<std::int64_t>{4, 2});
  CHECK(s.count() == 2);

  using fz::detail::check_shard_arguments;
  CHECK_NOTHROW(check_shard_arguments({{0, 1}, {0, 1}}, {0, 0}, {{4, 2}, {4, 2}}));
  CHECK_NOTHROW(check_shard_arguments({{0, 1}, {0, 1}}, {0, -1}, {{4, 2}, {}}));  // a replica broadcasts
  CHECK_THROWS_WITH(check_shard_arguments({{0, 1}, {1, 0}}, {0, 0}, {{4, 2}, {4, 2}}),
                    Catch::Contains("device by device"));
  CHECK_THROWS_WITH(check_shard_arguments({{0, 1}, {0, 1}}, {0, 0}, {{4, 2}, {3, 3}}),
                    Catch::Contains("(3, 3)") && Catch::Contains("(4, 2)") && Catch::Contains("split both alike"));
  CHECK_THROWS_AS(check_shard_arguments({{0, 1}, {0, 1}}, {0, 1}, {{4, 2}, {4, 2}}), fz::ShapeError);
}

TEST_CASE("all_reduce refuses pieces of a split array, repeated devices and mismatched arrays before NCCL",
          "[sharded]") {
  auto a = fz::placeholder<float>({8}), b = fz::placeholder<float>({8});
  fz::Sharded<float> split({a, b}, 0);
  CHECK_THROWS_WITH(fz::all_reduce(split), Catch::Contains("one array per device") && Catch::Contains("axis 0"));
  fz::Sharded<float> same_device({a, b}, -1);  // placeholders both say device -1 (none)
  CHECK_THROWS_WITH(fz::all_reduce(same_device), Catch::Contains("repeat") && Catch::Contains("one rank per GPU"));
}

TEST_CASE("process groups: the NCCL id goes through a file whole, and a missing rank 0 is a clear error", "[sharded]") {
  const std::string path = fmt::format("/tmp/fusion-test-nccl-id-{}", ::getpid());
  std::string id(128, '\0');
  for (int i = 0; i < 128; ++i) id[static_cast<std::size_t>(i)] = static_cast<char>(i * 7 + 1);
  fz::detail::write_unique_id(path, id);
  CHECK(fz::detail::read_unique_id(path, 1.0) == id);
  CHECK_FALSE(std::ifstream(fmt::format("{}.{}.tmp", path, ::getpid())).good());  // renamed, not left behind
  std::remove(path.c_str());
  CHECK_THROWS_WITH(fz::detail::read_unique_id(path, 0.05), Catch::Contains(path) && Catch::Contains("rank 0"));
  // ranks out of range and a missing environment are refused before NCCL is touched
  CHECK_THROWS_WITH(fz::ProcessGroup(path, 2, 2, 0), Catch::Contains("rank 2 of 2"));
  CHECK_THROWS_AS(fz::ProcessGroup(path, 0, 0, 0), fz::Error);
  CHECK_THROWS_AS(fz::ProcessGroup("", 0, 1, 0), fz::Error);
  for (const char* v : {"FUSION_RANK", "RANK", "FUSION_WORLD_SIZE", "WORLD_SIZE", "FUSION_NCCL_ID_FILE"}) unsetenv(v);
  CHECK_THROWS_WITH(fz::ProcessGroup::from_environment(),
                    Catch::Contains("FUSION_NCCL_ID_FILE") && Catch::Contains("missing: rank"));
}

TEST_CASE("inspect_shards shows each device's kernel, describe_all_reduce the collective", "[sharded]") {
  const fz::Sharded<float> x({fz::placeholder<float>({4096, 64}), fz::placeholder<float>({4000, 64})}, 0);
  const fz::Sharded<float> y({fz::placeholder<float>({4096, 64}), fz::placeholder<float>({4000, 64})}, 0);
  const auto axpy = fz::inspect_shards([](const auto& x, const auto& y) { return 2.5f * x + y; }, x, y);
  REQUIRE(axpy.size() == 2);
  for (const fz::KernelInfo& k : axpy) {
    CHECK_THAT(k.name, Catch::StartsWith("fz_mul_add_f32_"));
    CHECK(k.kernels == 1);
  }
  const auto dot = fz::inspect_shards([](const auto& x, const auto& y) { return fz::sum(x * y); }, x, y);
  const auto scaled =
      fz::inspect_shards([](const auto& x, const auto& b) { return x * b; }, x, fz::placeholder<float>({64}));
  REQUIRE(scaled.size() == 2);  // a plain array broadcasts against each piece
  CHECK_THAT(scaled[0].name, Catch::StartsWith("fz_mul_f32_"));
  CHECK_THAT(dot[1].variant, Catch::Contains("split over blocks"));
  const fz::Sharded<float> partials({fz::placeholder<float>({}), fz::placeholder<float>({})}, -1);
  CHECK(fz::describe_all_reduce(partials, fz::Combine::max) ==
        "ncclAllReduce (max) in place, 1 float32 per device, devices (-1, -1), one NCCL group call");  // placeholders:
                                                                                                       // no device
  CHECK(
      fz::describe_reduce_to(partials, 1) ==
      "ncclReduce to device -1 (index 1) (sum) in place, 1 float32 per device, devices (-1, -1), one NCCL group call");
}

TEST_CASE("map_shards' probe knows a product's shape: pieces of rows stay pieces of rows", "[sharded][matmul]") {
  const fz::Sharded<float> x({fz::placeholder<float>({300, 64}), fz::placeholder<float>({200, 64})}, 0);
  const auto w = fz::placeholder<float>({64, 48});
  CHECK(fz::detail::structural_shape(fz::matmul(fz::detail::longer_piece(x), w)) == fz::Shape{301, 48});
  CHECK_THROWS_AS(fz::detail::structural_shape(fz::matmul(w, fz::detail::longer_piece(x))), fz::ShapeError);
  const auto plans = fz::inspect_shards([](const auto& x, const auto& w) { return fz::gelu_tanh(fz::matmul(x, w)); }, x, w);
  REQUIRE(plans.size() == 2);
  CHECK_THAT(plans[0].plan[0], Catch::Contains("(m, n, k) = (300, 48, 64)") && Catch::Contains("gelu_tanh epilogue"));
  CHECK_THAT(plans[1].plan[0], Catch::Contains("(m, n, k) = (200, 48, 64)"));
}

TEST_CASE("along() reads one array per device as pieces of one array, checked", "[sharded]") {
  // what map_shards returns for row sums of a (6, 3) matrix split 4 + 2 by rows: one array per device
  fz::Sharded<float> rows({fz::placeholder<float>({4}), fz::placeholder<float>({2})}, 0);
  CHECK(rows.shape() == fz::Shape{6});
  auto per_device = fz::Sharded<float>({fz::placeholder<float>({1, 3}), fz::placeholder<float>({1, 3})}, -1);
  const auto stacked = std::move(per_device).along(0);  // the partials as rows of a (2, 3) array
  CHECK(stacked.axis() == 0);
  CHECK(stacked.shape() == fz::Shape{2, 3});
  CHECK(stacked.sizes() == std::vector<std::int64_t>{1, 1});
  CHECK_THROWS_AS(fz::Sharded<float>({fz::placeholder<float>({4}), fz::placeholder<float>({2})}, 0).along(-1),
                  fz::ShapeError);
}

TEST_CASE("to_device refuses what it cannot copy before touching a GPU", "[sharded][transfer]") {
  CHECK_THROWS_WITH(fz::to_device(fz::placeholder<float>({3}), 0), Catch::Contains("placeholder"));
  CHECK_THROWS_WITH(fz::to_device(fz::Array<float>(), 0), Catch::Contains("empty"));
  if (fz::device_count() == 0) CHECK_THROWS_AS(fz::describe_copy_route(0, 0), fz::NoDeviceError);
}

TEST_CASE("reduce_to checks its root and that it combines one array per device", "[sharded]") {
  fz::Sharded<float> partials({fz::placeholder<float>({}), fz::placeholder<float>({})}, -1);
  CHECK_THROWS_WITH(fz::reduce_to(partials, -1), Catch::Contains("root -1"));
  fz::Sharded<float> pieces({fz::placeholder<float>({4}), fz::placeholder<float>({5})}, 0);
  CHECK_THROWS_AS(fz::reduce_to(pieces, 0), fz::ShapeError);
  CHECK_THROWS_AS(fz::all_reduce(pieces), fz::ShapeError);
}

TEST_CASE("map_shards tells a reduction's split axis from its shape over longer pieces", "[sharded]") {
  using fz::detail::result_split_axis;
  using S = fz::Shape;
  CHECK(result_split_axis(S{8}, {S{7}, S{7}}) == 0);            // row sums of rows split evenly: pieces along 0
  CHECK(result_split_axis(S{5, 8}, {S{5, 7}, S{5, 6}}) == 1);   // the split axis moved to 1
  CHECK(result_split_axis(S{}, {S{}, S{}}) == -1);              // summed away: partials
  CHECK(result_split_axis(S{5}, {S{5}, S{5}}) == -1);           // reduced along the split axis
  CHECK(result_split_axis(std::nullopt, {S{4}, S{3}}) == 0);    // not probed: unequal results are pieces
  CHECK(result_split_axis(std::nullopt, {S{4}, S{4}}) == -1);   //   and equal ones partials
  // the probe's shapes: reductions, keepdims, broadcasting, without running anything
  const auto m = fz::placeholder<float>({6, 4});
  const auto b = fz::placeholder<float>({4});
  CHECK(fz::detail::structural_shape(fz::sum(m * b, 1)) == S{6});
  CHECK(fz::detail::structural_shape(fz::max(m, 0, true) + 1.f) == S{1, 4});
  CHECK(fz::detail::structural_shape(fz::sum(m - fz::mean(m, 1, true))) == S{});
  CHECK(fz::detail::structural_shape(fz::where(m > 0.f, m, b)) == S{6, 4});
}
