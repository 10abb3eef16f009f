// SPDX-License-Identifier: Apache-2.0
#include <bit>
#include <fstream>
#include <map>
#include <sstream>

#include "support.hpp"

using fz::DType;

namespace {
DType dtype_by_name(const std::string& n) {
  for (int i = 0; i < fz::kNumDTypes; ++i)
    if (fz::dtype_name(static_cast<DType>(i)) == n) return static_cast<DType>(i);
  FAIL("unknown dtype " << n);
  return DType::bool_;
}
}  // namespace

TEST_CASE("promotion matches NumPy's table for every dtype pair and weak scalar", "[dtype]") {
  std::ifstream in(std::string(FUSION_GOLDEN_DIR) + "/promotion.txt");
  REQUIRE(in);
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string a, b, want;
    fields >> a >> b >> want;
    INFO(line);
    const DType da = dtype_by_name(a);
    DType got;
    if (b.rfind("weak_", 0) == 0) {
      const fz::ScalarKind k = b == "weak_bool" ? fz::ScalarKind::boolean
                               : b == "weak_int" ? fz::ScalarKind::integer : fz::ScalarKind::floating;
      got = fz::promote_weak(da, k);
      // Deliberate: bfloat16 with a float scalar stays bfloat16 (JAX's and PyTorch's rule; ml_dtypes
      // gives float32 only because NumPy treats it as a foreign dtype).
      if (a == "bfloat16" && b == "weak_float") want = "bfloat16";
    } else {
      got = fz::promote_types(da, dtype_by_name(b));
      // ml_dtypes defines no promotion for these pairs; fusion uses NumPy's float-width rule.
      if (want == "none") {
        const DType other = a == "bfloat16" ? dtype_by_name(b) : da;
        want = other == DType::float16 || fz::itemsize(other) == 2 ? "float32" : "float64";
      }
    }
    CHECK(std::string(fz::dtype_name(got)) == want);
    ++checked;
  }
  CHECK(checked == 13 * 13 + 13 * 3);
}

TEST_CASE("expression result types follow the promotion rules at compile time", "[dtype]") {
  auto i8 = fz::placeholder<std::int8_t>({4});
  auto i32 = fz::placeholder<std::int32_t>({4});
  auto f32 = fz::placeholder<float>({4});
  auto b = fz::placeholder<bool>({4});
  auto h = fz::placeholder<fz::half>({4});
  STATIC_REQUIRE(decltype(i8 + 1)::dtype == DType::int8);
  STATIC_REQUIRE(decltype(f32 + 1.0)::dtype == DType::float32);
  STATIC_REQUIRE(decltype(i32 + f32)::dtype == DType::float64);
  STATIC_REQUIRE(decltype(b + 1)::dtype == DType::int64);
  STATIC_REQUIRE(decltype(i8 * 1.5)::dtype == DType::float64);
  STATIC_REQUIRE(decltype(i32 / i32)::dtype == DType::float64);  // true division
  STATIC_REQUIRE(decltype(fz::sin(i8))::dtype == DType::float16);
  STATIC_REQUIRE(decltype(fz::sin(i32))::dtype == DType::float64);
  STATIC_REQUIRE(decltype(h * 2.5)::dtype == DType::float16);
  STATIC_REQUIRE(decltype(f32 < 0)::dtype == DType::bool_);
  STATIC_REQUIRE(decltype(fz::floor_divide(i8, i8))::dtype == DType::int8);
  STATIC_REQUIRE(decltype(fz::cast<double>(i8))::dtype == DType::float64);
  STATIC_REQUIRE(std::is_same_v<decltype(fz::eval(i32 + f32))::value_type, double>);
}

TEST_CASE("a scalar that does not fit the array's integer dtype is a TypeError", "[dtype]") {
  auto i8 = fz::placeholder<std::int8_t>({4});
  CHECK_THROWS_AS(i8 + 1000, fz::TypeError);
  CHECK_THROWS_WITH(i8 + 1000, Catch::Contains("does not fit") && Catch::Contains("int8"));
  CHECK_NOTHROW(i8 + 100);
}

TEST_CASE("half: every value round-trips through float, and float rounds to nearest even", "[dtype]") {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const fz::half h = fz::half::from_bits(static_cast<std::uint16_t>(b));
    const float f = h;
    if (f != f) continue;  // NaN payloads may change, NaN stays NaN
    REQUIRE(fz::half(f).bits == b);
  }
  CHECK(fz::half(1.0f + std::ldexp(1.0f, -11)).bits == fz::half(1.0f).bits);  // tie -> even
  CHECK(float(fz::half(1.0f + 3 * std::ldexp(1.0f, -11))) == 1.0f + std::ldexp(1.0f, -9));
  CHECK(float(fz::half(65519.0f)) == 65504.0f);
  CHECK(std::isinf(float(fz::half(65520.0f))));
  CHECK(fz::half(std::ldexp(1.0f, -24)).bits == 1);  // smallest subnormal
  CHECK(fz::half(std::ldexp(1.0f, -25)).bits == 0);  // tie -> even (zero)
  CHECK(fz::half(3 * std::ldexp(1.0f, -26)).bits == 1);
  CHECK(std::isnan(float(fz::half(std::nanf("")))));
  CHECK(fz::half(-0.0f).bits == 0x8000);
}

TEST_CASE("bfloat16 rounds to nearest even and keeps NaN quiet", "[dtype]") {
  CHECK(float(fz::bfloat16(1.0f)) == 1.0f);
  CHECK(fz::bfloat16(std::bit_cast<float>(0x3f808000u)).bits == 0x3f80);  // tie -> even
  CHECK(fz::bfloat16(std::bit_cast<float>(0x3f818000u)).bits == 0x3f82);  // tie -> even (up)
  CHECK(fz::bfloat16(std::bit_cast<float>(0x3f808001u)).bits == 0x3f81);
  CHECK(std::isnan(float(fz::bfloat16(std::nanf("")))));
  CHECK(std::isinf(float(fz::bfloat16(std::numeric_limits<float>::infinity()))));
}
