// SPDX-License-Identifier: Apache-2.0
// CUDA events: ordering between streams and GPU-side timing.
#pragma once
#include "fusion/cpp20.hpp"
#include <memory>

struct CUevent_st;
namespace fusion {

class Stream;

struct EventOptions {
  bool blocking = false;       ///< synchronize() sleeps instead of spinning
  bool disable_timing = false; ///< cheaper; such events cannot be timed
  bool interprocess = false;   ///< shareable across processes (implies disable_timing)
};

class Event {
 public:
  explicit Event(EventOptions options = {});
  /// Capture the work enqueued so far on `stream` (the current stream when omitted).
  void record();
  void record(const Stream& stream);
  void synchronize() const;
  bool done() const;
  bool timing_disabled() const;
  CUevent_st* handle() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// Milliseconds between two recorded events; TypeError if either was made with disable_timing.
float elapsed_time(const Event& start, const Event& end);

}  // namespace fusion
