// SPDX-License-Identifier: Apache-2.0
// fz::concatenate and fz::stack without a GPU: what they compile to (one kernel, each piece computed in its
// own branch, its arrays read through pointers), the plans around reductions, and the shape errors.
#include "support.hpp"

TEST_CASE("concatenate is one kernel: each piece's math in its branch, the math around it fused", "[joining]") {
  const auto x = fz::placeholder<float>({64, 100}), y = fz::placeholder<float>({64, 28});
  const auto b = fz::placeholder<float>({128});
  const auto k = fz::inspect(fz::concatenate(1, x * 2.f, fz::exp(y)) + b);
  CHECK(k.kernels == 1);
  INFO(k.source);
  CHECK(k.name.rfind("fz_mul_exp_concatenate_add_f32_", 0) == 0);
  // where an element lies: its column against a limit found once per row (the last axis's period is the row)
  CHECK(k.source.find("(fz_c < t") != std::string::npos);
  CHECK(k.source.find("fz_row_limit(") != std::string::npos);
  CHECK(k.source.find("else {") != std::string::npos);           // a branch per piece
  CHECK(k.source.find("const float* x0") != std::string::npos);  // a piece's array: a pointer, read in its branch
  // the exp is spelled only inside the branch of its piece: after the test of where the element lies
  CHECK(k.source.find("exp(") > k.source.find("if ("));
  // sizes are arguments: other extents, the same kernel
  const auto x2 = fz::placeholder<float>({32, 40}), y2 = fz::placeholder<float>({32, 24});
  const auto b2 = fz::placeholder<float>({64});
  CHECK(fz::inspect(fz::concatenate(1, x2 * 2.f, fz::exp(y2)) + b2).hash == k.hash);
  // the pieces' order is part of it
  CHECK(fz::inspect(fz::concatenate(1, fz::exp(y), x * 2.f) + b).hash != k.hash);
}

TEST_CASE("a join of three pieces computes each piece's math only in its own branch", "[joining]") {
  const auto a = fz::placeholder<float>({8}), b = fz::placeholder<float>({5}), c = fz::placeholder<float>({3});
  const auto k = fz::inspect(fz::concatenate(0, a * 2.f, fz::exp(b), fz::sqrt(c)));
  INFO(k.source);
  // the second test of where an element lies comes before both the exp and the sqrt, each inside a branch
  const std::size_t second = k.source.find("fz_before(", k.source.find("fz_before(s") + 1);
  REQUIRE(second != std::string::npos);
  CHECK(k.source.find("exp(") > second);
  CHECK(k.source.find("sqrt(") > second);
  CHECK(k.source.find("sqrt(") > k.source.find("else", second));
}

TEST_CASE("joins the fuzzer found wrong: a gather's source read in another piece; promotion over all pieces",
          "[joining]") {
  // the same array gathered from in one piece and read in another (extent 1 along the gather's axis: the two
  // views are one): two parameters, one read through the index, one loaded (it was one, spelled both ways)
  const auto a = fz::placeholder<std::uint16_t>({4, 1});
  const auto b = fz::placeholder<fz::half>({4, 1});
  const auto idx = fz::placeholder<std::int64_t>({4, 1});
  CHECK(fz::inspect(fz::concatenate(1, fz::take_along_axis<fz::IndexMode::clip>(a, idx, 1), fz::pow(a, b))).kernels == 1);
  // NumPy's result type of int8, uint8 and float16 is float32 (promoting the last two first would give float16)
  const auto i8 = fz::placeholder<std::int8_t>({2});
  const auto u8 = fz::placeholder<std::uint8_t>({2});
  const auto f16 = fz::placeholder<fz::half>({2});
  using J = decltype(fz::concatenate(0, i8, u8, f16));
  STATIC_REQUIRE(J::dtype == fz::DType::float32);
  CHECK(fz::inspect(fz::concatenate(0, i8, u8, f16)).name.find("_f32_") != std::string::npos);
}

TEST_CASE("stack and concatenate plans: a reduction of a join runs the join first", "[joining][plan]") {
  const auto x = fz::placeholder<float>({64, 100}), y = fz::placeholder<float>({64, 100});
  CHECK(fz::inspect(fz::stack(0, x, y * 2.f)).kernels == 1);
  CHECK(fz::inspect(fz::stack(2, x, y)).kernels == 1);
  CHECK(fz::inspect(fz::sum(fz::concatenate(0, x, y))).kernels == 2);
  CHECK(fz::inspect(fz::concatenate(0, x, y) - fz::mean(y)).kernels == 2);  // the mean, then one kernel
  const fz::Unfused unfused;  // the join stays one kernel with its pieces' math (each op of its own elsewhere)
  CHECK(fz::inspect(fz::concatenate(0, x + 1.f, y) * 2.f).kernels == 2);
}

TEST_CASE("joining checks shapes and axes", "[joining]") {
  const auto x = fz::placeholder<float>({4, 5}), y = fz::placeholder<float>({4, 6});
  CHECK_THROWS_AS(fz::concatenate(0, x, y), fz::ShapeError);
  CHECK_THROWS_AS(fz::concatenate(2, x, x), fz::ShapeError);
  CHECK_THROWS_AS(fz::concatenate(-3, x, x), fz::ShapeError);
  CHECK_THROWS_AS(fz::stack(0, x, y), fz::ShapeError);
  CHECK_THROWS_AS(fz::stack(3, x, x), fz::ShapeError);
  CHECK_NOTHROW(fz::concatenate(-1, x, y));
  CHECK_NOTHROW(fz::stack(-3, x, x));
}
