// SPDX-License-Identifier: Apache-2.0
// RawModule and RawKernel: user source compiled through the same NVRTC path and caches as generated
// kernels (with the full device headers, since user code may use any of them), loaded once per device.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "common/hash.hpp"
#include "fusion/error.hpp"
#include "fusion/raw_kernel.hpp"
#include "runtime/exec/step_hook.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/compile/kernel_cache.hpp"
#include "runtime/measure/stats_counters.hpp"
#include "runtime/memory/storage.hpp"
#include "runtime/cuda/stream_state.hpp"

namespace fusion {
namespace detail {

/// The kernels a loaded module defines, by their (possibly mangled) names.
std::vector<std::string> kernel_names(CUmodule m) {
  unsigned n = 0;
  FUSION_CU(cuModuleGetFunctionCount, &n, m);
  std::vector<CUfunction> functions(n);
  if (n) FUSION_CU(cuModuleEnumerateFunctions, functions.data(), n, m);
  std::vector<std::string> names;
  for (CUfunction f : functions) {
    const char* name = nullptr;
    FUSION_CU(cuFuncGetName, &name, f);
    names.emplace_back(name ? name : "");
  }
  return names;
}

struct RawModuleImpl {
  codegen::GeneratedKernel k;  // name: the kernel's (RawKernel) or "module_<hash>" (RawModule)
  std::mutex mu;
  // (device, its context generation, kernel name): a device reset destroys the functions, which then load again
  std::map<std::tuple<int, unsigned, std::string>, CUfunction> functions;

  RawModuleImpl(std::string source, std::string label, std::vector<std::string> options) {
    for (const std::string& o : options)
      if (o.starts_with("--gpu-architecture") || o.starts_with("-arch"))
        throw TypeError(fmt::format("the option '{}' is fusion's to choose (from the device)", o));
    StableHasher h;
    h.add(source);
    for (const auto& o : options) h.add(o);
    k.hash = h.digest();
    k.name = label.empty() ? "module_" + hex16(k.hash) : std::move(label);
    k.source = std::move(source);
    k.options = std::move(options);
    k.full_headers = true;
  }

  CUfunction function(const std::string& name, int device) {
    std::lock_guard lock(mu);
    auto [it, fresh] = functions.try_emplace({device, context_generation(device), name}, nullptr);
    if (!fresh) return it->second;
    try {
      const LoadedModule& m = load_module(k, device);
      // A missing name is refused before asking the driver for it, which would be a failing driver call
      // (one that compute-sanitizer reports), and the message can list what the module has.
      const std::vector<std::string> names = kernel_names(m.module);
      if (std::find(names.begin(), names.end(), name) == names.end())
        throw Error(fmt::format("the module has no kernel named '{}' (it has: {}); declare it extern \"C\" __global__ "
                                "(C++ names are mangled) and check the spelling", name, fmt::join(names, ", ")));
      FUSION_CU(cuModuleGetFunction, &it->second, m.module, name.c_str());
    } catch (...) {
      functions.erase(it);
      throw;
    }
    return it->second;
  }
};

}  // namespace detail

RawModule::RawModule(std::string source, std::vector<std::string> options)
    : impl_(std::make_shared<detail::RawModuleImpl>(std::move(source), "", std::move(options))) {}

RawKernel RawModule::get_function(const std::string& name) const { return RawKernel(impl_, name); }

const std::string& RawModule::source() const { return impl_->k.source; }

KernelInfo RawModule::inspect() const { return detail::finish_inspect(impl_->k, "user source"); }

RawKernel::RawKernel(std::string source, std::string name, std::vector<std::string> options)
    : module_(std::make_shared<detail::RawModuleImpl>(std::move(source), name, std::move(options))),
      name_(std::move(name)) {
  if (name_.empty()) throw TypeError("RawKernel needs the name of the kernel to launch");
}

KernelInfo RawKernel::inspect() const {
  KernelInfo info = detail::finish_inspect(module_->k, "user source");
  info.name = name_;
  return info;
}

void RawKernel::launch_packed(Dim3 grid, Dim3 block, const LaunchOptions& o, void** args,
                              const ArrayBase* const* arrays, int n) const {
  detail::outside_step("a RawKernel launch");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0)
    throw Error(fmt::format("RawKernel '{}': grid ({}, {}, {}) and block ({}, {}, {}) need every extent >= 1", name_,
                            grid.x, grid.y, grid.z, block.x, block.y, block.z));
  const std::shared_ptr<detail::StreamState>& stream = o.stream ? o.stream->state() : detail::current_stream_state();
  if (o.stream) detail::live(*stream);  // (current_stream_state checked the current one)
  for (int i = 0; i < n; ++i) {
    const ArrayBase* a = arrays[i];
    if (!a) continue;
    if (!a->has_storage())
      throw Error(fmt::format("RawKernel '{}': argument {} is an Array without memory", name_, i + 1));
    a->data_ptr();  // packed before the launch began: checked here, once a device reset would have been noticed
    if (a->device() != stream->device)
      throw Error(fmt::format("RawKernel '{}': argument {} lives on device {} but the launch is on device {}", name_,
                              i + 1, a->device(), stream->device));
  }
  const CUfunction f = module_->function(name_, stream->device);
  FUSION_CU(cuLaunchKernel, f, grid.x, grid.y, grid.z, block.x, block.y, block.z, static_cast<unsigned>(o.shared_mem),
            stream->handle, args, nullptr);
  for (int i = 0; i < n; ++i)
    if (arrays[i])
      arrays[i]->storage()->note_use(stream), arrays[i]->storage()->note_write();  // any argument may be written
  detail::counters().launches.fetch_add(1, std::memory_order_relaxed);
}

KernelAttributes RawKernel::attributes() const {
  const CUfunction f = module_->function(name_, detail::enter_current_device());
  auto get = [&](CUfunction_attribute a) {
    int v = 0;
    FUSION_CU(cuFuncGetAttribute, &v, a, f);
    return v;
  };
  KernelAttributes r;
  r.registers = get(CU_FUNC_ATTRIBUTE_NUM_REGS);
  r.max_threads_per_block = get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  r.local_bytes = get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
  r.shared_bytes = get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  r.const_bytes = get(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES);
  r.max_dynamic_shared_bytes = get(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  r.ptx_version = get(CU_FUNC_ATTRIBUTE_PTX_VERSION);
  r.binary_version = get(CU_FUNC_ATTRIBUTE_BINARY_VERSION);
  return r;
}

void RawKernel::set_max_dynamic_shared_memory(int bytes) const {
  const CUfunction f = module_->function(name_, detail::enter_current_device());
  FUSION_CU(cuFuncSetAttribute, f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

}  // namespace fusion
