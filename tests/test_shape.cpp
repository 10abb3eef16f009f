// SPDX-License-Identifier: Apache-2.0
#include <array>
#include <span>

#include "support.hpp"

TEST_CASE("broadcasting follows NumPy and names both shapes when it fails", "[shape]") {
  CHECK(fz::broadcast_shapes({3, 1}, {1, 4}) == fz::Shape{3, 4});
  CHECK(fz::broadcast_shapes({}, {2, 3}) == fz::Shape{2, 3});
  CHECK(fz::broadcast_shapes({5, 0}, {1}) == fz::Shape{5, 0});
  CHECK(fz::broadcast_shapes({2, 1, 3}, {4, 1}) == fz::Shape{2, 4, 3});
  CHECK_THROWS_AS(fz::broadcast_shapes({3}, {4}), fz::ShapeError);
  CHECK_THROWS_WITH(fz::broadcast_shapes({2, 3}, {4}), Catch::Contains("(2, 3)") && Catch::Contains("(4,)"));
  CHECK_THROWS_AS(fz::Shape({1, 2, 3, 4, 5, 6, 7, 8, 9}), fz::ShapeError);
}

TEST_CASE("views compute shapes, strides and offsets like NumPy", "[shape]") {
  auto a = fz::placeholder<float>({4, 6});
  CHECK(a.strides() == fz::Strides{6, 1});

  auto t = a.transpose();
  CHECK(t.shape() == fz::Shape{6, 4});
  CHECK(t.strides() == fz::Strides{1, 6});
  CHECK_FALSE(t.is_contiguous());

  auto s = a.slice({{1, 4, 2}, {std::nullopt, std::nullopt, -1}});  // a[1:4:2, ::-1]
  CHECK(s.shape() == fz::Shape{2, 6});
  CHECK(s.strides() == fz::Strides{12, -1});
  CHECK(s.offset() == 6 + 5);

  auto e = a.slice({{10, 20}});  // out of range clamps to empty
  CHECK(e.shape() == fz::Shape{0, 6});
  auto neg = a.slice({{-1, std::nullopt}});  // a[-1:]
  CHECK(neg.shape() == fz::Shape{1, 6});
  CHECK(neg.offset() == 18);

  auto b = a.slice({{0, 1}}).broadcast_to({3, 4, 6});  // (1, 6) -> (3, 4, 6)
  CHECK(b.strides() == fz::Strides{0, 0, 1});
  CHECK_THROWS_AS(a.broadcast_to({5, 6}), fz::ShapeError);

  auto x = a.expand_dims(1);
  CHECK(x.shape() == fz::Shape{4, 1, 6});
  CHECK(a.expand_dims(-1).shape() == fz::Shape{4, 6, 1});
  CHECK_THROWS_AS(a.expand_dims(4), fz::ShapeError);

  CHECK(a.reshape({3, -1}).shape() == fz::Shape{3, 8});
  CHECK_THROWS_WITH(a.reshape({5, 5}), Catch::Contains("(4, 6)") && Catch::Contains("(5, 5)"));
  CHECK_THROWS_AS(a.transpose({0, 0}), fz::ShapeError);
  CHECK_THROWS_AS(a.slice({{0, 1, 0}}), fz::ShapeError);
}

TEST_CASE("extents from std::size_t and other integers, and shapes from vectors, arrays and spans", "[shape]") {
  // (a braced list of a std::size_t was a narrowing error on clang and a warning on g++, an error under -Werror)
  const std::vector<float> h(6);
  const std::size_t n = h.size();
  const unsigned two = 2;
  CHECK(fz::Shape{n, two} == fz::Shape{6, 2});
  CHECK(fz::placeholder<float>({n}).shape() == fz::Shape{6});
  const std::vector<std::size_t> dims{2, 3};
  const std::array<int, 2> fixed{4, 5};
  CHECK(fz::Shape(dims) == fz::Shape{2, 3});
  CHECK(fz::placeholder<float>(fixed).shape() == fz::Shape{4, 5});
  CHECK(fz::placeholder<float>(std::span(dims)).reshape({n}).shape() == fz::Shape{6});
  CHECK(fz::Shape{}.size() == 0);
}
