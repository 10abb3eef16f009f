// SPDX-License-Identifier: Apache-2.0
// Copies between GPUs (issue 18): an array's elements moved to another device, over peer access (NVLink or
// PCIe) where the two devices have it, else staged through page-locked host memory in chunks.
#pragma once
#include <string>

#include "fusion/array.hpp"

namespace fusion {

/// How to_device moves the bytes between two devices.
enum class CopyRoute {
  automatic,  ///< peer where the devices can reach each other's memory, else staged
  peer,       ///< device to device (peer access enabled once per pair); an Error where the devices cannot
  staged,     ///< through page-locked host memory, in chunks that overlap the copy out and the copy in
};

/// The route to_device(a, to, route) takes from device `from`, in words ("same device", "peer: ...",
/// "staged: ..."); an Error for an impossible request (peer between devices without peer access).
std::string describe_copy_route(int from, int to, CopyRoute route = CopyRoute::automatic);

namespace detail {
ArrayBase copy_to_device(const ArrayBase& a, int device, CopyRoute route);
}

/// A C-ordered copy of `a` on `device` (a new array even on `a`'s own device). Ordered on both devices'
/// current streams: the copy starts after the work already enqueued on the source device's current stream,
/// the result is ready in order on the destination's, and later work on the source's current stream
/// waits for the copy (so overwriting `a` there is safe). Returns without waiting.
template <Element T> Array<T> to_device(const Array<T>& a, int device, CopyRoute route = CopyRoute::automatic) {
  return Array<T>(detail::copy_to_device(a, device, route));
}

}  // namespace fusion
