// SPDX-License-Identifier: Apache-2.0
// Per-thread device selection shared by the runtime's translation units.
#pragma once
#include "fusion/device.hpp"
#include "codegen/target_device.hpp"
#include "runtime/cuda/driver.hpp"

namespace fusion::detail {
extern thread_local int tls_current_device;
/// Validates a device ordinal against the driver's count (NoDeviceError otherwise).
int checked_device(int id);
const DeviceProperties& properties_of(int id);
/// Device `id` as the layout decisions see it; -1: the H100 they plan for without a device.
codegen::TargetDevice target_device(int id);
/// The current device with its context made current: the entry point of every GPU operation.
inline int enter_current_device() {
  const int id = tls_current_device;
  checked_device(id);
  ensure_context(id);
  return id;
}
/// Runs `f` with `device` current: a transfer of another device's array goes on that device's current
/// stream, in the order of its other work there (and its default stream is that context's).
template <class F> decltype(auto) on_device(int device, F&& f) {
  DeviceScope on{Device(device)};
  return f();
}
}  // namespace fusion::detail
