// SPDX-License-Identifier: Apache-2.0
// A stand-in libcuda.so.1 for measuring fusion's host overhead on a machine without a GPU: every call
// succeeds at once, "device" memory is host memory, kernel launches do nothing, and the one device looks
// like an H100 (132 SMs, sm_90). Host-side paths (recording, grouping, layout, argument packing, the
// launch call itself) then run as they would, and a profiler sees only fusion's own time:
//
//   LD_LIBRARY_PATH=build/null-driver perf record -g build/fusion-bench --host-loop region 2000
//
// Never a test oracle: nothing computes, so results are garbage. Built with the benchmarks.
#include <cuda.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<std::uintptr_t> next_handle{0x1000};
template <class T> T handle() { return reinterpret_cast<T>(next_handle.fetch_add(16)); }

CUresult host_alloc(CUdeviceptr* p, size_t bytes) {
  void* m = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = reinterpret_cast<CUdeviceptr>(m);
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }
// NVRTC looks this up in a loaded driver; "not supported" sends it down its driverless path.
CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid*) {
  return *table = nullptr, CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuDriverGetVersion(int* v) { return *v = CUDA_VERSION, CUDA_SUCCESS; }
CUresult CUDAAPI cuGetErrorName(CUresult, const char** s) { return *s = "CUDA_ERROR_NULL_DRIVER", CUDA_SUCCESS; }
CUresult CUDAAPI cuGetErrorString(CUresult, const char** s) { return *s = "null driver", CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetCount(int* n) { return *n = 1, CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGet(CUdevice* d, int ordinal) {
  return *d = ordinal, ordinal == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  std::strncpy(name, "null driver (H100-like)", static_cast<size_t>(len));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 << 20; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 227 << 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 228 << 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    default: *v = 1;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice) { return *bytes = size_t{80} << 30, CUDA_SUCCESS; }
CUcontext the_context() {
  static const CUcontext ctx = handle<CUcontext>();
  return ctx;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) { return *c = the_context(), CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamGetCtx(CUstream, CUcontext* c) { return *c = the_context(), CUDA_SUCCESS; }
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetId(CUcontext, unsigned long long* id) { return *id = 1, CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSynchronize() { return CUDA_SUCCESS; }

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* s, unsigned int, int) {
  return *s = handle<CUstream>(), CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamQuery(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamWaitEvent(CUstream, CUevent, unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamGetPriority(CUstream, int* p) { return *p = 0, CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamGetFlags(CUstream, unsigned int* f) { return *f = 0, CUDA_SUCCESS; }
CUresult CUDAAPI cuLaunchHostFunc(CUstream, CUhostFn fn, void* data) { return fn(data), CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamBeginCapture(CUstream, CUstreamCaptureMode) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamEndCapture(CUstream, CUgraph* g) { return *g = handle<CUgraph>(), CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* s) {
  return *s = CU_STREAM_CAPTURE_STATUS_NONE, CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) { return *e = handle<CUevent>(), CUDA_SUCCESS; }
CUresult CUDAAPI cuEventDestroy(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventQuery(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent, CUevent) { return *ms = 0.001f, CUDA_SUCCESS; }

CUresult CUDAAPI cuGraphCreate(CUgraph* g, unsigned int) { return *g = handle<CUgraph>(), CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode* n, CUgraph, const CUgraphNode*, size_t,
                                      const CUDA_KERNEL_NODE_PARAMS*) {
  return *n = handle<CUgraphNode>(), CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph, unsigned long long) {
  return *e = handle<CUgraphExec>(), CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec, CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphDestroy(CUgraph) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* p, const CUmemPoolProps*) {
  return *p = handle<CUmemoryPool>(), CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool, CUmemPool_attribute, void*) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool, const CUmemAccessDesc*, size_t) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags* f, CUmemoryPool, CUmemLocation*) {
  return *f = CU_MEM_ACCESS_FLAGS_PROT_READWRITE, CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool, CUmemPool_attribute, void* v) {
  std::memset(v, 0, sizeof(cuuint64_t));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool, size_t) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* p, size_t bytes, CUmemoryPool, CUstream) {
  return host_alloc(p, bytes);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream) { return std::free(reinterpret_cast<void*>(p)), CUDA_SUCCESS; }
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t bytes) { return host_alloc(p, bytes); }
CUresult CUDAAPI cuMemFree(CUdeviceptr p) { return std::free(reinterpret_cast<void*>(p)), CUDA_SUCCESS; }
CUresult CUDAAPI cuMemAllocHost(void** p, size_t bytes) {
  CUdeviceptr d = 0;
  const CUresult r = host_alloc(&d, bytes);
  *p = reinterpret_cast<void*>(d);
  return r;
}
CUresult CUDAAPI cuMemFreeHost(void* p) { return std::free(p), CUDA_SUCCESS; }
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream) {
  return std::memcpy(reinterpret_cast<void*>(d), s, n), CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream) {
  return std::memcpy(d, reinterpret_cast<const void*>(s), n), CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
  return std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n), CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr d, CUcontext, CUdeviceptr s, CUcontext, size_t n, CUstream) {
  return std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n), CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceCanAccessPeer(int* can, CUdevice, CUdevice) { return *can = 0, CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext, unsigned) { return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED; }
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream) {
  return std::memset(reinterpret_cast<void*>(d), v, n), CUDA_SUCCESS;
}
CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr) {
  switch (a) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *static_cast<unsigned*>(data) = CU_MEMORYTYPE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = 0; break;
    default: *static_cast<unsigned*>(data) = 0;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuPointerGetAttributes(unsigned n, CUpointer_attribute* attributes, void** data, CUdeviceptr p) {
  for (unsigned i = 0; i < n; ++i) cuPointerGetAttribute(data[i], attributes[i], p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode* n, CUgraph, const CUgraphNode*, size_t, CUgraph) {
  return *n = handle<CUgraphNode>(), CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphExecChildGraphNodeSetParams(CUgraphExec, CUgraphNode, CUgraph) { return CUDA_SUCCESS; }
// (generated products' tensor maps: the bytes are the driver's own encoding, which nothing here reads)
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                        const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                        CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  return *map = CUtensorMap{}, CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule* m, const void*) { return *m = handle<CUmodule>(), CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule, const char*) {
  return *f = handle<CUfunction>(), CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int* n, CUmodule) { return *n = 0, CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction*, unsigned int, CUmodule) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction) { return *name = "null_driver_kernel", CUDA_SUCCESS; }
CUresult CUDAAPI cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction) {
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = 48 << 10; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
// No parameter information (the null driver does not read the cubin): fz::Step then records its
// launches without parameter bytes, which nothing here reads.
// (a kernel's parameters are unknown here: 4 bytes each, never more than any parameter has, 8 apart)
CUresult CUDAAPI cuFuncGetParamInfo(CUfunction, size_t i, size_t* offset, size_t* size) {
  return *offset = 8 * i, *size = 4, CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                                unsigned int, unsigned int, CUstream, void**, void**) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuOccupancyMaxActiveClusters(int* n, CUfunction, const CUlaunchConfig*) { return *n = 66, CUDA_SUCCESS; }
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void**, void**) { return CUDA_SUCCESS; }

}  // extern "C"
