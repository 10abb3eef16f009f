// SPDX-License-Identifier: Apache-2.0
#include "runtime/compile/kernel_cache.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "fusion/error.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/compile/background_build.hpp"
#include "runtime/compile/cubin_registers.hpp"
#include "runtime/compile/disk_cache.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/measure/stats_counters.hpp"

namespace fusion::detail {
namespace {

bool show_kernels() {
  static const bool on = [] {
    const char* v = std::getenv("FUSION_SHOW_KERNELS");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

// The kernels FUSION_SHOW_KERNELS has shown. At namespace scope: made before, and destroyed after, every
// function's static (a build still running on a worker thread at exit may show its kernel).
std::mutex shown_mu;
std::set<std::string> shown;

/// FUSION_SHOW_KERNELS=1: each kernel's name and source, once per process.
void announce(const codegen::GeneratedKernel& k, const std::string& target) {
  if (!show_kernels()) return;
  std::lock_guard lock(shown_mu);
  if (shown.insert(k.name).second)
    std::fprintf(stderr, "fusion: kernel %s (%s)\n%s\n", k.name.c_str(), target.c_str(), k.source.c_str());
}

}  // namespace

CacheKey cache_key(const std::string& source, const std::string& kernel_name, const Target& t,
                   const std::vector<std::string>& extra, bool minimal) {
  std::string options;
  for (const auto& o : compile_options(t, extra, minimal)) options += o + " ";
  return CacheKey{source, kernel_name, nvrtc_version(), options, t.name()};
}

namespace {

/// The target `k` is built for on a device of `device_target`'s: an architecture-specific kernel (the planner
/// chose it for a device of exactly that architecture) as sm_XXa.
Target build_target(const codegen::GeneratedKernel& k, const Target& device_target) {
  Target t = device_target;
  if (k.arch_specific) {
    if (t.ptx)
      throw Error(fmt::format("internal: kernel {} needs the sm_{}a target, which this NVRTC cannot build", k.name, t.arch));
    t.specific = true;
  }
  return t;
}

CacheKey key_of(const codegen::GeneratedKernel& k, const Target& t) {
  return cache_key(k.source, k.name, t, k.options, !k.full_headers);
}

}  // namespace

std::optional<Artifact> stored_artifact(const codegen::GeneratedKernel& k, const Target& device_target) {
  const Target t = build_target(k, device_target);
  auto hit = kernel_store().load(key_of(k, t));
  if (!hit) return std::nullopt;
  ++counters().disk_hits;
  Artifact a;
  a.target = t.name();
  a.ptx = t.ptx;
  a.binary = std::move(hit->binary);
  // (entries written while NVRTC's own cache left ptxas' report out of the log hold -1: read the cubin instead)
  a.registers = hit->registers >= 0 || t.ptx ? hit->registers : registers_in_cubin(a.binary, k.name);
  a.cache_path = std::move(hit->location);  // the store that had it (no second read)
  return a;
}

Artifact build_artifact(const codegen::GeneratedKernel& k, const Target& device_target) {
  const Target t = build_target(k, device_target);
  announce(k, t.name());
  if (auto a = stored_artifact(k, device_target)) return std::move(*a);
  const CacheKey key = key_of(k, t);
  CompileOutput out = compile(k.source, k.name, t, k.options, !k.full_headers);
  ++counters().compiles;
  counters().compile_ms.fetch_add(out.milliseconds, std::memory_order_relaxed);
  Artifact a;
  a.target = t.name();
  a.ptx = t.ptx;
  a.binary = std::move(out.binary);
  a.registers = out.registers;
  KernelStore& store = kernel_store();
  store.store(CacheEntry{key, a.binary, t.ptx, a.registers, {}});
  a.cache_path = store.location(key);
  return a;
}

namespace {

/// The in-memory key: everything the binary depends on besides the target (fixed by the device), and the
/// device's context generation: modules loaded before a device reset are gone, and are loaded again.
std::string memory_key(const codegen::GeneratedKernel& k, int device) {
  std::string key = fmt::format("{}\n{}\n{}\n{}\n", device, context_generation(device), k.full_headers, k.name);
  for (const auto& o : k.options) key += o + '\n';
  return key + k.source;
}

}  // namespace

namespace {

std::mutex modules_mu;
std::map<std::string, std::unique_ptr<LoadedModule>>& modules() {
  static std::map<std::string, std::unique_ptr<LoadedModule>> loaded;
  return loaded;
}

/// The module already loaded for `key`, if any.
const LoadedModule* loaded_module(const std::string& key) {
  std::lock_guard lock(modules_mu);
  auto it = modules().find(key);
  if (it == modules().end()) return nullptr;
  ++counters().memory_hits;
  return it->second.get();
}

/// `a` loaded on `device` as `key`'s module. Two threads racing on one new kernel both load it; the first wins
/// and the other's module is dropped.
const LoadedModule& install_module(const std::string& key, const Artifact& a, int device) {
  ensure_context(device);
  auto lm = std::make_unique<LoadedModule>();
  FUSION_CU(cuModuleLoadData, &lm->module, a.binary.c_str());
  lm->registers = a.registers;
  lm->target = a.target;
  lm->cache_path = a.cache_path;
  std::lock_guard lock(modules_mu);
  auto [it, inserted] = modules().emplace(key, std::move(lm));
  if (!inserted) FUSION_CU(cuModuleUnload, lm->module);  // (the winner's functions are already handed out)
  return *it->second;
}

}  // namespace

const LoadedModule& load_module(const codegen::GeneratedKernel& k, int device) {
  const std::string key = memory_key(k, device);
  if (const LoadedModule* m = loaded_module(key)) return *m;
  // Compile outside the lock: other kernels keep loading meanwhile.
  return install_module(key, build_artifact(k, target_for_arch(properties_of(device).arch())), device);
}

const LoadedModule* load_module_if_ready(const codegen::GeneratedKernel& k, int device, std::string* failed) {
  const std::string key = memory_key(k, device);
  if (const LoadedModule* m = loaded_module(key)) return m;
  BackgroundArtifact b = artifact_in_background(k, target_for_arch(properties_of(device).arch()));
  if (!b.artifact) {
    if (failed) *failed = b.failed;
    return nullptr;
  }
  return &install_module(key, *b.artifact, device);
}

const LoadedKernel& load_kernel(const codegen::GeneratedKernel& k, int device) {
  static std::mutex mu;
  static std::map<const LoadedModule*, std::unique_ptr<LoadedKernel>> functions;
  const LoadedModule& m = load_module(k, device);
  std::lock_guard lock(mu);
  auto& slot = functions[&m];
  if (!slot) {
    auto lk = std::make_unique<LoadedKernel>();
    FUSION_CU(cuModuleGetFunction, &lk->function, m.module, k.name.c_str());
    // A kernel with dynamic shared memory (a layer kernel keeping its rows, a scatter's private bins) may take
    // all a block can have: its layout sizes it per launch (rows of any length share one kernel), and a
    // per-launch attribute would race between threads launching it with different sizes. Past 48 KB a kernel
    // must opt in, static arrays included: a row of exactly 48 KB beside 136 bytes of scratch was refused
    // (CUDA_ERROR_INVALID_VALUE, fuzz case 2729014801).
    if (k.source.find("extern __shared__") != std::string::npos) {
      int static_bytes = 0;
      FUSION_CU(cuFuncGetAttribute, &static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, lk->function);
      const int block_max = static_cast<int>(properties_of(device).max_shared_bytes_per_block);
      FUSION_CU(cuFuncSetAttribute, lk->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                block_max - static_bytes);
    }
    // Clusters of more than 8 blocks (Hopper allows 16) launch only where the kernel says it knows they are not
    // portable.
    if (k.source.find("__cluster_dims__(16") != std::string::npos)
      FUSION_CU(cuFuncSetAttribute, lk->function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    lk->name = k.name;
    lk->registers = m.registers;
    lk->target = m.target;
    lk->cache_path = m.cache_path;
    slot = std::move(lk);
  }
  return *slot;
}

}  // namespace fusion::detail
