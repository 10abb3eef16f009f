// SPDX-License-Identifier: Apache-2.0
// Device memory behind arrays: allocated on a stream from the device pool, freed in that stream's order
// after every other stream that used it has finished with it.
#pragma once
#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "fusion/memory.hpp"
#include "runtime/cuda/stream_state.hpp"

namespace fusion::detail {

struct Storage {
  CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
  int device = 0;
  unsigned generation = 0;  // of the device context the memory belongs to: a reset frees it
  std::shared_ptr<StreamState> home;  // allocation stream: kept alive until the memory is freed

  /// Memory someone else owns (fz::from_device) lives as long as `owner` does: this holds `owner` and
  /// never frees the memory; it waits for fusion's work on it (every stream that used it) before letting go.
  std::shared_ptr<void> owner;
  bool external = false;
  std::shared_ptr<DeviceAllocator> allocator;  // the program's allocator that made the memory, or null: the pool

  Storage(std::size_t bytes, const std::shared_ptr<StreamState>& stream);
  /// Memory allocated when first used (a region's result that may never need memory): `ptr` stays 0
  /// until materialize().
  struct Deferred {};
  Storage(std::size_t bytes, const std::shared_ptr<StreamState>& stream, Deferred);
  /// Allocates deferred memory (on its home stream); nothing when it has memory.
  void materialize() {
    if (deferred_.load(std::memory_order_acquire)) [[unlikely]]
      allocate_deferred();
  }
  bool is_deferred() const { return deferred_; }
  /// External memory at `ptr` on `device`, owned by `owner` (may be null: the caller keeps it alive).
  Storage(CUdeviceptr ptr, int device, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// Bumped by every write fusion makes or enqueues (kernels' outputs, uploads, raw kernels' arguments):
  /// cached copies of this memory on other devices (map_shards' replicas) are valid while it is unchanged.
  std::atomic<std::uint64_t> writes{0};
  /// Set once the address went where fusion cannot see writes (data_ptr<U>(), record_stream, DLPack, or
  /// memory made elsewhere): such memory is never cached.
  std::atomic<bool> escaped{false};
  void note_write() { writes.fetch_add(1, std::memory_order_relaxed); }

  /// Called when work on `stream` touches this memory: remembers it if it is not the home stream.
  void note_use(const std::shared_ptr<StreamState>& stream) {
    if (stream != home) note_foreign_use(stream);
  }

 private:
  /// One event per other stream, re-recorded after each use there: it covers all earlier work too.
  struct ForeignUse {
    std::weak_ptr<StreamState> stream;  // expired: the stream is gone, its last event still counts
    CUevent last_use;
  };
  void note_foreign_use(const std::shared_ptr<StreamState>& stream);
  void allocate(const std::shared_ptr<StreamState>& stream);
  void allocate_deferred();
  std::atomic<bool> deferred_{false};
  std::mutex mu_;
  std::vector<ForeignUse> foreign_uses_;
};

}  // namespace fusion::detail
