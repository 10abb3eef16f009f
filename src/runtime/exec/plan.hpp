// SPDX-License-Identifier: Apache-2.0
// A plan: the partition of an expression's graph into kernels (schedule/partition.hpp), with each
// step's graph lowered for compiling, and the code that runs it.
#pragma once
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/exec/evaluate_internal.hpp"
#include "schedule/partition.hpp"

namespace fusion::detail {

struct Plan {
  Partition part;
  std::vector<const Lowered*> lowered;  // per step's kernel number: its graph, lowered
  const Lowered& lowered_of(const KernelStep& s) const { return *lowered[static_cast<std::size_t>(s.kernel)]; }
  mutable std::once_flag compiled_together;  // run_plan's first run compiles every step's kernel in parallel
  mutable std::atomic<bool> compiled{false};
};

const Plan& plan_of(const Lowered& lw, PartitionMode mode);

/// The call with its equal reductions merged: the same reduction of the same arrays with the same axes
/// (softmax's two `max(x, -1, true)`, var's mean inside layer norm) computed once; in a call with a matrix
/// product, every same-view input merged, so that equal products are one. `c` itself when none are.
Call with_shared_reductions(const Call& c);

/// Runs a plan: one layer kernel when the call allows it, else the steps in order on the current
/// stream (temporaries are freed in stream order after).
void run_plan(const Plan& p, const Call& c, ArrayBase* const* outs, AssignMode mode);

/// Each kernel run_plan would launch, compiled through the caches but not launched (placeholder temporaries).
std::vector<KernelInfo> inspect_plan(const Plan& p, const Call& c);

}  // namespace fusion::detail
