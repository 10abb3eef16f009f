// SPDX-License-Identifier: Apache-2.0
// What the layout decisions know of the device they plan for: a plain description, read off the device by
// the runtime (detail::target_device) or, without one (fz::inspect and fz::precompile on a machine without
// a GPU), an H100's. The decisions take this instead of asking the runtime, so they run with no GPU.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fusion::codegen {

struct TargetDevice {
  std::int64_t sms = 132;                         ///< multiprocessors
  std::size_t max_shared_per_block = 227 * 1024;  ///< shared memory a block may opt in to
  std::size_t max_shared_per_sm = 228 * 1024;     ///< shared memory of one multiprocessor
  int compute_major = 9;                          ///< compute capability's major number (clusters need 9)
  bool real = false;                              ///< read off a device (false: the H100 planned for)
  int compute_minor = 0;                          ///< its minor number (sm_90a kernels need exactly 9.0)
};

}  // namespace fusion::codegen
