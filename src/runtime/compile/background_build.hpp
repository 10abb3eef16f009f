// SPDX-License-Identifier: Apache-2.0
// Kernels compiled off the caller's thread, for work that has another way to run meanwhile (a matrix product
// runs on cuBLASLt while its generated kernel compiles): the caller asks on each call whether the binary is
// ready and never waits for NVRTC.
#pragma once
#include <optional>
#include <string>

#include "runtime/compile/kernel_cache.hpp"

namespace fusion::detail {

/// What a build off the caller's thread has come to.
struct BackgroundArtifact {
  std::optional<Artifact> artifact;  ///< the binary, once ready
  std::string failed;                ///< else why the build failed ("" while it runs)
};

/// The binary of `k` for `t`: from the kernel store at once where it is there, else from the build this starts on
/// a worker thread on the first ask (nothing until it is done; each kernel is built once per process). The
/// process waits for builds still running when it exits, so that every entry it began reaches the disk cache.
BackgroundArtifact artifact_in_background(const codegen::GeneratedKernel& k, const Target& t);

}  // namespace fusion::detail
