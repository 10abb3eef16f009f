// SPDX-License-Identifier: Apache-2.0
#include "runtime/cuda/driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
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

/// The driver library: libcuda.so.1, or the file FUSION_CUDA_DRIVER names (a forward-compatibility driver,
/// or a stand-in such as tests/tools/virtual_gpus.cpp, which shows one GPU as several).
std::string driver_path() {
  const char* p = std::getenv("FUSION_CUDA_DRIVER");
  return p && *p ? p : "libcuda.so.1";
}

Loaded load() {
  Loaded l;
  const std::string path = driver_path();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    l.error = fmt::format("no CUDA driver: {} could not be loaded ({}). Running kernels needs an "
                          "NVIDIA GPU and its driver; building, inspecting and compiling kernels does not.",
                          path, why ? why : "unknown reason");
    return l;
  }
  std::string missing;
#define FUSION_RESOLVE(name)                                                              \
  l.drv.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, FUSION_STR(name)));         \
  if (!l.drv.name) missing += std::string(missing.empty() ? "" : ", ") + FUSION_STR(name);
  FUSION_DRIVER_FUNCTIONS(FUSION_RESOLVE)
#undef FUSION_RESOLVE
  if (!missing.empty()) {
    l.error = fmt::format("the CUDA driver is too old for fusion: {} lacks {}. Update the NVIDIA "
                          "driver to one that supports CUDA {}.{}.", path, missing, CUDA_VERSION / 1000,
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

namespace {

/// Device `id`'s primary context as fusion knows it: retained once for the process, with the driver's
/// id of the incarnation that fusion's handles belong to.
struct PrimaryContext {
  std::atomic<CUcontext> handle{nullptr};
  std::atomic<unsigned long long> incarnation{0};
  std::atomic<unsigned> generation{0};
};
PrimaryContext primary[kMaxDevices];
std::mutex primary_mu;

/// Under primary_mu: retains the context on first use; after a reset, brings it back. A reset context
/// answers CUDA_ERROR_CONTEXT_IS_DESTROYED until it is retained again (the retain that fusion holds
/// survives the reset but does not revive it), so retain once more and drop that extra reference. If
/// the other library already revived it, its id changed and there is nothing to revive.
void renew(int id) {
  PrimaryContext& p = primary[id];
  CUcontext ctx = p.handle.load();
  unsigned long long live = 0;
  if (ctx && driver().cuCtxGetId(ctx, &live) == CUDA_SUCCESS && live == p.incarnation.load()) return;  // raced
  CUdevice dev;
  FUSION_CU(cuDeviceGet, &dev, id);
  if (!ctx) {
    FUSION_CU(cuDevicePrimaryCtxRetain, &ctx, dev);  // held for the process
  } else if (driver().cuCtxGetId(ctx, &live) != CUDA_SUCCESS) {
    FUSION_CU(cuDevicePrimaryCtxRetain, &ctx, dev);
    FUSION_CU(cuDevicePrimaryCtxRelease, dev);
  }
  FUSION_CU(cuCtxGetId, ctx, &live);
  p.handle.store(ctx);
  p.incarnation.store(live);
  p.generation.fetch_add(1, std::memory_order_release);
}

}  // namespace

void ensure_context(int id) {
  thread_local int current_id = -1;
  thread_local unsigned current_generation = 0;
  PrimaryContext& p = primary[id];
  CUcontext ctx = p.handle.load(std::memory_order_acquire);
  unsigned long long live = 0;
  const CUresult r = ctx ? driver().cuCtxGetId(ctx, &live) : CUDA_ERROR_INVALID_CONTEXT;
  if (r == CUDA_ERROR_DEINITIALIZED) return;  // the process is exiting: later calls report it, and releases ignore it
  if (r != CUDA_SUCCESS || live != p.incarnation.load(std::memory_order_acquire)) {
    std::lock_guard lock(primary_mu);
    renew(id);
    ctx = p.handle.load();
  }
  const unsigned generation = p.generation.load(std::memory_order_acquire);
  if (current_id == id && current_generation == generation) return;
  FUSION_CU(cuCtxSetCurrent, ctx);
  current_id = id;
  current_generation = generation;
}

void make_context_current(int id) {
  ensure_context(id);  // retained, revived after a reset, and this thread's record says `id`
  FUSION_CU(cuCtxSetCurrent, primary[id].handle.load(std::memory_order_acquire));
}

CUcontext primary_context(int id) {
  ensure_context(id);
  return primary[id].handle.load(std::memory_order_acquire);
}

bool context_for_release(int id) noexcept {
  try {
    ensure_context(id);
    return true;
  } catch (...) {
    return false;
  }
}

unsigned context_generation(int id) { return primary[id].generation.load(std::memory_order_acquire); }

void throw_device_reset(int id, const char* what) {
  throw DeviceResetError(fmt::format(
      "{} was made before device {} was reset (cuDevicePrimaryCtxReset or cudaDeviceReset, usually called by "
      "another library), which freed its memory and destroyed its handles. Make it again after the reset; "
      "arrays, streams and events made since work, and fusion reloads its kernels by itself.",
      what, id));
}

}  // namespace fusion::detail
