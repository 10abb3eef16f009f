// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <atomic>
#include <cstdint>

namespace fusion::detail {

struct Counters {
  std::atomic<std::uint64_t> compiles{0}, memory_hits{0}, disk_hits{0}, launches{0}, bytes_read{0}, bytes_written{0},
      min_bytes{0};
  std::atomic<double> compile_ms{0};
};
Counters& counters();

}  // namespace fusion::detail
