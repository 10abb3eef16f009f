// SPDX-License-Identifier: Apache-2.0
#include "runtime/memory/storage.hpp"

#include <fmt/format.h>

#include <atomic>
#include <map>

#include "fusion/device.hpp"
#include "fusion/error.hpp"
#include "fusion/stream.hpp"
#include "runtime/cuda/driver.hpp"

namespace fusion::detail {

namespace {

/// Another library's stream (Stream::from_external), which it may destroy before fusion frees memory.
bool is_external(const StreamState& s) {
  return !s.owned && s.handle && s.handle != CU_STREAM_LEGACY && s.handle != CU_STREAM_PER_THREAD;
}

/// fusion's own stream of a device for freeing memory allocated on external streams: never destroyed
/// (frees may run from static destructors).
const std::shared_ptr<StreamState>& release_stream(int device) {
  static std::mutex mu;
  static auto& streams = *new std::map<int, Stream>;
  std::lock_guard lock(mu);
  auto it = streams.find(device);
  if (it == streams.end()) {
    DeviceScope scope{Device(device)};
    it = streams.emplace(device, Stream(StreamOptions{.non_blocking = true})).first;
  }
  return it->second.state();
}

/// The allocators programs set, by device; `installed` lets the common case (none) skip the lock.
struct Allocators {
  std::mutex mu;
  std::map<int, std::shared_ptr<DeviceAllocator>> by_device;
  std::atomic<int> installed{0};
};
Allocators& allocators() {
  static auto& a = *new Allocators;  // never destroyed: memory may be freed from static destructors
  return a;
}

}  // namespace

Storage::Storage(std::size_t n, const std::shared_ptr<StreamState>& stream)
    : bytes(n), device(stream->device), home(is_external(*stream) ? release_stream(stream->device) : stream) {
  allocate(stream);
}

Storage::Storage(std::size_t n, const std::shared_ptr<StreamState>& stream, Deferred)
    : bytes(n), device(stream->device), home(is_external(*stream) ? release_stream(stream->device) : stream),
      deferred_(true) {
  generation = context_generation(device);
}

void Storage::allocate_deferred() {
  std::lock_guard lock(mu_);
  if (!deferred_.load(std::memory_order_relaxed)) return;
  ensure_context(device);
  allocate(home);
  deferred_.store(false, std::memory_order_release);
}

void Storage::allocate(const std::shared_ptr<StreamState>& stream) {
  const std::size_t n = bytes;
  allocator = fusion::allocator(device);
  if (!allocator) {
    ptr = memory_pool(device).allocate(n, stream->handle);
  } else if (n > 0) {
    ptr = allocator->allocate(n, stream->handle);
    if (!ptr)
      throw OutOfMemoryError(fmt::format(
          "the program's allocator (fz::set_allocator) returned no memory for {} bytes on device {}", n, device));
  }
  generation = context_generation(device);
  // Memory allocated on another library's stream is freed on fusion's own stream, after an event of the
  // external stream's last use (recorded while it lived): that library may destroy its stream first.
  if (home != stream) note_foreign_use(stream);
}

Storage::Storage(CUdeviceptr p, int dev, std::shared_ptr<void> keep)
    : ptr(p), device(dev), generation(context_generation(dev)), home(release_stream(dev)), owner(std::move(keep)),
      external(true) {
  // home is fusion's release stream, on which nothing runs: every stream that uses the memory is then a
  // foreign use with an event, and the destructor waits for those events.
}

void Storage::note_foreign_use(const std::shared_ptr<StreamState>& stream) {
  std::lock_guard lock(mu_);
  ensure_context(stream->device);  // a default stream's handle is the current context's: be on its device
  for (ForeignUse& u : foreign_uses_) {
    if (u.stream.lock() == stream) {
      FUSION_CU(cuEventRecord, u.last_use, stream->handle);
      return;
    }
  }
  CUevent ev;
  FUSION_CU(cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING);
  FUSION_CU(cuEventRecord, ev, stream->handle);
  foreign_uses_.push_back({stream, ev});
}

Storage::~Storage() {
  if (!ptr && foreign_uses_.empty()) return;
  try {
    ensure_context(device);
    if (is_stale(generation, device)) return;  // the reset freed the memory and the events already
    if (external) {  // not ours to free: the owner may free it as soon as fusion's work on it is done
      for (const ForeignUse& u : foreign_uses_) {
        driver().cuEventSynchronize(u.last_use);
        driver().cuEventDestroy(u.last_use);
      }
      return;
    }
    // The free is ordered on the home stream; work other streams did with this memory must finish first.
    for (const ForeignUse& u : foreign_uses_) {
      driver().cuStreamWaitEvent(home->handle, u.last_use, 0);
      driver().cuEventDestroy(u.last_use);
    }
    if (allocator) {
      if (ptr) allocator->deallocate(ptr, bytes, home->handle);
    } else {
      memory_pool(device).deallocate(ptr, bytes, home->handle);
    }
  } catch (...) {
    // A destructor cannot report; the pool's counters already reflect the release.
  }
}

}  // namespace fusion::detail

namespace fusion {

void set_allocator(std::shared_ptr<DeviceAllocator> a, int device) {
  if (device < 0) throw Error(fmt::format("set_allocator: device {} is not a device ordinal", device));
  auto& all = detail::allocators();
  std::lock_guard lock(all.mu);
  if (a) all.by_device[device] = std::move(a);
  else all.by_device.erase(device);
  all.installed.store(static_cast<int>(all.by_device.size()), std::memory_order_release);
}

std::shared_ptr<DeviceAllocator> allocator(int device) {
  auto& all = detail::allocators();
  if (all.installed.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard lock(all.mu);
  const auto it = all.by_device.find(device);
  return it == all.by_device.end() ? nullptr : it->second;
}

}  // namespace fusion
