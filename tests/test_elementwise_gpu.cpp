// SPDX-License-Identifier: Apache-2.0
// Fused expressions on a GPU against float64 host references: layouts, broadcasting, aliasing,
// semantics, fused vs unfused, compile counts, and arrays over 2^31 elements.
#include <cmath>
#include <limits>

#include "support.hpp"

namespace {

template <class T> std::vector<double> to_doubles(const std::vector<T>& v) {
  std::vector<double> d;
  for (const T& x : v) d.push_back(test::as_double(x));
  return d;
}

}  // namespace

TEST_CASE("the seed expression matches a float64 reference, fused and unfused", "[gpu][elementwise]") {
  const std::size_t n = (1 << 20) + 3;  // odd: exercises the vector tail
  const auto xh = test::random<float>(n, -10, 10, 1), yh = test::random<float>(n, -10, 10, 2),
             zh = test::random<float>(n, 0.1, 10, 3);
  fz::Array<float> x = fz::asarray(xh), y = fz::asarray(yh), z = fz::asarray(zh);
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i)
    want[i] = std::sin(double(xh[i])) + std::cos(double(yh[i])) / std::sqrt(double(zh[i]));

  fz::Array<float> out = fz::full<float>({static_cast<std::int64_t>(n)}, std::nanf(""));  // poisoned
  fz::reset_stats();
  out = fz::sin(x) + fz::cos(y) / fz::sqrt(z);
  CHECK(fz::stats().launches == 1);
  CHECK(fz::stats().bytes_read == 3 * 4 * n);
  CHECK(fz::stats().bytes_written == 4 * n);
  CHECK(test::mismatches(out.to_host(), want, fz::DType::float32) == 0);

  fz::Array<float> eager = fz::full<float>({static_cast<std::int64_t>(n)}, std::nanf(""));
  fz::reset_stats();
  {
    fz::Unfused scope;
    CHECK(fz::Unfused::active());
    eager = fz::sin(x) + fz::cos(y) / fz::sqrt(z);
  }
  CHECK_FALSE(fz::Unfused::active());
  CHECK(fz::stats().launches == 5);  // sin, cos, sqrt, div, add
  CHECK(test::mismatches(eager.to_host(), want, fz::DType::float32) == 0);
}

TEMPLATE_TEST_CASE("an expression gives the same answer in every dtype, fused and unfused", "[gpu][elementwise]",
                   float, double, fz::half, fz::bfloat16, std::int32_t, std::int8_t, std::uint16_t) {
  const std::size_t n = 4099;
  const auto xh = test::random<TestType>(n, 0, 9, 4), yh = test::random<TestType>(n, 0, 9, 5);
  fz::Array<TestType> x = fz::asarray(xh), y = fz::asarray(yh);
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double a = test::as_double(xh[i]), b = test::as_double(yh[i]);
    want[i] = (a - b) * (a - b) + 2 * a;
    if constexpr (std::is_integral_v<TestType>)
      want[i] = static_cast<double>(static_cast<TestType>(static_cast<std::int64_t>(want[i])));
  }
  const fz::DType d = fz::dtype_of<TestType>;
  fz::Array<TestType> fused = (x - y) * (x - y) + 2 * x;
  CHECK(test::mismatches(fused.to_host(), want, d) == 0);
  fz::Unfused scope;
  fz::Array<TestType> eager = (x - y) * (x - y) + 2 * x;
  CHECK(test::mismatches(eager.to_host(), want, d) == 0);
}

TEST_CASE("broadcasting, 0-d and empty arrays", "[gpu][elementwise]") {
  fz::Array<float> col = fz::asarray(std::vector<float>{1, 2, 3}, {3, 1});
  fz::Array<float> row = fz::asarray(std::vector<float>{10, 20, 30, 40}, {1, 4});
  fz::Array<float> grid = col * row + 0.5f;
  CHECK(grid.shape() == fz::Shape{3, 4});
  std::vector<float> want;
  for (int i = 1; i <= 3; ++i)
    for (int j = 1; j <= 4; ++j) want.push_back(float(i * j * 10) + 0.5f);
  CHECK(grid.to_host() == want);

  fz::Array<double> scalar = fz::asarray(std::vector<double>{2.5}, fz::Shape{});
  CHECK(scalar.ndim() == 0);
  fz::Array<double> v = fz::arange<double>(4) * scalar;
  CHECK(v.to_host() == std::vector<double>{0, 2.5, 5, 7.5});
  fz::Array<double> s2 = scalar * scalar;
  CHECK(s2.ndim() == 0);
  CHECK(s2.item() == 6.25);

  fz::Array<float> empty = fz::empty<float>({0, 4});
  fz::reset_stats();
  fz::Array<float> e2 = empty + row;
  CHECK(e2.shape() == fz::Shape{0, 4});
  CHECK(fz::stats().launches == 0);
  CHECK_THROWS_AS(fz::eval(col.reshape({3}) + row.reshape({4})), fz::ShapeError);
}

TEST_CASE("strided views as inputs and outputs: negative, zero and transposed strides", "[gpu][elementwise]") {
  const std::int64_t R = 37, C = 53;
  const auto h = test::random<float>(R * C, -1, 1, 9);
  fz::Array<float> m = fz::asarray(h, {R, C});
  auto at = [&](std::int64_t i, std::int64_t j) { return double(h[static_cast<std::size_t>(i * C + j)]); };

  fz::Array<float> flipped = m.slice({{std::nullopt, std::nullopt, -1}, {std::nullopt, std::nullopt, -2}}) * 2.f;
  CHECK(flipped.shape() == fz::Shape{R, (C + 1) / 2});
  std::vector<double> want;
  for (std::int64_t i = R - 1; i >= 0; --i)
    for (std::int64_t j = C - 1; j >= 0; j -= 2) want.push_back(2 * at(i, j));
  CHECK(test::mismatches(flipped.to_host(), want, fz::DType::float32) == 0);

  fz::Array<float> t = fz::full<float>({C, R}, std::nanf(""));
  auto tt = t.transpose();  // a strided output view of shape (R, C)
  tt = m + m.slice({{0, 1}}).broadcast_to({R, C});  // zero-stride input
  want.clear();
  for (std::int64_t j = 0; j < C; ++j)
    for (std::int64_t i = 0; i < R; ++i) want.push_back(at(i, j) + at(0, j));
  CHECK(test::mismatches(t.to_host(), want, fz::DType::float32) == 0);
}

TEMPLATE_TEST_CASE("inputs read at a step of 2 to 4 (x[..., ::2]) load whole vectors and pick their elements",
                   "[gpu][elementwise]", float, double, fz::bfloat16, std::int8_t) {
  using T = TestType;
  const fz::DType d = fz::dtype_of<T>;
  // whole vectors, a tail, and a view whose last element ends its allocation (no vector may read past it)
  for (const std::int64_t n : {std::int64_t{4096}, std::int64_t{4099}, std::int64_t{37}}) {
    for (const std::int64_t s : {2, 3, 4}) {
      CAPTURE(n, s);
      const auto h = test::random<T>(static_cast<std::size_t>((n - 1) * s + 1), -9, 9, 40 + s);
      const auto yh = test::random<T>(static_cast<std::size_t>(n), -9, 9, 50 + s);
      fz::Array<T> whole = fz::asarray(h), y = fz::asarray(yh);
      const auto x = whole.slice({fz::Slice{{}, {}, s}});  // n elements, the last one the allocation's last
      REQUIRE(x.size() == n);
      const std::string variant = fz::inspect(x * 2 + y).variant;
      const bool stepped = s * static_cast<std::int64_t>(sizeof(T)) <= 16;
      CHECK((variant.find(fmt::format("read at every {} elements", s)) != std::string::npos) == stepped);
      fz::Array<T> out = fz::full<T>({n}, T(7));  // poisoned
      out = x * 2 + y;
      std::vector<double> want;
      for (std::int64_t i = 0; i < n; ++i)
        want.push_back(test::as_double(T(test::as_double(h[static_cast<std::size_t>(i * s)]) * 2 +
                                         test::as_double(yh[static_cast<std::size_t>(i)]))));
      if constexpr (std::is_integral_v<T>)  // int8 wraps as the device's arithmetic does
        for (std::int64_t i = 0; i < n; ++i)
          want[static_cast<std::size_t>(i)] = static_cast<double>(static_cast<T>(
              static_cast<int>(h[static_cast<std::size_t>(i * s)]) * 2 + static_cast<int>(yh[static_cast<std::size_t>(i)])));
      CHECK(test::mismatches(out.to_host(), want, d) == 0);
    }
  }
  // views starting past a vector boundary: by less than the step (vectors loaded from the boundary) or not
  const auto long_h = test::random<T>(4099 * 4 + 8, -9, 9, 70);
  fz::Array<T> long_x = fz::asarray(long_h);
  for (const std::int64_t s : {2, 4})
    for (const std::int64_t first : {1, 2, 3}) {
      CAPTURE(s, first);
      fz::Array<T> out = long_x.slice({fz::Slice{first, {}, s}}) + 1;
      std::vector<double> want;
      for (std::size_t i = static_cast<std::size_t>(first); i < long_h.size(); i += static_cast<std::size_t>(s))
        want.push_back(test::as_double(T(test::as_double(long_h[i]) + 1)));
      CHECK(test::mismatches(out.to_host(), want, d) == 0);
    }
  // every other column of a matrix (one dimension of stride 2), odd columns (a view one element in: vectors from the
  // element before it), and both at once (rotary embeddings' interleaved pairs: x[..., ::2] * c - x[..., 1::2] * s)
  const std::int64_t R = 33, C = 64;
  const auto mh = test::random<T>(static_cast<std::size_t>(R * C), -9, 9, 61);
  fz::Array<T> m = fz::asarray(mh, {R, C});
  for (const std::int64_t first : {0, 1}) {
    CAPTURE(first);
    fz::Array<T> out = m.slice({{}, fz::Slice{first, {}, 2}}) - 1;
    std::vector<double> want;
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = first; j < C; j += 2)
        want.push_back(test::as_double(T(test::as_double(mh[static_cast<std::size_t>(i * C + j)]) - 1)));
    CHECK(test::mismatches(out.to_host(), want, d) == 0);
  }
  const auto ch = test::random<T>(static_cast<std::size_t>(R * C / 2), -2, 2, 62),
             sh = test::random<T>(static_cast<std::size_t>(R * C / 2), -2, 2, 63);
  fz::Array<T> c = fz::asarray(ch, {R, C / 2}), sn = fz::asarray(sh, {R, C / 2});
  fz::Array<T> rot = m.slice({{}, fz::Slice{0, {}, 2}}) * c - m.slice({{}, fz::Slice{1, {}, 2}}) * sn;
  std::vector<double> want;
  for (std::int64_t i = 0; i < R * C / 2; ++i) {
    const auto u = static_cast<std::size_t>(i);
    const double even = test::as_double(mh[2 * u]), odd = test::as_double(mh[2 * u + 1]);
    want.push_back(std::is_integral_v<T> ? static_cast<double>(static_cast<T>(static_cast<int>(
                                               even * test::as_double(ch[u]) - odd * test::as_double(sh[u]))))
                                         : test::as_double(T(even * test::as_double(ch[u]) - odd * test::as_double(sh[u]))));
  }
  CHECK(test::mismatches(rot.to_host(), want, d) == 0);
  // the same pairs of a view of wider rows (the query, key and value of a fused projection: a rows kernel), each of the
  // three in turn: the value's last row ends where the allocation ends
  const std::int64_t W = 3 * C;
  const auto ph = test::random<T>(static_cast<std::size_t>(R * W), -9, 9, 64);
  fz::Array<T> packed = fz::asarray(ph, {R, W});
  for (const std::int64_t part : {0, 1, 2}) {
    CAPTURE(part);
    const auto q = packed.slice({{}, fz::Slice{part * C, (part + 1) * C}});
    fz::Array<T> pairs = fz::full<T>({R, C / 2}, T(7));  // poisoned
    pairs = q.slice({{}, fz::Slice{0, {}, 2}}) * c - q.slice({{}, fz::Slice{1, {}, 2}}) * sn;
    CHECK(fz::inspect(q.slice({{}, fz::Slice{0, {}, 2}}) * c - q.slice({{}, fz::Slice{1, {}, 2}}) * sn)
              .variant.find("read at every 2 elements") != std::string::npos);
    want.clear();
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = 0; j < C / 2; ++j) {
        const auto at = static_cast<std::size_t>(i * W + part * C + 2 * j), cs = static_cast<std::size_t>(i * C / 2 + j);
        const double e = test::as_double(ph[at]) * test::as_double(ch[cs]) - test::as_double(ph[at + 1]) * test::as_double(sh[cs]);
        want.push_back(std::is_integral_v<T> ? static_cast<double>(static_cast<T>(static_cast<int>(e))) : test::as_double(T(e)));
      }
    CHECK(test::mismatches(pairs.to_host(), want, d) == 0);
    // one stepped row added to every row (its stride 0 along the rows), the row's last element its allocation's last
    const auto line_h = test::random<T>(static_cast<std::size_t>(C - 1), -9, 9, 65);
    fz::Array<T> line = fz::asarray(line_h);
    fz::Array<T> plus = q.slice({{}, fz::Slice{0, C / 2}}) + line.slice({fz::Slice{{}, {}, 2}});
    want.clear();
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = 0; j < C / 2; ++j)
        want.push_back(test::as_double(T(test::as_double(ph[static_cast<std::size_t>(i * W + part * C + j)]) +
                                         test::as_double(line_h[static_cast<std::size_t>(2 * j)]))));
    CHECK(test::mismatches(plus.to_host(), want, d) == 0);
    // every third column, rows read backwards (element by element)
    fz::Array<T> thirds = q.slice({fz::Slice{{}, {}, -1}, fz::Slice{1, {}, 3}}) + 1;
    want.clear();
    for (std::int64_t i = R - 1; i >= 0; --i)
      for (std::int64_t j = 1; j < C; j += 3)
        want.push_back(test::as_double(T(test::as_double(ph[static_cast<std::size_t>(i * W + part * C + j)]) + 1)));
    CHECK(test::mismatches(thirds.to_host(), want, d) == 0);
  }
}

TEST_CASE("rows kernels: bias rows, per-row scales, batch-norm channels, views and ties stream per row",
          "[gpu][elementwise]") {
  for (std::int64_t C : {1024, 64, 63, 5}) {  // whole 16-byte vectors per row, or not
    INFO("rows of " << C);
    const std::int64_t R = 129;
    const auto hm = test::random<float>(static_cast<std::size_t>(R * C), -3, 3, 31),
               hr = test::random<float>(static_cast<std::size_t>(C), -1, 1, 32),
               hc = test::random<float>(static_cast<std::size_t>(R), -2, 2, 33);
    const auto m = fz::asarray(hm, {R, C});
    const auto row = fz::asarray(hr), col = fz::asarray(hc, {R, 1});
    auto at = [&](std::int64_t i, std::int64_t j) { return double(hm[static_cast<std::size_t>(i * C + j)]); };
    fz::Array<float> out = fz::full<float>({R, C}, std::nanf(""));
    fz::reset_stats();
    out = fz::maximum(m + row * col, 0.f);
    CHECK(fz::stats().launches == 1);
    CHECK_THAT(fz::inspect(fz::maximum(m + row * col, 0.f)).variant, Catch::StartsWith("rows"));
    std::vector<double> want;
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = 0; j < C; ++j)
        want.push_back(std::max(
            at(i, j) + double(hr[static_cast<std::size_t>(j)]) * double(hc[static_cast<std::size_t>(i)]), 0.0));
    CHECK(test::mismatches(out.to_host(), want, fz::DType::float32) == 0);

    // reversed rows (a negative outer stride) and a bias starting one element in
    const auto wide = fz::asarray(test::random<float>(static_cast<std::size_t>(C + 1), -1, 1, 34));
    fz::Array<float> flipped = m.slice({{std::nullopt, std::nullopt, -1}}) - wide.slice({{1, C + 1}});
    const auto hw = wide.to_host();
    want.clear();
    for (std::int64_t i = R - 1; i >= 0; --i)
      for (std::int64_t j = 0; j < C; ++j) want.push_back(at(i, j) - double(hw[static_cast<std::size_t>(j + 1)]));
    CHECK(test::mismatches(flipped.to_host(), want, fz::DType::float32) == 0);

    // in place, and two outputs of one kernel
    fz::Array<float> acc = fz::asarray(hm, {R, C});
    acc += row;
    fz::Array<float> a = fz::empty<float>({R, C}), b = fz::empty<float>({R, C});
    fz::tie(a, b) = std::make_tuple(m * col, m - row);
    std::vector<double> want_acc, want_a, want_b;
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = 0; j < C; ++j) {
        want_acc.push_back(double(float(at(i, j) + double(hr[static_cast<std::size_t>(j)]))));
        want_a.push_back(at(i, j) * double(hc[static_cast<std::size_t>(i)]));
        want_b.push_back(at(i, j) - double(hr[static_cast<std::size_t>(j)]));
      }
    CHECK(test::mismatches(acc.to_host(), want_acc, fz::DType::float32) == 0);
    CHECK(test::mismatches(a.to_host(), want_a, fz::DType::float32) == 0);
    CHECK(test::mismatches(b.to_host(), want_b, fz::DType::float32) == 0);
  }
  // a batch norm's normalization: rank 3 rows (N, C, H*W), one statistic per (n, c); half rows of 8 per vector
  const std::int64_t N = 3, Ch = 5, HW = 40;
  const auto hx = test::random<fz::half>(static_cast<std::size_t>(N * Ch * HW), -2, 2, 35);
  const auto hmu = test::random<fz::half>(static_cast<std::size_t>(Ch), -1, 1, 36);
  const auto x = fz::asarray(hx, {N, Ch, 5, 8});
  const auto mu = fz::asarray(hmu, {1, Ch, 1, 1});
  fz::Array<fz::half> y = (x - mu) * 0.5f;
  CHECK_THAT(fz::inspect((x - mu) * 0.5f).variant, Catch::StartsWith("rows, rank 3") && Catch::Contains("8-wide"));
  std::vector<double> want;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < Ch; ++c)
      for (std::int64_t k = 0; k < HW; ++k)
        want.push_back((test::as_double(hx[static_cast<std::size_t>((n * Ch + c) * HW + k)]) -
                        test::as_double(hmu[static_cast<std::size_t>(c)])) *
                       0.5);
  CHECK(test::mismatches(y.to_host(), want, fz::DType::float16) == 0);
}

TEST_CASE("tiles kernels: transposed operands of every size, batches, 16-bit floats, ties and in place",
          "[gpu][elementwise]") {
  for (auto [R, C] : {std::pair<std::int64_t, std::int64_t>{64, 96}, {37, 45}, {16, 1000}, {1025, 33}}) {
    INFO(R << " x " << C);
    const auto ha = test::random<float>(static_cast<std::size_t>(R * C), -3, 3, 61),
               hb = test::random<float>(static_cast<std::size_t>(R * C), -3, 3, 62),
               hr = test::random<float>(static_cast<std::size_t>(C), -1, 1, 63);
    const auto a = fz::asarray(ha, {R, C}),
               bt = fz::asarray(hb, {C, R});  // bt.transpose() is (R, C), contiguous along R
    const auto row = fz::asarray(hr);
    auto A = [&](std::int64_t i, std::int64_t j) { return double(ha[static_cast<std::size_t>(i * C + j)]); };
    auto B = [&](std::int64_t i, std::int64_t j) {
      return double(hb[static_cast<std::size_t>(j * R + i)]);
    };  // bt.T[i, j]
    CHECK_THAT(fz::inspect(a * bt.transpose() + row).variant, Catch::StartsWith("tiles"));
    fz::Array<float> out = fz::full<float>({R, C}, std::nanf(""));
    fz::reset_stats();
    out = a * bt.transpose() + row;
    CHECK(fz::stats().launches == 1);
    std::vector<double> want, want_t, want_u;
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = 0; j < C; ++j) {
        want.push_back(A(i, j) * B(i, j) + double(hr[static_cast<std::size_t>(j)]));
        want_u.push_back(A(i, j) - B(i, j));
      }
    CHECK(test::mismatches(out.to_host(), want, fz::DType::float32) == 0);
    // the transposed input alone (a plain transpose copy), and the other way round: a.T into (C, R)
    fz::Array<float> t = bt.transpose();
    std::vector<double> want_copy;
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = 0; j < C; ++j) want_copy.push_back(B(i, j));
    CHECK(test::mismatches(t.to_host(), want_copy, fz::DType::float32) == 0);
    fz::Array<float> at = a.transpose() * 2.f;
    for (std::int64_t j = 0; j < C; ++j)
      for (std::int64_t i = 0; i < R; ++i) want_t.push_back(A(i, j) * 2.0);
    CHECK(test::mismatches(at.to_host(), want_t, fz::DType::float32) == 0);
    // two outputs of one kernel
    fz::Array<float> p = fz::empty<float>({R, C}), q = fz::empty<float>({R, C});
    fz::tie(p, q) = std::make_tuple(a * bt.transpose() + row, a - bt.transpose());
    CHECK(test::mismatches(p.to_host(), want, fz::DType::float32) == 0);
    CHECK(test::mismatches(q.to_host(), want_u, fz::DType::float32) == 0);
  }
  // a batch of transposes in float64, and 16-bit floats
  const std::int64_t N = 3, R = 50, C = 70;
  const auto hx = test::random<double>(static_cast<std::size_t>(N * C * R), -2, 2, 64);
  const auto x = fz::asarray(hx, {N, C, R});
  fz::Array<double> y = x.transpose({0, 2, 1}) - 0.5;
  CHECK_THAT(fz::inspect(x.transpose({0, 2, 1}) - 0.5).variant, Catch::StartsWith("tiles, rank 3"));
  std::vector<double> want;
  for (std::int64_t b = 0; b < N; ++b)
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = 0; j < C; ++j) want.push_back(hx[static_cast<std::size_t>((b * C + j) * R + i)] - 0.5);
  CHECK(test::mismatches(y.to_host(), want, fz::DType::float64) == 0);
  const auto hh = test::random<fz::bfloat16>(static_cast<std::size_t>(C * R), -2, 2, 65);
  const auto h = fz::asarray(hh, {C, R});
  fz::Array<fz::bfloat16> hy = h.transpose() * 3.f;
  std::vector<double> want_h;
  for (std::int64_t i = 0; i < R; ++i)
    for (std::int64_t j = 0; j < C; ++j) want_h.push_back(double(float(hh[static_cast<std::size_t>(j * R + i)])) * 3.0);
  CHECK(test::mismatches(hy.to_host(), want_h, fz::DType::bfloat16) == 0);
  // in place through the transpose: x = x + x.T on a square matrix is computed aside (NumPy's answer)
  const auto hs = test::random<float>(40 * 40, -1, 1, 66);
  fz::Array<float> sq = fz::asarray(hs, {40, 40});
  sq = sq + sq.transpose();
  std::vector<double> want_s;
  for (int i = 0; i < 40; ++i)
    for (int j = 0; j < 40; ++j)
      want_s.push_back(double(hs[static_cast<std::size_t>(i * 40 + j)]) +
                       double(hs[static_cast<std::size_t>(j * 40 + i)]));
  CHECK(test::mismatches(sq.to_host(), want_s, fz::DType::float32) == 0);
}

TEST_CASE("outputs that overlap inputs get NumPy's answer", "[gpu][elementwise]") {
  std::vector<float> h = {0, 1, 2, 3, 4, 5, 6, 7};
  fz::Array<float> x = fz::asarray(h);
  x = x.slice({{std::nullopt, std::nullopt, -1}}) + 1.f;  // all reads before any write
  CHECK(x.to_host() == std::vector<float>{8, 7, 6, 5, 4, 3, 2, 1});

  fz::Array<float> sq = fz::asarray(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  sq += sq.transpose();
  CHECK(sq.to_host() == std::vector<float>{2, 6, 10, 6, 10, 14, 10, 14, 18});

  fz::Array<float> y = fz::asarray(h);
  fz::reset_stats();
  y = y * 2.f + y;  // the same view in and out: one kernel, no temporary
  CHECK(fz::stats().launches == 1);
  CHECK(y.to_host() == std::vector<float>{0, 3, 6, 9, 12, 15, 18, 21});

  fz::Array<float> z = fz::asarray(h);
  auto lo = z.slice({{0, 4}}), hi = z.slice({{4, 8}});
  lo = hi * 1.f;  // disjoint halves of one buffer: no copy needed, still right
  CHECK(z.to_host() == std::vector<float>{4, 5, 6, 7, 4, 5, 6, 7});
}

TEST_CASE("NumPy semantics users rely on", "[gpu][elementwise]") {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  fz::Array<float> a = fz::asarray(std::vector<float>{1, nan, 3, -inf});
  fz::Array<float> b = fz::asarray(std::vector<float>{nan, 2, 1, 0});
  auto mx = fz::eval(fz::maximum(a, b)).to_host();
  CHECK((std::isnan(mx[0]) && std::isnan(mx[1]) && mx[2] == 3 && mx[3] == 0));
  auto fm = fz::eval(fz::fmax(a, b)).to_host();
  CHECK(fm == std::vector<float>{1, 2, 3, 0});
  CHECK(fz::eval(fz::clip(fz::arange<float>(6), 1.5f, 3.f)).to_host() == std::vector<float>{1.5f, 1.5f, 2, 3, 3, 3});
  CHECK(fz::eval(fz::where(fz::arange<int>(4) % 2 == 0, 10, fz::arange<int>(4))).to_host() ==
        std::vector<int>{10, 1, 10, 3});
  auto mn = fz::eval(fz::minimum(a, b)).to_host();
  CHECK((std::isnan(mn[0]) && std::isnan(mn[1]) && mn[2] == 1 && mn[3] == -inf));

  fz::Array<std::int32_t> i = fz::asarray(std::vector<std::int32_t>{7, -7, 7, -7, 5});
  fz::Array<std::int32_t> j = fz::asarray(std::vector<std::int32_t>{2, 2, -2, -2, 0});
  CHECK(fz::eval(i / j).to_host() ==
        std::vector<double>{3.5, -3.5, -3.5, 3.5, std::numeric_limits<double>::infinity()});
  CHECK(fz::eval(fz::floor_divide(i, j)).to_host() == std::vector<std::int32_t>{3, -4, -4, 3, 0});
  CHECK(fz::eval(i % j).to_host() == std::vector<std::int32_t>{1, 1, -1, -1, 0});
  CHECK(fz::eval(fz::fmod(i, j)).to_host() == std::vector<std::int32_t>{1, -1, 1, -1, 0});
  fz::Array<double> fi = fz::cast<double>(i), fj = fz::cast<double>(j);
  auto fd = fz::eval(fz::floor_divide(fi, fj)).to_host();
  CHECK((fd[0] == 3 && fd[1] == -4 && fd[2] == -4 && fd[3] == 3 && std::isinf(fd[4])));
  auto fr = fz::eval(fz::remainder(fi, fj)).to_host();
  CHECK((fr[0] == 1 && fr[1] == 1 && fr[2] == -1 && fr[3] == -1 && std::isnan(fr[4])));

  // inf and nan constants survive for every float width (scalars are arguments, never literals)
  fz::Array<fz::half> h = fz::full<fz::half>({2}, fz::half(1.f));
  fz::Array<fz::bfloat16> bf = fz::full<fz::bfloat16>({2}, fz::bfloat16(1.f));
  fz::Array<double> d = fz::full<double>({2}, 1.0);
  fz::Array<float> f = fz::full<float>({2}, 1.f);
  CHECK(std::isinf(float(fz::eval(h * inf).to_host()[0])));
  CHECK(std::isnan(float(fz::eval(h + nan).to_host()[0])));
  CHECK(std::isinf(float(fz::eval(bf * -inf).to_host()[0])));
  CHECK(std::isnan(float(fz::eval(bf - nan).to_host()[0])));
  CHECK(std::isinf(fz::eval(f / 0.f).to_host()[0]));
  CHECK(std::isnan(fz::eval(d * std::nan("")).to_host()[0]));
  CHECK(std::isinf(fz::eval(d + std::numeric_limits<double>::infinity()).to_host()[1]));
}

TEST_CASE("half and bfloat16 compute in float and round once, on store", "[gpu][elementwise]") {
  fz::Array<fz::half> one = fz::full<fz::half>({4}, fz::half(1.f));
  fz::Array<fz::half> tiny = fz::full<fz::half>({4}, fz::half(1e-4f));
  // With a rounding after every op, 1 + 1e-4 would round to 1 and the result would be 0.
  const float r = fz::eval((one + tiny) - one).to_host()[0];
  CHECK(r == Approx(float(fz::half(1e-4f))).epsilon(1e-3));
  fz::Array<fz::bfloat16> b1 = fz::full<fz::bfloat16>({4}, fz::bfloat16(1.f));
  fz::Array<fz::bfloat16> bt = fz::full<fz::bfloat16>({4}, fz::bfloat16(1e-3f));
  CHECK(float(fz::eval((b1 + bt) - b1).to_host()[0]) == Approx(float(fz::bfloat16(1e-3f))).epsilon(1e-2));
  // An explicit cast does round.
  CHECK(float(fz::eval(fz::cast<fz::half>(one + tiny) - one).to_host()[0]) == 0.f);
}

TEST_CASE("new sizes and new constants never recompile", "[gpu][elementwise]") {
  fz::Array<float> a = fz::full<float>({1000}, 1.f);
  fz::Array<float> r = a * 2.f + 1.f;  // warm: compiles (or loads) once
  fz::reset_stats();
  for (std::int64_t n : {1000, 5000, 123457, 1 << 20}) {
    fz::Array<float> b = fz::full<float>({n}, 2.f);
    fz::Array<float> c = b * 3.5f + static_cast<float>(n);
    CHECK(c.slice({{n - 1, n}}).item() == 7.f + static_cast<float>(n));
  }
  CHECK(fz::stats().compiles == 0);
  CHECK(fz::stats().disk_hits == 0);
}

TEST_CASE("arrays over 2^31 elements use 64-bit indexing", "[gpu][elementwise][large]") {
  const std::int64_t n = (std::int64_t{1} << 31) + 17;
  fz::Array<std::int8_t> x = fz::full<std::int8_t>({n}, 3);
  x.slice({{n - 1, n}}) = fz::full<std::int8_t>({1}, 5) * 1;  // mark the last element
  fz::Array<std::int8_t> y = x * 2 + 1;
  CHECK(fz::inspect(x * 2 + 1).variant.find("64-bit index") != std::string::npos);
  CHECK(y.slice({{0, 3}}).to_host() == std::vector<std::int8_t>{7, 7, 7});
  CHECK(y.slice({{(std::int64_t{1} << 31) - 2, (std::int64_t{1} << 31) + 2}}).to_host() ==
        std::vector<std::int8_t>{7, 7, 7, 7});
  CHECK(y.slice({{n - 2, n}}).to_host() == std::vector<std::int8_t>{7, 11});
}

TEST_CASE("a cast to a 16-bit float stored as that dtype rounds once, to the same bits as the host",
          "[gpu][elementwise]") {
  auto hx =
      test::random<float>(4099, -70000, 70000, 61);  // beyond half's range too: inf on store (one multiply: no FMA)
  hx[5] = std::numeric_limits<float>::quiet_NaN();
  const auto x = fz::asarray(hx);
  const std::vector<fz::bfloat16> b = fz::Array<fz::bfloat16>(fz::cast<fz::bfloat16>(x * 1.0001f)).to_host();
  const std::vector<fz::half> h = fz::Array<fz::half>(fz::cast<fz::half>(x * 0.999f)).to_host();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < hx.size(); ++i) {
    if (i == 5) {
      CHECK(std::isnan(float(b[i])));
      CHECK(std::isnan(float(h[i])));
      continue;
    }
    wrong += b[i].bits != fz::bfloat16(hx[i] * 1.0001f).bits;
    wrong += h[i].bits != fz::half(hx[i] * 0.999f).bits;
  }
  CHECK(wrong == 0);
}
