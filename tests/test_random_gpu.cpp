// SPDX-License-Identifier: Apache-2.0
// fz::random on the GPU: the device stream equals the host Philox bit for bit in every layout, vector
// width and fusion boundary; dropout is one kernel; the distributions' moments.
#include "philox.hpp"
#include "support.hpp"

TEST_CASE("random bits on the GPU are the Philox stream, whatever the layout or kernel split", "[gpu][ops][random]") {
  const std::int64_t n = 262147;  // 65,536 vectors of 4 and a tail
  const auto bits = fz::random::bits({n}, 99, fz::random::Offset{5}).to_host();
  std::size_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i)
    bad += bits[static_cast<std::size_t>(i)] != test::philox::bits(99, 5, static_cast<std::uint64_t>(i));
  CHECK(bad == 0);

  // the index is the element's flat index in the result: a 2-d result, a strided (transposed) output,
  // a rows kernel (a per-row operand) and the unfused path all see the same values
  fz::Array<std::uint32_t> m = fz::random::bits({300, 301}, 99, fz::random::Offset{5});
  const auto hm = m.to_host();
  for (std::size_t i = 0; i < hm.size(); ++i) bad += hm[i] != test::philox::bits(99, 5, i);
  CHECK(bad == 0);
  fz::Array<std::uint32_t> t = fz::empty<std::uint32_t>({301, 300});
  fz::Array<std::uint32_t> tv = t.transpose();  // (300, 301), strided
  fz::copyto(tv, fz::random::bits(99, fz::random::Offset{5}));
  CHECK(tv.to_host() == hm);
  auto zero_rows = fz::zeros<std::uint32_t>({300, 1});
  CHECK(
      fz::Array<std::uint32_t>(fz::random::bits(99, fz::random::Offset{5}) + zero_rows + fz::zeros<std::uint32_t>({300, 301})).to_host() ==
      hm);
  const fz::Array<std::uint32_t> zeros_t = fz::zeros<std::uint32_t>({301, 300});  // a tiles kernel: a transposed input
  CHECK(fz::Array<std::uint32_t>(fz::random::bits(99, fz::random::Offset{5}) + zeros_t.transpose()).to_host() == hm);
  {
    fz::Unfused unfused;
    CHECK(fz::Array<std::uint32_t>(fz::random::bits(99, fz::random::Offset{5}) + fz::zeros<std::uint32_t>({300, 301})).to_host() == hm);
  }
  const auto f64 = fz::random::uniform<double>({1001}, 3).to_host();
  for (std::size_t i = 0; i < f64.size(); ++i) bad += f64[i] != test::philox::uniform64(3, 0, i);
  CHECK(bad == 0);
}

TEST_CASE("dropout is one kernel and keeps the elements the host Philox keeps", "[gpu][ops][random]") {
  const std::int64_t n = 100003;
  const auto hx = test::random<float>(static_cast<std::size_t>(n), -2, 2, 71);
  auto x = fz::asarray(hx);
  const float p = 0.25f;
  fz::reset_stats();
  fz::Array<float> y = fz::where(fz::random::uniform<float>(2024, fz::random::Offset{7}) < p, 0.f, x / (1 - p));
  CHECK(fz::stats().launches == 1);
  const auto hy = y.to_host();
  std::size_t dropped = 0, bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const bool drop = test::philox::uniform32(2024, 7, static_cast<std::uint64_t>(i)) < p;
    dropped += drop;
    bad += hy[static_cast<std::size_t>(i)] != (drop ? 0.f : hx[static_cast<std::size_t>(i)] / (1 - p));
  }
  CHECK(bad == 0);
  CHECK(std::abs(static_cast<double>(dropped) / n - p) < 0.01);  // about 7 standard deviations of the fraction
  // another offset: another mask
  fz::Array<float> y2 = fz::where(fz::random::uniform<float>(2024, fz::random::Offset{8}) < p, 0.f, x / (1 - p));
  CHECK(y2.to_host() != hy);
}

TEST_CASE("normal values are Box-Muller pairs of the Philox words, against float64", "[gpu][ops][random]") {
  const std::int64_t n = 100003;  // vectors of 4 and a tail of 3: both paths, every position in a pair
  const auto f32 = fz::random::normal<float>({n}, 21, fz::random::Offset{6}).to_host();
  const auto f64 = fz::random::normal<double>({n}, 22, fz::random::Offset{6}).to_host();
  double worst32 = 0, worst64 = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::uint64_t>(i);
    const double want32 = test::philox::normal32(21, 6, k), want64 = test::philox::normal64(22, 6, k);
    // relative to the pair's radius: sin and cos near zero keep the radius's absolute error
    const double r32 = std::hypot(test::philox::normal32(21, 6, k ^ 1), want32);
    const double r64 = std::hypot(test::philox::normal64(22, 6, k ^ 1), want64);
    worst32 = std::max(worst32, std::abs(f32[static_cast<std::size_t>(i)] - want32) / std::max(r32, 1e-30));
    worst64 = std::max(worst64, std::abs(f64[static_cast<std::size_t>(i)] - want64) / std::max(r64, 1e-300));
  }
  INFO("worst error over the radius: float32 " << worst32 << ", float64 " << worst64);
  CHECK(worst32 < 6e-7);   // logf, sqrtf and sincospif: a few float ulps (2^-23 = 1.2e-7)
  CHECK(worst64 < 2e-15);  // a few double ulps (2^-52 = 2.2e-16)
  // a pair's two values lie on one circle: x^2 + y^2 = -2 log u1
  const auto b = test::philox::block(21, 6, 7);
  const double r2 = -2.0 * std::log((static_cast<double>(b[2] >> 8) + 1) * 0x1p-24);
  CHECK(double(f32[30]) * f32[30] + double(f32[31]) * f32[31] == Approx(r2).epsilon(1e-6));
  // another offset, another stream
  CHECK(fz::random::normal<float>({n}, 21, fz::random::Offset{7}).to_host() != f32);
}

TEST_CASE("the float32 Box-Muller transform is accurate on every one of its 2^24 inputs", "[gpu][ops][random]") {
  // normal<float>'s own statements as a function of the two words: word k carries 24 bits k (the low 8 bits, which
  // the transform drops, are noise), so u1 and u2 each take every value they can once, both ends included
  const auto transform = fz::function<float(std::uint32_t, std::uint32_t, std::int32_t)>(
      "normal_of_words", "(unsigned int lo, unsigned int hi, int sine) {\n" + fz::random::detail::normal32_transform() +
                             "  return sine ? r * s : r * c;\n}");
  const std::int64_t n = std::int64_t{1} << 24;
  std::vector<std::uint32_t> lo(static_cast<std::size_t>(n)), hi(lo.size());
  for (std::uint32_t k = 0; k < n; ++k) {
    lo[k] = k << 8 | (k * 37u & 0xffu);
    hi[k] = ((k * 2654435761u) & 0xffffffu) << 8 | (k & 0xffu);  // the angles in another order than u1
  }
  const auto lo_d = fz::asarray(lo), hi_d = fz::asarray(hi);
  const std::vector<float> got_c = fz::Array<float>(transform(lo_d, hi_d, 0)).to_host();
  const std::vector<float> got_s = fz::Array<float>(transform(lo_d, hi_d, 1)).to_host();
  double worst = 0;
  std::size_t worst_k = 0;
  for (std::size_t k = 0; k < lo.size(); ++k) {
    const double u1 = (static_cast<double>(lo[k] >> 8) + 1) * 0x1p-24, u2 = static_cast<double>(hi[k] >> 8) * 0x1p-24;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double want_c = test::philox::box_muller(u1, u2, false), want_s = test::philox::box_muller(u1, u2, true);
    const double e = std::max(std::abs(got_c[k] - want_c), std::abs(got_s[k] - want_s)) / std::max(r, 1e-30);
    if (e > worst) worst = e, worst_k = k;
  }
  INFO("worst error over the radius " << worst << " (" << worst * 0x1p24 << " x 2^-24) at word " << worst_k);
  CHECK(worst < 6e-7);
  // the ends: u1 = 1 gives a zero radius (exact zeros), u1 = 2^-24 the largest, sqrt(48 ln 2)
  const std::size_t last = lo.size() - 1;
  CHECK(got_c[last] == 0.f);
  CHECK(got_s[last] == 0.f);
  CHECK(std::hypot(double(got_c[0]), double(got_s[0])) == Approx(std::sqrt(48 * std::log(2.0))).epsilon(1e-6));
}

TEST_CASE("the float64 Box-Muller transform is accurate at its ends, its quadrants' edges and random words", "[gpu][ops][random]") {
  // normal<double>'s own statements as a function of the two words (53 bits each, the low 11 dropped); the reference
  // in long double (x86's 64-bit significand)
  const auto transform = fz::function<double(std::uint64_t, std::uint64_t, std::int32_t)>(
      "normal64_of_words", "(unsigned long long lo, unsigned long long hi, int sine) {\n" +
                               fz::random::detail::normal64_transform() + "  return sine ? r * s : r * c;\n}");
  std::vector<std::uint64_t> ks = {0, 1, 2, 3, (1ull << 52) - 1, 1ull << 52, (1ull << 53) - 2, (1ull << 53) - 1};
  std::vector<std::uint64_t> ms = {0, 1, (1ull << 53) - 1};
  for (std::uint64_t q = 1; q <= 4; ++q)  // the edges between quadrants (m = (2q - 1) 2^50) and their neighbours
    for (std::int64_t d = -1; d <= 1; ++d) ms.push_back(((2 * q - 1) << 50) + static_cast<std::uint64_t>(d));
  std::uint64_t state = 88172645463325252ull;  // xorshift64: random words of either kind
  auto next = [&] { return state ^= state << 13, state ^= state >> 7, state ^= state << 17; };
  for (int j = 0; j < 4000; ++j) ks.push_back(next() >> 11), ms.push_back(next() >> 11);
  for (int j = 0; j < 1000; ++j) ks.push_back((1ull << 53) - 1 - (next() >> 40));  // u1 near 1: small radii
  std::vector<std::uint64_t> lo, hi;
  for (std::size_t j = 0; j < std::max(ks.size(), ms.size()); ++j) {
    // the noise in the low 11 bits the transform drops
    lo.push_back(ks[j % ks.size()] << 11 | (next() & 0x7ff));
    hi.push_back(ms[(j * 7) % ms.size()] << 11 | (next() & 0x7ff));
  }
  const auto lo_d = fz::asarray(lo), hi_d = fz::asarray(hi);
  const std::vector<double> got_c = fz::Array<double>(transform(lo_d, hi_d, 0)).to_host();
  const std::vector<double> got_s = fz::Array<double>(transform(lo_d, hi_d, 1)).to_host();
  const long double two_pi = 6.283185307179586476925286766559L;
  double worst = 0;
  std::size_t worst_j = 0;
  for (std::size_t j = 0; j < lo.size(); ++j) {
    const long double u1 = (static_cast<long double>(lo[j] >> 11) + 1) * 0x1p-53L;
    const long double angle = two_pi * static_cast<long double>(hi[j] >> 11) * 0x1p-53L;
    const long double r = std::sqrt(-2 * std::log(u1));
    const long double e = std::max(std::abs(got_c[j] - r * std::cos(angle)), std::abs(got_s[j] - r * std::sin(angle)));
    const double rel = static_cast<double>(e / std::max(r, 1e-300L));
    if (rel > worst) worst = rel, worst_j = j;
  }
  INFO("worst error over the radius " << worst << " (" << worst * 0x1p53 << " x 2^-53) at " << worst_j);
  CHECK(worst < 1e-15);
  // the ends: u1 = 1 gives a zero radius (exact zeros), u1 = 2^-53 the largest, sqrt(106 ln 2)
  const std::size_t last = 7, first = 0;  // (ks[7] = 2^53 - 1, ks[0] = 0)
  CHECK(got_c[last] == 0.0);
  CHECK(got_s[last] == 0.0);
  CHECK(std::hypot(got_c[first], got_s[first]) == Approx(std::sqrt(106 * std::log(2.0))).epsilon(1e-15));
}

TEST_CASE("uniform and normal have the moments they should", "[gpu][ops][random]") {
  const std::int64_t n = 1 << 22;
  for (int kind = 0; kind < 4; ++kind) {
    std::vector<double> v;
    if (kind == 0) for (float f : fz::random::uniform<float>({n}, 11).to_host()) v.push_back(f);
    if (kind == 1) v = fz::random::uniform<double>({n}, 12).to_host();
    if (kind == 2) for (float f : fz::random::normal<float>({n}, 13).to_host()) v.push_back(f);
    if (kind == 3) v = fz::random::normal<double>({n}, 14).to_host();
    double mean = 0, m2 = 0, lo = 1e300, hi = -1e300;
    for (double x : v) mean += x, lo = std::min(lo, x), hi = std::max(hi, x);
    mean /= static_cast<double>(n);
    for (double x : v) m2 += (x - mean) * (x - mean);
    const double var = m2 / static_cast<double>(n);
    INFO("kind " << kind << ": mean " << mean << ", variance " << var << ", range " << lo << " .. " << hi);
    if (kind < 2) {
      CHECK(lo >= 0);
      CHECK(hi < 1);
      CHECK(std::abs(mean - 0.5) < 5 * std::sqrt(1.0 / 12 / n));
      CHECK(std::abs(var - 1.0 / 12) < 0.001);
    } else {
      CHECK(std::abs(mean) < 5 / std::sqrt(static_cast<double>(n)));
      CHECK(std::abs(var - 1) < 0.005);
      CHECK((lo < -4 && hi > 4));  // the tails are there
      CHECK((lo > -7 && hi < 7));
    }
  }
}

TEST_CASE("a generator beside a total draws at the result's own indices", "[gpu][ops][random]") {
  // uniform(seed) + sum(x): the total's kernel cannot hold the generator (it has no index of the result)
  const auto h = test::random<float>(6 * 7, -1, 1, 3);
  const auto x = fz::asarray(h, {6, 7});
  double total = 0;
  for (float v : h) total += v;
  const std::vector<float> got = (fz::random::uniform<float>(11, fz::random::Offset{4}) + fz::sum(x)).to_host();
  REQUIRE(got.size() == 1);
  CHECK(got[0] == Approx(test::philox::uniform32(11, 4, 0) + total).epsilon(1e-5));
  // a kept-dims total broadcast against a matrix of draws: element (i, j) draws at i * 7 + j
  auto out = fz::full<float>({6, 7}, NAN);
  fz::copyto(out, x * 0.f + fz::random::uniform<float>(11) + fz::max(x, {0, 1}, true));
  const std::vector<float> m = out.to_host();
  const float top = *std::max_element(h.begin(), h.end());
  for (std::size_t i = 0; i < m.size(); ++i) {
    INFO("element " << i);
    CHECK(m[i] == test::philox::uniform32(11, 0, i) + top);
  }
}
