// SPDX-License-Identifier: Apache-2.0
// Running a scatter (fz::index_add, scatter_add and kin): one elementwise kernel whose expression adds into the
// target through atomics, or under fz::Deterministic a floating sum into exact sums beside it, then rounded in
// (exact_scatter.cpp).
#include <fmt/format.h>

#include <algorithm>

#include "codegen/exact_sum.hpp"
#include "fusion/error.hpp"
#include "fusion/modes.hpp"
#include "runtime/cuda/held_work.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/exec/exact_scatter.hpp"
#include "runtime/exec/kernel_for.hpp"
#include "schedule/call_graph.hpp"
#include "schedule/layout.hpp"

namespace fusion::detail {

bool runs_in_steps(const Call& c) { return c.lowered->has_reduction || c.lowered->has_scan || c.lowered->has_product; }

void scatter_into(const Call& call, const ArrayBase& target, const ArrayBase& whole) {
  region_barrier();  // what a region recorded runs first: the target may be one of its results
  const Call c = as_asked(call);
  const auto& stream = current_stream_state();
  const int device = stream->device;
  if (!target.has_storage()) throw Error("index_add: the target array has no memory");
  if (target.device() != device)
    throw Error(fmt::format("index_add: the target lives on device {} but device {} is current", target.device(),
                            device));
  ArrayBase none(target.dtype());
  (void)prepare_output(c, none, AssignMode::fresh, device, Shape());  // (checks the operands only)
  for (int i = 0; i < c.n_arrays; ++i)
    if (shares_memory(*c.arrays[i], target))
      throw Error("index_add: the values or the index read the array they add into; evaluate them first "
                  "(fz::eval) or add into another array");
  const Shape space = broadcast_shapes(expression_shape(c), target.shape());
  ArrayBase out = target.broadcast(space);
  if (out.size() == 0) return;
  ArrayBase* outs[1] = {&out};
  Layout L;
  analyze(c, outs, 1, L);
  const ir::Graph& g = graph_of(c);
  const int words = mode_flag(Mode::deterministic) && g.nodes[g.outputs[0]].op == ir::Op::scatter_add
                        ? codegen::exact_sum_words(target.dtype())
                        : 0;
  if (words == 0) return launch_elementwise(kernel_for(*c.lowered, L.v, device, c.name), L, c, outs, 1, stream);
  // fz::Deterministic: exact sums beside the target, then rounded into it
  plan_exact_scatter(words, planned_device(device), L);
  if (out.size() > (std::int64_t{1} << 31))
    throw Error("index_add: fz::Deterministic adds at most 2^31 values in one call (its exact sums have room for "
                "so many); split the values");
  if (whole.data_ptr() != target.data_ptr()) throw Error("internal: a scatter's view starts elsewhere than its target");
  const ExactSums sums = begin_exact_sums(whole, words, stream);
  L.exact_plane = sums.span;
  ArrayBase at_target = sums.at_target;
  ArrayBase* into[1] = {&at_target};
  launch_elementwise(kernel_for(*c.lowered, L.v, device, c.name), L, c, into, 1, stream);
  ArrayBase written = whole;
  finish_exact_sums(sums, written, stream);
}

}  // namespace fusion::detail
