// SPDX-License-Identifier: Apache-2.0
// fz::concatenate, fz::stack and fz::pad on the GPU against host references: every axis, arrays and
// expressions as pieces (one kernel for the whole join and the math around it), mixed and 16-bit dtypes,
// views as pieces (transposed, strided, reversed, broadcast), empty pieces, pieces computed first, reductions
// of a join, vectors of many arrays, fz::Unfused, writing over a piece, and the errors for shapes that do not join.
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

/// The elements of `e`, evaluated, as doubles.
template <class E> std::vector<double> host(const E& e) {
  std::vector<double> out;
  if constexpr (fz::ArrayLike<E>) {
    for (auto v : e.to_host()) out.push_back(static_cast<double>(static_cast<float>(v)));
  } else {
    for (auto v : fz::eval(e).to_host()) out.push_back(static_cast<double>(v));
  }
  return out;
}

}  // namespace

TEST_CASE("concatenate: every axis, arrays and expressions, one kernel", "[gpu][joining]") {
  const fz::Shape sa{4, 5, 6};
  const auto ha = test::random<float>(120, -1, 1, 1), hb = test::random<float>(120, -1, 1, 2);
  const auto a = fz::asarray(ha, sa), b = fz::asarray(hb, sa);
  std::vector<double> b2;
  for (float v : hb) b2.push_back(static_cast<double>(static_cast<float>(v * 2.f)));
  for (int axis = 0; axis < 3; ++axis) {
    INFO("axis " << axis);
    fz::reset_stats();
    auto c = fz::empty<float>({1});
    c = fz::concatenate(axis, a, b * 2.f);
    CHECK(fz::stats().launches == 1);
    fz::Shape want_shape = sa;
    want_shape[axis] *= 2;
    CHECK(c.shape() == want_shape);
    CHECK(test::mismatches(c.to_host(), concat_ref({doubles(ha), b2}, {sa, sa}, axis), fz::DType::float32) == 0);
    // three pieces of different extents along the axis, the middle one of extent 1
    fz::Shape s1 = sa, s3 = sa;
    s1[axis] = 1;
    s3[axis] = 3;
    const auto h1 = test::random<float>(static_cast<std::size_t>(fz::numel(s1)), -1, 1, 3 + axis);
    const auto h3 = test::random<float>(static_cast<std::size_t>(fz::numel(s3)), -1, 1, 6 + axis);
    const auto p1 = fz::asarray(h1, s1), p3 = fz::asarray(h3, s3);
    CHECK(test::mismatches(fz::eval(fz::concatenate(axis, a, p1, p3)).to_host(),
                           concat_ref({doubles(ha), doubles(h1), doubles(h3)}, {sa, s1, s3}, axis),
                           fz::DType::float32) == 0);
    // math in every piece, an empty one last (its array is never read: found by the fuzzer)
    fz::Shape s0 = sa;
    s0[axis] = 0;
    std::vector<double> h3exp;
    for (float v : h3) h3exp.push_back(std::exp(static_cast<double>(v)));
    CHECK(test::mismatches(fz::eval(fz::concatenate(axis, fz::abs(a), fz::exp(p3), fz::sqrt(fz::zeros<float>(s0)))).to_host(),
                           concat_ref({[&] { std::vector<double> r; for (float v : ha) r.push_back(std::fabs(v)); return r; }(),
                                       h3exp, {}},
                                      {sa, s3, s0}, axis),
                           fz::DType::float32) == 0);
  }
}

TEST_CASE("concatenate fuses with the math around it and inside each piece", "[gpu][joining]") {
  const std::int64_t R = 37, C1 = 300, C2 = 129;  // (odd sizes: pieces that end inside 16-byte vectors)
  const auto hx = test::random<float>(R * C1, -2, 2, 21), hy = test::random<float>(R * C2, -2, 2, 22);
  const auto hb = test::random<float>(C1 + C2, -1, 1, 23);
  const auto x = fz::asarray(hx, {R, C1}), y = fz::asarray(hy, {R, C2}), bias = fz::asarray(hb, {C1 + C2});
  auto out = fz::full<float>({R, C1 + C2}, std::nanf(""));  // poisoned
  fz::reset_stats();
  out = fz::concatenate(1, x * 2.f, fz::exp(y)) * 3.f + bias;
  CHECK(fz::stats().launches == 1);
  // the bytes it moves: each piece's own elements (not the join's), the bias row, the result
  CHECK(fz::stats().min_bytes == static_cast<std::uint64_t>(4 * (R * C1 + R * C2 + (C1 + C2) + R * (C1 + C2))));
  std::vector<double> want;
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C1 + C2; ++c) {
      const double v = c < C1 ? static_cast<double>(hx[r * C1 + c]) * 2 : std::exp(static_cast<double>(hy[r * C2 + c - C1]));
      want.push_back(v * 3 + hb[c]);
    }
  CHECK(test::mismatches(out.to_host(), want, fz::DType::float32) == 0);
  // along the first axis, into a larger linear kernel (no division: one period spans the result)
  const auto top = fz::asarray(test::random<float>(1000 * 4, -1, 1, 24), {1000, 4});
  const auto bottom = fz::asarray(test::random<float>(3 * 4, -1, 1, 25), {3, 4});
  std::vector<double> want0;
  for (float v : top.to_host()) want0.push_back(std::sqrt(std::fabs(static_cast<double>(v))));
  for (float v : bottom.to_host()) want0.push_back(std::sqrt(std::fabs(static_cast<double>(v))));
  CHECK(test::mismatches(fz::eval(fz::sqrt(fz::abs(fz::concatenate(0, top, bottom)))).to_host(), want0,
                         fz::DType::float32) == 0);
}

TEST_CASE("concatenate of views, broadcasts, mixed and 16-bit dtypes, empty pieces", "[gpu][joining]") {
  const auto ha = test::random<float>(4 * 5 * 6, -1, 1, 31);
  const auto a = fz::asarray(ha, {4, 5, 6});
  // a transposed view next to an empty piece
  const auto t = fz::eval(fz::concatenate(0, a.transpose(), fz::zeros<float>({0, 5, 4})));
  CHECK(t.shape() == fz::Shape{6, 5, 4});
  CHECK(test::mismatches(t.to_host(), doubles(a.transpose().to_host()), fz::DType::float32) == 0);
  // a strided slice and a reversed one along the axis
  const auto s = a.slice({fz::Slice{0, 4, 2}});
  const auto r = a.slice({fz::Slice{3, -5, -1}});
  std::vector<double> want = doubles(s.to_host());
  for (double v : doubles(r.to_host())) want.push_back(v);
  CHECK(test::mismatches(fz::eval(fz::concatenate(0, s, r)).to_host(), want, fz::DType::float32) == 0);
  // a piece that broadcasts: a row plus a column, beside an array
  const auto row = fz::asarray(std::vector<float>{1, 2, 3}, {1, 3});
  const auto col = fz::asarray(std::vector<float>{10, 20}, {2, 1});
  const auto m = fz::asarray(std::vector<float>{-1, -2, -3}, {1, 3});
  CHECK(host(fz::concatenate(0, row + col, m)) == std::vector<double>{11, 12, 13, 21, 22, 23, -1, -2, -3});
  // a join broadcast into a larger result: along an axis after its own (its place is found in the kernel's
  // index space, not its own shape), and along its own axis when it has extent 1 there
  const auto top = fz::asarray(std::vector<float>{1, 2}, {2, 1}), low = fz::asarray(std::vector<float>{3, 4, 5}, {3, 1});
  const auto wide = fz::asarray(std::vector<float>{0, 10, 20, 30}, {4});
  std::vector<double> want_wide;
  for (double r : {1, 2, 3, 4, 5})
    for (double c : {0, 10, 20, 30}) want_wide.push_back(r + c);
  CHECK(host(fz::concatenate(0, top, low) + wide) == want_wide);
  CHECK(host(fz::concatenate(1, top, fz::zeros<float>({2, 0})) * fz::ones<float>({3, 2, 4})) ==
        std::vector<double>{1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1, 2, 2, 2, 2});
  // mixed dtypes promote as NumPy's
  const auto mixed = fz::concatenate(0, fz::asarray(std::vector<std::int32_t>{1, 2}, {2}),
                                     fz::asarray(std::vector<double>{0.5}, {1}));
  static_assert(decltype(mixed)::dtype == fz::DType::float64);
  CHECK(fz::eval(mixed).to_host() == std::vector<double>{1, 2, 0.5});
  // 16-bit floats, an odd number of them per piece
  const auto h16 = fz::eval(fz::asarray(std::vector<float>{1.5f, -2.25f, 3.f}, {3}).astype<fz::bfloat16>());
  const auto g16 = fz::eval(fz::asarray(std::vector<float>{0.5f, 7.f}, {2}).astype<fz::bfloat16>());
  const auto j16 = fz::eval(fz::concatenate(0, h16, g16 * 2));
  static_assert(std::is_same_v<decltype(j16)::value_type, fz::bfloat16>);
  CHECK(host(j16) == std::vector<double>{1.5, -2.25, 3, 1, 14});
  // bool and integer pieces
  const auto ints = fz::asarray(std::vector<std::int64_t>{5, -6, 7}, {3});
  CHECK(host(fz::concatenate(0, ints > 0, ints < 0)) == std::vector<double>{1, 0, 1, 0, 1, 0});
}

TEST_CASE("pieces that need more than their own elements are computed first; reductions of a join", "[gpu][joining]") {
  const auto hx = test::random<float>(6 * 8, -1, 1, 41);
  const auto x = fz::asarray(hx, {6, 8});
  // a reduction as a piece: the row sums next to the rows
  fz::reset_stats();
  const auto j = fz::eval(fz::concatenate(1, x, fz::sum(x, 1, true)));
  CHECK(fz::stats().launches == 2);
  std::vector<double> want;
  for (int r = 0; r < 6; ++r) {
    double total = 0;
    for (int c = 0; c < 8; ++c) want.push_back(hx[r * 8 + c]), total += hx[r * 8 + c];
    want.push_back(total);
  }
  CHECK(test::mismatches(j.to_host(), want, fz::DType::float32) == 0);
  // a join inside a join (computed first), and fz::arange as a piece
  const auto nested = fz::eval(fz::concatenate(0, fz::concatenate(1, x, x), fz::concatenate(1, x * 0.f, x)));
  CHECK(nested.shape() == fz::Shape{12, 16});
  const auto hn = nested.to_host();
  CHECK(hn[0] == hx[0]);
  CHECK(hn[8] == hx[0]);
  CHECK(hn[6 * 16 + 0] == 0.f);
  CHECK(hn[6 * 16 + 8 + 3] == hx[3]);
  CHECK(host(fz::concatenate(0, fz::arange<std::int64_t>(3), fz::arange<std::int64_t>(2))) ==
        std::vector<double>{0, 1, 2, 0, 1});
  // whole and per-axis reductions of a join
  double total = 0;
  for (float v : hx) total += 3.0 * v;
  CHECK(fz::eval(fz::sum(fz::concatenate(0, x, x * 2.f))).item() == Approx(total).epsilon(1e-5));
  const auto per_col = fz::eval(fz::max(fz::concatenate(0, x, -x), 0)).to_host();
  for (int c = 0; c < 8; ++c) {
    double best = -1e9;
    for (int r = 0; r < 6; ++r) best = std::max({best, static_cast<double>(hx[r * 8 + c]), -static_cast<double>(hx[r * 8 + c])});
    CHECK(per_col[static_cast<std::size_t>(c)] == static_cast<float>(best));
  }
}

TEST_CASE("stack along every axis, vectors of many arrays, fz::Unfused, writing over a piece", "[gpu][joining]") {
  const auto ha = test::random<float>(6, -1, 1, 11), hb = test::random<float>(6, -1, 1, 12);
  const auto a = fz::asarray(ha, {2, 3}), b = fz::asarray(hb, {2, 3});
  fz::reset_stats();
  const auto s0 = fz::eval(fz::stack(0, a, b + 1.f));
  CHECK(fz::stats().launches == 1);
  CHECK(s0.shape() == fz::Shape{2, 2, 3});
  std::vector<double> want0;
  for (float v : ha) want0.push_back(v);
  for (float v : hb) want0.push_back(static_cast<double>(v + 1.f));
  CHECK(test::mismatches(s0.to_host(), want0, fz::DType::float32) == 0);
  const auto s2 = fz::eval(fz::stack(-1, a, b));
  CHECK(s2.shape() == fz::Shape{2, 3, 2});
  std::vector<double> want2;
  for (std::size_t i = 0; i < 6; ++i) want2.push_back(ha[i]), want2.push_back(hb[i]);
  CHECK(test::mismatches(s2.to_host(), want2, fz::DType::float32) == 0);
  const auto s1 = fz::eval(fz::stack(1, a, a, b));
  CHECK(s1.shape() == fz::Shape{2, 3, 3});
  CHECK(s1.to_host()[3 + 2] == ha[2]);
  CHECK(s1.to_host()[6 + 1] == hb[1]);

  // vectors: 11 arrays of different extents (two kernels of up to 8 pieces), and a stack of 11
  std::vector<fz::Array<float>> many;
  std::vector<std::vector<double>> hosts;
  std::vector<fz::Shape> shapes;
  for (int k = 0; k < 11; ++k) {
    const fz::Shape sk{2, k % 3, 3};
    const auto hk = test::random<float>(static_cast<std::size_t>(fz::numel(sk)), -1, 1, 100 + k);
    many.push_back(fz::asarray(hk, sk));
    hosts.push_back(doubles(hk));
    shapes.push_back(sk);
  }
  fz::reset_stats();
  const auto joined = fz::concatenate(many, 1);
  CHECK(fz::stats().launches == 2);
  CHECK(test::mismatches(joined.to_host(), concat_ref(hosts, shapes, 1), fz::DType::float32) == 0);
  std::vector<fz::Array<float>> same(11, fz::Array<float>(a));
  for (int k = 0; k < 11; ++k) same[static_cast<std::size_t>(k)] = a * static_cast<float>(k);
  const auto stacked = fz::stack(same, 2).to_host();
  for (int k = 0; k < 11; ++k) CHECK(stacked[static_cast<std::size_t>(4 * 11 + k)] == ha[4] * static_cast<float>(k));

  // fz::Unfused: the same values
  const auto fused = fz::eval(fz::concatenate(1, a * 2.f, fz::exp(b)) + 1.f).to_host();
  {
    const fz::Unfused unfused;
    CHECK(fz::eval(fz::concatenate(1, a * 2.f, fz::exp(b)) + 1.f).to_host() == fused);
  }
  // writing a join of two halves of x back into x, swapped: read before written (a copy where they overlap)
  auto x = fz::asarray(std::vector<float>{1, 2, 3, 4, 5, 6}, {6});
  x = fz::concatenate(0, x.slice({fz::Slice{3, 6, 1}}), x.slice({fz::Slice{0, 3, 1}}));
  CHECK(x.to_host() == std::vector<float>{4, 5, 6, 1, 2, 3});
}

/// NumPy's constant pad of row-major `x` (shape `s`) by `widths` with `fill`.
std::vector<double> pad_ref(const std::vector<double>& x, const fz::Shape& s,
                            const std::vector<std::pair<std::int64_t, std::int64_t>>& widths, double fill) {
  fz::Shape out = s;
  for (int d = 0; d < s.size(); ++d) out[d] += widths[static_cast<std::size_t>(d)].first + widths[static_cast<std::size_t>(d)].second;
  std::vector<double> r(static_cast<std::size_t>(fz::numel(out)), fill);
  for (std::int64_t i = 0; i < fz::numel(s); ++i) {
    std::int64_t rest = i, at = 0, scale = 1;
    for (int d = s.size() - 1; d >= 0; --d) {
      at += (rest % s[d] + widths[static_cast<std::size_t>(d)].first) * scale;
      rest /= s[d], scale *= out[d];
    }
    r[static_cast<std::size_t>(at)] = x[static_cast<std::size_t>(i)];
  }
  return r;
}

TEST_CASE("pad: one kernel with the math around it, every padded axis, dtypes, views, empty operands", "[gpu][joining]") {
  const auto ha = test::random<float>(6, -1, 1, 11);
  const auto a = fz::asarray(ha, {2, 3});
  fz::Array<float> p = fz::full<float>({3, 6}, 9.f);  // poisoned
  fz::reset_stats();
  p = fz::pad(a * 2.f, {{1, 0}, {2, 1}}, -1);
  CHECK(fz::stats().launches == 1);
  std::vector<double> twice;
  for (float v : ha) twice.push_back(static_cast<double>(v * 2.f));
  CHECK(test::mismatches(p.to_host(), pad_ref(twice, {2, 3}, {{1, 0}, {2, 1}}, -1), fz::DType::float32) == 0);

  // 3-D int32, every axis padded, the math reading it in the same kernel
  const fz::Shape s3{3, 4, 5};
  const auto hi = test::random<std::int32_t>(60, -100, 100, 12);
  const auto xi = fz::asarray(hi, s3);
  const std::vector<std::pair<std::int64_t, std::int64_t>> w3{{2, 1}, {0, 3}, {1, 1}};
  std::vector<double> di(hi.begin(), hi.end());
  auto want3 = pad_ref(di, s3, w3, 7);
  for (double& v : want3) v = v * 3 + 1;
  fz::reset_stats();
  fz::Array<std::int32_t> q = fz::pad(xi, w3, 7) * 3 + 1;
  CHECK(fz::stats().launches == 1);
  CHECK(q.shape() == fz::Shape{6, 7, 7});
  CHECK(test::mismatches(q.to_host(), want3, fz::DType::int32) == 0);
  CHECK_THAT(fz::inspect(fz::pad(xi, w3, 7) * 3 + 1).source, Catch::Contains("_lo <= fz_c"));  // (a rows kernel)

  // four padded axes in one kernel; a fifth is refused with the way out
  const auto h4 = test::random<float>(2 * 3 * 2 * 2 * 3, -1, 1, 13);
  const auto x4 = fz::asarray(h4, {2, 3, 2, 2, 3});
  const std::vector<std::pair<std::int64_t, std::int64_t>> w4{{0, 0}, {1, 0}, {1, 2}, {0, 1}, {2, 2}};
  fz::Array<float> p4 = fz::pad(x4, w4, 0.5);
  CHECK(test::mismatches(p4.to_host(), pad_ref(doubles(h4), {2, 3, 2, 2, 3}, w4, 0.5), fz::DType::float32) == 0);
  CHECK_THROWS_WITH(fz::pad(x4, {{1, 0}, {1, 0}, {1, 2}, {0, 1}, {2, 2}}), Catch::Contains("second fz::pad"));
  fz::Array<float> p5 = fz::pad(fz::pad(x4, {{1, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}}, 0.5), w4, 0.5);
  CHECK(test::mismatches(p5.to_host(), pad_ref(pad_ref(doubles(h4), {2, 3, 2, 2, 3}, {{1, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}}, 0.5),
                                                 {3, 3, 2, 2, 3}, w4, 0.5), fz::DType::float32) == 0);

  // a 16-bit operand keeps its dtype; a transposed view; a reduction padded (computed first)
  const auto hh = test::random<fz::half>(12, -1, 1, 14);
  fz::Array<fz::half> ph = fz::pad(fz::asarray(hh, {3, 4}).transpose(), {{1, 1}, {0, 2}}, 0.25);
  std::vector<double> th;  // the transpose
  for (int c = 0; c < 4; ++c)
    for (int r = 0; r < 3; ++r) th.push_back(test::as_double(hh[static_cast<std::size_t>(r * 4 + c)]));
  CHECK(test::mismatches(ph.to_host(), pad_ref(th, {4, 3}, {{1, 1}, {0, 2}}, 0.25), fz::DType::float16) == 0);
  fz::reset_stats();
  fz::Array<float> ps = fz::pad(fz::sum(a, 1), {{2, 1}}, 4);
  CHECK(fz::stats().launches == 2);
  CHECK(test::mismatches(ps.to_host(), {4, 4, double(ha[0]) + ha[1] + ha[2], double(ha[3]) + ha[4] + ha[5], 4},
                         fz::DType::float32) == 0);

  // an empty operand: all fill; a pad broadcast into a larger result; nothing padded
  fz::Array<float> pe = fz::pad(fz::zeros<float>({0, 3}), {{1, 1}, {0, 0}}, 2);
  CHECK(pe.to_host() == std::vector<float>(6, 2.f));
  const auto row = fz::asarray(std::vector<float>{1, 2, 3}, {1, 3});
  const auto m = fz::asarray(test::random<float>(20, -1, 1, 15), {4, 5});
  fz::Array<float> pb = fz::pad(row, {{0, 0}, {1, 1}}) + m;
  const auto hm = m.to_host();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 5; ++c) {
      const float want = (c >= 1 && c <= 3 ? static_cast<float>(c) : 0.f) + hm[static_cast<std::size_t>(r * 5 + c)];
      CHECK(pb.to_host()[static_cast<std::size_t>(r * 5 + c)] == want);
    }
  fz::Array<float> same = fz::pad(a, {{0, 0}, {0, 0}});
  CHECK(same.to_host() == ha);
  {
    const fz::Unfused unfused;
    CHECK(fz::eval(fz::pad(a * 2.f, {{1, 0}, {2, 1}}, -1)).to_host() == p.to_host());
  }
  CHECK_THROWS_AS(fz::pad(a, {{1, 1}}), fz::ShapeError);
}

TEST_CASE("joins in a rows kernel: column limits a row, a pad's box as one interval, two joins in one kernel",
          "[gpu][joining]") {
  // pads of both axes of rows of 4,096 (the operand off the output's vectors, or on them: {3, 0}, {0, 4}, whose
  // leading axis's limits are 0 or the whole row) and of three axes of a 3-d array, each against the host
  const fz::Shape s{37, 4096};
  const auto hx = test::random<float>(static_cast<std::size_t>(fz::numel(s)), -2, 2, 21);
  const auto x = fz::asarray(hx, s);
  for (const auto& w : std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>>{
           {{1, 1}, {2, 2}}, {{3, 0}, {0, 4}}, {{0, 2}, {4, 0}}, {{5, 5}, {1, 3}}}) {
    CAPTURE(w[0].first, w[0].second, w[1].first, w[1].second);
    const auto info = fz::inspect(fz::pad(x * 2.f, w, -0.5) + 1.f);
    CHECK_THAT(info.variant, Catch::StartsWith("rows"));
    fz::Array<float> got = fz::full<float>({s[0] + w[0].first + w[0].second, s[1] + w[1].first + w[1].second}, 7.f);
    got = fz::pad(x * 2.f, w, -0.5) + 1.f;
    // x * 2 + 1 inside the box (where a pad of ones is 1), the fill + 1 outside
    const std::vector<double> inside = pad_ref(std::vector<double>(hx.size(), 1.0), s, w, 0.0);
    const std::vector<double> plain = pad_ref(doubles(hx), s, w, 0.0);
    std::vector<double> want(inside.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      want[i] = inside[i] != 0 ? static_cast<double>(static_cast<float>(plain[i]) * 2.f + 1.f) : -0.5 + 1.0;
    CHECK(test::mismatches(got.to_host(), want, fz::DType::float32) == 0);
  }
  const fz::Shape s3{3, 5, 64};
  const auto h3 = test::random<float>(static_cast<std::size_t>(fz::numel(s3)), -2, 2, 22);
  const std::vector<std::pair<std::int64_t, std::int64_t>> w3{{1, 2}, {0, 3}, {4, 4}};
  fz::Array<float> p3 = fz::pad(fz::asarray(h3, s3), w3, 3);
  CHECK(test::mismatches(p3.to_host(), pad_ref(doubles(h3), s3, w3, 3), fz::DType::float32) == 0);

  // two joins in one kernel: a pad and a concatenate along the last axis, rows whose limits are whole vectors
  const auto ha = test::random<float>(16 * 40, -1, 1, 23), hb = test::random<float>(16 * 24, -1, 1, 24);
  const auto hc = test::random<float>(14 * 60, -1, 1, 25);
  const auto a = fz::asarray(ha, {16, 40}), b = fz::asarray(hb, {16, 24}), c = fz::asarray(hc, {14, 60});
  const auto both = fz::concatenate(1, a, fz::exp(b)) - fz::pad(c, {{1, 1}, {2, 2}}, 0.25);
  CHECK(fz::inspect(both).kernels == 1);
  fz::reset_stats();
  fz::Array<float> got = both;
  CHECK(fz::stats().launches == 1);
  std::vector<double> eb;
  for (float v : hb) eb.push_back(static_cast<double>(std::exp(v)));
  const std::vector<double> joined = concat_ref({doubles(ha), eb}, {{16, 40}, {16, 24}}, 1);
  const std::vector<double> padded = pad_ref(doubles(hc), {14, 60}, {{1, 1}, {2, 2}}, 0.25);
  std::vector<double> want(joined.size());
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = joined[i] - padded[i];
  CHECK(test::mismatches(got.to_host(), want, fz::DType::float32) == 0);
}

TEST_CASE("joins whose pieces lie on vector boundaries: a piece chosen and loaded per vector", "[gpu][joining]") {
  auto per_vector = [](const fz::KernelInfo& k) { return k.variant.find("chosen per vector") != std::string::npos; };
  // eight float32 pieces of 64 columns, through the vector API and as one expression, into a poisoned output
  std::vector<std::vector<double>> parts;
  std::vector<fz::Array<float>> eight;
  for (int k = 0; k < 8; ++k) {
    const auto h = test::random<float>(33 * 64, -3, 3, 40 + k);
    parts.push_back(doubles(h));
    eight.push_back(fz::asarray(h, {33, 64}));
  }
  const std::vector<double> want8 = concat_ref(parts, std::vector<fz::Shape>(8, fz::Shape{33, 64}), 1);
  CHECK(per_vector(fz::inspect(fz::concatenate(1, eight[0], eight[1], eight[2], eight[3], eight[4], eight[5],
                                               eight[6], eight[7]))));
  CHECK(test::mismatches(fz::concatenate(eight, 1).to_host(), want8, fz::DType::float32) == 0);
  fz::Array<float> into = fz::full<float>({33, 512}, 1e30f);
  into = fz::concatenate(1, eight[0], eight[1], eight[2], eight[3], eight[4], eight[5], eight[6], eight[7]);
  CHECK(test::mismatches(into.to_host(), want8, fz::DType::float32) == 0);

  // bfloat16 pieces with math in them and a bias row around them (8-wide vectors, the bias loaded as one)
  const auto ha = test::random<float>(19 * 64, -2, 2, 50), hb = test::random<float>(19 * 24, -2, 2, 51);
  const auto hbias = test::random<float>(88, -1, 1, 52);
  const auto a = fz::eval(fz::asarray(ha, {19, 64}).astype<fz::bfloat16>());
  const auto b = fz::eval(fz::asarray(hb, {19, 24}).astype<fz::bfloat16>());
  const auto bias = fz::eval(fz::asarray(hbias, {88}).astype<fz::bfloat16>());
  const auto e16 = fz::concatenate(1, a * 2.f, fz::exp(b)) + bias;
  CHECK(per_vector(fz::inspect(e16)));
  fz::Array<fz::bfloat16> got16 = fz::full<fz::bfloat16>({19, 88}, fz::bfloat16(-7.f));
  got16 = e16;
  {
    const auto va = host(a), vb = host(b), vbias = host(bias);
    std::vector<double> want;
    for (int r = 0; r < 19; ++r)
      for (int c = 0; c < 88; ++c)
        want.push_back((c < 64 ? 2.0 * va[r * 64 + c] : std::exp(vb[r * 24 + c - 64])) + vbias[c]);
    CHECK(test::mismatches(got16.to_host(), want, fz::DType::bfloat16) == 0);
  }

  // a piece broadcast inside (a column per row plus a row), float64 (2-wide vectors) with a where in a piece
  const auto hx = test::random<double>(12 * 10, -1, 1, 53), hcol = test::random<double>(12, -1, 1, 54);
  const auto hrow = test::random<double>(6, -1, 1, 55);
  const auto x = fz::asarray(hx, {12, 10}), col = fz::asarray(hcol, {12, 1}), row = fz::asarray(hrow, {6});
  const auto e64 = fz::concatenate(1, fz::where(x > 0.0, x, -x * 3.0), col + row);
  CHECK(per_vector(fz::inspect(e64)));
  fz::Array<double> got64 = fz::full<double>({12, 16}, 1e300);
  got64 = e64;
  {
    std::vector<double> want;
    for (int r = 0; r < 12; ++r)
      for (int c = 0; c < 16; ++c) {
        const double v = c < 10 ? hx[r * 10 + c] : 0;
        want.push_back(c < 10 ? (v > 0 ? v : -v * 3.0) : hcol[r] + hrow[c - 10]);
      }
    CHECK(test::mismatches(got64.to_host(), want, fz::DType::float64) == 0);
  }

  // int32 pads by whole vectors (4 columns each side, a row above) and not (3): both against the host
  const auto hi = test::random<std::int32_t>(9 * 16, -50, 50, 56);
  const auto xi = fz::asarray(hi, {9, 16});
  std::vector<double> di(hi.begin(), hi.end());
  for (std::int64_t w : {4, 3}) {
    CAPTURE(w);
    const std::vector<std::pair<std::int64_t, std::int64_t>> widths{{1, 0}, {w, w}};
    CHECK(per_vector(fz::inspect(fz::pad(xi + 1, widths, 9))) == (w == 4));
    fz::Array<std::int32_t> p = fz::full<std::int32_t>({10, 16 + 2 * w}, -1);
    p = fz::pad(xi + 1, widths, 9);
    std::vector<double> plus(di);
    for (double& v : plus) v += 1;
    CHECK(test::mismatches(p.to_host(), pad_ref(plus, {9, 16}, widths, 9), fz::DType::int32) == 0);
  }

  // a piece whose view is off the vectors (a slice from column 1): chosen per element, still right
  const auto wide = fz::asarray(test::random<float>(7 * 68, -1, 1, 57), {7, 68});
  const auto off = wide.slice({fz::Slice{}, fz::Slice{1, 65, 1}});
  const auto tail = fz::asarray(test::random<float>(7 * 4, -1, 1, 58), {7, 4});
  CHECK(!per_vector(fz::inspect(fz::concatenate(1, off, tail))));
  CHECK(test::mismatches(fz::eval(fz::concatenate(1, off, tail)).to_host(),
                         concat_ref({doubles(off.to_host()), doubles(tail.to_host())}, {{7, 64}, {7, 4}}, 1),
                         fz::DType::float32) == 0);
}
