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
  // a pad beside a product: the pad's step spans its own region, not the product's operands (fusion-fuzz case
  // 77000345 planned it over (6, 1, 5, 40) broadcast with the (2, 40) operand: an error)
  const auto a = fz::placeholder<double>({5, 2});
  const auto b = fz::placeholder<float>({2, 40});
  const auto z = fz::placeholder<fz::half>({1, 1, 1, 20});
  const fz::KernelInfo k = fz::inspect(fz::fmax(fz::matmul(a, b), fz::pad(z, {{2, 4}, {0, 0}, {3, 1}, {8, 12}}, 0)));
  CHECK_THAT(k.plan.back(), Catch::StartsWith("fz_fmax_f64_"));
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

TEST_CASE("a join whose pieces lie on vector boundaries chooses its piece once per vector", "[joining]") {
  // eight pieces of 64 float32 columns: every column limit a whole number of 4-wide vectors, every piece aligned
  std::vector<fz::Array<float>> eight;
  for (int k = 0; k < 8; ++k) eight.push_back(fz::placeholder<float>({16, 64}));
  const auto k8 = fz::inspect(fz::concatenate(1, eight[0], eight[1], eight[2], eight[3], eight[4], eight[5],
                                              eight[6], eight[7]));
  INFO(k8.source);
  CHECK_THAT(k8.variant, Catch::Contains("4-wide vectors (a join's piece chosen per vector)"));
  CHECK(k8.source.find("FzVec<float, 4> fz_expr(") != std::string::npos);  // fz_expr computes a whole vector
  CHECK(k8.source.find("*reinterpret_cast<const FzVec<float, 4>*>(x7)") != std::string::npos);  // loaded as one
  CHECK(k8.source.find("(fz_c < t") != std::string::npos);  // the test: the vector's first column, once
  CHECK(k8.source.find("col + k") == std::string::npos);    // never an element's own column

  // the math around it and inside the pieces, 16-bit: an 8-wide vector, a bias row loaded as a vector
  const auto h = fz::placeholder<fz::bfloat16>({16, 64}), h2 = fz::placeholder<fz::bfloat16>({16, 32});
  const auto bias = fz::placeholder<fz::bfloat16>({96});
  const auto kh = fz::inspect(fz::concatenate(1, h * 2.f, fz::exp(h2)) + bias);
  INFO(kh.source);
  CHECK_THAT(kh.variant, Catch::Contains("8-wide vectors (a join's piece chosen per vector)"));
  CHECK(kh.source.find("FzVec<unsigned short, 8> x2") != std::string::npos);
  CHECK(kh.source.find("exp(") > kh.source.find("if ("));  // a piece's math still only in its branch

  // a pad of 4 columns each side lies on vectors; of 2 it does not (an element's own column then)
  const auto x = fz::placeholder<float>({16, 64});
  CHECK_THAT(fz::inspect(fz::pad(x, {{1, 1}, {4, 4}})).variant, Catch::Contains("chosen per vector"));
  const auto off = fz::inspect(fz::pad(x, {{1, 1}, {2, 2}}));
  CHECK_THAT(off.variant, Catch::StartsWith("rows") && !Catch::Contains("chosen per vector"));
  CHECK(off.source.find("col + k") != std::string::npos);
  // pieces of 6 columns end off the vectors: per element
  const auto six = fz::placeholder<float>({16, 6});
  CHECK_THAT(fz::inspect(fz::concatenate(1, six, six * 2.f)).variant, !Catch::Contains("chosen per vector"));
  // a gather inside is read where its index says, per element
  const auto table = fz::placeholder<float>({10, 64});
  const auto ids = fz::placeholder<std::int64_t>({16});
  CHECK_THAT(fz::inspect(fz::concatenate(1, x, fz::take(table, ids, 0))).variant,
             !Catch::Contains("chosen per vector"));
}
