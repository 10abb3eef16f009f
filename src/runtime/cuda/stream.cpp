// SPDX-License-Identifier: Apache-2.0
#include "fusion/stream.hpp"

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "fusion/error.hpp"
#include "fusion/event.hpp"
#include "runtime/cuda/held_work.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/graph_state.hpp"
#include "runtime/cuda/stream_state.hpp"

namespace fusion {
namespace detail {
namespace {


std::shared_ptr<StreamState> make_builtin(CUstream handle, int device) {
  auto s = std::make_shared<StreamState>();
  s->handle = handle;
  s->device = device;
  return s;
}

const std::shared_ptr<StreamState>& legacy_default(int device) {
  static std::shared_ptr<StreamState> streams[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  std::call_once(once[device], [&] { streams[device] = make_builtin(nullptr, device); });
  return streams[device];
}

thread_local std::shared_ptr<StreamState> tls_current[kMaxDevices];

}  // namespace

namespace {
std::atomic<StreamReleaseHook> release_hook{nullptr};

struct OwnedHandles {  // the live streams fusion created, by handle (a count: a reset's stale handle may be reused)
  std::mutex mu;
  std::unordered_map<CUstream, int> live;
};
OwnedHandles& owned_handles() {
  static auto* h = new OwnedHandles;  // never destroyed: streams may be released at exit
  return *h;
}
void count_owned(CUstream s, int delta) {
  OwnedHandles& h = owned_handles();
  std::lock_guard lock(h.mu);
  if ((h.live[s] += delta) <= 0) h.live.erase(s);
}
}  // namespace

void set_stream_release_hook(StreamReleaseHook hook) { release_hook.store(hook); }

bool stream_lifetime_known(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) return true;
  OwnedHandles& h = owned_handles();
  std::lock_guard lock(h.mu);
  return h.live.count(stream) > 0;
}

StreamState::~StreamState() {
  if (!reduce_workspace && !blas_workspace && !index_fault && !scan_state && !(owned && handle)) return;
  if (!context_for_release(device)) return;
  if (reduce_workspace && !is_stale(workspace_generation, device))
    driver().cuMemFree(reduce_workspace);  // waits for work still using it
  if (blas_workspace && !is_stale(blas_workspace_generation, device)) driver().cuMemFree(blas_workspace);
  if (index_fault && !is_stale(index_fault_generation, device)) driver().cuMemFree(index_fault);
  if (scan_state && !is_stale(scan_state_generation, device)) driver().cuMemFree(scan_state);
  // The driver releases the stream once its queued work completes; nothing is cut short. A stream a
  // reset destroyed is not touched: destroying it again would crash the driver.
  if (owned && handle) count_owned(handle, -1);
  if (owned && handle && !reset_destroyed()) {
    if (const StreamReleaseHook hook = release_hook.load()) hook(device, handle);  // while it still lives
    driver().cuStreamDestroy(handle);
  }
}

const StreamState& live(const StreamState& s) {
  ensure_context(s.device);
  if (s.reset_destroyed()) throw_device_reset(s.device, "this stream");
  return s;
}

const std::shared_ptr<StreamState>& current_stream_state() {
  const int id = enter_current_device();
  std::shared_ptr<StreamState>& s = tls_current[id];
  if (!s) s = legacy_default(id);
  if (s->reset_destroyed())
    throw_device_reset(id, "the current stream (use() another, or leave its StreamScope)");
  return s;
}

}  // namespace detail

using detail::StreamState;

Stream::Stream(StreamOptions options) {
  const int dev = detail::enter_current_device();
  auto s = std::make_shared<StreamState>();
  s->device = dev;
  s->owned = true;
  s->non_blocking = options.non_blocking;
  s->priority = options.priority;
  FUSION_CU(cuStreamCreateWithPriority, &s->handle, options.non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT,
            options.priority);
  detail::count_owned(s->handle, 1);
  FUSION_CU(cuStreamGetPriority, s->handle, &s->priority);  // the driver clamps to the device's range
  s->generation = detail::context_generation(dev);
  state_ = std::move(s);
}

Stream Stream::null() {
  const int dev = detail::enter_current_device();
  return Stream(detail::legacy_default(dev));
}

Stream Stream::per_thread() {
  const int dev = detail::enter_current_device();
  auto s = detail::make_builtin(CU_STREAM_PER_THREAD, dev);
  s->non_blocking = false;
  return Stream(std::move(s));
}

Stream Stream::from_external(CUstream_st* handle, int device) {
  const int dev = device >= 0 ? detail::checked_device(device) : detail::enter_current_device();
  detail::ensure_context(dev);
  auto s = detail::make_builtin(handle, dev);
  if (handle && handle != CU_STREAM_LEGACY && handle != CU_STREAM_PER_THREAD) {
    // fusion launches with the device's primary context current: a stream of another context cannot take
    // its work (the driver would say "invalid handle" at the first launch, far from the cause)
    CUcontext owner = nullptr;
    FUSION_CU(cuStreamGetCtx, handle, &owner);
    if (owner != detail::primary_context(dev))
      throw Error(fmt::format("Stream::from_external: the stream was not made in device {}'s primary context (it "
                              "belongs to another device, or to a context of its own); pass the device it was made "
                              "on", dev));
    s->generation = detail::context_generation(dev);  // another library's stream dies in a reset too
    unsigned flags = 0;
    FUSION_CU(cuStreamGetFlags, handle, &flags);
    s->non_blocking = (flags & CU_STREAM_NON_BLOCKING) != 0;
    FUSION_CU(cuStreamGetPriority, handle, &s->priority);
  }
  return Stream(std::move(s));
}

void Stream::use() const { detail::tls_current[state_->device] = state_; }

void Stream::synchronize() const {
  detail::region_barrier();
  detail::outside_step("a stream synchronize");
  FUSION_CU(cuStreamSynchronize, detail::live(*state_).handle);
}

bool Stream::done() const {
  detail::region_barrier();
  CUresult r = detail::driver().cuStreamQuery(detail::live(*state_).handle);
  if (r == CUDA_ERROR_NOT_READY) return false;
  detail::check(r, "cuStreamQuery");
  return true;
}

Event Stream::record(Event event) const {
  detail::region_barrier();
  detail::outside_step("recording an event");
  event.record(*this);
  return event;
}
Event Stream::record() const { return record(Event()); }

void Stream::wait_event(const Event& event) const {
  detail::region_barrier();
  detail::outside_step("a stream wait");
  // The event first (its handle makes its device current), the stream's device last: a default stream's
  // handle names the current context's default stream, so the wait would land on the event's device.
  const CUevent e = event.handle();
  const CUstream s = detail::live(*state_).handle;
  FUSION_CU(cuStreamWaitEvent, s, e, 0);
}

namespace {
void CUDA_CB run_host_func(void* data) {
  std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()>*>(data));
  (*fn)();
}
}  // namespace

void Stream::launch_host_func(std::function<void()> fn) const {
  detail::region_barrier();
  detail::outside_step("a host function");
  const CUstream s = detail::live(*state_).handle;
  auto* boxed = new std::function<void()>(std::move(fn));
  CUresult r = detail::driver().cuLaunchHostFunc(s, run_host_func, boxed);
  if (r != CUDA_SUCCESS) delete boxed;
  detail::check(r, "cuLaunchHostFunc");
}

void Stream::begin_capture(CaptureMode mode) const {
  detail::region_barrier();
  detail::outside_step("a stream capture");
  detail::live(*state_);
  if (!state_->handle || state_->handle == CU_STREAM_LEGACY)
    throw Error("the legacy default stream cannot be captured; capture on a Stream you created");
  const CUstreamCaptureMode m = mode == CaptureMode::global ? CU_STREAM_CAPTURE_MODE_GLOBAL
                                : mode == CaptureMode::thread_local_ ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                                                                     : CU_STREAM_CAPTURE_MODE_RELAXED;
  FUSION_CU(cuStreamBeginCapture, state_->handle, m);
}

Graph Stream::end_capture() const {
  detail::region_barrier();
  detail::outside_step("a stream capture");
  detail::live(*state_);
  CUgraph g = nullptr;
  FUSION_CU(cuStreamEndCapture, state_->handle, &g);
  return detail::instantiate_graph(g, state_->device);
}

bool Stream::is_capturing() const {
  detail::live(*state_);
  CUstreamCaptureStatus st;
  FUSION_CU(cuStreamIsCapturing, state_->handle, &st);
  return st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

int Stream::priority() const { return state_->priority; }
bool Stream::is_non_blocking() const { return state_->non_blocking; }
int Stream::device() const { return state_->device; }
CUstream_st* Stream::handle() const { return state_->handle; }

Stream current_stream() { return Stream(detail::current_stream_state()); }

StreamScope::StreamScope(const Stream& s) : previous_([&] {
  // The previous stream as it is, even one a device reset destroyed: a scope is the way out of it.
  auto& prev = detail::tls_current[detail::checked_device(s.device())];
  return Stream(prev ? prev : detail::legacy_default(s.device()));
}()) {
  s.use();
}
StreamScope::~StreamScope() { previous_.use(); }

}  // namespace fusion
