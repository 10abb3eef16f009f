// SPDX-License-Identifier: Apache-2.0
// Copies between devices: one device-to-device copy on a device, a peer copy between devices that can
// reach each other's memory, else chunks staged through page-locked host memory. Both devices' current
// streams order the copy (events between them), so neither side needs a host wait.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

#include "fusion/device.hpp"
#include "fusion/event.hpp"
#include "fusion/stream.hpp"
#include "fusion/memory.hpp"
#include "fusion/transfer.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/held_work.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/memory/device_copy.hpp"
#include "runtime/memory/storage.hpp"

namespace fusion {
namespace {

using detail::driver;
using detail::StreamState;

enum class Route { same, peer, staged };

/// Staging chunk: large enough that a copy's per-chunk cost (two events, two copy calls) is small beside
/// the bytes, small enough that copy out of chunk i+1 overlaps copy in of chunk i for arrays of tens of MiB.
constexpr std::size_t kStagingChunk = std::size_t{8} << 20;

bool peer_capable(int from, int to) {
  CUdevice source, target;
  FUSION_CU(cuDeviceGet, &source, detail::checked_device(from));
  FUSION_CU(cuDeviceGet, &target, detail::checked_device(to));
  int can = 0;
  FUSION_CU(cuDeviceCanAccessPeer, &can, target, source);  // can `to` read `from`'s memory
  return can != 0;
}

Route resolve(int from, int to, CopyRoute route) {
  detail::checked_device(from);
  detail::checked_device(to);
  if (route == CopyRoute::staged) return Route::staged;  // also on one device: the path is testable there
  if (from == to) return Route::same;
  const bool peer = peer_capable(from, to);
  if (route == CopyRoute::peer && !peer)
    throw Error(fmt::format("to_device: devices {} and {} have no peer access to each other's memory; use "
                            "CopyRoute::staged (or automatic, which picks it)", from, to));
  return peer ? Route::peer : Route::staged;
}

/// Lets device `to` reach device `from`'s memory, once per pair and context generation (a reset drops it).
/// Two grants: the context's peer access covers memory from cuMemAlloc (a program's allocator, external
/// memory); the pool's access covers fusion's own arrays. Without the second, the driver still copies a
/// pool's memory between the devices, but through the host at a tenth of the link's speed (seen on two
/// H200s joined by NVLink: 38 GB/s against 382).
void enable_peer_access(int from, int to) {
  static std::mutex mu;
  static std::set<std::tuple<int, int, unsigned, unsigned>> enabled;
  std::lock_guard lock(mu);
  const CUcontext source = detail::primary_context(from);
  detail::ensure_context(to);
  const auto key = std::make_tuple(from, to, detail::context_generation(from), detail::context_generation(to));
  if (enabled.contains(key)) return;
  const CUresult r = driver().cuCtxEnablePeerAccess(source, 0);
  if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) detail::check(r, "cuCtxEnablePeerAccess");
  memory_pool(from).allow_access_from(to);  // (the pool keeps its grant over resets itself)
  enabled.insert(key);
}

/// An event of `device` without timing (fz::Event is made on the current device).
Event event_on(int device) {
  DeviceScope on{Device(device)};
  return Event(EventOptions{.disable_timing = true});
}

/// Two page-locked chunks in turn: chunk i leaves the source on its stream into buffer i % 2 and enters
/// the target from there on the target's stream, so the copy out of chunk i + 1 runs while chunk i copies
/// in. Events order each buffer's fill before its drain and its drain before its next fill.
void staged_copy(CUdeviceptr to, const Stream& dst, CUdeviceptr from, const Stream& src, std::size_t bytes) {
  PinnedMemoryPool& pool = default_pinned_memory_pool();
  const std::size_t chunk = std::min(kStagingChunk, bytes);
  void* buffer[2] = {nullptr, nullptr};
  {
    DeviceScope on{Device(dst.device())};  // released on the target's stream: its blocks' events live there
    buffer[0] = pool.acquire(chunk);
    if (bytes > chunk) buffer[1] = pool.acquire(chunk);
  }
  const Event drained[2] = {event_on(dst.device()), event_on(dst.device())};
  const Event filled = event_on(src.device());
  std::size_t i = 0;
  for (std::size_t offset = 0; offset < bytes; offset += chunk, ++i) {
    const std::size_t n = std::min(chunk, bytes - offset);
    const std::size_t k = i % 2;
    if (i >= 2) src.wait_event(drained[k]);  // the buffer's previous chunk has entered the target
    detail::ensure_context(src.device());
    FUSION_CU(cuMemcpyDtoHAsync, buffer[k], from + offset, n, src.handle());
    dst.wait_event(src.record(filled));
    detail::ensure_context(dst.device());
    FUSION_CU(cuMemcpyHtoDAsync, to + offset, buffer[k], n, dst.handle());
    dst.record(drained[k]);
  }
  for (void* b : buffer)
    if (b) pool.release(b, dst.handle());
}

}  // namespace

std::string describe_copy_route(int from, int to, CopyRoute route) {
  switch (resolve(from, to, route)) {
    case Route::same: return fmt::format("same device: one device-to-device copy on device {}'s current stream", to);
    case Route::peer:
      return fmt::format("peer: device {} reads device {}'s memory directly (peer access, over NVLink or PCIe)", to,
                         from);
    case Route::staged: break;
  }
  return fmt::format("staged: through page-locked host memory in {} MiB chunks, device {} copying out while device {} "
                     "copies in{}", kStagingChunk >> 20, from, to,
                     route == CopyRoute::automatic ? " (the devices have no peer access)" : "");
}

namespace detail {

void order_after(const Stream& waiter, const Stream& signaller) {
  if (waiter.state() == signaller.state()) return;  // (handles alone do not tell devices' default streams apart)
  waiter.wait_event(signaller.record(event_on(signaller.device())));
}

ArrayBase copy_to_device(const ArrayBase& a, int device, CopyRoute route) {
  if (a.is_placeholder()) throw Error("to_device: a placeholder array has no data; it exists for fz::inspect");
  if (!a.has_storage()) throw Error("to_device: the Array is empty (default-constructed, never assigned)");
  outside_step("copying an array to another device");
  const int from = a.device();
  const Route how = resolve(from, device, route);
  ArrayBase source = a;
  std::shared_ptr<StreamState> src, dst;
  {
    DeviceScope on{Device(from)};
    if (!a.is_contiguous()) source = a.contiguous_copy();
    src = current_stream_state();
  }
  ArrayBase out(a.dtype());
  {
    DeviceScope on{Device(device)};
    dst = current_stream_state();
    out = ArrayBase::make_empty(a.dtype(), a.shape());
  }
  const std::size_t bytes = a.nbytes();
  if (bytes == 0) return out;
  const CUdeviceptr to = out.data_ptr(), from_ptr = source.data_ptr();
  order_after(Stream(dst), Stream(src));  // the source's pending writes first
  switch (how) {
    case Route::same:
      ensure_context(device);
      FUSION_CU(cuMemcpyDtoDAsync, to, from_ptr, bytes, dst->handle);
      break;
    case Route::peer: {
      enable_peer_access(from, device);
      const CUcontext source_context = primary_context(from), target_context = primary_context(device);
      ensure_context(device);  // last: the target's default stream is the current context's
      FUSION_CU(cuMemcpyPeerAsync, to, target_context, from_ptr, source_context, bytes, dst->handle);
      break;
    }
    case Route::staged: staged_copy(to, Stream(dst), from_ptr, Stream(src), bytes); break;
  }
  order_after(Stream(src), Stream(dst));  // later writes to the source wait for the copy
  source.storage()->note_use(src);  // and its memory is not reused before then
  return out;
}

}  // namespace detail
}  // namespace fusion
