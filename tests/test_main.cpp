// SPDX-License-Identifier: Apache-2.0
// Test entry point. `--gpu` marks a run of [gpu] tests: with no usable device it prints why and exits
// 77, which ctest reports as skipped. `--device N` makes device N the main thread's current device, so the
// single-device tests run on another device than 0 (scripts/gpu-check's `virtual` stage). `--tune name=value` sets a
// tuning knob before any case runs, as fusion-fuzz and the benchmarks take it (cases that set knobs themselves restore
// this value after). Without --gpu and
// without a device, selecting a [gpu] case is refused with a message (its code would fail on the missing device).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fusion/device.hpp"
#include "fusion/error.hpp"
#include "schedule/tuning.hpp"

int main(int argc, char** argv) {
  std::vector<char*> args;
  bool gpu = false;
  int device = 0;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpu") == 0) gpu = true;
    else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--tune") == 0 && i + 1 < argc) {
      try {
        fusion::detail::set_tuning(argv[++i]);
      } catch (const fusion::Error& e) {
        std::printf("--tune: %s\n", e.what());
        return 2;
      }
    }
    else args.push_back(argv[i]);
  }
  if (gpu && fusion::device_count() == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n", fusion::no_device_reason().c_str());
    return 77;
  }
  if (device != 0) {
    if (device >= fusion::device_count()) {
      std::printf("--device %d: there are %d device(s)\n", device, fusion::device_count());
      return 2;
    }
    fusion::Device(device).use();
  }
  Catch::Session session;
  if (const int rc = session.applyCommandLine(static_cast<int>(args.size()), args.data()); rc != 0) return rc;
  const Catch::Config& config = session.config();
  const bool listing = config.listTests() || config.listTestNamesOnly() || config.listTags() || config.listReporters();
  if (!gpu && !listing && fusion::device_count() == 0) {  // a [gpu] case named without --gpu: say so, not crash in it
    std::size_t n = 0;
    for (const Catch::TestCase& t : Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config))
      n += std::find(t.tags.begin(), t.tags.end(), "gpu") != t.tags.end();
    if (n > 0) {
      std::printf("%zu of the selected test cases are tagged [gpu] and there is no CUDA device here (%s): leave them "
                  "out with \"~[gpu]\", or pass --gpu to skip the run\n", n, fusion::no_device_reason().c_str());
      return 2;
    }
  }
  return session.run();
}
