// SPDX-License-Identifier: Apache-2.0
// A step of a loop (an optimizer update, a time step) recorded once as a CUDA graph and replayed.
#pragma once
#include <functional>
#include <memory>

namespace fusion {

class Stream;

/// Runs `body` as a region (fz::Lazy) whose kernels become one CUDA graph, launched with one call:
///
///     fz::Step step([&] { m = b1 * m + (1 - b1) * g; p -= lr * m; });
///     for (int i = 0; i < n; ++i) step();     // lr may change: its new value reaches the graph
///
/// step() runs the body without launching anything: the kernels it would launch are compared with the
/// graph's; when they are the same kernels with the same grids (the usual case: same shapes), only the
/// parameters that changed (scalars, array addresses) are written into the graph, then the graph is
/// launched on the current stream. Other kernels or grids (a new shape) rebuild the graph. The arrays
/// the graph reads and writes, those allocated inside the body included, stay alive and in place until
/// the next step() records new ones.
///
/// step.replay() launches the graph as it stands, without running the body: the fastest way, when
/// nothing the body reads on the host (scalars, which arrays) has changed.
///
/// Inside the body: fusion's expressions, reductions, fz::tie and user kernels (ElementwiseKernel,
/// ReductionKernel). Not inside: host reads and writes (to_host, asarray into an existing array), raw
/// kernels, stream, event and graph operations; each throws an fz::Error saying so.
class Step {
 public:
  explicit Step(std::function<void()> body);
  ~Step();
  Step(Step&&) noexcept;
  Step& operator=(Step&&) noexcept;

  /// Runs the body (recording), updates the graph, launches it on the current stream.
  void operator()();
  /// Launches the graph as last recorded, on the current stream (or `stream`).
  void replay() const;
  void replay(const Stream& stream) const;
  /// How many times the graph was built (1 after the first step; more when kernels or grids changed).
  int builds() const;
  /// Kernels in the graph.
  int kernels() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace fusion
