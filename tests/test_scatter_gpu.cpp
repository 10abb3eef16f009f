// SPDX-License-Identifier: Apache-2.0
// fz::index_add, fz::scatter_add and fz::bincount on the GPU against host references: rows and columns,
// negative and repeated indices (contended bins), expressions as values and as indices (one launch), float,
// 16-bit and integer targets (integers exact), the index modes, and the errors.
#include "support.hpp"

namespace {

std::vector<double> doubles_of(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// A float sum's error bound against float64: a few ulps of the magnitudes added, per element.
std::size_t off_sums(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& mag) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-6 * mag[i] + 1e-30) {
      if (bad++ < 5) UNSCOPED_INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    }
  return bad;
}

}  // namespace

TEST_CASE("index_add: rows and columns, negative and repeated indices, an expression as values", "[gpu][scatter]") {
  const std::int64_t R = 50, D = 64, N = 300;
  const auto ht = test::random<float>(static_cast<std::size_t>(R * D), -1, 1, 1);
  const auto hv = test::random<float>(static_cast<std::size_t>(N * D), -1, 1, 2);
  const auto hi = test::random<std::int32_t>(static_cast<std::size_t>(N), -R, R - 1, 3);
  fz::Array<float> target = fz::asarray(ht, {R, D});
  const auto values = fz::asarray(hv, {N, D});
  const auto idx = fz::asarray(hi, {N});
  std::vector<double> want = doubles_of(ht), mag(want.size());
  for (std::size_t i = 0; i < mag.size(); ++i) mag[i] = std::abs(want[i]);
  for (std::int64_t n = 0; n < N; ++n) {
    std::int64_t r = hi[static_cast<std::size_t>(n)];
    r = r < 0 ? r + R : r;
    for (std::int64_t d = 0; d < D; ++d) {
      const double v = static_cast<double>(hv[static_cast<std::size_t>(n * D + d)] * 2.f) + 1.0;
      want[static_cast<std::size_t>(r * D + d)] += v;
      mag[static_cast<std::size_t>(r * D + d)] += std::abs(v);
    }
  }
  fz::reset_stats();
  fz::index_add(target, 0, idx, values * 2.f + 1.f);
  CHECK(fz::stats().launches == 1);
  CHECK(off_sums(target.to_host(), want, mag) == 0);

  // along axis 1 of a (D, R) array: columns
  fz::Array<float> t2 = fz::zeros<float>({D, R});
  fz::index_add(t2, 1, idx, values.transpose());
  std::vector<double> want2(static_cast<std::size_t>(D * R), 0), mag2(want2.size(), 0);
  for (std::int64_t n = 0; n < N; ++n) {
    std::int64_t r = hi[static_cast<std::size_t>(n)];
    r = r < 0 ? r + R : r;
    for (std::int64_t d = 0; d < D; ++d) {
      want2[static_cast<std::size_t>(d * R + r)] += hv[static_cast<std::size_t>(n * D + d)];
      mag2[static_cast<std::size_t>(d * R + r)] += std::abs(hv[static_cast<std::size_t>(n * D + d)]);
    }
  }
  CHECK(off_sums(t2.to_host(), want2, mag2) == 0);
}

TEST_CASE("index_add: integer targets are exact under contention; 16-bit targets add through their word",
          "[gpu][scatter]") {
  const std::int64_t N = 1 << 16;
  const auto hi = test::random<std::int64_t>(static_cast<std::size_t>(N), 0, 3, 11);  // four bins
  const auto hv = test::random<std::int64_t>(static_cast<std::size_t>(N), -1000000, 1000000, 12);
  fz::Array<std::int64_t> bins = fz::zeros<std::int64_t>({4});
  fz::index_add(bins, 0, fz::asarray(hi, {N}), fz::asarray(hv, {N}));
  std::vector<std::int64_t> want(4, 0);
  for (std::int64_t n = 0; n < N; ++n) want[static_cast<std::size_t>(hi[static_cast<std::size_t>(n)])] += hv[static_cast<std::size_t>(n)];
  CHECK(bins.to_host() == want);

  fz::Array<std::int32_t> counts = fz::zeros<std::int32_t>({4});
  fz::index_add(counts, 0, fz::asarray(hi, {N}), 1);
  std::vector<std::int32_t> want_counts(4, 0);
  for (std::int64_t v : hi) ++want_counts[static_cast<std::size_t>(v)];
  CHECK(counts.to_host() == want_counts);

  // 16-bit floats: a neighbouring element of the same 32-bit word must stay as it is
  fz::Array<fz::half> h = fz::zeros<fz::half>({6});
  fz::index_add(h, 0, fz::asarray(std::vector<std::int32_t>{1, 1, 2, 4, 1}, {5}),
                fz::asarray(std::vector<float>{0.5f, 0.25f, 1, -2, 0.125f}, {5}));
  CHECK(test::mismatches(h.to_host(), {0, 0.875, 1, 0, -2, 0}, fz::DType::float16) == 0);
  fz::Array<fz::bfloat16> b = fz::ones<fz::bfloat16>({3});
  fz::index_add(b, 0, fz::asarray(std::vector<std::int32_t>{2, 0, 2}, {3}), 2.f);
  CHECK(test::mismatches(b.to_host(), {3, 1, 5}, fz::DType::bfloat16) == 0);
}

TEST_CASE("scatter_add: the index names a place along the axis for each of its elements", "[gpu][scatter]") {
  const std::int64_t R = 5, C = 6, M = 4;
  const auto hi = test::random<std::int64_t>(static_cast<std::size_t>(M * C), 0, R - 1, 21);
  const auto hv = test::random<float>(static_cast<std::size_t>(M * C), -1, 1, 22);
  fz::Array<float> target = fz::zeros<float>({R, C});
  const auto idx = fz::asarray(hi, {M, C});
  fz::scatter_add(target, 0, idx, fz::asarray(hv, {M, C}));
  std::vector<double> want(static_cast<std::size_t>(R * C), 0), mag(want.size(), 0);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t c = 0; c < C; ++c) {
      const auto at = static_cast<std::size_t>(hi[static_cast<std::size_t>(m * C + c)] * C + c);
      want[at] += hv[static_cast<std::size_t>(m * C + c)];
      mag[at] += std::abs(hv[static_cast<std::size_t>(m * C + c)]);
    }
  CHECK(off_sums(target.to_host(), want, mag) == 0);
  // an index expression (fused): the rows in reverse
  fz::Array<float> rev = fz::zeros<float>({R, C});
  fz::scatter_add(rev, 0, (R - 1) - idx, fz::asarray(hv, {M, C}));
  const auto got = rev.to_host();
  std::vector<double> want_rev(want.size());
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c)
      want_rev[static_cast<std::size_t>(r * C + c)] = want[static_cast<std::size_t>((R - 1 - r) * C + c)];
  std::vector<double> mag_rev(mag.rbegin(), mag.rend());
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c)
      mag_rev[static_cast<std::size_t>(r * C + c)] = mag[static_cast<std::size_t>((R - 1 - r) * C + c)];
  CHECK(off_sums(got, want_rev, mag_rev) == 0);
  CHECK_THROWS_AS(fz::scatter_add(target, 0, fz::asarray(hi, {M * C}), 1.f), fz::ShapeError);
}

TEST_CASE("bincount, with and without weights; bad indices and aliasing are errors", "[gpu][scatter]") {
  const std::vector<std::int32_t> hx{0, 3, 3, 7, 1, 3, 0};
  const auto x = fz::asarray(hx, {7});
  CHECK(fz::bincount(x).to_host() == std::vector<std::int64_t>{2, 1, 0, 3, 0, 0, 0, 1});
  CHECK(fz::bincount(x, 10).to_host().size() == 10);
  const auto w = fz::asarray(std::vector<double>{0.5, 1, 2, 4, 8, 16, 32}, {7});
  CHECK(fz::bincount(x, w).to_host() == std::vector<double>{32.5, 8, 0, 19, 0, 0, 0, 4});
  CHECK(fz::bincount(fz::zeros<std::int32_t>({0}), 3).to_host() == std::vector<std::int64_t>{0, 0, 0});
  CHECK_THROWS_AS(fz::bincount(fz::asarray(std::vector<std::int32_t>{1, -1}, {2})), fz::Error);

  // a bad index adds nothing and is reported; the good ones have added (as NumPy's add.at, which raises midway)
  fz::Array<float> t = fz::zeros<float>({4, 2});
  CHECK_THROWS_AS(fz::index_add(t, 0, fz::asarray(std::vector<std::int32_t>{0, 4}, {2}), 1.f), fz::IndexError);
  CHECK(t.to_host() == std::vector<float>{1, 1, 0, 0, 0, 0, 0, 0});
  fz::index_add<fz::IndexMode::wrap>(t, 0, fz::asarray(std::vector<std::int32_t>{0, 4, -1}, {3}), 1.f);
  CHECK(t.to_host() == std::vector<float>{3, 3, 0, 0, 0, 0, 1, 1});
  CHECK_THROWS_WITH(fz::index_add(t, 0, fz::asarray(std::vector<std::int32_t>{0}, {1}), t.slice({fz::Slice{0, 1}})),
                    Catch::Contains("read the array they add into"));
}

namespace {

/// index_max / index_min of `n` values into `bins` bins (private bins in shared memory when the target is
/// small, global atomics when not), against the host: exact, as a maximum is one of the values.
template <class T> void check_extremes(std::int64_t n, std::int64_t bins, unsigned seed) {
  INFO(fz::dtype_name(fz::dtype_of<T>) << ", " << n << " values into " << bins << " bins");
  const double lo = std::is_unsigned_v<T> ? 0 : -1000;
  const auto hv = test::random<T>(static_cast<std::size_t>(n), lo, 1000, seed);
  const auto hi = test::random<std::int64_t>(static_cast<std::size_t>(n), -bins, bins - 1, seed + 1);
  const auto ht = test::random<T>(static_cast<std::size_t>(bins), lo, 1000, seed + 2);
  for (bool is_max : {true, false}) {
    std::vector<double> want;
    for (T t : ht) want.push_back(test::as_double(t));
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t i = hi[static_cast<std::size_t>(k)];
      double& w = want[static_cast<std::size_t>(i < 0 ? i + bins : i)];
      const double v = test::as_double(hv[static_cast<std::size_t>(k)]);
      w = is_max ? std::max(w, v) : std::min(w, v);
    }
    fz::Array<T> target = fz::asarray(ht, {bins});
    fz::reset_stats();
    if (is_max) fz::index_max(target, 0, fz::asarray(hi, {n}), fz::asarray(hv, {n}));
    else fz::index_min(target, 0, fz::asarray(hi, {n}), fz::asarray(hv, {n}));
    CHECK(fz::stats().launches == 1);
    INFO((is_max ? "index_max" : "index_min"));
    CHECK(test::mismatches(target.to_host(), want, fz::dtype_of<T>) == 0);
  }
}

}  // namespace

TEST_CASE("index_max and index_min: every dtype, contended bins in shared memory and bins in global memory",
          "[gpu][scatter]") {
  check_extremes<float>(1 << 16, 100, 31);        // private bins
  check_extremes<float>(1 << 16, 50000, 32);      // 200 KB: global atomics
  check_extremes<double>(1 << 15, 7, 33);
  check_extremes<std::int32_t>(1 << 16, 1000, 34);
  check_extremes<std::int64_t>(1 << 15, 20000, 35);
  check_extremes<std::uint32_t>(1 << 15, 64, 36);
  check_extremes<std::uint64_t>(1 << 14, 9, 37);
  check_extremes<fz::half>(1 << 14, 5, 38);         // 16-bit compare-and-swap, neighbours kept
  check_extremes<fz::bfloat16>(1 << 14, 301, 39);
}

TEST_CASE("scatter_max and scatter_min: NaN wins, equal values keep the target's, index expressions fuse",
          "[gpu][scatter]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // NumPy's maximum.at: NaN in the target or a value wins; of 0 and -0 the target's stays
  fz::Array<float> t = fz::asarray(std::vector<float>{0.f, nan, 1.f, -0.f, -inf}, {5});
  fz::index_max(t, 0, fz::asarray(std::vector<std::int32_t>{0, 1, 2, 2, 3, 4, 4}, {7}),
                fz::asarray(std::vector<float>{-0.f, 5.f, nan, 7.f, 0.f, -inf, 2.f}, {7}));
  const auto got = t.to_host();
  CHECK((got[0] == 0.f && !std::signbit(got[0])));
  CHECK(std::isnan(got[1]));
  CHECK(std::isnan(got[2]));
  CHECK((got[3] == 0.f && std::signbit(got[3])));
  CHECK(got[4] == 2.f);
  fz::Array<fz::half> h = fz::asarray(std::vector<float>{1, 2, 3}, {3}).astype<fz::half>();
  fz::index_min(h, 0, fz::asarray(std::vector<std::int32_t>{1, 1}, {2}), fz::asarray(std::vector<float>{nan, -4}, {2}));
  const auto hh = h.to_host();
  CHECK((test::as_double(hh[0]) == 1 && std::isnan(test::as_double(hh[1])) && test::as_double(hh[2]) == 3));

  // along axis 1 of a 2-D target, the index an expression (fused: one launch)
  const std::int64_t R = 6, C = 40, M = 9;
  const auto hi = test::random<std::int32_t>(static_cast<std::size_t>(R * M), 0, C - 1, 41);
  const auto hv = test::random<std::int32_t>(static_cast<std::size_t>(R * M), -500, 500, 42);
  fz::Array<std::int32_t> target = fz::full<std::int32_t>({R, C}, 3);
  fz::reset_stats();
  fz::scatter_min(target, 1, (C - 1) - fz::asarray(hi, {R, M}), fz::asarray(hv, {R, M}) * 2);
  CHECK(fz::stats().launches == 1);
  std::vector<std::int32_t> want(static_cast<std::size_t>(R * C), 3);
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t m = 0; m < M; ++m) {
      auto& w = want[static_cast<std::size_t>(r * C + (C - 1 - hi[static_cast<std::size_t>(r * M + m)]))];
      w = std::min(w, 2 * hv[static_cast<std::size_t>(r * M + m)]);
    }
  CHECK(target.to_host() == want);
  fz::Array<std::int32_t> up = fz::full<std::int32_t>({R, C}, 3);
  fz::scatter_max<fz::IndexMode::clip>(up, 1, fz::asarray(hi, {R, M}) + 1000, fz::asarray(hv, {R, M}));
  std::vector<std::int32_t> want_up(static_cast<std::size_t>(R * C), 3);
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t m = 0; m < M; ++m)
      want_up[static_cast<std::size_t>(r * C + C - 1)] = std::max(want_up[static_cast<std::size_t>(r * C + C - 1)], hv[static_cast<std::size_t>(r * M + m)]);
  CHECK(up.to_host() == want_up);
  CHECK_THROWS_AS(fz::index_max(target, 0, fz::asarray(std::vector<std::int32_t>{0, R}, {2}), 1), fz::IndexError);
  CHECK_THROWS_AS(fz::scatter_max(target, 2, fz::asarray(hi, {R, M}), 1), fz::ShapeError);
}

TEST_CASE("scatters whose index or values hold a reduction or a scan compute those first", "[gpu][scatter]") {
  // found by the fuzzer: the scatter's one kernel had no spelling for a reduction inside its operands
  const auto x = fz::asarray(std::vector<float>{1, 5, 2, 7, 3, 4}, {2, 3});
  fz::Array<float> t = fz::zeros<float>({2, 3});
  // row sums into the column each row's largest element is in: rows {1,5,2} -> 8 at column 1, {7,3,4} -> 14 at 0
  fz::scatter_add(t, 1, fz::argmax(x, 1, true), fz::sum(x, 1, true));
  CHECK(t.to_host() == std::vector<float>{0, 8, 0, 14, 0, 0});
  fz::Array<std::int32_t> c = fz::zeros<std::int32_t>({4});
  fz::index_max(c, 0, fz::asarray(std::vector<std::int32_t>{3, 0, 3}, {3}),
                fz::cumsum(fz::asarray(std::vector<std::int32_t>{2, 5, -1}, {3}), 0));
  CHECK(c.to_host() == std::vector<std::int32_t>{7, 0, 0, 6});
  // an empty index space still evaluates its operands: a reduction over nothing is an error, as in NumPy
  fz::Array<float> empty = fz::zeros<float>({0, 1});
  CHECK_THROWS_AS(fz::scatter_max(empty, 1, fz::cast<std::int32_t>(fz::max(fz::zeros<float>({0, 1}), 0, true)), 0.5f),
                  fz::Error);
}
