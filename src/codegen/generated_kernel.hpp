// SPDX-License-Identifier: Apache-2.0
// What an emitter hands to the runtime: a kernel's source, name, hash and signature. The runtime's
// compile and launch layers depend on this header only, never on an emitter.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/signature.hpp"

namespace fusion::codegen {

struct GeneratedKernel {
  std::string name;    ///< fz_<ops>_<dtype>_<hash> or <user name>_<hash>
  std::uint64_t hash;  ///< of the canonical IR and the variant
  std::string source;
  KernelSignature signature;  ///< the parameter list, in order, and where each value comes from
  /// NVRTC options beyond fusion's own (user kernels); part of the disk-cache key.
  std::vector<std::string> options;
  /// Compile without -minimal (user code may use any device API).
  bool full_headers = false;
  /// Compile for the architecture-specific target (sm_90a): the kernel uses what only that architecture has
  /// (wgmma, setmaxnreg), and runs on that compute capability alone.
  bool arch_specific = false;
};

}  // namespace fusion::codegen
