// SPDX-License-Identifier: Apache-2.0
#include <regex>
#include <set>

#include "common/hash.hpp"
#include "support.hpp"

using fz::DType;

namespace {
int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("an array used twice is read once; common subexpressions are computed once", "[ir]") {
  auto x = fz::placeholder<float>({1000}), y = fz::placeholder<float>({1000});
  const auto once = fz::inspect(x * x + fz::sin(y) * fz::sin(y));
  CHECK(count(once.source, "const float* __restrict__ in") == 2);  // x and y, one parameter each
  CHECK(count(once.source, "sin(") == 1);
  const auto twice = fz::inspect(x * y);
  CHECK(count(twice.source, "const float* __restrict__ in") == 2);
  CHECK(once.hash != twice.hash);
  // commutative operands are ordered, so x*y and y*x are one kernel
  CHECK(fz::inspect(y * x).hash == fz::inspect(x * y).hash);
}

TEST_CASE("dtypes are part of the IR: a cast makes a different kernel", "[ir]") {
  auto x = fz::placeholder<float>({8}), y = fz::placeholder<float>({8});
  CHECK(fz::inspect(x + y).hash != fz::inspect(fz::cast<double>(x) + y).hash);
  CHECK(fz::inspect(x + y).hash != fz::inspect(fz::cast<fz::half>(x + y)).hash);
}

TEST_CASE("sizes and scalar values are arguments: they never change the kernel", "[ir]") {
  auto a = fz::placeholder<float>({1000}), b = fz::placeholder<float>({5000});
  const auto k1 = fz::inspect(a * 2.0f + 1.0f);
  const auto k2 = fz::inspect(b * 3.5f + 7.0f);
  CHECK(k1.name == k2.name);
  CHECK(k1.source == k2.source);
}

TEST_CASE("kernel names carry the ops, dtype and a stable hash", "[ir]") {
  auto x = fz::placeholder<float>({1 << 20}), y = fz::placeholder<float>({1 << 20}),
       z = fz::placeholder<float>({1 << 20});
  const auto k = fz::inspect(fz::sin(x) + fz::cos(y) / fz::sqrt(z));
  CHECK(std::regex_match(k.name, std::regex("fz_sin_cos_sqrt_div_f32_[0-9a-f]{16}")));
  CHECK(k.name.substr(k.name.size() - 16) == fz::hex16(k.hash));
  // Golden: the hash is a function of the canonical IR and variant only, identical on every machine.
  CHECK(fz::hex16(k.hash) == "e51348d38624b14c");

  const auto n = fz::inspect(fz::named("squared_diff", (x - y) * (x - y)));
  CHECK(std::regex_match(n.name, std::regex("squared_diff_[0-9a-f]{16}")));
  CHECK_THROWS_AS(fz::inspect(fz::named("bad name", x + y)), fz::Error);

  auto i = fz::placeholder<std::int32_t>({16});
  CHECK(std::regex_match(fz::inspect(i + 1).name, std::regex("fz_add_i32_[0-9a-f]{16}")));
}

TEST_CASE("kernel names use the public op names", "[ir]") {
  auto i = fz::placeholder<std::int32_t>({16}), j = fz::placeholder<std::int32_t>({16});
  auto f = fz::placeholder<float>({16});
  auto op_part = [](const fz::KernelInfo& k) { return k.name.substr(0, k.name.size() - 17); };  // drop _<hash>
  CHECK(op_part(fz::inspect(fz::floor_divide(i, j))) == "fz_floor_divide_i32");
  CHECK(op_part(fz::inspect(fz::invert(i))) == "fz_invert_i32");
  CHECK(op_part(fz::inspect(fz::bitwise_and(i, j) | (i ^ j))) == "fz_bitwise_and_bitwise_xor_bitwise_or_i32");
  CHECK(op_part(fz::inspect(fz::left_shift(i, 2) + fz::right_shift(i, j))) == "fz_left_shift_right_shift_add_i32");
  CHECK(op_part(fz::inspect(fz::logical_and(i > 0, !(f < 1.f)))) == "fz_gt_lt_logical_not_logical_and_b1");
  CHECK(op_part(fz::inspect(-f)) == "fz_negative_f32");
  // The NumPy spellings are the same ops as the operators: one kernel, one hash.
  CHECK(fz::inspect(fz::bitwise_and(i, j)).hash == fz::inspect(i & j).hash);
  CHECK(fz::inspect(fz::invert(i)).hash == fz::inspect(~i).hash);
}

TEST_CASE("the op table: one row per op, distinct identifier names, consistent facts", "[ir]") {
  std::set<std::string> names;
  for (const fz::ir::OpInfo& o : fz::ir::kOps) {
    INFO(o.name);
    CHECK(names.insert(o.name).second);
    CHECK(std::regex_match(std::string(o.name), std::regex("[a-z][a-z0-9_]*")));
    // a math function computes floating operands only: integer operands reach it through float_for
    if (*o.math) CHECK((o.arity == fz::ir::Arity::unary || o.arity == fz::ir::Arity::binary));
    if (o.commutative) CHECK(o.arity == fz::ir::Arity::binary);
    if (fz::ir::is_bitwise(o.op)) CHECK_FALSE(fz::ir::accepts(o.op, DType::float32));
  }
  CHECK(names.size() == static_cast<std::size_t>(fz::ir::Op::count_));
}

TEST_CASE("the dtype table: kinds, sizes and compute types agree", "[dtype]") {
  for (const fz::DTypeInfo& d : fz::kDTypes) {
    INFO(d.name);
    CHECK(fz::dtype_name(d.dtype) == d.name);
    CHECK(fz::itemsize(d.compute) >= d.size);
    CHECK((fz::is_16bit_float(d.dtype) == (*d.to_float != 0)));
    CHECK((fz::is_16bit_float(d.dtype) == (d.compute != d.dtype)));
  }
}

TEST_CASE("stable hash of bytes does not depend on the platform", "[ir]") {
  fz::StableHasher h;
  h.add("fusion");
  h.add_u32(42);
  // computed independently in Python from the documented FNV-1a + splitmix64 definition
  CHECK(fz::hex16(h.digest()) == "e14bff0a5d36620d");
}

TEST_CASE("asking for a GPU without one raises NoDeviceError that says why", "[ir][device]") {
  if (fz::device_count() == 0) {
    CHECK_FALSE(fz::no_device_reason().empty());
    CHECK_THROWS_AS(fz::empty<float>({4}), fz::NoDeviceError);
    CHECK_THROWS_WITH(fz::Stream(), Catch::Contains("GPU") || Catch::Contains("driver") || Catch::Contains("device"));
    CHECK_THROWS_AS(fz::Device(0), fz::NoDeviceError);
  } else {  // where there is one, the same calls work
    CHECK(fz::no_device_reason().empty());
    CHECK(fz::empty<float>({4}).size() == 4);
  }
}

TEST_CASE("a child reports why it has no device", "[.][child_no_driver]") {
  std::printf("devices: %d; reason: %s\n", fz::device_count(), fz::no_device_reason().c_str());
}

TEST_CASE("FUSION_CUDA_DRIVER names the driver library to load, and the error names it", "[ir][device]") {
  const std::string cmd = std::string("FUSION_CUDA_DRIVER=/nonexistent/libcuda-stand-in.so.1 ") + test::self_binary() +
                          " \"a child reports why it has no device\" 2>&1";
  const auto child = test::run_command(cmd);
  CHECK(child.status == 0);
  CHECK_THAT(
      child.text,
      Catch::Contains("devices: 0; reason: no CUDA driver: /nonexistent/libcuda-stand-in.so.1 could not be loaded"));
}

TEST_CASE("FUSION_SHOW_KERNELS prints each new kernel's name and source once", "[ir][nvrtc]") {
  const std::string cmd = std::string("FUSION_SHOW_KERNELS=1 FUSION_CACHE=0 ") + test::self_binary() +
                          " \"sizes and scalar values are arguments: they never change the kernel\" 2>&1";
  const auto child = test::run_command(cmd);
  CHECK(child.status == 0);
  const std::string& out = child.text;
  // that test inspects the same kernel twice (two sizes, two constants): it is shown once
  CHECK(count(out, "fusion: kernel fz_mul_add_f32_") == 1);
  CHECK(count(out, "extern \"C\" __global__") == 1);
}
