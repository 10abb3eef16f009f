// SPDX-License-Identifier: Apache-2.0
#include "fusion/event.hpp"

#include <fmt/format.h>

#include "fusion/error.hpp"
#include "fusion/stream.hpp"
#include "runtime/cuda/held_work.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/stream_state.hpp"

namespace fusion {

struct Event::State {
  CUevent handle = nullptr;
  int device = 0;
  unsigned generation = 0;
  bool timing_disabled = false;
  ~State() {
    if (!handle) return;  // the constructor refused the options before creating it
    if (detail::context_for_release(device) && !detail::is_stale(generation, device))
      detail::driver().cuEventDestroy(handle);
  }
  /// The handle, checked against a device reset (with the device's context made current).
  CUevent live() const {
    detail::ensure_context(device);
    detail::check_not_reset(generation, device, "this event");
    return handle;
  }
};

Event::Event(EventOptions o) : state_(std::make_shared<State>()) {
  state_->device = detail::enter_current_device();
  if (o.interprocess && !o.disable_timing)
    throw Error("an interprocess Event must also set disable_timing (CUDA's rule)");
  unsigned flags = CU_EVENT_DEFAULT;
  if (o.blocking) flags |= CU_EVENT_BLOCKING_SYNC;
  if (o.disable_timing) flags |= CU_EVENT_DISABLE_TIMING;
  if (o.interprocess) flags |= CU_EVENT_INTERPROCESS;
  state_->timing_disabled = o.disable_timing;
  FUSION_CU(cuEventCreate, &state_->handle, flags);
  state_->generation = detail::context_generation(state_->device);
}

void Event::record() { record(current_stream()); }
void Event::record(const Stream& stream) {
  detail::region_barrier();
  detail::outside_step("recording an event");
  if (stream.device() != state_->device)
    throw Error(fmt::format("an event of device {} cannot be recorded on a stream of device {} (CUDA's rule): make "
                            "the event with device {} current, or wait for it from the other device's stream",
                            state_->device, stream.device(), stream.device()));
  const CUevent e = state_->live();
  const CUstream s = detail::live(*stream.state()).handle;  // last: a default stream is the current context's
  FUSION_CU(cuEventRecord, e, s);
}
void Event::synchronize() const {
  detail::region_barrier();
  detail::outside_step("an event synchronize");
  FUSION_CU(cuEventSynchronize, state_->live());
}
bool Event::done() const {
  detail::region_barrier();
  CUresult r = detail::driver().cuEventQuery(state_->live());
  if (r == CUDA_ERROR_NOT_READY) return false;
  detail::check(r, "cuEventQuery");
  return true;
}
bool Event::timing_disabled() const { return state_->timing_disabled; }
CUevent_st* Event::handle() const { return state_->live(); }

float elapsed_time(const Event& start, const Event& end) {
  if (start.timing_disabled() || end.timing_disabled())
    throw TypeError("elapsed_time needs events created with timing enabled (EventOptions{.disable_timing = false})");
  float ms = 0;
  FUSION_CU(cuEventElapsedTime, &ms, start.handle(), end.handle());
  return ms;
}

}  // namespace fusion
