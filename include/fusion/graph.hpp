// SPDX-License-Identifier: Apache-2.0
// A captured CUDA graph, instantiated once and replayable any number of times on any stream.
#pragma once
#include "fusion/cpp20.hpp"
#include <memory>

namespace fusion {

class Stream;

class Graph {
 public:
  Graph() = default;
  /// Replay on `stream` (the current stream when omitted).
  void launch() const;
  void launch(const Stream& stream) const;
  explicit operator bool() const { return state_ != nullptr; }

  struct State;
  explicit Graph(std::shared_ptr<State> s) : state_(std::move(s)) {}

 private:
  std::shared_ptr<State> state_;
};

}  // namespace fusion
