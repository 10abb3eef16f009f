// SPDX-License-Identifier: Apache-2.0
// Running one reduction kernel: the reduced axes from the call, dimensions split into kept and reduced
// and collapsed, the thread layout (variant) chosen, the kernel found or built, and launched.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/reduce_skeleton.hpp"
#include "fusion/error.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/exec/kernel_for.hpp"
#include "runtime/exec/reduce_launch.hpp"
#include "runtime/compile/kernel_cache.hpp"
#include "runtime/exec/launch.hpp"
#include "runtime/memory/storage.hpp"

namespace fusion::detail {

using codegen::kMaxParams;
using codegen::ReduceMode;
using codegen::ReduceVariant;

using ReduceSlot = KernelSlot<ReduceVariant>;

CUdeviceptr reduction_workspace(StreamState& s) {
  if (!s.reduce_workspace || is_stale(s.workspace_generation, s.device)) {  // a device reset freed the old one
    FUSION_CU(cuMemAlloc, &s.reduce_workspace, kCounterBytes + kPartialBytes);
    s.workspace_generation = context_generation(s.device);
    FUSION_CU(cuMemsetD8Async, s.reduce_workspace, 0, kCounterBytes, s.handle);
  }
  return s.reduce_workspace;
}

void launch_reduction(CUfunction f, const codegen::KernelSignature& sig, ReduceLayout& L,
                      std::span<const ScalarArg> scalars, std::span<const ArrayBase* const> outs,
                      const std::shared_ptr<StreamState>& stream) {
  // Arrays and dims entries are numbered as write_reduce_kernel's signature names them.
  const int np = L.v.n_params;
  std::uint64_t ptrs[kMaxParams + codegen::kMaxOutputs];
  const std::int64_t* dims[codegen::reduced_strides(kMaxParams)];
  for (int p = 0; p < np; ++p) ptrs[p] = L.params[p]->data_ptr();
  for (std::size_t k = 0; k < outs.size(); ++k) ptrs[np + static_cast<int>(k)] = outs[k]->data_ptr();
  dims[codegen::kKeptShape] = L.kshape.begin();
  dims[codegen::kReducedShape] = L.rshape.begin();
  dims[codegen::kOutKeptStrides] = L.kst_out.begin();
  for (int p = 0; p < np; ++p) {
    dims[codegen::kept_strides(p)] = L.kst[p].begin();
    dims[codegen::reduced_strides(p)] = L.rst[p].begin();
  }
  LaunchArgs a;
  a.pointers = {ptrs, static_cast<std::size_t>(np) + outs.size()};
  a.scalars = scalars;
  a.dims = {dims, codegen::kept_strides(np)};
  a.count(codegen::Count::n_out) = L.n_out;
  a.count(codegen::Count::n_red) = L.n_red;
  a.count(codegen::Count::chunk) = L.chunk;
  a.divisors = {&L.divisor, 1};
  if (L.v.split) {
    const CUdeviceptr ws = reduction_workspace(*stream);
    a.workspace = {ws + kCounterBytes, ws};  // partials, counters
  }
  launch_kernel(f, sig, a, {L.blocks, L.splits}, *stream);
  note_launch({L.params, static_cast<std::size_t>(np)}, outs, stream);
}

namespace {

/// The first reduction node (a multi-reduction's share their descriptor).
const ir::Node& first_reduction(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes)
    if (ir::is_reduction(n.op)) return n;
  throw Error("internal: no reduction in a reduction kernel");
}

/// The layout of a fused reduction call: its distinct arrays, then the shared analysis.
void analyze(const Call& c, const ArrayBase& out, const Reduced& shapes, int device, ReduceLayout& L) {
  const ir::Graph& g = c.lowered->graph;
  const ir::Node& rn = first_reduction(g);
  L.v = ReduceVariant{};
  const int np = distinct_params(c, L.params, L.v.param_of_slot);
  analyze_reduction(np, out, shapes, c.reductions[rn.slot], codegen::accumulator_bytes(g), planned_device(device), L);
}

/// Checks that a reduction without an identity has something to reduce.
void check_extent(const ir::Node& rn, const Reduced& shapes) {
  if (!ir::needs_nonempty(rn.op)) return;
  std::int64_t n_red = 1, n_out = 1;
  for (int d = 0; d < shapes.in.size(); ++d) ((shapes.mask & (1u << d)) ? n_red : n_out) *= shapes.in[d];
  if (n_red == 0 && n_out > 0)
    throw ShapeError(fmt::format("{} of an empty extent (operand shape {}): it has no identity; check the size "
                                 "before reducing or use sum/prod/any/all, which do",
                                 ir::op_name(rn.op), to_string(shapes.in)));
}

}  // namespace

Shape reduction_output_shape(const Call& c) {
  const ir::Graph& g = c.lowered->graph;
  const ir::Node& rn = first_reduction(g);
  const Reduced shapes = reduced_shapes(broadcast_shape_of(c), c.reductions[rn.slot]);
  check_extent(rn, shapes);
  return shapes.out;
}

void evaluate_reduction(const Call& c, ArrayBase& out, AssignMode mode) {
  const ir::Graph& g = c.lowered->graph;
  const ir::Node& rn = first_reduction(g);
  const Reduced shapes = reduced_shapes(broadcast_shape_of(c), c.reductions[rn.slot]);
  check_extent(rn, shapes);
  if (mode == AssignMode::replace)
    mode = (out.has_storage() && out.shape() == shapes.out) ? AssignMode::into : AssignMode::fresh;
  if (mode == AssignMode::into) {
    bool aside = out.has_storage() && out.shape() != shapes.out;  // broadcast into a larger array
    for (int i = 0; i < c.n_arrays && !aside; ++i)
      aside = c.arrays[i]->storage() && c.arrays[i]->storage() == out.storage();
    if (aside) {  // every input read before the output is written: compute aside, then copy
      ArrayBase tmp(out.dtype());
      evaluate_reduction(c, tmp, AssignMode::fresh);
      copy_array(tmp, out, AssignMode::into);
      return;
    }
  }
  const auto& stream = current_stream_state();
  if (!prepare_output(c, out, mode, stream->device, shapes.out)) return;  // no outputs: no launch
  ReduceLayout L;
  analyze(c, out, shapes, stream->device, L);
  const ReduceSlot& k = kernel_for(*c.lowered, L.v, stream->device, c.name);
  fit_split_to_kernel(L, k.kernel->registers, planned_device(stream->device));
  const ArrayBase* written[1] = {&out};
  launch_reduction(k.kernel->function, k.signature, L, {c.scalars, static_cast<std::size_t>(c.n_scalars)}, written,
                   stream);
}

bool reductions_share_space(const Call& c) {
  try {
    const std::vector<Shape> shapes = node_shapes(c);
    const Shape full = broadcast_shape_of(c);
    for (const ir::Node& n : c.lowered->graph.nodes)
      if (ir::is_reduction(n.op) && shapes[n.a] != full) return false;
    return true;
  } catch (const ShapeError&) {
    return false;  // each output alone reports its own shape errors
  }
}

bool evaluate_reductions(const Call& c, ArrayBase* const* outs, int K, AssignMode mode) {
  const ir::Graph& g = c.lowered->graph;
  const ir::Node& rn = first_reduction(g);
  if (!reductions_share_space(c)) return false;
  const Reduced shapes = reduced_shapes(broadcast_shape_of(c), c.reductions[rn.slot]);
  for (const ir::Node& n : g.nodes)
    if (ir::is_reduction(n.op)) check_extent(n, shapes);
  // Outputs that exist must be exactly the result, with one layout, apart from the inputs.
  if (mode != AssignMode::fresh)
    for (int k = 0; k < K; ++k) {
      if (!outs[k]->has_storage()) continue;
      if (outs[k]->shape() != shapes.out) return false;
      for (int i = 0; i < c.n_arrays; ++i)
        if (shares_memory(*c.arrays[i], *outs[k])) return false;
    }
  const auto& stream = current_stream_state();
  bool any = false;
  for (int k = 0; k < K; ++k) any = prepare_output(c, *outs[k], mode, stream->device, shapes.out) || any;
  if (!any) return true;
  for (int k = 1; k < K; ++k)  // one kernel writes every output at the same offsets (new ones included)
    if (outs[k]->strides() != outs[0]->strides()) return false;
  ReduceLayout L;
  analyze(c, *outs[0], shapes, stream->device, L);
  L.v.n_outputs = static_cast<std::uint8_t>(K);
  for (int k = 0; k < K; ++k) L.v.out_dtypes[k] = outs[k]->dtype();
  const ReduceSlot& kernel = kernel_for(*c.lowered, L.v, stream->device, c.name);
  fit_split_to_kernel(L, kernel.kernel->registers, planned_device(stream->device));
  launch_reduction(kernel.kernel->function, kernel.signature, L, {c.scalars, static_cast<std::size_t>(c.n_scalars)},
                   {outs, static_cast<std::size_t>(K)}, stream);
  return true;
}

KernelInfo inspect_reductions(const Call& c) {
  const ir::Graph& g = c.lowered->graph;
  const int K = static_cast<int>(g.outputs.size());
  const ir::Node& rn = first_reduction(g);
  const Reduced shapes = reduced_shapes(broadcast_shape_of(c), c.reductions[rn.slot]);
  const ArrayBase out = ArrayBase::make_placeholder(g.dtype(g.outputs[0]), shapes.out);
  ReduceLayout L;
  const int device = device_count() > 0 ? enter_current_device() : -1;
  analyze(c, out, shapes, device, L);
  L.v.n_outputs = static_cast<std::uint8_t>(K);
  for (int k = 0; k < K; ++k) L.v.out_dtypes[k] = g.dtype(g.outputs[static_cast<std::size_t>(k)]);
  return finish_inspect(generate(*c.lowered, L.v, c.name),
                        L.v.describe());
}

KernelInfo inspect_reduction(const Call& c) {
  const ir::Graph& g = c.lowered->graph;
  const ir::Node& rn = first_reduction(g);
  const Reduced shapes = reduced_shapes(broadcast_shape_of(c), c.reductions[rn.slot]);
  check_extent(rn, shapes);
  const ArrayBase out = ArrayBase::make_placeholder(g.dtype(g.outputs[0]), shapes.out);
  ReduceLayout L;
  const int device = device_count() > 0 ? enter_current_device() : -1;
  analyze(c, out, shapes, device, L);
  return finish_inspect(generate(*c.lowered, L.v, c.name),
                        L.v.describe());
}

}  // namespace fusion::detail
