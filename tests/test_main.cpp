// SPDX-License-Identifier: Apache-2.0
// Test entry point. `--gpu` marks a run of [gpu] tests: with no usable device it prints why and exits
// 77, which ctest reports as skipped. `--device N` makes device N the main thread's current device, so the
// single-device tests run on another device than 0 (scripts/gpu-check's `virtual` stage).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fusion/device.hpp"

int main(int argc, char** argv) {
  std::vector<char*> args;
  bool gpu = false;
  int device = 0;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpu") == 0) gpu = true;
    else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = std::atoi(argv[++i]);
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
  return Catch::Session().run(static_cast<int>(args.size()), args.data());
}
