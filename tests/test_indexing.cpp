// SPDX-License-Identifier: Apache-2.0
// fz::take and its kin without a GPU: what they compile to (one kernel with the math around them, the
// source read through a pointer, the fault word only in the checked mode), the plans around reductions,
// and the errors for bad axes, shapes and empty axes.
#include "support.hpp"

TEST_CASE("take compiles into the kernel of the expression around it", "[indexing]") {
  const auto table = fz::placeholder<float>({1000, 256});
  const auto ids = fz::placeholder<std::int32_t>({64});
  const auto pos = fz::placeholder<float>({64, 256});
  const auto k = fz::inspect(fz::take(table, ids, 0) * 2.f + pos);
  CHECK(k.kernels == 1);
  INFO(k.source);
  CHECK(k.name.rfind("fz_take_mul_add_f32_", 0) == 0);  // the index arithmetic shows as the take
  CHECK(k.source.find("const float* x1") != std::string::npos);  // the source reaches the expression as a pointer
  CHECK(k.source.find("fz_index_raise(") != std::string::npos);
  CHECK(k.source.find("unsigned long long* fz_fault") != std::string::npos);
  CHECK(k.variant.find("rows") != std::string::npos);  // the index is read once per row, the row streams
  CHECK(fz::inspect(table.take(ids, 0) * 2.f + pos).hash == k.hash);  // NumPy's spelling: the same kernel

  const auto w = fz::inspect(fz::take<fz::IndexMode::wrap>(table, ids, 0));
  CHECK(w.source.find("fz_index_wrap(") != std::string::npos);
  CHECK(w.source.find("fz_fault") == std::string::npos);  // unchecked: no fault word, no wait after the kernel
  const auto c = fz::inspect(fz::take<fz::IndexMode::clip>(table, ids, 1));
  CHECK(c.source.find("fz_index_clip(") != std::string::npos);
  CHECK(c.hash != w.hash);
}

TEST_CASE("take's modes and sources are part of the kernel, its sizes are not", "[indexing]") {
  const auto a = fz::placeholder<float>({100, 64}), b = fz::placeholder<float>({300, 64});
  const auto i = fz::placeholder<std::int64_t>({32}), j = fz::placeholder<std::int64_t>({32});
  // another table and index of the same layout: the same kernel (extents and strides are arguments)
  CHECK(fz::inspect(fz::take(a, i, 0)).hash == fz::inspect(fz::take(b, j, 0)).hash);
  CHECK(fz::inspect(fz::take(a, i, 0)).hash != fz::inspect(fz::take<fz::IndexMode::clip>(a, i, 0)).hash);
  // the same array read directly and through an index: two parameters, the gathered one never loaded
  const auto both = fz::inspect(fz::take(a, i, 1) + a.slice({fz::Slice{}, fz::Slice{0, 32}}));
  CHECK(both.kernels == 1);
  CHECK(both.source.find("const float* x") != std::string::npos);
}

TEST_CASE("a whole reduction of a take runs the take first, a row one is a layer kernel; take_along_axis fuses its index", "[indexing][plan]") {
  const auto table = fz::placeholder<float>({1000, 256});
  const auto ids = fz::placeholder<std::int32_t>({64});
  CHECK(fz::inspect(fz::sum(fz::take(table, ids, 0))).kernels == 2);
  CHECK(fz::inspect(fz::sum(fz::take(table, ids, 0), 1) * 2.f).kernels == 1);  // a layer kernel
  // a layer kernel reads the source in place: an embedding lookup and its RMSNorm are one kernel
  const auto pos = fz::placeholder<float>({64, 256}), weight = fz::placeholder<float>({256});
  const auto norm = fz::inspect(fz::rms_norm(fz::take(table, ids, 0) + pos, weight, 1e-6f));
  CHECK(norm.kernels == 1);
  INFO(norm.source);
  // the row read at a per-row offset, as an ordinary input: in vectors, cached for the second pass
  CHECK(norm.source.find("this row's place in fz::take's source") != std::string::npos);
  CHECK(norm.variant.find("2 input(s) cached") != std::string::npos);
  // ... and, a short row, held in registers between the passes (loaded as vectors, whole or not)
  CHECK(norm.variant.find("the row held in registers") != std::string::npos);
  CHECK(norm.source.find("fz_unaligned") != std::string::npos);
  // (so too rows of a view of which some start off a vector boundary: tests/test_indexing_gpu.cpp runs this one)
  const auto wide = fz::placeholder<float>({200, 514});
  const auto view = fz::inspect(fz::rms_norm(fz::take(wide.slice({fz::_, fz::to(512)}), ids, 0) +
                                                 fz::placeholder<float>({64, 512}), fz::placeholder<float>({512}), 1e-6f));
  CHECK(view.kernels == 1);
  CHECK(view.variant.find("the row held in registers") != std::string::npos);
  CHECK(view.variant.find("4-wide vectors") != std::string::npos);
  const auto x = fz::placeholder<float>({64, 100});
  const auto idx = fz::placeholder<std::int64_t>({64, 3});
  const auto k = fz::inspect(fz::exp(fz::take_along_axis(x, idx * 2 - 1, 1)));
  CHECK(k.kernels == 1);
  CHECK(k.name.find("take") != std::string::npos);
}

TEST_CASE("take's errors: a bad axis, an empty axis, an index of the wrong rank", "[indexing][errors]") {
  const auto a = fz::placeholder<float>({4, 5});
  const auto i = fz::placeholder<std::int32_t>({3});
  CHECK_THROWS_AS(fz::take(a, i, 2), fz::ShapeError);
  CHECK_THROWS_AS(fz::take(a, i, -3), fz::ShapeError);
  CHECK_NOTHROW(fz::take(a, i, -1));
  CHECK_THROWS_WITH(fz::take(fz::placeholder<float>({4, 0}), i, 1), Catch::Contains("which is empty"));
  CHECK_THROWS_AS(fz::take_along_axis(a, i, 0), fz::ShapeError);
  CHECK_THROWS_AS(fz::index_select(a, 0, fz::placeholder<std::int32_t>({3, 1})), fz::ShapeError);
}

TEST_CASE("joining's shape errors come before any GPU work", "[indexing][errors]") {
  const auto a = fz::placeholder<float>({4, 5}), b = fz::placeholder<float>({4, 6});
  CHECK_THROWS_WITH(fz::concatenate(0, a, b), Catch::Contains("differ outside axis 0"));
  CHECK_THROWS_WITH(fz::concatenate(2, a, a), Catch::Contains("axis 2 is out of range"));
  CHECK_THROWS_WITH(fz::stack(0, a, b * 2.f), Catch::Contains("every piece must have the same shape"));
  CHECK_THROWS_WITH(fz::pad(a, {{1, 1}}), Catch::Contains("one pair per axis"));
  CHECK_THROWS_AS(fz::pad(a, {{1, 1}, {-1, 0}}), fz::ShapeError);
  const auto five = fz::placeholder<float>({2, 2, 2, 2, 2});
  CHECK_THROWS_WITH(fz::pad(five, {{1, 0}, {1, 0}, {1, 0}, {1, 0}, {1, 0}}), Catch::Contains("4 padded axes at most"));
}

TEST_CASE("a pad is one kernel with the math around it, compiled without a GPU", "[indexing][joining]") {
  const auto x = fz::placeholder<float>({64, 30});
  const auto info = fz::inspect(fz::exp(fz::pad(x * 2.f, {{1, 2}, {3, 0}}, -1.5)) + 1.f);
  CHECK(info.kernels == 1);
  CHECK_THAT(info.source, Catch::Contains("fz_position"));
  const auto five = fz::placeholder<float>({2, 2, 2, 2, 2});
  CHECK(fz::inspect(fz::pad(five, {{1, 0}, {0, 0}, {1, 0}, {1, 0}, {1, 0}})).kernels == 1);
  // a reduction or scan of a pad runs the pad first, as of any join
  CHECK(fz::inspect(fz::sum(fz::pad(x, {{1, 1}, {0, 2}}, 3))).kernels == 2);
  CHECK(fz::inspect(fz::cumsum(fz::pad(x, {{1, 1}, {0, 2}}, 3), 1)).kernels == 2);
  // the operand sits off the vector boundary, read element by element: the result is still written in vectors,
  // a row at a time, the box tested as an interval of columns found per row (no remainder per element); the
  // kernel is named a pad
  const auto wide = fz::inspect(fz::pad(fz::placeholder<float>({64, 4096}), {{1, 1}, {2, 2}}));
  CHECK_THAT(wide.variant, Catch::Contains("4-wide vectors"));
  CHECK_THAT(wide.variant, Catch::StartsWith("rows"));
  CHECK_THAT(wide.source, Catch::Contains("_lo <= fz_c && fz_c < t"));  // the box: one interval of columns a row
  CHECK_THAT(wide.source, Catch::Contains("fz_row_limit("));
  CHECK(wide.name.rfind("fz_pad_f32_", 0) == 0);
  CHECK(fz::inspect(fz::exp(fz::pad(x * 2.f, {{1, 2}, {3, 0}}, -1.5)) + 1.f).name.rfind("fz_mul_pad_exp_add_f32_", 0) == 0);
  // past 2^31 elements: 64-bit rows, limits and intervals (compiled here: max and min of long long)
  const auto huge = fz::inspect(fz::pad(fz::placeholder<float>({40000, 40000}), {{1, 1}, {2, 2}}, 1.f) * 2.f);
  CHECK_THAT(huge.variant, Catch::Contains("64-bit index"));
  CHECK_THAT(huge.source, Catch::Contains("_lo = max(max(max(max((long long)0,"));
  // an empty last axis (the fuzzer's: the rows kernel's question of whole rows divided by zero)
  const auto none = fz::placeholder<float>({4, 0});
  CHECK(fz::inspect(fz::pad(none.slice({fz::Slice{{}, {}, -1}, fz::Slice{}}), {{1, 1}, {0, 0}})).kernels == 1);
}
