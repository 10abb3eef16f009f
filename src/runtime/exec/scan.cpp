// SPDX-License-Identifier: Apache-2.0
// Running a scan step (codegen/scan_variant.hpp): the axis checked, the output prepared, the layout
// analyzed, one kernel launched (or, for a few long columns, the chunks' totals first, then the scan).
#include <fmt/format.h>

#include "codegen/scan_state.hpp"
#include "fusion/error.hpp"
#include "runtime/cuda/held_work.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/exec/kernel_for.hpp"
#include "runtime/exec/launch.hpp"
#include "runtime/memory/storage.hpp"
#include "schedule/call_graph.hpp"
#include "schedule/scan_layout.hpp"

namespace fusion::detail {

using codegen::ScanVariant;
using ScanSlot = KernelSlot<ScanVariant>;

namespace {

/// The scanned axis of call `c` over the scan's shape, counted from 0.
int scan_axis(const Call& c, const Shape& shape) {
  const ir::Graph& g = graph_of(c);
  const ir::Node& scan = g.nodes[g.outputs[0]];
  const int nd = shape.size(), axis = c.reductions[scan.slot].axes[0];
  if (axis < -nd || axis >= nd)
    throw ShapeError(fmt::format("{}: axis {} is out of range for an operand of shape {}", ir::op_name(scan.op),
                                 axis, to_string(shape)));
  return axis < 0 ? axis + nd : axis;
}

/// A one-pass scan's state over `nodes` tree nodes (codegen/scan_state.hpp): the stream's buffer, grown
/// on demand and zeroed when made. While an fz::Step records or the stream is captured, a zeroed buffer of
/// the launch's own (`own`), which the graph keeps: a replay on another stream must not share the stream's.
CUdeviceptr scan_state(std::int64_t nodes, ArrayBase& own, StreamState& s) {
  const std::int64_t bytes = codegen::scan_state_bytes(nodes);
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  FUSION_CU(cuStreamIsCapturing, s.handle, &capturing);
  if (tls_step != nullptr || capturing != CU_STREAM_CAPTURE_STATUS_NONE) {
    own = ArrayBase::make_empty(DType::uint8, {bytes});
    FUSION_CU(cuMemsetD8Async, own.data_ptr(), 0, static_cast<std::size_t>(bytes), s.handle);
    return own.data_ptr();
  }
  if (s.scan_state && !is_stale(s.scan_state_generation, s.device) && s.scan_state_bytes >= bytes)
    return s.scan_state;
  if (s.scan_state && !is_stale(s.scan_state_generation, s.device))
    FUSION_CU(cuMemFree, s.scan_state);  // (waits for the launches still using it)
  s.scan_state = 0;
  const std::int64_t grown = std::max<std::int64_t>(bytes * 2, 1 << 16);  // few regrowths
  FUSION_CU(cuMemAlloc, &s.scan_state, static_cast<std::size_t>(grown));
  s.scan_state_bytes = grown;
  s.scan_state_generation = context_generation(s.device);
  FUSION_CU(cuMemsetD8Async, s.scan_state, 0, static_cast<std::size_t>(grown), s.handle);
  return s.scan_state;
}

void launch(const ScanSlot& k, const ScanLayout& L, const Call& c, ArrayBase* out, ArrayBase* totals,
            const std::shared_ptr<StreamState>& stream) {
  const int np = L.v.n_params;
  std::uint64_t ptrs[codegen::kMaxParams + 2] = {};
  const std::int64_t* dims[codegen::scan_dims_count(codegen::kMaxParams + 1)];
  for (int p = 0; p < np; ++p) ptrs[p] = L.params[p]->data_ptr();
  if (out) ptrs[np] = out->data_ptr();
  if (totals) ptrs[np + 1] = totals->data_ptr();
  ArrayBase own_state(DType::uint8);
  if (L.v.lookback) ptrs[np + 1] = scan_state(codegen::scan_state_nodes(L.n_rows, L.chunks), own_state, *stream);
  dims[0] = L.kshape.begin();
  for (int op = 0; op <= np; ++op) {
    dims[codegen::scan_row_strides(op)] = L.kst[op].begin();
    dims[codegen::scan_axis_stride(op)] = &L.ast[op];
  }
  LaunchArgs a;
  a.pointers = {ptrs, static_cast<std::size_t>(np + 2)};
  a.scalars = {c.scalars, static_cast<std::size_t>(c.n_scalars)};
  a.dims = {dims, codegen::scan_dims_count(np + 1)};
  a.count(codegen::Count::n_out) = L.n_rows;
  a.count(codegen::Count::n_red) = L.n;
  a.count(codegen::Count::chunk) = L.chunk;
  a.count(codegen::Count::lanes) = L.chunks;
  // (a one-pass scan's blocks claim partitions until none is left: a few per SM keep the GPU busy; columns
  // take a thread per row and chunk, or a block per 32 rows, where the others take a block per row)
  const std::int64_t parts = L.n_rows * L.chunks;
  std::int64_t blocks = parts;
  if (L.v.lookback) blocks = std::min<std::int64_t>(parts, L.resident_blocks);
  if (L.v.columns) blocks = (parts + codegen::kScanBlock - 1) / codegen::kScanBlock;
  if (L.v.strips) blocks = (L.n_rows + 31) / 32;  // a block per strip of 32 rows
  blocks = std::min<std::int64_t>(blocks, codegen::kMaxGridX);
  launch_kernel(k.kernel->function, k.signature, a, {blocks, 1, static_cast<unsigned>(L.v.threads()), L.shared_bytes}, *stream);
  std::vector<const ArrayBase*> written;
  if (out) written.push_back(out);
  if (totals) written.push_back(totals);
  if (own_state.has_storage()) written.push_back(&own_state);
  note_launch({L.params, static_cast<std::size_t>(np)}, written, stream);
}

/// The scan's shape and axis, checked.
std::pair<Shape, int> shape_and_axis(const Call& c) {
  const Shape shape = node_shapes(c)[graph_of(c).outputs[0]];
  return {shape, scan_axis(c, shape)};
}

}  // namespace

void evaluate_scan(const Call& c, ArrayBase& out, AssignMode mode) {
  const auto [shape, axis] = shape_and_axis(c);
  // A scan reads elements that other blocks write: an output sharing memory with an input gets the result
  // computed aside, then copied.
  if (mode != AssignMode::fresh && out.has_storage())
    for (int i = 0; i < c.n_arrays; ++i)
      if (shares_memory(*c.arrays[i], out)) {
        ArrayBase aside(out.dtype());
        evaluate_scan(c, aside, AssignMode::fresh);
        return copy_array(aside, out, mode);
      }
  const auto& stream = current_stream_state();
  if (!prepare_output(c, out, mode, stream->device, shape)) return;
  if (out.shape() != shape) {
    // a scan written into a larger array (`out[...] = cumsum(x)` with x broadcasting): computed at its own
    // shape, then broadcast by a copy (found by the fuzzer)
    if (broadcast_shapes(shape, out.shape()) != out.shape())  // (a ShapeError naming both where they do not broadcast)
      throw ShapeError(fmt::format("a scan of shape {} cannot be broadcast into an array of shape {}",
                                   to_string(shape), to_string(out.shape())));
    ArrayBase aside(out.dtype());
    evaluate_scan(c, aside, AssignMode::fresh);
    return copy_array(aside, out, mode);
  }
  ScanLayout L;
  analyze_scan(c, out, shape, axis, planned_device(stream->device), L);
  if (L.n_rows == 0 || L.n == 0) return;
  const Lowered& lw = *c.lowered;
  if (!L.v.chunked) return launch(kernel_for(lw, L.v, stream->device, c.name), L, c, &out, nullptr, stream);
  // one accumulator per chunk: the compute type of the scan's result (float for 16-bit floats)
  const DType acc = dtype_info(graph_of(c).dtype(graph_of(c).outputs[0])).compute;
  ArrayBase totals = ArrayBase::make_empty(acc, {L.n_rows * L.chunks});
  ScanVariant first = L.v;
  first.totals = true;
  launch(kernel_for(lw, first, stream->device, c.name), L, c, nullptr, &totals, stream);
  launch(kernel_for(lw, L.v, stream->device, c.name), L, c, &out, &totals, stream);
}

std::vector<KernelInfo> inspect_scan(const Call& c) {
  const auto [shape, axis] = shape_and_axis(c);
  const ir::Graph& g = graph_of(c);
  const ArrayBase out = ArrayBase::make_placeholder(g.dtype(g.outputs[0]), shape);
  ScanLayout L;
  const int device = device_count() > 0 ? enter_current_device() : -1;
  analyze_scan(c, out, shape, axis, planned_device(device), L);
  std::vector<KernelInfo> kernels;
  if (L.v.chunked) {
    ScanVariant first = L.v;
    first.totals = true;
    kernels.push_back(finish_inspect(generate(*c.lowered, first, c.name), first.describe()));
  }
  kernels.push_back(finish_inspect(generate(*c.lowered, L.v, c.name), L.v.describe()));
  return kernels;
}

}  // namespace fusion::detail
