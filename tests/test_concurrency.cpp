// SPDX-License-Identifier: Apache-2.0
// Sixteen threads building, compiling and caching identical and different expressions at once (no
// GPU needed; the ThreadSanitizer build runs this). The GPU version is in test_runtime_gpu.cpp.
#include <atomic>
#include <thread>

#include "fuzz_run.hpp"
#include "support.hpp"

TEST_CASE("concurrency: sixteen threads compile identical and different expressions through the caches",
          "[concurrency][nvrtc]") {
  std::atomic<int> failures{0}, unfused_leaks{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([t, &failures, &unfused_leaks] {
      // thread-local state: fz::Unfused in one thread never changes another
      std::optional<fz::Unfused> unfused;
      if (t % 2) unfused.emplace();
      std::optional<fz::FastMath> fast;  // and fz::FastMath in every fourth (their kernels are fast twins)
      if (t % 4 == 2) fast.emplace();
      for (int k = 0; k < 3; ++k) {
        // seeds shared by four threads each (identical kernels racing) and seeds of their own
        for (std::uint64_t seed : {0x5a0000ull + static_cast<std::uint64_t>(t % 4 * 10 + k),
                                   0x5b0000ull + static_cast<std::uint64_t>(t * 10 + k)}) {
          const fuzz::Verdict v = fuzz::compile_only(fuzz::generate(seed, {.max_depth = 5, .max_elements = 500}));
          if (v.failed() || v.kind == fuzz::Verdict::invalid) ++failures;
        }
        if (fz::Unfused::active() != (t % 2 == 1) || fz::FastMath::active() != (t % 4 == 2)) ++unfused_leaks;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(unfused_leaks == 0);
  CHECK_FALSE(fz::Unfused::active());
  CHECK_FALSE(fz::FastMath::active());
}
