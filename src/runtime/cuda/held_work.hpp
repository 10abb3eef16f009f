// SPDX-License-Identifier: Apache-2.0
// Work the layers above hold back on a thread: a recording fz::Lazy region (statements not run yet) and a
// recording fz::Step (launches captured for a graph). The CUDA and memory layers call region_barrier()
// before anything that needs results in memory and outside_step() before anything a graph cannot hold.
// The state lives here and the layers above fill it in (exec/region.cpp, which also defines run_region, and
// exec/step.cpp), so this layer never includes theirs. Each check is one thread-local load when nothing
// is held.
#pragma once
#include <cuda.h>

#include <functional>
#include <memory>
#include <vector>

#include "fusion/lazy.hpp"

namespace fusion::detail {

struct StepRecorder;  // exec/step_hook.hpp
struct Storage;       // memory/storage.hpp

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

/// While a step records on this thread: a library's work (a cuBLASLt call) becomes one node of the step's
/// graph. `launch(stream)` issues it on a stream that is captured, not run; `kind` identifies what runs
/// (equal kinds update the built graph in place, others rebuild it), `arguments` the addresses it uses
/// (equal ones need no update), `memory` what the graph must keep alive. Defined by exec/step.cpp.
void record_library_call(std::vector<unsigned char> kind, std::vector<unsigned char> arguments,
                         std::vector<std::shared_ptr<Storage>> memory, const std::function<void(CUstream)>& launch);

}  // namespace fusion::detail
