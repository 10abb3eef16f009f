// SPDX-License-Identifier: Apache-2.0
// Streams and the thread-local current stream every fusion operation is enqueued on.
#pragma once
#include <functional>
#include <memory>

#include "fusion/graph.hpp"

struct CUstream_st;
namespace fusion {

class Event;
namespace detail { struct StreamState; }

struct StreamOptions {
  bool non_blocking = false;  ///< do not synchronize with the legacy default stream
  int priority = 0;           ///< lower numbers are higher priority (CUDA's convention)
};

enum class CaptureMode { global, thread_local_, relaxed };

/// A CUDA stream. Copies share one stream; the stream is destroyed with its last owner, which includes
/// arrays allocated on it (their memory is freed in its order, so it must outlive them).
class Stream {
 public:
  explicit Stream(StreamOptions options = {});
  /// The legacy default stream: synchronizes with all blocking streams.
  static Stream null();
  /// The per-thread default stream.
  static Stream per_thread();
  /// Wraps a stream made elsewhere (PyTorch, CuPy, your own code) without owning it.
  static Stream from_external(CUstream_st* handle, int device = -1);

  /// Make this the current stream of its device on this thread.
  void use() const;
  void synchronize() const;
  /// True when all work enqueued so far has completed.
  bool done() const;
  /// Record `event` (a new one if none is given) on this stream and return it.
  Event record(Event event) const;
  Event record() const;
  /// Later work on this stream waits until `event` completes.
  void wait_event(const Event& event) const;
  /// Run `fn` on a driver thread once preceding work completes. `fn` must not call CUDA.
  void launch_host_func(std::function<void()> fn) const;
  void begin_capture(CaptureMode mode = CaptureMode::relaxed) const;
  Graph end_capture() const;
  bool is_capturing() const;
  int priority() const;
  bool is_non_blocking() const;
  int device() const;
  CUstream_st* handle() const;
  bool operator==(const Stream& o) const { return handle() == o.handle(); }

  const std::shared_ptr<detail::StreamState>& state() const { return state_; }
  explicit Stream(std::shared_ptr<detail::StreamState> s) : state_(std::move(s)) {}

 private:
  std::shared_ptr<detail::StreamState> state_;
};

/// The calling thread's current stream on the current device (the legacy default stream until changed).
Stream current_stream();

/// RAII: makes `s` current for a scope (C++'s `with stream:`) and restores the previous stream.
class StreamScope {
 public:
  explicit StreamScope(const Stream& s);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  Stream previous_;
};

}  // namespace fusion
