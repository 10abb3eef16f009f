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
