// SPDX-License-Identifier: Apache-2.0
// Page-locked host buffers and copies that do not wait: `a.copy_to(buffer)` / `a.copy_from(buffer)`
// enqueue on the current stream and return, so a transfer overlaps GPU work and host work.
#pragma once
#include "fusion/cpp20.hpp"
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "fusion/dtype.hpp"
#include "fusion/event.hpp"

namespace fusion {

/// Page-locked host memory of `bytes` (cuMemAllocHost). Copies using it record an event; the memory is
/// freed only after every one of them completed, so dropping a buffer with a copy in flight is safe.
class PinnedMemory {
 public:
  explicit PinnedMemory(std::size_t bytes);
  ~PinnedMemory();
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  /// Marks the memory used by the work enqueued so far on the current stream.
  void note_use();
  /// Waits for every copy that used this memory (what a host reader needs before reading it).
  void synchronize() const;

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = 0;
  std::vector<Event> uses_;
};

/// `n` elements of T in page-locked host memory: the fast, asynchronous side of a transfer.
/// Read it after the copy completed (`synchronize()`, or the stream's).
template <Element T> class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t n) : memory_(std::make_shared<PinnedMemory>(n * sizeof(T))), n_(n) {}
  T* data() const { return static_cast<T*>(memory_->data()); }
  std::size_t size() const { return n_; }
  T& operator[](std::size_t i) const { return data()[i]; }
  T* begin() const { return data(); }
  T* end() const { return data() + n_; }
  std::span<T> span() const { return {data(), n_}; }
  void synchronize() const { memory_->synchronize(); }
  PinnedMemory& memory() const { return *memory_; }

 private:
  std::shared_ptr<PinnedMemory> memory_;
  std::size_t n_;
};

}  // namespace fusion
