// SPDX-License-Identifier: Apache-2.0
// From generated source to a launchable function: memory cache -> disk cache -> NVRTC -> module load.
#pragma once
#include <cuda.h>

#include <optional>
#include <string>

#include "codegen/generated_kernel.hpp"
#include "runtime/compile/cache_entry.hpp"
#include "runtime/compile/nvrtc.hpp"

namespace fusion::detail {

/// A compiled binary and where it came from.
struct Artifact {
  std::string binary;
  bool ptx = false;
  int registers = -1;
  std::string target;
  std::string cache_path;  ///< "" with the disk cache off
};

/// The disk-cache key of `source` compiled for `t` with user options `extra` (`minimal`: fusion's own
/// kernels, without the toolkit headers).
CacheKey cache_key(const std::string& source, const std::string& kernel_name, const Target& t,
                   const std::vector<std::string>& extra, bool minimal);

/// The binary for `k` on a device of target `t`: from the disk cache, else compiled by NVRTC and stored.
Artifact build_artifact(const codegen::GeneratedKernel& k, const Target& t);
/// ... from the kernel store only (nothing where it is not there).
std::optional<Artifact> stored_artifact(const codegen::GeneratedKernel& k, const Target& t);

struct LoadedModule {
  CUmodule module = nullptr;
  int registers = -1;  ///< ptxas' figure for the first (or only) kernel
  std::string target, cache_path;
};

/// The loaded module for `k`'s source and options on `device`; thread-safe, loads each once per process.
const LoadedModule& load_module(const codegen::GeneratedKernel& k, int device);
/// ... if it can be had without waiting for NVRTC: loaded already, in the kernel store, or built on a worker thread
/// since an earlier ask (runtime/compile/background_build.hpp); else nothing, and `failed` says why where the
/// build failed ("" while it runs).
const LoadedModule* load_module_if_ready(const codegen::GeneratedKernel& k, int device, std::string* failed);

struct LoadedKernel {
  CUfunction function = nullptr;
  std::string name;
  int registers = -1;
  std::string target, cache_path;
};

/// The loaded function `k.name` of `k`'s module on `device`; thread-safe, looked up once per process.
const LoadedKernel& load_kernel(const codegen::GeneratedKernel& k, int device);

}  // namespace fusion::detail
