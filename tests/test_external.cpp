// SPDX-License-Identifier: Apache-2.0
// External memory without a GPU: what fz::from_device refuses before it asks the driver, and byte strides.
// test_array_gpu.cpp uses real device memory of another owner.
#include "support.hpp"

TEST_CASE("from_device refuses bad views before touching memory", "[external]") {
  alignas(16) static float storage[8];
  const float* p = storage;
  CHECK_THROWS_WITH(fz::from_device(static_cast<const float*>(nullptr), {4}), Catch::Contains("null pointer"));
  CHECK_THROWS_WITH(fz::from_device(reinterpret_cast<const float*>(reinterpret_cast<const char*>(p) + 2), {2}),
                    Catch::Contains("not aligned for float32"));
  CHECK_THROWS_AS(fz::from_device(p, {2, 2}, fz::Strides{1}), fz::ShapeError);  // one stride for two axes
  CHECK_THROWS_AS(fz::from_device(p, {-1}), fz::ShapeError);
  // a well-formed view gets as far as the driver: here there is none, and the error says so
  if (fz::device_count() == 0) CHECK_THROWS_AS(fz::from_device(p, {2, 2}), fz::NoDeviceError);
}

TEST_CASE("byte strides become element strides, or a clear error", "[external]") {
  CHECK(fz::strides_from_bytes({16, 4}, fz::DType::float32) == fz::Strides{4, 1});
  CHECK(fz::strides_from_bytes({-8, 2}, fz::DType::bfloat16) == fz::Strides{-4, 1});
  CHECK_THROWS_WITH(fz::strides_from_bytes({6}, fz::DType::float32),
                    Catch::Contains("not a multiple of the 4-byte float32"));
}

namespace {
struct NoMemory : fz::DeviceAllocator {
  std::uint64_t allocate(std::size_t, CUstream_st*) override { return 0; }
  void deallocate(std::uint64_t, std::size_t, CUstream_st*) override {}
};
}  // namespace

TEST_CASE("a program's allocator is set per device and taken back", "[external][memory]") {
  CHECK(fz::allocator(3) == nullptr);
  auto mine = std::make_shared<NoMemory>();
  fz::set_allocator(mine, 3);
  CHECK(fz::allocator(3) == mine);
  CHECK(fz::allocator(0) == nullptr);  // other devices keep the pool
  fz::set_allocator(nullptr, 3);
  CHECK(fz::allocator(3) == nullptr);
  CHECK_THROWS_WITH(fz::set_allocator(mine, -1), Catch::Contains("not a device ordinal"));
}
