// SPDX-License-Identifier: Apache-2.0
// A plan: how an expression runs when one kernel cannot do it all. Each step is a kernel over its own
// small graph; a step writes a temporary that later steps read, the last ones write the outputs.
//   fused:   every reduction that cannot sit at the root of the last kernel gets its own kernel
//            (`x / sum(x)` over one long row: the sum, then the division); neighbouring reductions with
//            equal axes that do not read each other share one (a batch norm's mean and variance);
//   unfused: every operation gets its own kernel (fz::Unfused, the honest baseline).
#pragma once
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/exec/evaluate_internal.hpp"

namespace fusion::detail {

struct PlanStep {
  const Lowered* lowered;
  std::vector<int> arrays;                 // per input slot: >= 0 the call's array slot, < 0: temporary ~t
  std::vector<std::uint32_t> scalars;      // per scalar slot: the call's scalar slot
  std::vector<std::uint32_t> reductions;   // per reduction slot: the call's reduction slot
  std::vector<int> targets;                // per output of the step: >= 0 temporary; < 0 the call's output ~k
  std::vector<PlanStep> alone;             // several targets: a step per target, when they cannot run together
  // An elementwise temporary that reads the flat index (fz::random) spans the index space the fused kernel
  // numbers: that of its region (the elementwise part of the graph around it, up to reductions), given
  // by the call's arrays the region reads and, for an output's region, the output.
  bool whole_index = false;
  std::vector<int> index_arrays;  // the call's array slots
  int index_output = -1;          // the call's output k, or -1
};

struct Plan {
  bool direct = false;  // one kernel over the expression's own graph: no remapping needed
  bool layer = false;   // try one layer kernel first (schedule/layer_layout.hpp decides per call)
  std::vector<PlanStep> steps;
  std::vector<DType> temp_dtypes;
  mutable std::once_flag compiled_together;  // run_plan's first run compiles every step's kernel in parallel
  mutable std::atomic<bool> compiled{false};
};

/// fused: layer kernels and sibling reductions in one pass where they apply; separate: each reduction
/// its own kernel (fz::SeparateReductions); unfused: each operation its own kernel (fz::Unfused).
enum class PlanMode { fused, separate, unfused };
const Plan& plan_of(const Lowered& lw, PlanMode mode);

/// The call with its equal reductions merged: the same reduction of the same arrays with the same axes
/// (softmax's two `max(x, -1, true)`, var's mean inside layer norm) computed once. `c` itself when none are.
Call with_shared_reductions(const Call& c);

/// Runs a plan: one layer kernel when the call allows it, else the steps in order on the current
/// stream (temporaries are freed in stream order after).
void run_plan(const Plan& p, const Call& c, ArrayBase* const* outs, AssignMode mode);

/// Each kernel run_plan would launch, compiled through the caches but not launched (placeholder temporaries).
std::vector<KernelInfo> inspect_plan(const Plan& p, const Call& c);

}  // namespace fusion::detail
