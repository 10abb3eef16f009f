// SPDX-License-Identifier: Apache-2.0
// A stand-in CUDA driver that shows one real GPU as several devices, so that fusion's multi-device
// bookkeeping (which context, stream, pool, module and event belongs to which device) runs on a machine
// with one GPU, and runs the same way on a machine with more:
//
//   FUSION_CUDA_DRIVER=build/tests/libfusion_virtual_gpus.so FUSION_VIRTUAL_GPUS=2 \
//   FUSION_NCCL_LIBRARY=/nonexistent build/tests/fusion_tests --gpu "[sharded]"
//
// Every device runs on real GPU 0, whatever else the machine has (other GPUs are hidden: a test of the
// stand-in must not turn into a test of real GPUs where there are some). Device 0 is GPU 0 with its
// primary context; devices past it get a context of their own (cuCtxCreate on GPU 0) in place of a
// primary context, so their streams, events, modules and memory pools are distinct driver objects: a call
// that mixes two devices' handles (a kernel launched on another device's stream, an event recorded on
// another device's stream) fails here as it does on two GPUs. The devices report peer access to each other
// (FUSION_VIRTUAL_PEER=0: none, so copies go staged).
// Every entry point this file does not define is the real driver's: this library links libcuda.so.1,
// and dlsym on its handle finds them there.
//
// What it cannot show: two GPUs' bandwidth or concurrency; NCCL (it loads the real driver and sees the
// real GPUs: point FUSION_NCCL_LIBRARY at a missing file); a kernel reading another device's memory
// (both devices' memory is on one GPU, so that bug does not fault here). A test tool, never shipped.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#define VGPU_STR2(x) #x
#define VGPU_STR(x) VGPU_STR2(x)

namespace {

[[noreturn]] void die(const char* what, const char* detail) {
  std::fprintf(stderr, "virtual_gpus: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  std::abort();
}

void* real_driver() {
  static void* lib = [] {
    void* l = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);  // this library's own dependency
    if (!l) die("the real driver (libcuda.so.1) is not loaded", dlerror());
    return l;
  }();
  return lib;
}

template <class F> F resolve(const char* name) {
  void* f = dlsym(real_driver(), name);
  if (!f) die("the real driver lacks", name);
  return reinterpret_cast<F>(f);
}

// The real driver's `fn` (its versioned name: cuda.h's macros expand before stringizing), resolved once.
#define REAL(fn) ([] { static const auto f = resolve<decltype(&::fn)>(VGPU_STR(fn)); return f; }())

struct Layout {
  std::mutex mu;
  int real_count = 0;     // real GPUs in use: 1 (GPU 0) once the real driver answered, 0 before
  int virtual_count = 0;
  std::map<int, CUcontext> contexts;        // device past the real ones -> the context standing in for its primary
  std::map<CUcontext, int> real_device_of;  // every context handed out -> its real GPU
  std::set<std::pair<CUcontext, CUcontext>> peers;  // (current, peer) pairs of one GPU given peer access
  std::map<CUmemoryPool, int> pool_device;  // pools made for devices past the real ones
  std::map<std::pair<CUmemoryPool, int>, CUmemAccess_flags> pool_access;  // (pool, device) -> granted access
};

Layout& layout() {
  static Layout l;
  return l;
}

/// Fills in the layout on first use after cuInit; the real driver's error before that.
CUresult ready(Layout& l) {
  if (l.real_count > 0) return CUDA_SUCCESS;
  int n = 0;
  if (CUresult r = REAL(cuDeviceGetCount)(&n); r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_ERROR_NO_DEVICE;
  for (int i = 0; i < n; ++i) {
    CUdevice d = -1;
    if (CUresult r = REAL(cuDeviceGet)(&d, i); r != CUDA_SUCCESS) return r;
    if (d != i) die("the real driver's device handles are not its ordinals; this stand-in assumes they are", nullptr);
  }
  const char* want = std::getenv("FUSION_VIRTUAL_GPUS");
  const int v = want && *want ? std::atoi(want) : 2;
  l.virtual_count = v > 1 ? v : 1;
  l.real_count = 1;  // GPU 0 only
  return CUDA_SUCCESS;
}

/// The real GPU of device `dev`, or -1 when there is no such device.
int real_of(CUdevice dev) {
  Layout& l = layout();
  std::lock_guard lock(l.mu);
  if (ready(l) != CUDA_SUCCESS || dev < 0 || dev >= l.virtual_count) return -1;
  return 0;  // every device is GPU 0
}

bool is_real(CUdevice dev) {
  Layout& l = layout();
  std::lock_guard lock(l.mu);
  return ready(l) == CUDA_SUCCESS && dev >= 0 && dev < l.real_count;
}

/// Under l.mu: the device `pool` was made for (pools of devices past 0 are recorded when made).
int owner_of(Layout& l, CUmemoryPool pool) {
  const auto p = l.pool_device.find(pool);
  return p == l.pool_device.end() ? 0 : p->second;
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  Layout& l = layout();
  std::lock_guard lock(l.mu);
  if (CUresult r = ready(l); r != CUDA_SUCCESS) return r;
  *count = l.virtual_count;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* dev, int ordinal) {
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (real_of(ordinal) < 0) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;  // handles are ordinals, as the real driver's are (ready() checks)
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  const int real = real_of(dev);
  if (real < 0) return CUDA_ERROR_INVALID_DEVICE;
  CUresult r = REAL(cuDeviceGetName)(name, len, real);
  if (r == CUDA_SUCCESS && !is_real(dev) && len > 0) {
    const std::size_t used = std::strlen(name);
    std::snprintf(name + used, static_cast<std::size_t>(len) - used, " (virtual device %d)", static_cast<int>(dev));
  }
  return r;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice dev) {
  const int real = real_of(dev);
  return real < 0 ? CUDA_ERROR_INVALID_DEVICE : REAL(cuDeviceGetAttribute)(value, attribute, real);
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  const int real = real_of(dev);
  return real < 0 ? CUDA_ERROR_INVALID_DEVICE : REAL(cuDeviceTotalMem)(bytes, real);
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  const int real = real_of(dev);
  if (real < 0 || !ctx) return real < 0 ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_INVALID_VALUE;
  Layout& l = layout();
  if (is_real(dev)) {
    CUresult r = REAL(cuDevicePrimaryCtxRetain)(ctx, real);
    std::lock_guard lock(l.mu);
    if (r == CUDA_SUCCESS) l.real_device_of[*ctx] = real;
    return r;
  }
  std::lock_guard lock(l.mu);
  CUcontext& mine = l.contexts[dev];
  if (!mine) {
    // cuCtxCreate makes the new context current: put back whatever this thread had.
    CUcontext before = nullptr;
    if (CUresult r = REAL(cuCtxGetCurrent)(&before); r != CUDA_SUCCESS) return r;
    CUctxCreateParams params{};
    if (CUresult r = REAL(cuCtxCreate)(&mine, &params, 0, real); r != CUDA_SUCCESS) return r;
    if (CUresult r = REAL(cuCtxSetCurrent)(before); r != CUDA_SUCCESS) return r;
    l.real_device_of[mine] = real;
  }
  *ctx = mine;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  const int real = real_of(dev);
  if (real < 0) return CUDA_ERROR_INVALID_DEVICE;
  return is_real(dev) ? REAL(cuDevicePrimaryCtxRelease)(real) : CUDA_SUCCESS;  // stand-ins live for the process
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  const int a = real_of(dev), b = real_of(peer);
  if (a < 0 || b < 0 || !can) return !can ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_DEVICE;
  if (a != b) return REAL(cuDeviceCanAccessPeer)(can, a, b);
  const char* peer_env = std::getenv("FUSION_VIRTUAL_PEER");
  *can = dev != peer && !(peer_env && std::strcmp(peer_env, "0") == 0);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  const CUresult r = REAL(cuCtxEnablePeerAccess)(peer, flags);
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return r;
  // Two contexts of one GPU: the real driver may refuse the pair; their memory is one GPU's anyway.
  CUcontext current = nullptr;
  if (REAL(cuCtxGetCurrent)(&current) != CUDA_SUCCESS || !current || current == peer) return r;
  Layout& l = layout();
  std::lock_guard lock(l.mu);
  const auto at = l.real_device_of.find(current), to = l.real_device_of.find(peer);
  if (at == l.real_device_of.end() || to == l.real_device_of.end() || at->second != to->second) return r;
  return l.peers.insert({current, peer}).second ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (!props) return CUDA_ERROR_INVALID_VALUE;
  CUmemPoolProps on_real = *props;
  if (on_real.location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    const int real = real_of(on_real.location.id);
    if (real < 0) return CUDA_ERROR_INVALID_DEVICE;
    on_real.location.id = real;
  }
  const CUresult r = REAL(cuMemPoolCreate)(pool, &on_real);
  if (r == CUDA_SUCCESS && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE && !is_real(props->location.id)) {
    Layout& l = layout();
    std::lock_guard lock(l.mu);
    l.pool_device[*pool] = props->location.id;
  }
  return r;
}

// Every pool is on GPU 0, so the real driver would refuse access for the devices standing in on it (or
// grant it to a real GPU the stand-in hides): grants are kept here, one per pool and device.
CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) {
  if (!pool || (!map && count)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i)
    if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || real_of(map[i].location.id) < 0)
      return CUDA_ERROR_INVALID_DEVICE;
  Layout& l = layout();
  std::lock_guard lock(l.mu);
  for (size_t i = 0; i < count; ++i)
    if (map[i].location.id != owner_of(l, pool)) l.pool_access[{pool, map[i].location.id}] = map[i].flags;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool pool, CUmemLocation* location) {
  if (!flags || !pool || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (real_of(location->id) < 0) return CUDA_ERROR_INVALID_DEVICE;
  Layout& l = layout();
  std::lock_guard lock(l.mu);
  const auto granted = l.pool_access.find({pool, location->id});
  *flags = location->id == owner_of(l, pool) ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
           : granted == l.pool_access.end()  ? CU_MEM_ACCESS_FLAGS_PROT_NONE
                                             : granted->second;
  return CUDA_SUCCESS;
}

// The device of memory a stand-in device allocated is that device, not the real GPU it lives on: found by
// the pool it came from, else by the context that allocated it.
static void correct_ordinal(int* ordinal, CUdeviceptr ptr) {
  CUmemoryPool pool = nullptr;
  CUcontext ctx = nullptr;
  REAL(cuPointerGetAttribute)(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr);
  REAL(cuPointerGetAttribute)(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, ptr);
  Layout& l = layout();
  std::lock_guard lock(l.mu);
  if (const auto p = l.pool_device.find(pool); pool && p != l.pool_device.end()) *ordinal = p->second;
  for (const auto& [dev, mine] : l.contexts)
    if (ctx && ctx == mine) *ordinal = dev;
}

CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  const CUresult r = REAL(cuPointerGetAttribute)(data, attribute, ptr);
  if (r == CUDA_SUCCESS && attribute == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) correct_ordinal(static_cast<int*>(data), ptr);
  return r;
}

// (the plural call answers memory CUDA does not know with a memory type of 0 and no error)
CUresult CUDAAPI cuPointerGetAttributes(unsigned count, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr) {
  const CUresult r = REAL(cuPointerGetAttributes)(count, attributes, data, ptr);
  unsigned type = 0;
  CUpointer_attribute memory_type = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
  void* type_value = &type;
  if (r != CUDA_SUCCESS || REAL(cuPointerGetAttributes)(1, &memory_type, &type_value, ptr) != CUDA_SUCCESS || type == 0)
    return r;
  for (unsigned i = 0; i < count; ++i)
    if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) correct_ordinal(static_cast<int*>(data[i]), ptr);
  return r;
}

}  // extern "C"
