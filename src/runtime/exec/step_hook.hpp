// SPDX-License-Identifier: Apache-2.0
// Where the runtime meets fz::Step: while a step's body runs, kernel launches are recorded (function,
// grid, parameter bytes) instead of launched, and the memory they touch is kept for the graph.
#pragma once
#include <cuda.h>

#include <memory>
#include <vector>

#include "runtime/cuda/held_work.hpp"

namespace fusion::detail {

struct Storage;

struct RecordedLaunch {
  CUfunction function = nullptr;
  unsigned grid_x = 0, grid_y = 0, block = 0, shared_bytes = 0;
  std::vector<std::size_t> offsets;  // parameter i starts at bytes[offsets[i]]
  std::vector<unsigned char> bytes;  // (a library call: the addresses it uses)
  /// A library call instead of a kernel (function null): its captured graph, a child-graph node of the
  /// step, and what identifies the call (see record_library_call).
  std::shared_ptr<CUgraph_st> library;
  std::vector<unsigned char> library_kind;
};

struct StepRecorder {
  std::vector<RecordedLaunch> launches;
  std::vector<std::shared_ptr<Storage>> memory;  // every array the launches read or write
};

/// Records a launch of `f` with its `count` parameters `argv` (as cuLaunchKernel takes them).
void record_launch(StepRecorder& rec, CUfunction f, void** argv, std::size_t count, unsigned grid_x, unsigned grid_y,
                   unsigned block, unsigned shared_bytes);

}  // namespace fusion::detail
