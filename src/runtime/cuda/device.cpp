// SPDX-License-Identifier: Apache-2.0
#include "fusion/device.hpp"

#include <fmt/format.h>

#include <memory>
#include <atomic>
#include <mutex>

#include "fusion/error.hpp"
#include "runtime/cuda/held_work.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"

namespace fusion {
namespace detail {

thread_local int tls_current_device = 0;

int checked_device(int id) {
  const int n = driver().device_count;
  if (id < 0 || id >= n)
    throw NoDeviceError(fmt::format("device {} does not exist: this machine has {} CUDA device(s)", id, n));
  return id;
}

const DeviceProperties& properties_of(int id) {
  // Read on the launch path (layouts size grids by the SM count): found without a lock once filled.
  static std::atomic<const DeviceProperties*> cache[64];
  if (const DeviceProperties* p = cache[id].load(std::memory_order_acquire)) return *p;
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (!cache[id].load(std::memory_order_relaxed)) {
    auto p = std::make_unique<DeviceProperties>();
    CUdevice dev;
    FUSION_CU(cuDeviceGet, &dev, id);
    char name[256] = {};
    FUSION_CU(cuDeviceGetName, name, sizeof name, dev);
    p->name = name;
    auto attr = [&](CUdevice_attribute a) {
      int v = 0;
      FUSION_CU(cuDeviceGetAttribute, &v, a, dev);
      return v;
    };
    p->compute_capability_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    p->compute_capability_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    p->multiprocessor_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    p->max_threads_per_multiprocessor = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    p->l2_cache_bytes = static_cast<std::size_t>(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
    p->max_shared_bytes_per_block =
        static_cast<std::size_t>(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
    p->max_shared_bytes_per_sm =
        static_cast<std::size_t>(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
    FUSION_CU(cuDeviceTotalMem, &p->total_memory, dev);
    cache[id].store(p.release(), std::memory_order_release);  // kept for the process
  }
  return *cache[id].load(std::memory_order_relaxed);
}

codegen::TargetDevice target_device(int id) {
  if (id < 0) return {};
  const DeviceProperties& p = properties_of(id);
  return {p.multiprocessor_count, p.max_shared_bytes_per_block, p.max_shared_bytes_per_sm, p.compute_capability_major, true,
          p.compute_capability_minor};
}

}  // namespace detail

int device_count() { return detail::driver_unavailable_reason().empty() ? detail::driver().device_count : 0; }
std::string no_device_reason() { return detail::driver_unavailable_reason(); }

Device::Device(int id) : id_(detail::checked_device(id)) {}
Device Device::current() { return Device(detail::tls_current_device); }
void Device::use() const { detail::tls_current_device = id_; }
void Device::synchronize() const {
  detail::region_barrier();
  detail::outside_step("a device synchronize");
  detail::ensure_context(id_);
  FUSION_CU(cuCtxSynchronize);
}
const DeviceProperties& Device::properties() const { return detail::properties_of(id_); }

DeviceScope::DeviceScope(Device d) : previous_(detail::tls_current_device) { d.use(); }
DeviceScope::~DeviceScope() { detail::tls_current_device = previous_; }

}  // namespace fusion
