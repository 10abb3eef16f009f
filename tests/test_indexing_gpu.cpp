// SPDX-License-Identifier: Apache-2.0
// fz::take, take_along_axis and index_select on the GPU against a host reference of NumPy's rules: every axis
// of 1- to 3-D sources, 0-d to 2-D indices of int32 and int64 with negative entries, every dtype (a read
// through an index is exact), views as sources, the three index modes (raise reported as IndexError and
// cleared), index expressions, fusion with the math around it (one launch), reductions of gathers.
#include <algorithm>
#include <random>

#include "support.hpp"

namespace {

/// NumPy's take of `a` (shape `as`, C order) at `idx` (shape `is`) along `axis`, in float64, with the mode's
/// rule for bad indices (raise: none may be bad here).
std::vector<double> take_ref(const std::vector<double>& a, const fz::Shape& as, const std::vector<std::int64_t>& idx,
                             const fz::Shape& is, int axis, fz::IndexMode mode, fz::Shape& out_shape) {
  out_shape = fz::Shape();
  for (int d = 0; d < axis; ++d) out_shape.push_back(as[d]);
  for (int d = 0; d < is.size(); ++d) out_shape.push_back(is[d]);
  for (int d = axis + 1; d < as.size(); ++d) out_shape.push_back(as[d]);
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= as[d];
  for (int d = axis + 1; d < as.size(); ++d) inner *= as[d];
  const std::int64_t n = as[axis], m = static_cast<std::int64_t>(idx.size());
  std::vector<double> out(static_cast<std::size_t>(outer * m * inner));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < m; ++j) {
      std::int64_t k = idx[static_cast<std::size_t>(j)];
      if (mode == fz::IndexMode::wrap) k = ((k % n) + n) % n;
      else if (mode == fz::IndexMode::clip) k = std::clamp<std::int64_t>(k, 0, n - 1);
      else k = k < 0 ? k + n : k;
      REQUIRE((k >= 0 && k < n));
      for (std::int64_t i = 0; i < inner; ++i)
        out[static_cast<std::size_t>((o * m + j) * inner + i)] = a[static_cast<std::size_t>((o * n + k) * inner + i)];
    }
  return out;
}

template <class T> std::vector<double> doubles(const std::vector<T>& v) {
  std::vector<double> r;
  for (const T& x : v) r.push_back(test::as_double(x));
  return r;
}

/// take(a, idx, axis) for a source of shape `as` and an index of shape `is` (entries in [-n, n)).
template <class T, class I> void check_take(const fz::Shape& as, const fz::Shape& is, int axis, unsigned seed) {
  INFO(fz::dtype_name(fz::dtype_of<T>) << " source " << fz::to_string(as) << " index " << fz::to_string(is)
                                        << " of " << fz::dtype_name(fz::dtype_of<I>) << " axis " << axis);
  const auto ha = test::random<T>(static_cast<std::size_t>(fz::numel(as)), -100, 100, seed);
  const std::int64_t n = as[axis];
  const auto hi = test::random<I>(static_cast<std::size_t>(fz::numel(is)), static_cast<double>(-n),
                                  static_cast<double>(n - 1), seed + 1);
  const auto a = fz::asarray(ha, as);
  const auto idx = fz::asarray(hi, is);
  fz::Shape want_shape;
  const std::vector<std::int64_t> hi64(hi.begin(), hi.end());
  const auto want = take_ref(doubles(ha), as, hi64, is, axis, fz::IndexMode::raise, want_shape);
  fz::Array<T> out = fz::full<T>(want_shape, T(7));  // poisoned: every element must be written
  fz::reset_stats();
  out = fz::take(a, idx, axis);
  CHECK(fz::stats().launches == 1);
  CHECK(out.shape() == want_shape);
  CHECK(test::mismatches(out.to_host(), want, fz::dtype_of<T>) == 0);
}

}  // namespace

TEST_CASE("take: every axis, index ranks 0 to 2, int32 and int64 indices, negative entries", "[gpu][indexing]") {
  unsigned seed = 100;
  for (const fz::Shape& as : {fz::Shape{37}, fz::Shape{9, 130}, fz::Shape{5, 6, 7}})
    for (int axis = 0; axis < as.size(); ++axis)
      for (const fz::Shape& is : {fz::Shape{}, fz::Shape{11}, fz::Shape{3, 4}}) {
        check_take<float, std::int32_t>(as, is, axis, seed++);
        check_take<float, std::int64_t>(as, is, axis, seed++);
      }
}

TEST_CASE("take: every dtype is read exactly", "[gpu][indexing]") {
  check_take<double, std::int64_t>({40, 33}, {17}, 0, 1);
  check_take<fz::half, std::int32_t>({40, 64}, {17}, 0, 2);
  check_take<fz::bfloat16, std::int32_t>({40, 64}, {9, 2}, 1, 3);
  check_take<std::int8_t, std::int32_t>({40, 33}, {17}, 1, 4);
  check_take<std::uint16_t, std::int64_t>({40, 33}, {17}, 0, 5);
  check_take<std::int64_t, std::int32_t>({40, 33}, {5}, 0, 6);
  check_take<bool, std::int32_t>({40, 33}, {17}, 1, 7);
}

TEST_CASE("take: row gathers of wide rows (embedding lookups) in every vector width", "[gpu][indexing]") {
  check_take<float, std::int32_t>({1000, 4096}, {300}, 0, 11);
  check_take<fz::bfloat16, std::int64_t>({512, 1024}, {64, 3}, 0, 12);
  check_take<float, std::int32_t>({100, 1}, {50}, 0, 13);  // one-element rows
}

TEST_CASE("take: views as sources (transposed, flipped, sliced) and as indices", "[gpu][indexing]") {
  const fz::Shape as{12, 10};
  const auto ha = test::random<float>(120, -5, 5, 21);
  const auto a = fz::asarray(ha, as);
  const auto hi = std::vector<std::int32_t>{0, 3, -1, 9, 2, 2};
  const auto idx = fz::asarray(hi, {6});
  std::vector<double> at(120), flipped(120);  // a.T (10 x 12) and a flipped along axis 1
  for (int r = 0; r < 12; ++r)
    for (int c = 0; c < 10; ++c) {
      at[static_cast<std::size_t>(c * 12 + r)] = ha[static_cast<std::size_t>(r * 10 + c)];
      flipped[static_cast<std::size_t>(r * 10 + c)] = ha[static_cast<std::size_t>(r * 10 + 9 - c)];
    }
  const std::vector<std::int64_t> hi64(hi.begin(), hi.end());
  fz::Shape s;
  for (int axis = 0; axis < 2; ++axis) {
    fz::Array<float> t = fz::take(a.transpose(), idx, axis);
    CHECK(test::mismatches(t.to_host(), take_ref(at, {10, 12}, hi64, {6}, axis, fz::IndexMode::raise, s), fz::DType::float32) == 0);
    fz::Array<float> f = fz::take(a.flip(1), idx, axis);
    CHECK(test::mismatches(f.to_host(), take_ref(flipped, as, hi64, {6}, axis, fz::IndexMode::raise, s), fz::DType::float32) == 0);
  }
  // every other row of a, and an index read every other element
  const auto sliced = a.slice({fz::Slice{0, std::nullopt, 2}});
  const auto hi2 = std::vector<std::int32_t>{5, 0, 1, 1, -6, 4, 3, 2};
  const auto idx_view = fz::asarray(hi2, {8}).slice({fz::Slice{0, std::nullopt, 2}});  // 5, 1, -6, 3
  std::vector<double> even_rows;
  for (int r = 0; r < 12; r += 2)
    for (int c = 0; c < 10; ++c) even_rows.push_back(ha[static_cast<std::size_t>(r * 10 + c)]);
  fz::Array<float> v = fz::take(sliced, idx_view, 0);
  CHECK(test::mismatches(v.to_host(), take_ref(even_rows, {6, 10}, {5, 1, -6, 3}, {4}, 0, fz::IndexMode::raise, s),
                         fz::DType::float32) == 0);
}

TEST_CASE("take: wrap and clip take any index; raise reports the first bad one and the next call runs",
          "[gpu][indexing]") {
  const auto ha = test::random<float>(7 * 5, -5, 5, 31);
  const auto a = fz::asarray(ha, {7, 5});
  const std::vector<std::int64_t> hi{-20, -8, -7, -1, 0, 6, 7, 13, 100};
  const auto idx = fz::asarray(hi, {9});
  fz::Shape s;
  fz::Array<float> w = fz::take<fz::IndexMode::wrap>(a, idx, 0);
  CHECK(test::mismatches(w.to_host(), take_ref(doubles(ha), {7, 5}, hi, {9}, 0, fz::IndexMode::wrap, s),
                         fz::DType::float32) == 0);
  fz::Array<float> c = fz::take<fz::IndexMode::clip>(a, idx, 0);
  CHECK(test::mismatches(c.to_host(), take_ref(doubles(ha), {7, 5}, hi, {9}, 0, fz::IndexMode::clip, s),
                         fz::DType::float32) == 0);

  fz::Array<float> r = fz::full<float>({9, 5}, 3.f);
  try {
    r = fz::take(a, idx, 0);
    FAIL("an index out of bounds was not reported");
  } catch (const fz::IndexError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("out of bounds for an axis of size 7") != std::string::npos);
    CHECK((m.find("index -20 ") != std::string::npos || m.find("index -8 ") != std::string::npos ||
           m.find("index 7 ") != std::string::npos || m.find("index 13 ") != std::string::npos ||
           m.find("index 100 ") != std::string::npos));
  }
  // the fault word is clear again: a good index runs and is right
  const std::vector<std::int64_t> good{-7, -1, 0, 6};
  fz::Array<float> ok = fz::take(a, fz::asarray(good, {4}), 0);
  CHECK(test::mismatches(ok.to_host(), take_ref(doubles(ha), {7, 5}, good, {4}, 0, fz::IndexMode::raise, s),
                         fz::DType::float32) == 0);
  // an empty axis cannot be taken from; an empty index gives an empty result
  CHECK_THROWS_AS(fz::take(fz::zeros<float>({0, 3}), idx, 0), fz::IndexError);
  fz::Array<float> none = fz::take(a, fz::zeros<std::int32_t>({0}), 0);
  CHECK(none.shape() == fz::Shape{0, 5});
}

TEST_CASE("take fuses with the math around it: one launch, the index an expression", "[gpu][indexing]") {
  const std::int64_t V = 300, D = 256, B = 64;
  const auto ht = test::random<float>(static_cast<std::size_t>(V * D), -1, 1, 41);
  const auto hp = test::random<float>(static_cast<std::size_t>(B * D), -1, 1, 42);
  const auto hi = test::random<std::int32_t>(static_cast<std::size_t>(B), 0, static_cast<double>(V - 2), 43);
  const auto table = fz::asarray(ht, {V, D}), pos = fz::asarray(hp, {B, D});
  const auto ids = fz::asarray(hi, {B});
  std::vector<double> want(static_cast<std::size_t>(B * D)), want_next(want.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t d = 0; d < D; ++d) {
      const auto at = static_cast<std::size_t>(b * D + d);
      const double row = ht[static_cast<std::size_t>(hi[static_cast<std::size_t>(b)] * D + d)];
      const double next = ht[static_cast<std::size_t>((hi[static_cast<std::size_t>(b)] + 1) * D + d)];
      want[at] = static_cast<double>(static_cast<float>(row * 2.0)) + hp[at];
      want_next[at] = next;
    }
  fz::Array<float> out = fz::full<float>({B, D}, std::nanf(""));
  fz::reset_stats();
  out = fz::take(table, ids, 0) * 2.f + pos;
  CHECK(fz::stats().launches == 1);
  CHECK(test::mismatches(out.to_host(), want, fz::DType::float32) == 0);
  const auto info = fz::inspect(fz::take(table, ids, 0) * 2.f + pos);
  CHECK(info.kernels == 1);
  CHECK(info.name.find("take") != std::string::npos);
  // an index expression is evaluated first (one small kernel), the read still fuses
  fz::Array<float> next = fz::take(table, ids + 1, 0);
  CHECK(test::mismatches(next.to_host(), want_next, fz::DType::float32) == 0);
  // a reduction of a gather: the gather first, then the sum
  const double total = fz::sum(fz::take(table, ids, 0) * 2.f + pos).item();
  double want_total = 0;
  for (double x : want) want_total += x;
  CHECK(total == Approx(want_total).epsilon(1e-4));
}

TEST_CASE("take_along_axis: the values at an argmax, the index an expression that fuses", "[gpu][indexing]") {
  const std::int64_t R = 33, D = 77;
  const auto hx = test::random<float>(static_cast<std::size_t>(R * D), -10, 10, 51);
  const auto x = fz::asarray(hx, {R, D});
  fz::Array<float> picked = fz::take_along_axis(x, fz::argmax(x, 1, true), 1);
  fz::Array<float> best = fz::max(x, 1, true);
  CHECK(picked.shape() == fz::Shape{R, 1});
  CHECK(test::mismatches(picked.to_host(), doubles(best.to_host()), fz::DType::float32) == 0);
  // a whole index array along axis 0, with negative entries, broadcasting its rows
  const auto hi = test::random<std::int64_t>(static_cast<std::size_t>(3 * D), -R, R - 1, 52);
  fz::Array<float> cols = fz::take_along_axis(x, fz::asarray(hi, {3, D}), 0);
  std::vector<double> want;
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t c = 0; c < D; ++c) {
      std::int64_t k = hi[static_cast<std::size_t>(r * D + c)];
      k = k < 0 ? k + R : k;
      want.push_back(hx[static_cast<std::size_t>(k * D + c)]);
    }
  CHECK(test::mismatches(cols.to_host(), want, fz::DType::float32) == 0);
  CHECK_THROWS_AS(fz::take_along_axis(x, fz::asarray(hi, {3 * D}), 0), fz::ShapeError);
  // index_select is take with a one-dimensional index
  fz::Array<float> sel = fz::index_select(x, 1, fz::asarray(std::vector<std::int32_t>{4, 0, -1}, {3}));
  fz::Shape s;
  CHECK(test::mismatches(sel.to_host(), take_ref(doubles(hx), {R, D}, {4, 0, -1}, {3}, 1, fz::IndexMode::raise, s),
                         fz::DType::float32) == 0);
  CHECK_THROWS_AS(fz::index_select(x, 1, fz::asarray(std::vector<std::int32_t>{4, 0}, {2, 1})), fz::ShapeError);
  // take without an axis reads the array as flat
  fz::Array<float> flat = fz::take(x, fz::asarray(std::vector<std::int64_t>{0, R * D - 1, -2}, {3}));
  CHECK(test::mismatches(flat.to_host(), {hx[0], hx[static_cast<std::size_t>(R * D - 1)],
                                          hx[static_cast<std::size_t>(R * D - 2)]}, fz::DType::float32) == 0);
}

TEST_CASE("take: checked indices refuse a Step; wrap and clip record into one", "[gpu][indexing]") {
  const auto a = fz::asarray(test::random<float>(40, -1, 1, 61), {8, 5});
  const auto idx = fz::asarray(std::vector<std::int32_t>{1, 9, -3}, {3});
  fz::Array<float> out = fz::zeros<float>({3, 5});
  fz::Step raise_step([&] { out = fz::take(a, idx, 0); });
  CHECK_THROWS_WITH(raise_step(), Catch::Contains("IndexMode::wrap"));
  fz::Step wrap_step([&] { out = fz::take<fz::IndexMode::wrap>(a, idx, 0); });
  wrap_step();
  const auto ha = a.to_host();
  fz::Shape s;
  CHECK(test::mismatches(out.to_host(), take_ref(doubles(ha), {8, 5}, {1, 9, -3}, {3}, 0, fz::IndexMode::wrap, s),
                         fz::DType::float32) == 0);
}

namespace {

/// rms_norm(take(table, ids, 0) + pos, weight) * take(scale, ids[:, None], 0) against float64, one launch.
/// `extra` > 0: the table is a view of the first D columns of a wider array, so some rows start off a vector
/// boundary.
template <class T> void check_embedding_norm(std::int64_t V, std::int64_t D, std::int64_t B, unsigned seed,
                                             std::int64_t extra = 0) {
  INFO(fz::dtype_name(fz::dtype_of<T>) << " table " << V << " x " << D << ", " << B << " ids, extra " << extra);
  const auto ht = test::random<T>(static_cast<std::size_t>(V * D), -2, 2, seed);
  const auto hp = test::random<T>(static_cast<std::size_t>(B * D), -1, 1, seed + 1);
  const auto hw = test::random<T>(static_cast<std::size_t>(D), 0.5, 1.5, seed + 2);
  const auto hs = test::random<T>(static_cast<std::size_t>(V), 0.5, 2, seed + 3);
  const auto hi = test::random<std::int32_t>(static_cast<std::size_t>(B), static_cast<double>(-V),
                                             static_cast<double>(V - 1), seed + 4);
  std::vector<T> wide(static_cast<std::size_t>(V * (D + extra)), T(1e30f));  // (the columns after: never read)
  for (std::int64_t r = 0; r < V; ++r)
    std::copy_n(ht.begin() + r * D, D, wide.begin() + r * (D + extra));
  const auto table = fz::asarray(wide, {V, D + extra}).slice({fz::_, fz::to(D)});
  const auto pos = fz::asarray(hp, {B, D});
  const auto weight = fz::asarray(hw, {D}), scale = fz::asarray(hs, {V});
  const auto ids = fz::asarray(hi, {B});
  std::vector<double> want(static_cast<std::size_t>(B * D));
  for (std::int64_t b = 0; b < B; ++b) {
    std::int64_t r = hi[static_cast<std::size_t>(b)];
    r = r < 0 ? r + V : r;
    std::vector<double> x(static_cast<std::size_t>(D));
    double ms = 0;
    for (std::int64_t d = 0; d < D; ++d) {
      // the sum is rounded to T as fused code rounds it (16-bit values stay float: rounded to float)
      const double sum = test::as_double(ht[static_cast<std::size_t>(r * D + d)]) +
                         test::as_double(hp[static_cast<std::size_t>(b * D + d)]);
      x[static_cast<std::size_t>(d)] = sum;
      ms += sum * sum;
    }
    ms /= static_cast<double>(D);
    for (std::int64_t d = 0; d < D; ++d)
      want[static_cast<std::size_t>(b * D + d)] = x[static_cast<std::size_t>(d)] / std::sqrt(ms + 1e-6) *
                                                  test::as_double(hw[static_cast<std::size_t>(d)]) *
                                                  test::as_double(hs[static_cast<std::size_t>(r)]);
  }
  fz::Array<T> out = fz::full<T>({B, D}, T(7.f));
  fz::reset_stats();
  out = fz::rms_norm(fz::take(table, ids, 0) + pos, weight, 1e-6f) * fz::take(scale, ids.reshape({B, 1}), 0);
  // one layer kernel, except for a row over a cluster of blocks, which falls back to the take, then the norm
  if (D <= 4096) CHECK(fz::stats().launches == 1);
  CHECK(test::mismatches(out.to_host(), want, fz::dtype_of<T>) == 0);
}

}  // namespace

TEST_CASE("take inside a layer kernel: an embedding lookup, its RMSNorm and a per-row scale in one launch",
          "[gpu][indexing]") {
  check_embedding_norm<float>(500, 256, 96, 71);
  check_embedding_norm<float>(100, 300, 33, 72);       // rows not a multiple of a vector
  check_embedding_norm<fz::bfloat16>(300, 4096, 64, 73);  // rows held in registers
  check_embedding_norm<float>(200, 512, 40, 76, 2);      // in registers, rows read off a vector boundary
  check_embedding_norm<fz::bfloat16>(200, 1024, 40, 77, 3);
  check_embedding_norm<float>(40, 65536, 8, 74);       // a row over a cluster of blocks: not a layer kernel
  // a row sum of a gather, and a softmax over gathered rows
  const auto table = fz::asarray(test::random<float>(50 * 64, -3, 3, 75), {50, 64});
  const auto ids = fz::asarray(std::vector<std::int64_t>{3, -1, 7, 7, 0}, {5});
  const auto ht = table.to_host();
  fz::Array<float> rows = fz::sum(fz::take(table, ids, 0), 1);
  std::vector<double> want;
  for (std::int64_t r : {3, 49, 7, 7, 0}) {
    double s = 0;
    for (int d = 0; d < 64; ++d) s += ht[static_cast<std::size_t>(r * 64 + d)];
    want.push_back(s);
  }
  CHECK(test::mismatches(rows.to_host(), want, fz::DType::float32) == 0);
}

TEST_CASE("take inside a layer kernel along the row: a softmax of each row read in a permuted order",
          "[gpu][indexing]") {
  const std::int64_t R = 40, D = 300;
  const auto hx = test::random<float>(static_cast<std::size_t>(R * D), -4, 4, 81);
  std::vector<std::int64_t> perm(static_cast<std::size_t>(R * D));
  std::mt19937 rng(82);
  for (std::int64_t r = 0; r < R; ++r) {
    std::vector<std::int64_t> p(static_cast<std::size_t>(D));
    for (std::int64_t j = 0; j < D; ++j) p[static_cast<std::size_t>(j)] = j;
    std::shuffle(p.begin(), p.end(), rng);
    for (std::int64_t j = 0; j < D; ++j) perm[static_cast<std::size_t>(r * D + j)] = p[static_cast<std::size_t>(j)] - (j % 2) * D;
  }
  const auto x = fz::asarray(hx, {R, D});
  const auto idx = fz::asarray(perm, {R, D});
  const auto t = fz::take_along_axis(x, idx, 1);  // the offset varies along the row: read through a pointer
  fz::reset_stats();
  fz::Array<float> sm = fz::exp(t - fz::max(t, 1, true)) / fz::sum(fz::exp(t - fz::max(t, 1, true)), 1, true);
  CHECK(fz::stats().launches == 1);
  std::vector<double> want(hx.size());
  for (std::int64_t r = 0; r < R; ++r) {
    std::vector<double> row(static_cast<std::size_t>(D));
    double m = -INFINITY, s = 0;
    for (std::int64_t j = 0; j < D; ++j) {
      std::int64_t k = perm[static_cast<std::size_t>(r * D + j)];
      k = k < 0 ? k + D : k;
      row[static_cast<std::size_t>(j)] = hx[static_cast<std::size_t>(r * D + k)];
      m = std::max(m, row[static_cast<std::size_t>(j)]);
    }
    for (double v : row) s += std::exp(v - m);
    for (std::int64_t j = 0; j < D; ++j) want[static_cast<std::size_t>(r * D + j)] = std::exp(row[static_cast<std::size_t>(j)] - m) / s;
  }
  CHECK(test::mismatches(sm.to_host(), want, fz::DType::float32) == 0);
}
