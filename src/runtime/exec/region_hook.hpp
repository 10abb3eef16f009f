// SPDX-License-Identifier: Apache-2.0
// Where the rest of the runtime meets fz::Lazy: evaluate() hands statements to the recording region,
// and every operation that needs results in memory (a host read, a raw pointer, a stream or event
// operation) first runs what the region recorded. Both checks are one thread-local load when no region records.
#pragma once
#include "fusion/evaluate.hpp"
#include "fusion/region.hpp"

namespace fusion::detail {

/// The region recording on this thread, or null.
extern thread_local Lazy::State* tls_region;
/// The region itself is recording or running (its own launches and checks are no barrier).
extern thread_local bool tls_region_busy;

void run_region(Lazy::State& region);
/// Records `outs = call` into the region when one records on this thread; false: run it now.
bool record_in_region(const Call& call, ArrayBase* const* outs, int K, AssignMode mode);

/// Runs what this thread's region recorded: call before anything that needs results in memory.
inline void region_barrier() {
  if (tls_region != nullptr && !tls_region_busy) [[unlikely]]
    run_region(*tls_region);
}

}  // namespace fusion::detail
