// SPDX-License-Identifier: Apache-2.0
// fz::Deterministic: floating index_add and scatter_add into exact sums. Checked bit for bit against a host sum
// that is exact too (values on a grid of 2^-Q, summed as 128-bit integers, rounded once), run to run, through
// shared and global bins, strided and reversed targets, infinities and NaN, and every floating dtype.
#include <cstring>

#include "support.hpp"

namespace {

/// `n` values m * 2^e (m a random integer of T's mantissa width, e in [-30, 30]): their sums need far more
/// bits than T has, so the order of float adds shows in the result; 2^Q times each is an integer.
template <class T> std::vector<T> wide_values(std::size_t n, unsigned seed) {
  constexpr int bits = std::is_same_v<T, double> ? 53 : 24;
  const auto m = test::random<std::int64_t>(n, -(std::int64_t{1} << (bits - 1)), (std::int64_t{1} << (bits - 1)) - 1, seed);
  const auto e = test::random<std::int32_t>(n, -30, 30, seed + 1);
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(std::ldexp(static_cast<double>(m[i]), e[i] - bits));
  return v;
}

/// The correctly rounded sums of `old` plus each value into its bin: exact in 128-bit integers of 2^-Q.
template <class T>
std::vector<T> exact_sums(std::vector<T> old, const std::vector<std::int64_t>& bins, const std::vector<T>& values) {
  constexpr int Q = std::is_same_v<T, double> ? 83 : 54;
  std::vector<__int128> sum(old.size(), 0);
  auto fixed = [](T v) { return static_cast<__int128>(std::ldexp(static_cast<long double>(v), Q)); };
  for (std::size_t i = 0; i < old.size(); ++i) sum[i] = fixed(old[i]);
  for (std::size_t k = 0; k < values.size(); ++k) sum[static_cast<std::size_t>(bins[k])] += fixed(values[k]);
  for (std::size_t i = 0; i < old.size(); ++i) old[i] = std::ldexp(static_cast<T>(sum[i]), -Q);  // (one rounding)
  return old;
}

template <class T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T> std::size_t differing(const std::vector<T>& got, const std::vector<T>& want) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && bad++ < 5)
      UNSCOPED_INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
  return bad;
}

/// `n` values into `nbins` bins under fz::Deterministic: the exact, correctly rounded sums, the same bits on
/// every run; without the mode, float atomics reach them within their usual error only.
template <class T> void check_exact(std::int64_t n, std::int64_t nbins, unsigned seed) {
  INFO(fz::dtype_name(fz::dtype_of<T>) << ": " << n << " values into " << nbins << " bins");
  const auto hv = wide_values<T>(static_cast<std::size_t>(n), seed);
  const auto ht = wide_values<T>(static_cast<std::size_t>(nbins), seed + 2);
  const auto hi = test::random<std::int64_t>(static_cast<std::size_t>(n), 0, nbins - 1, seed + 3);
  const auto want = exact_sums(ht, hi, hv);
  const auto idx = fz::asarray(hi, {n});
  const auto values = fz::asarray(hv, {n});
  std::vector<T> first;
  for (int run = 0; run < 3; ++run) {
    fz::Array<T> target = fz::asarray(ht, {nbins});
    fz::reset_stats();
    {
      fz::Deterministic exact;
      fz::index_add(target, 0, idx, values);
    }
    CHECK(fz::stats().launches == 2);  // the adds, then the rounding
    const auto got = target.to_host();
    CHECK(differing(got, want) == 0);
    if (run == 0) first = got;
    else CHECK(same_bits(got, first));
  }
  // float atomics: within a few ulps of the magnitudes added (their cancellations lose the rest)
  std::vector<double> mag(ht.size());
  for (std::size_t i = 0; i < ht.size(); ++i) mag[i] = std::abs(static_cast<double>(ht[i]));
  for (std::size_t k = 0; k < hv.size(); ++k) mag[static_cast<std::size_t>(hi[k])] += std::abs(static_cast<double>(hv[k]));
  fz::Array<T> fast = fz::asarray(ht, {nbins});
  fz::index_add(fast, 0, idx, values);
  const auto approx = fast.to_host();
  const double eps = std::is_same_v<T, double> ? 1e-14 : 1e-5;
  std::size_t far = 0;
  for (std::size_t i = 0; i < approx.size(); ++i)
    far += std::abs(static_cast<double>(approx[i]) - static_cast<double>(want[i])) > eps * mag[i];
  CHECK(far == 0);
}

}  // namespace

TEST_CASE("fz::Deterministic: exact, correctly rounded sums, the same bits every run, in shared and in global bins",
          "[gpu][scatter]") {
  check_exact<float>(1 << 20, 1000, 51);      // contended: each block's sums in shared memory
  check_exact<float>(1 << 18, 100000, 52);    // global sums
  check_exact<double>(1 << 18, 50, 53);       // 67 words a bin: global
  check_exact<double>(1 << 16, 30000, 54);
}

TEST_CASE("fz::Deterministic: cancellation is exact; infinities and NaN follow IEEE's sums", "[gpu][scatter]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  fz::Array<float> t = fz::asarray(std::vector<float>{0, 0, 0, 0, 0, inf, 2, -0.f}, {8});
  const std::vector<std::int32_t> at{0, 0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 6};
  const std::vector<float> v{1e30f, 1, -1e30f, inf, 1, inf, -inf, nan, -inf, 5, 1e-45f, -1e-45f};
  fz::Deterministic exact;
  fz::index_add(t, 0, fz::asarray(at, {12}), fz::asarray(v, {12}));
  const auto got = t.to_host();
  CHECK(got[0] == 1.f);  // float atomics give 0 or 1 by the order they happen to run in
  CHECK(got[1] == inf);
  CHECK(std::isnan(got[2]));
  CHECK(std::isnan(got[3]));
  CHECK(got[4] == -inf);
  CHECK(got[5] == inf);
  CHECK(got[6] == 2.f);
  CHECK((got[7] == 0.f && std::signbit(got[7])));  // untouched
  // 16-bit targets sum as float and round once into their dtype
  fz::Array<fz::half> h = fz::zeros<fz::half>({3});
  fz::index_add(h, 0, fz::asarray(std::vector<std::int32_t>{0, 0, 0, 2}, {4}),
                fz::asarray(std::vector<float>{60000.f, 1.f, -60000.f, 0.5f}, {4}));
  CHECK(test::mismatches(h.to_host(), {1, 0, 0.5}, fz::DType::float16) == 0);
  fz::Array<fz::bfloat16> b = fz::ones<fz::bfloat16>({2});
  fz::index_add(b, 0, fz::asarray(std::vector<std::int32_t>{1, 1, 1}, {3}), fz::asarray(std::vector<float>{1e20f, 3, -1e20f}, {3}));
  CHECK(test::mismatches(b.to_host(), {1, 4}, fz::DType::bfloat16) == 0);
  // integer sums and maxima are exact already: one kernel, as without the mode
  fz::Array<std::int32_t> counts = fz::zeros<std::int32_t>({4});
  const auto where = fz::asarray(at, {12});
  fz::reset_stats();
  fz::scatter_add(counts, 0, where % 4, 1);  // (index_add evaluates an index expression first)
  CHECK(fz::stats().launches == 1);
  CHECK(counts.to_host() == std::vector<std::int32_t>{4, 3, 4, 1});
}

TEST_CASE("fz::Deterministic: strided and reversed targets, scatter_add along a row, bincount's weights", "[gpu][scatter]") {
  const std::int64_t R = 40, C = 24, N = 5000;
  const auto hv = wide_values<float>(static_cast<std::size_t>(N * C), 61);
  const auto hi = test::random<std::int64_t>(static_cast<std::size_t>(N), 0, R - 1, 62);
  // the target a transposed (C, R) matrix's view, added along its axis 1: the sums mirror its strides
  fz::Array<float> base = fz::zeros<float>({C, R});
  fz::Array<float> view = base.transpose();  // (R, C), strides (1, R)
  fz::Deterministic exact;
  fz::index_add(view, 0, fz::asarray(hi, {N}), fz::asarray(hv, {N, C}));
  std::vector<float> want(static_cast<std::size_t>(R * C));
  for (std::int64_t c = 0; c < C; ++c) {
    std::vector<float> values;
    for (std::int64_t k = 0; k < N; ++k) values.push_back(hv[static_cast<std::size_t>(k * C + c)]);
    const auto col = exact_sums(std::vector<float>(static_cast<std::size_t>(R), 0.f), hi, values);
    for (std::int64_t r = 0; r < R; ++r) want[static_cast<std::size_t>(c * R + r)] = col[static_cast<std::size_t>(r)];
  }
  CHECK(differing(base.to_host(), want) == 0);

  // a reversed target (negative stride): bins counted from its end
  fz::Array<float> row = fz::zeros<float>({R});
  fz::Array<float> reversed = row.slice({fz::Slice{{}, {}, -1}});
  std::vector<float> first(hv.begin(), hv.begin() + N);
  fz::index_add(reversed, 0, fz::asarray(hi, {N}), fz::asarray(first, {N}));
  auto sums = exact_sums(std::vector<float>(static_cast<std::size_t>(R), 0.f), hi, first);
  CHECK(differing(row.to_host(), std::vector<float>(sums.rbegin(), sums.rend())) == 0);

  // scatter_add along axis 1, every element of the index naming a column of its own row
  const auto cols = test::random<std::int64_t>(static_cast<std::size_t>(R * C), 0, 2, 63);
  fz::Array<double> t = fz::zeros<double>({R, 3});
  std::vector<double> dv(hv.begin(), hv.begin() + R * C);
  fz::scatter_add(t, 1, fz::asarray(cols, {R, C}), fz::asarray(dv, {R, C}));
  std::vector<double> want_t(static_cast<std::size_t>(R * 3));
  for (std::int64_t r = 0; r < R; ++r) {
    std::vector<std::int64_t> b;
    std::vector<double> vals;
    for (std::int64_t c = 0; c < C; ++c) {
      b.push_back(cols[static_cast<std::size_t>(r * C + c)]);
      vals.push_back(dv[static_cast<std::size_t>(r * C + c)]);
    }
    const auto s = exact_sums(std::vector<double>(3, 0.0), b, vals);
    std::copy(s.begin(), s.end(), want_t.begin() + r * 3);
  }
  CHECK(differing(t.to_host(), want_t) == 0);

  // bincount's float64 weights
  const std::vector<double> weights(hv.begin(), hv.begin() + N);
  const auto counts = fz::bincount(fz::asarray(hi, {N}), fz::asarray(weights, {N}));
  CHECK(differing(counts.to_host(), exact_sums(std::vector<double>(static_cast<std::size_t>(R), 0.0), hi, weights)) == 0);
}
