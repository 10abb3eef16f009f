// SPDX-License-Identifier: Apache-2.0
#include "fusion/external.hpp"

#include <fmt/format.h>

#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/memory/storage.hpp"

namespace fusion {

namespace {

/// What the driver says `ptr` is; throws for memory a kernel on `device` cannot use as device memory.
void check_device_memory(CUdeviceptr ptr, int device) {
  // cuPointerGetAttributes (unlike the singular call) answers memory CUDA does not know with zeros instead of an
  // error, so checking a host pointer makes no failing API call for compute-sanitizer to report.
  unsigned type = 0;
  unsigned managed = 0;  // (the driver writes a boolean)
  int ordinal = -1;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* values[] = {&type, &managed, &ordinal};
  detail::check(detail::driver().cuPointerGetAttributes(3, attributes, values, ptr), "cuPointerGetAttributes");
  if (type == 0)
    throw Error(fmt::format("from_device: {:#x} is not memory CUDA knows (host memory from malloc or new?); copy host "
                            "data with fz::asarray", ptr));
  if (type == CU_MEMORYTYPE_HOST)
    throw Error(fmt::format("from_device: {:#x} is pinned host memory; copy it with fz::asarray (fusion's kernels read "
                            "device memory)", ptr));
  if (managed) return;  // managed memory is reachable from every device
  if (ordinal != device)
    throw Error(fmt::format("from_device: the memory is on device {} but device {} is current; make it current "
                            "with fz::DeviceScope", ordinal, device));
}

}  // namespace

Strides strides_from_bytes(const std::vector<std::int64_t>& byte_strides, DType d) {
  const auto w = static_cast<std::int64_t>(itemsize(d));
  Strides st;
  for (std::int64_t b : byte_strides) {
    if (b % w != 0)
      throw ShapeError(
          fmt::format("a byte stride of {} is not a multiple of the {}-byte {} element", b, w, dtype_name(d)));
    st.push_back(b / w);
  }
  return st;
}

ArrayBase from_device(DType d, const ExternalView& v) {
  for (std::int64_t e : v.shape)
    if (e < 0) throw ShapeError(fmt::format("from_device: shape {} has a negative extent", to_string(v.shape)));
  const Strides strides = v.strides.empty() ? contiguous_strides(v.shape) : v.strides;
  if (strides.size() != v.shape.size())
    throw ShapeError(fmt::format("from_device: {} strides for a shape of {} dimensions ({})", strides.size(),
                                 v.shape.size(), to_string(v.shape)));
  const auto address = reinterpret_cast<std::uintptr_t>(v.data);
  if (numel(v.shape) > 0 && address == 0) throw Error("from_device: a null pointer for a non-empty array");
  if (address % itemsize(d) != 0)
    throw Error(fmt::format("from_device: {:#x} is not aligned for {} ({}-byte elements)", address, dtype_name(d),
                            itemsize(d)));

  const int device = detail::enter_current_device();
  if (address != 0) check_device_memory(static_cast<CUdeviceptr>(address), device);
  if (v.last_used_on) {  // fusion's stream waits for the owner's work so far
    const auto& theirs = v.last_used_on->state();
    const auto& ours = detail::current_stream_state();
    if (theirs != ours) {
      CUevent ready;
      FUSION_CU(cuEventCreate, &ready, CU_EVENT_DISABLE_TIMING);
      FUSION_CU(cuEventRecord, ready, theirs->handle);
      FUSION_CU(cuStreamWaitEvent, ours->handle, ready, 0);
      FUSION_CU(cuEventDestroy, ready);  // (destroyed once the wait is enqueued: the driver keeps what it needs)
    }
  }
  return ArrayBase::make_external(
      d, v.shape, strides, std::make_shared<detail::Storage>(static_cast<CUdeviceptr>(address), device, v.owner));
}

}  // namespace fusion
