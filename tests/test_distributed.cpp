// SPDX-License-Identifier: Apache-2.0
// Arrays over several GPUs, the GPU-free pieces: split rules, and loading NCCL at run time (a missing or
// unusable library is a clear error; the real one, where the toolkit has it, reports its version).
#include <cstdlib>

#include <cstddef>

#include "runtime/distributed/nccl.hpp"
#include "support.hpp"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define FUSION_TEST_HAVE_NCCL_H 1
#endif

TEST_CASE("split_sizes: numpy.array_split's rule, the first parts one larger", "[distributed]") {
  CHECK(fz::split_sizes(10, 3) == std::vector<std::int64_t>{4, 3, 3});
  CHECK(fz::split_sizes(12, 4) == std::vector<std::int64_t>{3, 3, 3, 3});
  CHECK(fz::split_sizes(2, 4) == std::vector<std::int64_t>{1, 1, 0, 0});  // empty parts allowed
  CHECK(fz::split_sizes(0, 2) == std::vector<std::int64_t>{0, 0});
  CHECK(fz::split_sizes(std::int64_t{1} << 40, 1) == std::vector<std::int64_t>{std::int64_t{1} << 40});
  CHECK_THROWS_AS(fz::split_sizes(10, 0), fz::Error);
  CHECK_THROWS_AS(fz::split_sizes(-1, 2), fz::ShapeError);
  fz::check_split(10, {4, 3, 3});
  fz::check_split(10, {10, 0});
  CHECK_THROWS_WITH(fz::check_split(10, {4, 4}), Catch::Contains("add up to 8") && Catch::Contains("10 elements"));
  CHECK_THROWS_AS(fz::check_split(0, {1, -1}), fz::ShapeError);
  CHECK_THROWS_AS(fz::check_split(0, {}), fz::Error);
}

TEST_CASE("NCCL loads at run time: a missing or unusable library is a clear error", "[distributed]") {
  namespace nccl = fz::detail::nccl;
  const nccl::Loaded missing = nccl::load({"/nonexistent/libnccl.so.2", "libnccl-not-here.so.9"});
  CHECK_THAT(missing.error, Catch::Contains("NCCL could not be loaded") &&
                                Catch::Contains("/nonexistent/libnccl.so.2") &&
                                Catch::Contains("libnccl-not-here.so.9") && Catch::Contains("FUSION_NCCL_LIBRARY"));
  // a library that is not NCCL: every missing entry point is named
  const nccl::Loaded wrong = nccl::load({"libm.so.6"});
  CHECK_THAT(wrong.error, Catch::Contains("not a usable NCCL") && Catch::Contains("ncclGetVersion") &&
                              Catch::Contains("ncclAllReduce"));
  // FUSION_NCCL_LIBRARY names exactly one file
  setenv("FUSION_NCCL_LIBRARY", "/opt/mine/libnccl.so.2", 1);
  CHECK(nccl::default_candidates() == std::vector<std::string>{"/opt/mine/libnccl.so.2"});
  unsetenv("FUSION_NCCL_LIBRARY");
  const auto defaults = nccl::default_candidates();
  REQUIRE(!defaults.empty());
  CHECK(defaults.front() == "libnccl.so.2");
  // the real one, where this machine has it (the CUDA 13 toolkit ships libnccl.so.2 in lib/)
  const nccl::Loaded real = nccl::load(defaults);
  if (real.error.empty()) {
    CHECK(real.api.version.major == 2);
    CHECK(real.api.version.minor >= 10);
    CHECK(fz::nccl_available());
    CHECK(fz::nccl_version().minor == real.api.version.minor);
    const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
    REQUIRE(nvls != nullptr);  // set by the first load unless the environment had it
#ifdef FUSION_TEST_HAVE_NCCL_H
    CHECK(real.api.version.major == NCCL_MAJOR);
    CHECK(real.api.version.minor == NCCL_MINOR);
#endif
  } else {
    WARN("no NCCL on this machine: " << real.error);
    CHECK_FALSE(fz::nccl_available());
    CHECK_THROWS_AS(fz::nccl_version(), fz::NcclError);
    CHECK(!fz::nccl_unavailable_reason().empty());
  }
}

#ifdef FUSION_TEST_HAVE_NCCL_H
TEST_CASE("NCCL's types as fusion declares them match nccl.h", "[distributed]") {
  namespace nccl = fz::detail::nccl;
  STATIC_REQUIRE(sizeof(nccl::UniqueId) == sizeof(ncclUniqueId));
  STATIC_REQUIRE(static_cast<int>(nccl::DataType::float32) == ncclFloat32);
  STATIC_REQUIRE(static_cast<int>(nccl::DataType::bfloat16) == ncclBfloat16);
  STATIC_REQUIRE(static_cast<int>(nccl::DataType::float16) == ncclFloat16);
  STATIC_REQUIRE(static_cast<int>(nccl::DataType::int64) == ncclInt64);
  STATIC_REQUIRE(static_cast<int>(nccl::DataType::uint8) == ncclUint8);
  STATIC_REQUIRE(static_cast<int>(nccl::RedOp::sum) == ncclSum);
  STATIC_REQUIRE(static_cast<int>(nccl::RedOp::max) == ncclMax);
  STATIC_REQUIRE(static_cast<int>(nccl::RedOp::avg) == ncclAvg);
  STATIC_REQUIRE(ncclSuccess == 0);
  STATIC_REQUIRE(nccl::kInProgress == ncclInProgress);
  // the first fields of ncclConfig_t (NCCL 2.14's), which fusion passes with version 2.14 and its own size
  STATIC_REQUIRE(offsetof(nccl::Config, magic) == offsetof(ncclConfig_t, magic));
  STATIC_REQUIRE(offsetof(nccl::Config, version) == offsetof(ncclConfig_t, version));
  STATIC_REQUIRE(offsetof(nccl::Config, blocking) == offsetof(ncclConfig_t, blocking));
  STATIC_REQUIRE(offsetof(nccl::Config, max_ctas) == offsetof(ncclConfig_t, maxCTAs));
  STATIC_REQUIRE(offsetof(nccl::Config, net_name) == offsetof(ncclConfig_t, netName));
  STATIC_REQUIRE(sizeof(nccl::Config) <= sizeof(ncclConfig_t));
  const ncclConfig_t theirs = NCCL_CONFIG_INITIALIZER;
  const nccl::Config ours;
  CHECK(ours.magic == theirs.magic);
  CHECK(ours.blocking == theirs.blocking);
  CHECK(ours.net_name == theirs.netName);
  // the dtype table's NCCL column, which the collectives pass as it is
  using fz::DType, fz::dtype_info;
  STATIC_REQUIRE(dtype_info(DType::int8).nccl == ncclInt8);
  STATIC_REQUIRE(dtype_info(DType::uint8).nccl == ncclUint8);
  STATIC_REQUIRE(dtype_info(DType::int32).nccl == ncclInt32);
  STATIC_REQUIRE(dtype_info(DType::uint32).nccl == ncclUint32);
  STATIC_REQUIRE(dtype_info(DType::int64).nccl == ncclInt64);
  STATIC_REQUIRE(dtype_info(DType::uint64).nccl == ncclUint64);
  STATIC_REQUIRE(dtype_info(DType::float16).nccl == ncclFloat16);
  STATIC_REQUIRE(dtype_info(DType::bfloat16).nccl == ncclBfloat16);
  STATIC_REQUIRE(dtype_info(DType::float32).nccl == ncclFloat32);
  STATIC_REQUIRE(dtype_info(DType::float64).nccl == ncclFloat64);
}
#endif

TEST_CASE("collectives take the dtypes NCCL has and name the others in a TypeError", "[distributed]") {
  namespace nccl = fz::detail::nccl;
  CHECK(nccl::data_type(fz::DType::bfloat16) == nccl::DataType::bfloat16);
  CHECK(nccl::data_type(fz::DType::uint64) == nccl::DataType::uint64);
  for (fz::DType d : {fz::DType::bool_, fz::DType::int16, fz::DType::uint16})
    CHECK_THROWS_WITH(nccl::data_type(d), Catch::Contains("NCCL has no") && Catch::Contains(std::string(fz::dtype_name(d))));
}
