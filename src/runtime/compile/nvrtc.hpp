// SPDX-License-Identifier: Apache-2.0
// NVRTC: CUDA source -> cubin for one architecture (PTX where NVRTC does not know the device's).
#pragma once
#include <string>
#include <vector>

namespace fusion::detail {

struct Target {
  int arch = 90;        ///< compute capability as major*10+minor
  bool ptx = false;     ///< emit PTX for the driver to JIT (the device is newer than NVRTC)
  bool specific = false;  ///< the architecture-specific target ("sm_90a": wgmma), for that architecture alone
  std::string name() const;  ///< "sm_90", "sm_90a" or "compute_100"
};

/// The target for a device's compute capability: exact cubin when NVRTC supports it.
Target target_for_arch(int device_arch);
/// The target when no device is involved: FUSION_ARCH (e.g. "90"), else sm_90.
Target default_target();

struct CompileOutput {
  std::string binary;  ///< cubin or PTX
  std::string log;
  int registers = -1;  ///< from ptxas' report (cubin only)
  double milliseconds = 0;
};

/// "13.0"
const std::string& nvrtc_version();
/// The options a kernel is compiled with for `t` (they are part of the disk-cache key): fusion's own,
/// then `extra` (user options). `minimal` leaves out headers that generated kernels never need.
std::vector<std::string> compile_options(const Target& t, const std::vector<std::string>& extra = {},
                                         bool minimal = true);
/// Compiles `source`; CompileError with the log and numbered source when NVRTC rejects it.
CompileOutput compile(const std::string& source, const std::string& kernel_name, const Target& t,
                      const std::vector<std::string>& extra = {}, bool minimal = true);

}  // namespace fusion::detail
