// SPDX-License-Identifier: Apache-2.0
// Memory another library owns (a PyTorch or CuPy tensor, a cudaMalloc buffer, a custom allocator's
// block) used as a fusion array without a copy.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "fusion/array.hpp"
#include "fusion/stream.hpp"

namespace fusion {

/// Where external memory is and how it is laid out.
struct ExternalView {
  const void* data = nullptr;  ///< device address of the first element (index 0 along every axis)
  Shape shape;
  Strides strides;             ///< in elements (strides_from_bytes converts); empty: C-contiguous
  /// Kept alive while any fusion array or view uses the memory, and released only after fusion's work on
  /// it has finished (its deleter may free the memory then). Empty: the caller keeps the memory alive.
  std::shared_ptr<void> owner;
  /// The stream the owner last used the memory on: fusion's current stream waits for the work enqueued
  /// there so far before fusion touches the memory. Empty: the memory is ready now.
  std::shared_ptr<const Stream> last_used_on;
};

/// An array over external memory of dtype `d` on the current device, with no copy. Refused with a
/// clear error: a null pointer, a pointer not aligned for the dtype, strides that do not match the shape,
/// host memory, memory of another device than the current one.
ArrayBase from_device(DType d, const ExternalView& view);

/// The typed form: `fz::from_device(ptr, {rows, cols})` over `rows * cols` floats at `ptr`.
template <Element T>
Array<T> from_device(const T* data, const Shape& shape, Strides strides = {}, std::shared_ptr<void> owner = {},
                     std::shared_ptr<const Stream> last_used_on = {}) {
  return Array<T>(from_device(
      dtype_of<T>, ExternalView{data, shape, std::move(strides), std::move(owner), std::move(last_used_on)}));
}

/// Element strides from byte strides (DLPack before 0.2, NumPy's __cuda_array_interface__): each must be
/// a multiple of the element size.
Strides strides_from_bytes(const std::vector<std::int64_t>& byte_strides, DType d);

}  // namespace fusion
