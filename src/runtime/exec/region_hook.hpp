// SPDX-License-Identifier: Apache-2.0
// Where the rest of the runtime meets fz::Lazy: evaluate() hands statements to the recording region,
// and every operation that needs results in memory (a host read, a raw pointer, a stream or event
// operation) first runs what the region recorded. Both checks are one thread-local load when no region records.
#pragma once
#include "fusion/evaluate.hpp"
#include "fusion/lazy.hpp"
#include "runtime/cuda/held_work.hpp"

namespace fusion::detail {

/// Records `outs = call` into the region when one records on this thread; false: run it now.
bool record_in_region(const Call& call, ArrayBase* const* outs, int K, AssignMode mode);

}  // namespace fusion::detail
