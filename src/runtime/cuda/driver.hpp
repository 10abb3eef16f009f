// SPDX-License-Identifier: Apache-2.0
// The CUDA Driver API, loaded with dlopen("libcuda.so.1") on first use and resolved once.
#pragma once
#include <cuda.h>

#include <string>

namespace fusion::detail {

// Every entry point fusion calls. The name is stringified after macro expansion, so cuda.h's versioned
// aliases (cuMemAlloc -> cuMemAlloc_v2, ...) resolve to the symbol the header's declaration means.
#define FUSION_DRIVER_FUNCTIONS(X)                                                                  \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)       \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                   \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxGetId) X(cuCtxSetCurrent)      \
  X(cuCtxSynchronize)                                                                             \
  X(cuStreamCreateWithPriority) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery)        \
  X(cuStreamWaitEvent) X(cuStreamGetPriority) X(cuStreamGetFlags) X(cuLaunchHostFunc)             \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuStreamIsCapturing)                            \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventQuery)       \
  X(cuEventElapsedTime) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphDestroy)         \
  X(cuGraphExecDestroy) X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuMemPoolSetAttribute)           \
  X(cuMemPoolGetAttribute) X(cuMemPoolTrimTo) X(cuMemAllocFromPoolAsync) X(cuMemFreeAsync)        \
  X(cuMemAllocHost) X(cuMemFreeHost) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)                    \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuModuleLoadData) X(cuModuleGetFunction)              \
  X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuMemAlloc) X(cuMemFree)    \
  X(cuModuleUnload) X(cuModuleGetFunctionCount) X(cuModuleEnumerateFunctions) X(cuFuncGetName)    \
  X(cuPointerGetAttribute) X(cuPointerGetAttributes) X(cuGraphCreate) X(cuGraphAddKernelNode) X(cuGraphExecKernelNodeSetParams)        \
  X(cuFuncGetParamInfo) X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) X(cuMemcpyPeerAsync)            \
  X(cuStreamGetCtx) X(cuMemPoolSetAccess) X(cuMemPoolGetAccess) X(cuGraphAddChildGraphNode)             \
  X(cuGraphExecChildGraphNodeSetParams) X(cuTensorMapEncodeTiled) X(cuOccupancyMaxActiveClusters)

struct Driver {
#define FUSION_DECLARE_DRIVER_FN(name) decltype(&::name) name = nullptr;
  FUSION_DRIVER_FUNCTIONS(FUSION_DECLARE_DRIVER_FN)
#undef FUSION_DECLARE_DRIVER_FN
  int version = 0;
  int device_count = 0;
};

/// The loaded and initialized driver; throws NoDeviceError (with the reason) where there is none.
const Driver& driver();
/// The same check without throwing: "" when a driver with at least one device is present.
const std::string& driver_unavailable_reason();

/// Throws CudaError (OutOfMemoryError for CUDA_ERROR_OUT_OF_MEMORY) naming `call` when `r` is not success.
void check(CUresult r, const char* call);

/// Devices fusion keeps per-device state for (contexts, built-in streams).
inline constexpr int kMaxDevices = 64;

/// Makes device `id`'s primary context current on this thread, first noticing whether another library
/// reset it (cuDevicePrimaryCtxReset, cudaDeviceReset): that destroys every handle made in it, so the
/// context is brought back and its generation advances. One cuCtxGetId call (~15 ns) when nothing changed.
void ensure_context(int id);

/// ensure_context without trusting what this thread last set: for handing the thread to a library that
/// reads the current context itself (NCCL through the CUDA runtime), which may have changed it since.
void make_context_current(int id);

/// Device `id`'s primary context (made current on this thread first), for calls that name two contexts.
CUcontext primary_context(int id);

/// ensure_context for destructors: false (instead of an exception) when the context cannot be made current.
bool context_for_release(int id) noexcept;

/// Device `id`'s context generation: 1 at first use, one more after each reset ensure_context noticed.
/// Whatever holds driver handles (memory, streams, events, graphs, modules) records the generation it
/// made them in and never touches them in another one: the driver crashes on some stale handles.
unsigned context_generation(int id);

/// True when handles made in `generation` died in a reset of device `id` (call after ensure_context).
inline bool is_stale(unsigned generation, int id) { return generation != context_generation(id); }

/// Throws DeviceResetError: `what` ("this array", "the current stream") was made before device `id` was reset.
[[noreturn]] void throw_device_reset(int id, const char* what);

/// DeviceResetError naming `what` when its handles, made in `generation`, died in a reset of device `id`.
inline void check_not_reset(unsigned generation, int id, const char* what) {
  if (is_stale(generation, id)) throw_device_reset(id, what);
}

}  // namespace fusion::detail

// Calls a driver function and checks its result: FUSION_CU(cuStreamSynchronize, s).
#define FUSION_CU(fn, ...) ::fusion::detail::check(::fusion::detail::driver().fn(__VA_ARGS__), #fn)
