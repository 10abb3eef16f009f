// SPDX-License-Identifier: Apache-2.0
#include "runtime/driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

#include "fusion/error.hpp"

namespace fusion::detail {
namespace {

#define FUSION_STR2(x) #x
#define FUSION_STR(x) FUSION_STR2(x)

struct Loaded {
  Driver drv;
  std::string error;  // empty when usable
};

Loaded load() {
  Loaded l;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    l.error = fmt::format("no CUDA driver: libcuda.so.1 could not be loaded ({}). Running kernels needs an "
                          "NVIDIA GPU and its driver; building, inspecting and compiling kernels does not.",
                          why ? why : "unknown reason");
    return l;
  }
  std::string missing;
#define FUSION_RESOLVE(name)                                                              \
  l.drv.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, FUSION_STR(name)));         \
  if (!l.drv.name) missing += std::string(missing.empty() ? "" : ", ") + FUSION_STR(name);
  FUSION_DRIVER_FUNCTIONS(FUSION_RESOLVE)
#undef FUSION_RESOLVE
  if (!missing.empty()) {
    l.error = fmt::format("the CUDA driver is too old for fusion: libcuda.so.1 lacks {}. Update the NVIDIA "
                          "driver to one that supports CUDA {}.{}.", missing, CUDA_VERSION / 1000,
                          CUDA_VERSION % 1000 / 10);
    return l;
  }
  if (CUresult r = l.drv.cuInit(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    l.drv.cuGetErrorName(r, &name);
    l.error = fmt::format("the CUDA driver is present but cuInit failed with {} ({}): no usable GPU.",
                          name ? name : "?", static_cast<int>(r));
    return l;
  }
  l.drv.cuDriverGetVersion(&l.drv.version);
  l.drv.cuDeviceGetCount(&l.drv.device_count);
  if (l.drv.device_count == 0) l.error = "the CUDA driver reports no devices.";
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const Driver& driver() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw NoDeviceError(l.error);
  return l.drv;
}

const std::string& driver_unavailable_reason() { return loaded().error; }

void check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const Driver& d = loaded().drv;
  const char* name = "CUDA_ERROR_UNKNOWN";
  const char* desc = "";
  if (d.cuGetErrorName) d.cuGetErrorName(r, &name);
  if (d.cuGetErrorString) d.cuGetErrorString(r, &desc);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    throw OutOfMemoryError(fmt::format("{} failed: out of device memory ({})", call, name));
  throw CudaError(call, static_cast<int>(r), name ? name : "?", desc ? desc : "");
}

void ensure_context(int id) {
  thread_local CUcontext current = nullptr;
  thread_local int current_id = -1;
  if (current_id == id && current) return;
  static std::mutex mu;
  static CUcontext contexts[64] = {};
  CUcontext ctx;
  {
    std::lock_guard lock(mu);
    if (!contexts[id]) {
      CUdevice dev;
      FUSION_CU(cuDeviceGet, &dev, id);
      FUSION_CU(cuDevicePrimaryCtxRetain, &contexts[id], dev);  // retained once, for the process
    }
    ctx = contexts[id];
  }
  FUSION_CU(cuCtxSetCurrent, ctx);
  current = ctx;
  current_id = id;
}

}  // namespace fusion::detail
