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
  CUfunction function;
  unsigned grid_x, grid_y, block, shared_bytes;
  std::vector<std::size_t> offsets;  // parameter i starts at bytes[offsets[i]]
  std::vector<unsigned char> bytes;
};

struct StepRecorder {
  std::vector<RecordedLaunch> launches;
  std::vector<std::shared_ptr<Storage>> memory;  // every array the launches read or write
};

/// Records a launch of `f` with `argv` (as cuLaunchKernel takes it).
void record_launch(StepRecorder& rec, CUfunction f, void** argv, unsigned grid_x, unsigned grid_y, unsigned block,
                   unsigned shared_bytes);

}  // namespace fusion::detail
