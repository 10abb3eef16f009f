// SPDX-License-Identifier: Apache-2.0
// fz::concatenate, fz::stack and fz::pad on the GPU against host references: every axis, arrays and
// expressions as pieces (an expression computed into its place: one kernel per piece, no temporary), mixed
// dtypes promoted, views as pieces, empty pieces, and the errors for shapes that do not join.
#include "support.hpp"

namespace {

std::vector<double> doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// NumPy's concatenate of row-major pieces along `axis`.
std::vector<double> concat_ref(const std::vector<std::vector<double>>& xs, const std::vector<fz::Shape>& shapes,
                               int axis) {
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shapes[0][d];
  for (int d = axis + 1; d < shapes[0].size(); ++d) inner *= shapes[0][d];
  std::vector<double> out;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::size_t k = 0; k < xs.size(); ++k) {
      const std::int64_t block = shapes[k][axis] * inner;
      for (std::int64_t i = 0; i < block; ++i) out.push_back(xs[k][static_cast<std::size_t>(o * block + i)]);
    }
  return out;
}

}  // namespace

TEST_CASE("concatenate: every axis, arrays and expressions, one kernel per piece", "[gpu][joining]") {
  const fz::Shape sa{4, 5, 6}, sb{4, 5, 6};
  const auto ha = test::random<float>(120, -1, 1, 1), hb = test::random<float>(120, -1, 1, 2);
  const auto a = fz::asarray(ha, sa), b = fz::asarray(hb, sb);
  std::vector<double> b2;
  for (float v : hb) b2.push_back(static_cast<double>(static_cast<float>(v * 2.f)));
  for (int axis = 0; axis < 3; ++axis) {
    INFO("axis " << axis);
    fz::reset_stats();
    const auto c = fz::concatenate(axis, a, b * 2.f);
    CHECK(fz::stats().launches == 2);
    fz::Shape want_shape = sa;
    want_shape[axis] *= 2;
    CHECK(c.shape() == want_shape);
    CHECK(test::mismatches(c.to_host(), concat_ref({doubles(ha), b2}, {sa, sb}, axis), fz::DType::float32) == 0);
  }
  // arrays of one type from a vector, pieces of different extents along the axis, a transposed view
  const auto hc = test::random<float>(4 * 5 * 2, -1, 1, 3);
  const auto c = fz::asarray(hc, {4, 5, 2});
  const std::vector<fz::Array<float>> pieces{a, c};
  const auto joined = fz::concatenate(pieces, -1);
  CHECK(joined.shape() == fz::Shape{4, 5, 8});
  CHECK(test::mismatches(joined.to_host(), concat_ref({doubles(ha), doubles(hc)}, {sa, {4, 5, 2}}, 2),
                         fz::DType::float32) == 0);
  const auto t = fz::concatenate(0, a.transpose(), fz::zeros<float>({0, 5, 4}));
  CHECK(t.shape() == fz::Shape{6, 5, 4});
  CHECK(test::mismatches(t.to_host(), doubles(a.transpose().to_host()), fz::DType::float32) == 0);
  // mixed dtypes promote as NumPy's
  const auto mixed = fz::concatenate(0, fz::asarray(std::vector<std::int32_t>{1, 2}, {2}),
                                     fz::asarray(std::vector<double>{0.5}, {1}));
  static_assert(std::is_same_v<decltype(mixed)::value_type, double>);
  CHECK(mixed.to_host() == std::vector<double>{1, 2, 0.5});
  CHECK_THROWS_AS(fz::concatenate(0, a, fz::zeros<float>({4, 5, 7})), fz::ShapeError);
  CHECK_THROWS_AS(fz::concatenate(3, a, b), fz::ShapeError);
}

TEST_CASE("stack and pad", "[gpu][joining]") {
  const auto ha = test::random<float>(6, -1, 1, 11), hb = test::random<float>(6, -1, 1, 12);
  const auto a = fz::asarray(ha, {2, 3}), b = fz::asarray(hb, {2, 3});
  const auto s0 = fz::stack(0, a, b + 1.f);
  CHECK(s0.shape() == fz::Shape{2, 2, 3});
  std::vector<double> want0;
  for (float v : ha) want0.push_back(v);
  for (float v : hb) want0.push_back(static_cast<double>(v + 1.f));
  CHECK(test::mismatches(s0.to_host(), want0, fz::DType::float32) == 0);
  const std::vector<fz::Array<float>> both{a, b};
  const auto s2 = fz::stack(both, -1);
  CHECK(s2.shape() == fz::Shape{2, 3, 2});
  std::vector<double> want2;
  for (std::size_t i = 0; i < 6; ++i) want2.push_back(ha[i]), want2.push_back(hb[i]);
  CHECK(test::mismatches(s2.to_host(), want2, fz::DType::float32) == 0);
  CHECK_THROWS_AS(fz::stack(0, a, fz::zeros<float>({3, 2})), fz::ShapeError);

  const auto p = fz::pad(a * 2.f, {{1, 0}, {2, 1}}, -1);
  CHECK(p.shape() == fz::Shape{3, 6});
  std::vector<double> wantp(18, -1);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c)
      wantp[static_cast<std::size_t>((r + 1) * 6 + c + 2)] = static_cast<double>(ha[static_cast<std::size_t>(r * 3 + c)] * 2.f);
  CHECK(test::mismatches(p.to_host(), wantp, fz::DType::float32) == 0);
  CHECK_THROWS_AS(fz::pad(a, {{1, 1}}), fz::ShapeError);
}
