// SPDX-License-Identifier: Apache-2.0
#include <map>
#include <mutex>

#include "fusion/memory.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"

namespace fusion {
namespace {

struct PinnedBlock {
  void* ptr;
  std::size_t bytes;
  CUevent ready;  // recorded after the last transfer that used the block
  int device;
  unsigned generation;  // a device reset frees page-locked memory too: such blocks are forgotten, not freed
};

struct PinnedState {
  std::mutex mu;
  std::multimap<std::size_t, PinnedBlock> free;   // by capacity
  std::map<void*, PinnedBlock> in_use;
};
PinnedState& state() {
  static auto* s = new PinnedState;  // outlives every static Array
  return *s;
}

/// Drops the free blocks a reset of their device freed (ensure_context on that device noticed it).
void forget_reset_blocks(PinnedState& s) {
  std::erase_if(s.free,
                [](const auto& entry) { return detail::is_stale(entry.second.generation, entry.second.device); });
}

std::size_t round_up(std::size_t n) {  // power-of-two bins above 4 KiB keep reuse high
  std::size_t b = 4096;
  while (b < n) b *= 2;
  return b;
}

}  // namespace

void* PinnedMemoryPool::acquire(std::size_t bytes) {
  const int dev = detail::enter_current_device();
  PinnedState& s = state();
  {
    std::lock_guard lock(s.mu);
    forget_reset_blocks(s);
    // Only the current device's blocks: a block's event is its device's, and release() records it on a
    // stream of the device that acquired the block.
    auto it = s.free.lower_bound(bytes);
    while (it != s.free.end() && it->first <= 2 * round_up(bytes) && it->second.device != dev) ++it;
    if (it != s.free.end() && it->first <= 2 * round_up(bytes)) {
      PinnedBlock b = it->second;
      s.free.erase(it);
      s.in_use.emplace(b.ptr, b);
      detail::ensure_context(b.device);
      FUSION_CU(cuEventSynchronize, b.ready);  // the previous copy out of this block has completed
      detail::ensure_context(dev);
      return b.ptr;
    }
  }
  PinnedBlock b{nullptr, round_up(bytes), nullptr, dev, detail::context_generation(dev)};
  FUSION_CU(cuMemAllocHost, &b.ptr, b.bytes);
  FUSION_CU(cuEventCreate, &b.ready, CU_EVENT_DISABLE_TIMING);
  std::lock_guard lock(s.mu);
  s.in_use.emplace(b.ptr, b);
  return b.ptr;
}

void PinnedMemoryPool::release(void* block, void* stream) {
  PinnedState& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.in_use.find(block);
  if (it == s.in_use.end()) return;
  PinnedBlock b = it->second;
  s.in_use.erase(it);
  detail::ensure_context(b.device);
  if (detail::is_stale(b.generation, b.device)) return;
  FUSION_CU(cuEventRecord, b.ready, static_cast<CUstream>(stream));
  s.free.emplace(b.bytes, b);
}

std::size_t PinnedMemoryPool::n_free_blocks() const {
  std::lock_guard lock(state().mu);
  forget_reset_blocks(state());
  return state().free.size();
}

void PinnedMemoryPool::free_all_blocks() {
  PinnedState& s = state();
  std::lock_guard lock(s.mu);
  for (auto& [size, b] : s.free) {
    detail::ensure_context(b.device);
    if (detail::is_stale(b.generation, b.device)) continue;
    FUSION_CU(cuEventSynchronize, b.ready);
    FUSION_CU(cuEventDestroy, b.ready);
    FUSION_CU(cuMemFreeHost, b.ptr);
  }
  s.free.clear();
}

PinnedMemoryPool& default_pinned_memory_pool() {
  static PinnedMemoryPool pool;
  return pool;
}

}  // namespace fusion
