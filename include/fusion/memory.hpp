// SPDX-License-Identifier: Apache-2.0
// Memory pools: the device pool behind every Array (the driver's stream-ordered allocator) and a
// pinned host pool that stages transfers.
#pragma once
#include "fusion/cpp20.hpp"
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct CUmemPoolHandle_st;  // CUmemoryPool, without cuda.h
struct CUstream_st;         // CUstream (cudaStream_t), without cuda.h

namespace fusion {

namespace detail {
struct BlockCache;  // freed blocks kept on the host for the same stream's next allocation (memory_pool.cpp)
}

/// One per device. Freed blocks stay cached for reuse until free_all_blocks().
class MemoryPool {
 public:
  explicit MemoryPool(int device);
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  /// Bytes held by live allocations.
  std::size_t used_bytes() const;
  /// Bytes the pool holds from the device: in use plus cached.
  std::size_t total_bytes() const;
  /// Return cached blocks to the device (waits for pending frees first).
  void free_all_blocks();
  /// Cap on used_bytes(); 0 means no limit. Exceeding it raises OutOfMemoryError.
  void set_limit(std::size_t bytes);
  std::size_t limit() const;
  int device() const { return device_; }
  /// Lets `device` read and write this pool's memory directly (peer access over NVLink or PCIe), for this
  /// pool's present and future blocks and again after a device reset. A pool's memory is reachable only
  /// from its own device until then, whatever cuCtxEnablePeerAccess says (that covers cuMemAlloc's memory,
  /// not a pool's); fz::to_device calls this itself before a peer copy. An Error where the two GPUs have
  /// no peer access.
  void allow_access_from(int device);

  // Used by array storage; stream is a CUstream.
  std::uint64_t allocate(std::size_t bytes, void* stream);
  void deallocate(std::uint64_t ptr, std::size_t bytes, void* stream);

 private:
  /// The driver pool of the device's current context generation (a new one after a device reset).
  CUmemPoolHandle_st* live_pool() const;
  friend struct detail::BlockCache;
  int device_;
  struct State;
  State* state_;
};

/// A program's own allocator for fusion's device memory (a framework's caching allocator, an arena):
/// allocate `bytes` usable in `stream`'s order and free them in `stream`'s order. Called with the device's
/// context current, from any thread (make it thread-safe). Return 0 when out of memory (fusion raises
/// OutOfMemoryError). The pool's statistics and limit cover only the pool.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual std::uint64_t allocate(std::size_t bytes, CUstream_st* stream) = 0;
  virtual void deallocate(std::uint64_t ptr, std::size_t bytes, CUstream_st* stream) = 0;
};

/// Routes device `device`'s new allocations to `allocator` (null: back to the pool). Memory allocated
/// before is still freed where it came from; the allocator is kept alive until the last of its memory is.
void set_allocator(std::shared_ptr<DeviceAllocator> allocator, int device = 0);
/// The allocator set for `device`, or null when the pool serves it.
std::shared_ptr<DeviceAllocator> allocator(int device = 0);

/// The pool of the current device. FUSION_GPU_MEMORY_LIMIT ("4000000000" or "50%") sets its initial limit.
MemoryPool& default_memory_pool();
MemoryPool& memory_pool(int device);
/// Parses FUSION_GPU_MEMORY_LIMIT's syntax: bytes, or a percentage of `device_total`.
std::size_t parse_memory_limit(const std::string& text, std::size_t device_total);

/// Page-locked host blocks for transfers, reused once the copy that used them completed.
class PinnedMemoryPool {
 public:
  std::size_t n_free_blocks() const;
  void free_all_blocks();

  // Used by transfers: a block of at least `bytes` for the current device; release() makes it reusable
  // after `stream`'s work (a stream of that same device).
  void* acquire(std::size_t bytes);
  void release(void* block, void* stream);
};
PinnedMemoryPool& default_pinned_memory_pool();

}  // namespace fusion
