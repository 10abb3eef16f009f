// SPDX-License-Identifier: Apache-2.0
// Running an expression as one layer kernel (codegen/layer_variant.hpp): the shapes checked, the
// outputs prepared, the layout analyzed, the kernel found or built, launched.
#include <algorithm>

#include "runtime/cuda/device_state.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/exec/kernel_for.hpp"
#include "runtime/exec/launch.hpp"
#include "runtime/exec/plan.hpp"
#include "schedule/layer_layout.hpp"
#include "runtime/memory/storage.hpp"

namespace fusion::detail {

using codegen::LayerVariant;
using LayerSlot = KernelSlot<LayerVariant>;

namespace {

void launch(const LayerSlot& k, const LayerLayout& L, const Call& c, ArrayBase* const* outs, int K,
            const std::shared_ptr<StreamState>& stream) {
  // Arrays and dims entries are numbered as emit_layer's signature names them.
  const int np = L.v.n_params;
  std::uint64_t ptrs[codegen::kMaxParams + codegen::kMaxOutputs];
  const std::int64_t* dims[codegen::layer_dims_count(codegen::kMaxParams + codegen::kMaxOutputs)];
  for (int p = 0; p < np; ++p) ptrs[p] = L.params[p]->data_ptr();
  for (int o = 0; o < K; ++o) ptrs[np + o] = outs[o]->data_ptr();
  dims[codegen::kLayerKeptShape] = L.kshape.begin();
  dims[codegen::kLayerSegment] = &L.segment;
  for (int op = 0; op < np + K; ++op) {
    dims[codegen::layer_kept_strides(op)] = L.kst[op].begin();
    dims[codegen::layer_row_stride(op)] = &L.rst[op];
    dims[codegen::layer_segment_stride(op)] = &L.sst[op];
  }
  LaunchArgs a;
  a.pointers = {ptrs, static_cast<std::size_t>(np + K)};
  a.scalars = {c.scalars, static_cast<std::size_t>(c.n_scalars)};
  a.dims = {dims, codegen::layer_dims_count(np + K)};
  a.count(codegen::Count::n_out) = L.n_rows;
  a.count(codegen::Count::n_red) = L.n_red;
  a.count(codegen::Count::chunk) = L.keep;
  a.divisors = L.divisors;
  launch_kernel(k.kernel->function, k.signature, a, {L.blocks, 1, L.v.block, L.shared_bytes}, *stream);
  note_launch({L.params, static_cast<std::size_t>(np)}, {outs, static_cast<std::size_t>(K)}, stream);
}

/// var(e) in a layer kernel becomes mean(square(e - mean(e, keepdims, ddof 0)), var's own slot): two float
/// reductions over the cached row, one after the other, as softmax takes max then sum, instead of one pass
/// of Welford accumulators in double (H100, layer norm written that way by hand: rows of 65,536 73.5 ->
/// 86-87% of the limit, 16,384 92 -> 100%). The outer mean divides by n - ddof, var's own divisor. `args`
/// receives the call's reductions, then per var a keepdims, ddof-0 copy of its own (the inner mean's slot).
Call with_centered_variance(const Call& c, std::vector<ReduceArg>& args) {
  const ir::Graph& g = c.lowered->graph;
  const auto centered = ir::is_floating_variance;
  if (std::none_of(g.nodes.begin(), g.nodes.end(), centered)) return c;  // (the common case: no allocation)
  args.assign(c.reductions, c.reductions + c.n_reductions);
  for (const ir::Node& n : g.nodes) {
    if (!centered(n)) continue;
    ReduceArg inner = c.reductions[n.slot];
    inner.keepdims = true;
    inner.ddof = 0;
    args.push_back(inner);
  }
  Call r = c;
  r.reductions = args.data();
  r.n_reductions = static_cast<int>(args.size());
  // The graph depends on which of the call's means may serve a var (keepdims, ddof 0, var's axes), so the
  // reductions' run-time arguments are part of its key: keyed by {3} alone, a tie of means and vars with keepdims
  // made the graph that a later one without them was given, and that call lost its layer kernel.
  std::vector<std::uint32_t> key{3};  // (see as_asked for the other keys)
  for (int k = 0; k < c.n_reductions; ++k) {
    const ReduceArg& a = c.reductions[k];
    key.push_back(static_cast<std::uint32_t>(a.keepdims) | static_cast<std::uint32_t>(a.ddof == 0) << 1 |
                  static_cast<std::uint32_t>(a.n_axes + 1) << 2);
    for (int d = 0; d < a.n_axes; ++d) key.push_back(static_cast<std::uint8_t>(a.axes[static_cast<std::size_t>(d)]));
  }
  r.lowered = &derived(*c.lowered, key, [&] {
    ir::Graph out;
    out.n_inputs = g.n_inputs;
    out.n_scalars = g.n_scalars;
    out.n_functions = g.n_functions;
    out.fast_math = g.fast_math;
    std::uint32_t next_slot = static_cast<std::uint32_t>(c.n_reductions);
    std::vector<std::uint32_t> at(g.nodes.size());
    auto mapped = [&](std::uint32_t x) { return x == ir::kNone ? x : at[x]; };
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      ir::Node n = g.nodes[i];
      n.a = mapped(n.a);
      n.b = mapped(n.b);
      n.c = mapped(n.c);
      if (!centered(n)) {
        at[i] = out.append(n);
        continue;
      }
      // (var's operand is already in its accumulator dtype, Graph::reduce cast it.) A mean the expression
      // takes already (layer norm's own) serves; else one more.
      const ReduceArg& inner = args[next_slot];
      std::uint32_t mean = ir::kNone;
      for (std::uint32_t j = 0; j < out.nodes.size() && mean == ir::kNone; ++j) {
        const ir::Node& m = out.nodes[j];
        const ReduceArg& a = args[m.slot];
        if (m.op == ir::Op::mean && m.a == n.a && m.dtype == n.dtype && a.keepdims && a.ddof == 0 &&
            a.n_axes == inner.n_axes && a.axes == inner.axes)
          mean = j;
      }
      if (mean == ir::kNone) mean = out.append({ir::Op::mean, n.dtype, n.a, ir::kNone, ir::kNone, next_slot});
      ++next_slot;
      const std::uint32_t d = out.append({ir::Op::sub, n.dtype, n.a, mean});
      const std::uint32_t sq = out.append({ir::Op::square, n.dtype, d});
      at[i] = out.append({ir::Op::mean, n.dtype, sq, ir::kNone, ir::kNone, n.slot});
    }
    for (std::uint32_t o : g.outputs) out.outputs.push_back(at[o]);
    out.n_reductions = next_slot;
    return out;
  });
  return r;
}

/// Whether the plan computes the call in one kernel when no layer kernel does.
bool one_kernel_otherwise(const Call& c) {
  const Partition& plan = plan_of(*c.lowered, PartitionMode::fused).part;
  return plan.direct || plan.steps.size() == 1;
}

/// The layout for new outputs of S's shapes (placeholders: nothing allocated), for fz::inspect and to decide
/// before anything is written.
bool analyze_fresh(const Call& c, const LayerShapes& S, int device, LayerLayout& L) {
  const int K = static_cast<int>(c.lowered->graph.outputs.size());
  std::vector<ArrayBase> outs;
  ArrayBase* ptrs[codegen::kMaxOutputs];
  for (int k = 0; k < K; ++k)
    outs.push_back(
        ArrayBase::make_placeholder(c.lowered->graph.dtype(c.lowered->graph.outputs[static_cast<std::size_t>(k)]),
                                    S.out[static_cast<std::size_t>(k)]));
  for (int k = 0; k < K; ++k) ptrs[k] = &outs[static_cast<std::size_t>(k)];
  return analyze_layer(c, S, ptrs, K, planned_device(device), L);
}

}  // namespace

bool evaluate_layer(const Call& call, ArrayBase* const* outs, int K, AssignMode mode) {
  std::vector<ReduceArg> args;
  const Call c = with_centered_variance(call, args);
  LayerShapes S;
  if (!layer_shapes(c, S)) return false;
  const StatisticsLayer take = statistics_layer(call.lowered->graph, S, one_kernel_otherwise(call));
  if (take == StatisticsLayer::never) return false;
  if (take == StatisticsLayer::one_block) {
    LayerLayout fresh;
    if (!analyze_fresh(c, S, current_stream_state()->device, fresh) || !holds_whole_rows(fresh.v)) return false;
  }
  for (int k = 0; k < K; ++k) {
    // a layer kernel writes each result once: no broadcasting into a larger array, no shared outputs
    if (mode == AssignMode::into && outs[k]->has_storage() && outs[k]->shape() != S.out[static_cast<std::size_t>(k)])
      return false;
    for (int j = 0; j < k; ++j)
      if (outs[k] == outs[j] || (mode != AssignMode::fresh && outs[k]->has_storage() && outs[j]->has_storage() &&
                                 shares_memory(*outs[k], *outs[j])))
        return false;
  }
  const auto& stream = current_stream_state();
  bool any = false;
  for (int k = 0; k < K; ++k)
    any = prepare_output(c, *outs[k], mode, stream->device, S.out[static_cast<std::size_t>(k)]) || any;
  if (!any || S.n_rows == 0) return true;  // nothing to compute: no launch
  LayerLayout L;
  if (!analyze_layer(c, S, outs, K, planned_device(stream->device), L)) return false;
  launch(kernel_for(*c.lowered, L.v, stream->device, c.name), L, c, outs, K, stream);
  return true;
}

bool inspect_layer(const Call& call, KernelInfo& info) {
  std::vector<ReduceArg> args;
  const Call c = with_centered_variance(call, args);
  LayerShapes S;
  if (!layer_shapes(c, S)) return false;
  LayerLayout L;
  L.explain = true;
  const int device = device_count() > 0 ? enter_current_device() : -1;
  if (!analyze_fresh(c, S, device, L)) return false;
  const StatisticsLayer take = statistics_layer(call.lowered->graph, S, one_kernel_otherwise(call));
  if (take == StatisticsLayer::never || (take == StatisticsLayer::one_block && !holds_whole_rows(L.v))) return false;
  info = finish_inspect(generate(*c.lowered, L.v, c.name),
                        fmt::format("{}; {}", L.v.describe(), L.why));
  return true;
}

}  // namespace fusion::detail
