// SPDX-License-Identifier: Apache-2.0
// The differential fuzzer on the GPU: a fixed-seed slice of random expressions against the float64
// reference (fusion-fuzz runs the large campaign), and the bugs it found, kept as regression tests.
#include "fuzz_run.hpp"
#include "support.hpp"

TEST_CASE("fuzz: a fixed-seed slice of random expressions matches the float64 reference", "[gpu][fuzz]") {
  const int n = 300;
  int failed = 0;
  std::int64_t compared = 0;
  for (int k = 0; k < n; ++k) {
    const fuzz::Case c = fuzz::generate(0x9a'0000 + static_cast<std::uint64_t>(k));
    const fuzz::Verdict v = fuzz::run_on_gpu(c);
    if (v.failed()) {
      ++failed;
      UNSCOPED_INFO(fuzz::kind_name(v.kind) << ": " << v.detail << fuzz::to_cpp(fuzz::shrink(c, fuzz::run_on_gpu, 150), "repro"));
    }
    compared += v.compared;
  }
  CHECK(failed == 0);
  CHECK(compared > 100000);
}

// ---- regressions the fuzzer found ------------------------------------------------------------------

TEST_CASE("fuzz regression: a plan that fails in a later step leaves earlier outputs unwritten", "[gpu][fuzz]") {
  // case 1002887: fz::tie of an argmin and a max over an empty extent wrote the argmin, then threw
  const auto x = fz::asarray(std::vector<float>{2.0f, -1.0f, 3.0f}, {3});
  const auto empty = fz::asarray(std::vector<std::uint64_t>{}, {1, 0});
  auto first = fz::full<std::int64_t>({}, -7);
  auto second = fz::full<std::uint64_t>({1}, 9);
  CHECK_THROWS_AS((fz::tie(first, second) = std::make_tuple(fz::argmin(x), fz::max(empty, 1))), fz::ShapeError);
  CHECK(first.item() == -7);
  CHECK(second.to_host() == std::vector<std::uint64_t>{9});
  // an output shape that does not fit the second result is refused before the first is written
  auto wrong = fz::full<float>({2}, 5.0f);
  CHECK_THROWS_AS((fz::tie(first, wrong) = std::make_tuple(fz::argmin(x), fz::sum(x, {}, true) + x)), fz::ShapeError);
  CHECK(first.item() == -7);
  CHECK(wrong.to_host() == std::vector<float>{5.0f, 5.0f});
}
