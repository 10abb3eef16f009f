// SPDX-License-Identifier: Apache-2.0
// DLPack without a GPU: the structs' layout is DLPack 1.0's, every dtype maps both ways, and refused
// tensors stay their owner's (the deleter is not called).
#include <cstddef>

#include "support.hpp"

namespace dl = fz::dlpack;

TEST_CASE("the DLPack structs have DLPack's layout", "[dlpack]") {
  STATIC_REQUIRE(sizeof(dl::Device) == 8);
  STATIC_REQUIRE(sizeof(dl::DataType) == 4);
  STATIC_REQUIRE(sizeof(dl::Tensor) == 48);
  STATIC_REQUIRE(offsetof(dl::Tensor, ndim) == 16);
  STATIC_REQUIRE(offsetof(dl::Tensor, dtype) == 20);
  STATIC_REQUIRE(offsetof(dl::Tensor, shape) == 24);
  STATIC_REQUIRE(offsetof(dl::Tensor, byte_offset) == 40);
  STATIC_REQUIRE(offsetof(dl::ManagedTensor, manager_ctx) == 48);
  STATIC_REQUIRE(offsetof(dl::ManagedTensor, deleter) == 56);
  STATIC_REQUIRE(offsetof(dl::ManagedTensorVersioned, manager_ctx) == 8);
  STATIC_REQUIRE(offsetof(dl::ManagedTensorVersioned, flags) == 24);
  STATIC_REQUIRE(offsetof(dl::ManagedTensorVersioned, dl_tensor) == 32);
}

TEST_CASE("every dtype maps to DLPack and back; DLPack dtypes fusion has not are TypeErrors", "[dlpack]") {
  for (int i = 0; i < fz::kNumDTypes; ++i) {
    const auto d = static_cast<fz::DType>(i);
    const dl::DataType t = dl::to_dlpack_dtype(d);
    CHECK(t.lanes == 1);
    CHECK(t.bits == 8 * fz::itemsize(d));
    CHECK(dl::from_dlpack_dtype(t) == d);
  }
  CHECK(dl::to_dlpack_dtype(fz::DType::bfloat16).code == dl::kBfloat);
  CHECK(dl::to_dlpack_dtype(fz::DType::bool_).code == dl::kBool);
  CHECK(dl::to_dlpack_dtype(fz::DType::uint16).code == dl::kUInt);
  CHECK_THROWS_AS(dl::from_dlpack_dtype({dl::kComplex, 64, 1}), fz::TypeError);
  CHECK_THROWS_AS(dl::from_dlpack_dtype({dl::kFloat, 32, 4}), fz::TypeError);  // vectors of lanes
  CHECK_THROWS_AS(dl::from_dlpack_dtype({7, 8, 1}), fz::TypeError);           // an 8-bit float
  CHECK_THROWS_WITH(dl::from_dlpack_dtype({dl::kFloat, 8, 1}), Catch::Contains("has no fusion dtype"));
}

TEST_CASE("refused DLPack tensors stay their owner's", "[dlpack][errors]") {
  static int deleted = 0;
  std::int64_t shape[2] = {2, 3};
  auto make = [&](std::int32_t device_type, dl::DataType dtype) {
    auto* t = new dl::ManagedTensorVersioned{};
    t->version = {1, 0};
    t->deleter = [](dl::ManagedTensorVersioned* self) { ++deleted; delete self; };
    t->dl_tensor =
        dl::Tensor{reinterpret_cast<void*>(std::uintptr_t{0x10000}), {device_type, 0}, 2, dtype, shape, nullptr, 0};
    return t;
  };
  deleted = 0;
  auto* cpu = make(dl::kCPU, {dl::kFloat, 32, 1});
  CHECK_THROWS_WITH(dl::from_dlpack(cpu), Catch::Contains("device type 1"));
  auto* complex = make(dl::kCUDA, {dl::kComplex, 64, 1});
  CHECK_THROWS_AS(dl::from_dlpack(complex), fz::TypeError);
  auto* newer = make(dl::kCUDA, {dl::kFloat, 32, 1});
  newer->version = {2, 0};
  CHECK_THROWS_WITH(dl::from_dlpack(newer), Catch::Contains("newer"));
  auto* read_only = make(dl::kCUDA, {dl::kFloat, 32, 1});
  read_only->flags = dl::kFlagReadOnly;
  CHECK_THROWS_WITH(dl::from_dlpack(read_only), Catch::Contains("read-only"));
  CHECK_THROWS_AS(dl::from_dlpack(static_cast<dl::ManagedTensorVersioned*>(nullptr)), fz::Error);
  CHECK(deleted == 0);  // each still belongs to the caller
  for (auto* t : {cpu, complex, newer, read_only}) t->deleter(t);
  CHECK(deleted == 4);
  CHECK_THROWS_AS(dl::to_dlpack(fz::ArrayBase::make_placeholder(fz::DType::float32, {3})), fz::Error);
}
