// SPDX-License-Identifier: Apache-2.0
// Test entry point. `--gpu` marks a run of [gpu] tests: with no usable device it prints why and exits
// 77, which ctest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

#include "fusion/device.hpp"

int main(int argc, char** argv) {
  std::vector<char*> args;
  bool gpu = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpu") == 0) gpu = true;
    else args.push_back(argv[i]);
  }
  if (gpu && fusion::device_count() == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n", fusion::no_device_reason().c_str());
    return 77;
  }
  return Catch::Session().run(static_cast<int>(args.size()), args.data());
}
