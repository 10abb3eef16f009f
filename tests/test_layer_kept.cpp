// SPDX-License-Identifier: Apache-2.0
// Layer kernels that keep a value for a later pass (softmax's exp(x - max), computed by the sum's pass and read
// by the output's) and divide by a row's value through its reciprocal (fz_div_row): which kernels do, that the
// results are the bits of the kernel that computes everything again, and that the division is the division
// operator's to the bit, special values included.
#include <cstring>
#include <limits>

#include "schedule/tuning.hpp"
#include "support.hpp"

namespace {

/// Occurrences of `what` in `s`.
std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

/// The mixed-precision softmax of 16-bit rows (float math), as fusion-bench and PyTorch code write it.
template <class T> auto softmax16(const fz::Array<T>& x) {
  auto xf = fz::cast<float>(x);
  return fz::cast<T>(fz::exp(xf - fz::max(xf, -1, true)) / fz::sum(fz::exp(xf - fz::max(xf, -1, true)), -1, true));
}

/// Restores the layout thresholds a test changed.
struct SavedTuning {
  fz::detail::Tuning saved = fz::detail::tuning();
  ~SavedTuning() { fz::detail::tuning() = saved; }
};

}  // namespace

TEST_CASE("a later pass reads the value an earlier pass kept, where shared memory still holds enough blocks",
          "[layer]") {
  SavedTuning restore;
  const auto x = fz::placeholder<fz::bfloat16>({16384, 4096});
  const fz::KernelInfo kept = fz::inspect(softmax16(x));
  CHECK_THAT(kept.variant, Catch::Contains("values later passes need kept beside it"));
  CHECK(count(kept.source, "exp(") == 2);  // the sum's pass only: its vector loop and its tail
  CHECK(count(kept.source, "fz_kept") >= 5);
  fz::detail::set_tuning("layer_keep_values=0");
  const fz::KernelInfo again = fz::inspect(softmax16(x));
  CHECK_THAT(again.variant, !Catch::Contains("kept beside it"));
  CHECK(count(again.source, "exp(") == 4);
  CHECK(again.name != kept.name);  // another variant, another hash
  fz::detail::tuning() = restore.saved;

  // Nothing to keep: log-softmax's last pass computes no math call of the element (its log is the row's).
  CHECK_THAT(fz::inspect(fz::log_softmax(fz::placeholder<float>({4096, 4096}))).variant, !Catch::Contains("kept beside"));
  // A float32 row of 65,536 split over a cluster of 4: kept values would double each block's 64 KB slice and
  // leave one block of 512 threads per SM.
  const auto y = fz::placeholder<float>({1024, 65536});
  CHECK_THAT(fz::inspect(fz::exp(y - fz::max(y, -1, true)) / fz::sum(fz::exp(y - fz::max(y, -1, true)), -1, true)).variant,
             !Catch::Contains("kept beside"));
  // Short 16-bit rows, eight to a block of warps, keep theirs; so do 16-bit nodes (kept as float).
  const auto s = fz::placeholder<fz::half>({4096, 100});
  CHECK_THAT(fz::inspect(fz::exp(s - fz::max(s, -1, true)) / fz::sum(fz::exp(s - fz::max(s, -1, true)), -1, true)).variant,
             Catch::Contains("kept beside"));
}

TEST_CASE("a division by a row's value goes through its reciprocal; one by a value along the row does not", "[layer]") {
  const auto x = fz::placeholder<float>({512, 1000}), y = fz::placeholder<float>({512, 1000});
  const auto r = fz::placeholder<float>({512, 1});
  CHECK(count(fz::inspect(x / fz::sum(x, -1, true)).source, "fz_div_row(") == 3);  // the helper, two loops
  CHECK(count(fz::inspect(x / y + fz::sum(x, -1, true)).source, "fz_div_row(") == 0);
  CHECK(count(fz::inspect(fz::sum(x, -1, true) / x).source, "fz_div_row(") == 0);
  CHECK(count(fz::inspect(x / r - fz::mean(x, -1, true)).source, "fz_div_row(") == 3);  // a per-row input
  CHECK(count(fz::inspect(x / 3.f).source, "fz_div_row(") == 0);  // elementwise kernels divide as ever
}

TEST_CASE("kept values give the bits of the kernel computing them again, against float64", "[gpu][layers]") {
  SavedTuning restore;
  for (const auto [R, D] : {std::pair<std::int64_t, std::int64_t>{300, 4096}, {257, 4100}, {1000, 100}, {40, 1000}, {3000, 24}}) {
    // (a block per row in 16-byte vectors, a block per unaligned row, a warp per row, a part of a warp per row)
    INFO("rows " << R << " x " << D);
    const auto hx = test::random<fz::bfloat16>(static_cast<std::size_t>(R * D), -6, 6, static_cast<unsigned>(D));
    const auto x = fz::asarray(hx, {R, D});
    std::vector<double> want(hx.size());
    for (std::int64_t r = 0; r < R; ++r) {
      double m = -std::numeric_limits<double>::infinity(), sum = 0;
      for (std::int64_t j = 0; j < D; ++j) m = std::max(m, test::as_double(hx[static_cast<std::size_t>(r * D + j)]));
      for (std::int64_t j = 0; j < D; ++j) sum += std::exp(test::as_double(hx[static_cast<std::size_t>(r * D + j)]) - m);
      for (std::int64_t j = 0; j < D; ++j)
        want[static_cast<std::size_t>(r * D + j)] = std::exp(test::as_double(hx[static_cast<std::size_t>(r * D + j)]) - m) / sum;
    }
    auto run = [&](bool keep) {
      fz::detail::set_tuning(keep ? "layer_keep_values=1" : "layer_keep_values=0");
      CHECK((fz::inspect(softmax16(x)).variant.find("kept beside") != std::string::npos) == keep);
      fz::Array<fz::bfloat16> y = fz::full<fz::bfloat16>({R, D}, fz::bfloat16(-7.f));  // poisoned
      fz::reset_stats();
      y = softmax16(x);
      CHECK(fz::stats().launches == 1);
      return y.to_host();
    };
    const auto kept = run(true), again = run(false);
    CHECK(test::mismatches(kept, want, fz::DType::bfloat16) == 0);
    CHECK(std::memcmp(kept.data(), again.data(), kept.size() * sizeof(fz::bfloat16)) == 0);
  }
}

TEST_CASE("a division by a row's value is the division operator's, bit for bit, special values included",
          "[gpu][layers]") {
  const std::int64_t R = 64, D = 4096;
  // Quotients over the whole range: every exponent of the numerators against divisors of every size and sign,
  // zeros, subnormals, infinities and NaN on both sides, and divisors whose significand is all ones.
  std::vector<float> hx(static_cast<std::size_t>(R * D)), hr(static_cast<std::size_t>(R));
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] { return static_cast<std::uint32_t>((state = state * 6364136223846793005ull + 1442695040888963407ull) >> 32); };
  auto bits = [](std::uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; };
  for (float& v : hx) v = bits(next());
  const float specials[] = {0.f, -0.f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(), 1e-40f,
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::min()};
  for (std::size_t i = 0; i < std::size(specials); ++i) hx[i * 97] = specials[i];
  for (std::int64_t r = 0; r < R; ++r)
    hr[static_cast<std::size_t>(r)] = r < static_cast<std::int64_t>(std::size(specials)) ? specials[r]
                                      : r % 3 == 0 ? bits(0x3f800000u | 0x7fffffu ^ (next() & 0xffu)) * (r % 2 ? 1.f : -3.f)
                                                   : bits(next());
  const auto x = fz::asarray(hx, {R, D});
  const auto rows = fz::asarray(hr, {R, 1});
  fz::Array<float> q = fz::full<float>({R, D}, 7.f), m = fz::full<float>({R}, 7.f);
  CHECK(fz::inspect(x / rows, fz::max(x, -1)).source.find("fz_div_row(") != std::string::npos);
  fz::reset_stats();
  fz::tie(q, m) = std::make_tuple(x / rows, fz::max(x, -1));
  CHECK(fz::stats().launches == 1);
  const std::vector<float> got = q.to_host();
  std::size_t wrong = 0;
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t j = 0; j < D; ++j) {
      const std::size_t i = static_cast<std::size_t>(r * D + j);
      const float want = hx[i] / hr[static_cast<std::size_t>(r)];
      const bool same = std::isnan(want) ? std::isnan(got[i]) : std::memcmp(&want, &got[i], 4) == 0;
      if (!same && ++wrong <= 5) UNSCOPED_INFO(hx[i] << " / " << hr[static_cast<std::size_t>(r)] << ": " << got[i] << ", want " << want);
    }
  CHECK(wrong == 0);
}
