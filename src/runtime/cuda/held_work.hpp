// SPDX-License-Identifier: Apache-2.0
// Work the layers above hold back on a thread: a recording fz::Lazy region (statements not run yet) and a
// recording fz::Step (launches captured for a graph). The CUDA and memory layers call region_barrier()
// before anything that needs results in memory and outside_step() before anything a graph cannot hold.
// The state lives here and the layers above fill it in (exec/region.cpp, which also defines run_region, and
// exec/step.cpp), so this layer never includes theirs. Each check is one thread-local load when nothing
// is held.
#pragma once
#include "fusion/lazy.hpp"

namespace fusion::detail {

struct StepRecorder;  // exec/step_hook.hpp

/// The region recording on this thread, or null.
extern thread_local Lazy::State* tls_region;
/// The region itself is recording or running (its own launches and checks are no barrier).
extern thread_local bool tls_region_busy;
/// Runs a region's recorded statements (defined by exec/region.cpp, which records them).
void run_region(Lazy::State& region);
/// The step recording on this thread, or null.
extern thread_local StepRecorder* tls_step;

/// Runs what this thread's region recorded: call before anything that needs results in memory.
inline void region_barrier() {
  if (tls_region != nullptr && !tls_region_busy) [[unlikely]]
    run_region(*tls_region);
}

/// Throws an fz::Error naming `what` when a step records on this thread (it cannot be part of a graph).
void outside_step(const char* what);

}  // namespace fusion::detail
