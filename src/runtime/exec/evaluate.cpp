// SPDX-License-Identifier: Apache-2.0
// Running an expression: layout analysis (which variant), the per-expression kernel list (lock-free on
// the hot path), argument packing and launch of elementwise kernels (one or several outputs); the
// dispatch between elementwise kernels, reductions and plans; and inspection. Scatters run in scatter.cpp. The registry of lowered
// graphs the kernel lists hang off is lowered.cpp.
#include <fmt/format.h>

#include <atomic>
#include <climits>
#include <map>
#include <mutex>

#include "fusion/error.hpp"
#include "fusion/inspect.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/exec/kernel_for.hpp"
#include "runtime/exec/plan.hpp"
#include "runtime/exec/region_hook.hpp"
#include "runtime/compile/kernel_cache.hpp"
#include "runtime/exec/launch.hpp"
#include "schedule/call_graph.hpp"
#include "schedule/layout.hpp"
#include "schedule/pieces.hpp"
#include "schedule/tuning.hpp"
#include "runtime/measure/stats_counters.hpp"
#include "runtime/memory/storage.hpp"

namespace fusion {
namespace detail {

using codegen::Access;
using codegen::kMaxOutputs;
using codegen::kMaxParams;
using codegen::Variant;

namespace {

thread_local bool tls_mode[static_cast<int>(Mode::count_)] = {};  // fz::ScopedMode's switches
bool on(Mode m) { return tls_mode[static_cast<int>(m)]; }

}  // namespace

thread_local int tls_precompile_arch = 0;

using ElementwiseSlot = KernelSlot<Variant>;

bool prepare_output(const Call& c, ArrayBase& out, AssignMode mode, int device, const Shape& shape, bool deferred) {
  for (int i = 0; i < c.n_arrays; ++i) {
    const ArrayBase& a = *c.arrays[i];
    if (!a.has_storage())
      throw Error(a.is_placeholder() ? "a placeholder array has no memory: use fz::inspect(e) to see its kernel, "
                                       "or fz::empty / fz::asarray to make arrays that can run"
                                     : "an expression reads an empty Array (default-constructed, never assigned)");
    if (a.device() != device)
      throw Error(fmt::format("an array on device {} is used while device {} is current; use fz::DeviceScope",
                              a.device(), device));
  }
  if (mode == AssignMode::replace)
    mode = (out.has_storage() && out.shape() == shape) ? AssignMode::into : AssignMode::fresh;
  if (mode == AssignMode::into) {
    if (!out.has_storage()) throw Error("assigning into an Array that has no memory");
    if (broadcast_shapes(shape, out.shape()) != out.shape())
      throw ShapeError(fmt::format("cannot write a result of shape {} into an array of shape {}", to_string(shape),
                                   to_string(out.shape())));
    if (out.device() != device)
      throw Error(fmt::format("the output lives on device {} but device {} is current", out.device(), device));
    for (int d = 0; d < out.ndim(); ++d)
      if (out.strides()[d] == 0 && out.shape()[d] > 1)
        throw Error("cannot write into a broadcast view (several elements share memory); copy it first");
  } else {
    out = deferred ? ArrayBase::make_deferred(out.dtype(), shape) : ArrayBase::make_empty(out.dtype(), shape);
  }
  return out.size() > 0;
}

/// The shape of output k: the broadcast of the arrays it reads (all of them for a single output).
Shape output_shape(const Call& c, int k) {
  if (c.lowered->graph.outputs.size() == 1) return broadcast_shape_of(c);
  const ir::Graph& g = c.lowered->graph;
  const std::vector<bool> reads = codegen::reachable(g, g.outputs[static_cast<std::size_t>(k)]);
  Shape s;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (reads[i] && g.nodes[i].op == ir::Op::input) s = broadcast_shapes(s, c.arrays[g.nodes[i].slot]->shape());
  return s;
}

/// The grid covers the work, one vector (or element) per thread: measured on an H100, this keeps more
/// loads in flight than a one-wave grid-stride launch (2^26 float32: 100-107% of the device-to-device
/// copy bandwidth against 90-97%; unrolling 2 or 4 vectors per thread did not help once the grid is
/// full). Kernels calling a device function, or doing much math on 16-bit floats, loop instead
/// (schedule/layout.hpp, linear_grid). The kernels keep a grid-stride loop for work beyond the largest grid.
void launch_elementwise(const KernelSlot<Variant>& k, const Layout& L, const Call& c, ArrayBase* const* outs, int K,
                        const std::shared_ptr<StreamState>& stream) {
  // Arrays and dims entries are numbered as emit_elementwise's signature names them.
  const int np = L.v.n_params;
  std::uint64_t ptrs[kMaxParams + kMaxOutputs];
  const std::int64_t* dims[1 + kMaxParams + kMaxOutputs];
  for (int p = 0; p < np; ++p) ptrs[p] = L.params[p]->data_ptr();
  for (int o = 0; o < K; ++o) ptrs[np + o] = outs[o]->data_ptr();
  dims[0] = L.shape.begin();
  for (int k = 0; k < K + np; ++k) dims[1 + k] = L.strides[k].begin();
  LaunchArgs a;
  a.pointers = {ptrs, static_cast<std::size_t>(np + K)};
  std::vector<ScalarArg> placed;  // (a join's positions, for this index space; no scan of the graph otherwise)
  a.scalars = {c.lowered->has_join ? place_pieces(c, L.space, placed) : c.scalars, static_cast<std::size_t>(c.n_scalars)};
  a.dims = {dims, static_cast<std::size_t>(1 + K + np)};
  a.count(codegen::Count::n) = L.n;
  Grid grid;
  if (L.v.rows) {
    // Threads per row: enough for the row's vectors (a power of two up to a block), blocks along the row
    // for what those leave, and rows over the grid's y dimension (the kernel loops when there are more).
    const std::int64_t cols = L.shape[L.shape.size() - 1], rows = L.n / cols;
    const std::int64_t vectors = (cols + L.v.vector_width - 1) / L.v.vector_width;
    std::int64_t lanes = 1;
    while (lanes < codegen::kBlockThreads && lanes < vectors) lanes *= 2;
    a.count(codegen::Count::lanes) = lanes;
    const std::int64_t per_block = codegen::kBlockThreads / lanes;
    grid.y = std::min<std::int64_t>((rows + per_block - 1) / per_block, codegen::kMaxGridY);
    // Along the row: a vector per thread at most, kAccessesPerLane at least (loads in flight, the row's
    // offsets computed once for several), and as many blocks between as fill the device.
    const std::int64_t most = (vectors + lanes - 1) / lanes;
    const std::int64_t least = (vectors + lanes * codegen::kAccessesPerLane - 1) / (lanes * codegen::kAccessesPerLane);
    const std::int64_t fill =
        (std::int64_t{properties_of(stream->device).multiprocessor_count} * codegen::kBlocksPerSm + grid.y - 1) /
        grid.y;
    grid.x = std::min<std::int64_t>(std::clamp(fill, least, most), codegen::kMaxGridX);
  } else if (L.v.tiles) {
    // A tile per block (codegen::kTile^2 elements, kTileRows rows of threads): many blocks in flight
    // hide the two barriers per tile; the kernel loops over tiles beyond the largest grid.
    const std::int64_t cols = L.shape[L.shape.size() - 1], rows = L.shape[L.shape.size() - 2];
    const std::int64_t per_matrix =
        ((cols + codegen::kTile - 1) / codegen::kTile) * ((rows + codegen::kTile - 1) / codegen::kTile);
    grid.x = std::min<std::int64_t>(per_matrix * (L.n / (rows * cols)), codegen::kMaxGridX);
  } else {
    grid.x = linear_grid(L.v.has_strided() ? L.n : (L.n + L.v.vector_width - 1) / L.v.vector_width, c.lowered->loops,
                         properties_of(stream->device).multiprocessor_count);
    if (L.v.private_bins) {  // a block's bins are added into the target once: a wave of blocks, each looping
      const DeviceProperties& props = properties_of(stream->device);
      const std::int64_t words = std::max<int>(1, L.v.exact_words);  // (exact sums: so many int64 words a bin)
      grid.shared_bytes = static_cast<unsigned>(L.bins * words * static_cast<std::int64_t>(itemsize(outs[0]->dtype())));
      const std::int64_t per_sm =
          std::clamp<std::int64_t>(static_cast<std::int64_t>(props.max_shared_bytes_per_sm) / grid.shared_bytes, 1, 4);
      grid.x = std::min<std::int64_t>(grid.x, std::int64_t{props.multiprocessor_count} * per_sm);
      a.count(codegen::Count::lanes) = L.bins;
    }
    if (L.v.exact_words) a.count(codegen::Count::chunk) = L.exact_plane;
  }
  launch_kernel(k.kernel->function, k.signature, a, grid, *stream);
  note_launch({L.params, static_cast<std::size_t>(np)}, {outs, static_cast<std::size_t>(K)}, stream);
}

namespace {

/// True when writing the outputs could change an input before it is read: an output shares memory
/// with an input that is not the very same view walked over the whole index space
/// (x = x.slice(reversed) + 1, x += x.transpose(), tie(a, b) = (a + 1, a + y) with `a` broadcast).
bool overlaps_harmfully(const Call& c, const ArrayBase* const* outs, int K, const Shape& full) {
  for (int k = 0; k < K; ++k)
    for (int i = 0; i < c.n_arrays; ++i) {
      const ArrayBase& a = *c.arrays[i];
      if (!shares_memory(a, *outs[k])) continue;
      const ArrayBase& out = *outs[k];
      if (out.shape() == full && a.shape() == out.shape() && a.data_ptr() == out.data_ptr() &&
          broadcast_strides(a, full) == broadcast_strides(out, full))
        continue;
      return true;
    }
  return false;
}

}  // namespace

void check_distinct_outputs(ArrayBase* const* outs, int K, AssignMode mode) {
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < k; ++j)
      if (outs[k] == outs[j] || (mode != AssignMode::fresh && shares_memory(*outs[k], *outs[j])))
        throw Error(fmt::format("fz::tie: outputs {} and {} share memory; give each result its own array", j, k));
}

void evaluate_elementwise(const Call& c, ArrayBase* const* outs, int K, AssignMode mode) {
  const auto& stream = current_stream_state();
  const int device = stream->device;
  check_distinct_outputs(outs, K, mode);
  bool any = false;
  for (int k = 0; k < K; ++k) any = prepare_output(c, *outs[k], mode, device, output_shape(c, k)) || any;
  if (!any) return;  // empty: no launch
  evaluate_prepared(c, outs, K);
}

void evaluate_prepared(const Call& c, ArrayBase* const* outs, int K) {
  const auto& stream = current_stream_state();
  const Shape full = index_space(outs, K);
  if (overlaps_harmfully(c, outs, K, full)) {
    // NumPy's answer: every input is read before any output is written. Compute aside, then copy.
    std::vector<ArrayBase> tmp;
    ArrayBase* tmp_ptrs[kMaxOutputs];
    for (int k = 0; k < K; ++k) tmp.push_back(ArrayBase::make_empty(outs[k]->dtype(), outs[k]->shape()));
    for (int k = 0; k < K; ++k) tmp_ptrs[k] = &tmp[static_cast<std::size_t>(k)];
    evaluate_elementwise(c, tmp_ptrs, K, AssignMode::into);
    for (int k = 0; k < K; ++k) copy_array(tmp[static_cast<std::size_t>(k)], *outs[k], AssignMode::into);
    return;
  }
  Layout L;
  analyze(c, outs, K, L);
  const ElementwiseSlot& k = kernel_for(*c.lowered, L.v, stream->device, c.name);
  launch_elementwise(k, L, c, outs, K, stream);
}

namespace {

const Lowered& identity_lowered(DType d) {
  static const Lowered* table[kNumDTypes] = {};
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < kNumDTypes; ++i) {
      ir::Graph g;
      g.outputs.push_back(g.input(static_cast<DType>(i)));
      table[i] = register_lowered(std::move(g));
    }
  });
  return *table[static_cast<int>(d)];
}

}  // namespace

/// What runs when: one elementwise kernel (the hot path), one reduction kernel, or a plan.
void evaluate_call(const Call& call, ArrayBase* const* outs, int K, AssignMode mode) {
  if (!on(Mode::unfused) && !call.lowered->has_reduction && !call.lowered->has_product && !call.lowered->has_scan)
    return evaluate_elementwise(call, outs, K, mode);
  const Call c = on(Mode::unfused) ? call : with_shared_reductions(call);
  const Lowered& lw = *c.lowered;
  const Plan& p = plan_of(lw, on(Mode::unfused) ? PartitionMode::unfused : on(Mode::separate_reductions) ? PartitionMode::separate : PartitionMode::fused);
  if (p.part.direct) {
    if (!lw.has_reduction) return evaluate_elementwise(c, outs, K, mode);
    if (p.part.layer && evaluate_layer(c, outs, K, mode)) return;  // (a lone var: schedule/partition.cpp)
    return evaluate_reduction(c, *outs[0], mode);
  }
  run_plan(p, c, outs, mode);
}

/// The call as this thread asks for it: its fz::function calls resolved (below), and inside an
/// fz::FastMath scope the fast-math twin of its graph.
Call with_functions_resolved(const Call& c);
Call as_asked(const Call& call) {
  Call c = with_functions_resolved(call);
  if (on(Mode::fast_math) && !c.lowered->graph.fast_math)
    c.lowered = &derived(*c.lowered, {2},
                         [&] {  // key {2}: the fast twin ({0, ...}: functions resolved; {1, ...}: reductions merged)
                           ir::Graph g = c.lowered->graph;
                           g.fast_math = true;
                           return g;
                         });
  return c;
}

Call with_functions_resolved(const Call& c) {
  if (c.n_functions == 0) return c;
  // The expression type's graph numbers its fz::function calls; this call's functions fill them in
  // (the functions are values, not part of the type). The graph with them is made once per set of ids.
  std::vector<std::uint32_t> key{0};  // the kind of derived graph: functions resolved
  key.insert(key.end(), c.functions, c.functions + c.n_functions);
  Call r = c;
  r.lowered = &derived(*c.lowered, key, [&] {
    ir::Graph g = c.lowered->graph;
    for (ir::Node& n : g.nodes)
      if (n.op == ir::Op::call) n.slot = c.functions[n.slot];
    g.n_functions = 0;
    return g;
  });
  r.functions = nullptr;
  r.n_functions = 0;
  return r;
}

void evaluate(const Call& c, ArrayBase& out, AssignMode mode) {
  ArrayBase* outs[1] = {&out};
  if (tls_region != nullptr && !tls_region_busy && record_in_region(c, outs, 1, mode)) return;
  evaluate_call(as_asked(c), outs, 1, mode);
  note_minimum({c.arrays, static_cast<std::size_t>(c.n_arrays)}, outs);
}

void evaluate_multi(const Call& c, ArrayBase* const* outs, int n_outs, AssignMode mode) {
  if (n_outs > kMaxOutputs) throw Error(fmt::format("fz::tie takes at most {} outputs", kMaxOutputs));
  if (tls_region != nullptr && !tls_region_busy && record_in_region(c, outs, n_outs, mode)) return;
  evaluate_call(as_asked(c), outs, n_outs, mode);
  note_minimum({c.arrays, static_cast<std::size_t>(c.n_arrays)}, {outs, static_cast<std::size_t>(n_outs)});
}

void copy_array(const ArrayBase& src, ArrayBase& dst, AssignMode mode) {
  const ArrayBase* arrays[1] = {&src};
  ArrayBase* outs[1] = {&dst};
  evaluate_elementwise(Call{&identity_lowered(src.dtype()), arrays, nullptr, nullptr, 1, 0, 0, {}}, outs, 1, mode);
}

/// Compiles (through the caches) without launching; works without a GPU.
KernelInfo finish_inspect(codegen::GeneratedKernel k, std::string variant) {
  KernelInfo info;
  info.name = k.name;
  info.hash = k.hash;
  info.variant = std::move(variant);
  for (const std::string& o : k.options)
    if (o == "-use_fast_math") info.variant += ", fast math (approximate float32 math)";
  if (tls_precompile_arch > 0) {
    const Artifact a = build_artifact(k, target_for_arch(tls_precompile_arch));
    info.arch = a.target;
    info.cache_path = a.cache_path;
    info.registers = a.registers;
  } else if (device_count() > 0) {
    const int device = enter_current_device();
    const LoadedModule& lk = load_module(k, device);  // compiled and loaded; no function needed to describe it
    info.arch = lk.target;
    info.cache_path = lk.cache_path;
    info.registers = lk.registers;
  } else {
    const Artifact a = build_artifact(k, default_target());
    info.arch = a.target;
    info.cache_path = a.cache_path;
    info.registers = a.registers;
  }
  info.source = std::move(k.source);
  return info;
}

KernelInfo inspect_elementwise(const Call& c) {
  const int K = static_cast<int>(c.lowered->graph.outputs.size());
  std::vector<ArrayBase> outs;
  ArrayBase* ptrs[kMaxOutputs];
  for (int k = 0; k < K; ++k)
    outs.push_back(ArrayBase::make_placeholder(
        c.lowered->graph.dtype(c.lowered->graph.outputs[static_cast<std::size_t>(k)]), output_shape(c, k)));
  for (int k = 0; k < K; ++k) ptrs[k] = &outs[static_cast<std::size_t>(k)];
  Layout L;
  analyze(c, ptrs, K, L);
  return finish_inspect(generate(*c.lowered, L.v, c.name), L.v.describe());
}

std::string plan_entry(const KernelInfo& k) { return fmt::format("{} [{:016x}] ({})", k.name, k.hash, k.variant); }

/// Every kernel a call runs as into new outputs, in launch order, as evaluate_call picks them (fz::Unfused
/// and fz::SeparateReductions included).
std::vector<KernelInfo> kernels_of(const Call& c) {
  const Lowered& lw = *c.lowered;
  if (!on(Mode::unfused) && !lw.has_reduction && !lw.has_product && !lw.has_scan) return {inspect_elementwise(c)};
  const Plan& p = plan_of(lw, on(Mode::unfused) ? PartitionMode::unfused : on(Mode::separate_reductions) ? PartitionMode::separate : PartitionMode::fused);
  if (p.part.direct && !lw.has_reduction) return {inspect_elementwise(c)};
  if (p.part.direct) {  // (a direct reduction has one output)
    KernelInfo layer;
    if (p.part.layer && inspect_layer(c, layer)) return {layer};
    return {inspect_reduction(c)};
  }
  return inspect_plan(p, c);
}

Shape expression_shape(const Call& c) { return node_shapes(c)[c.lowered->graph.outputs[0]]; }

/// One KernelInfo for several kernels: the last one's fields, every one in `plan`, every source.
KernelInfo assemble(std::vector<KernelInfo> steps, const std::vector<std::string>& notes) {
  KernelInfo info = steps.back();
  info.kernels = static_cast<int>(steps.size());
  info.plan.clear();
  for (std::size_t i = 0; i < steps.size(); ++i)
    info.plan.push_back(plan_entry(steps[i]) + (i < notes.size() ? notes[i] : std::string()));
  if (steps.size() == 1) return info;
  std::string source;
  for (std::size_t i = 0; i < steps.size(); ++i)
    source += fmt::format("// ---- kernel {} of {}: {}\n{}\n", i + 1, steps.size(), steps[i].name, steps[i].source);
  info.source = std::move(source);
  return info;
}

/// An expression over an empty Array (default-constructed, never assigned) has no shape to inspect: said
/// here rather than only when it runs.
void refuse_empty_inputs(const Call& c) {
  for (int i = 0; i < c.n_arrays; ++i)
    if (!c.arrays[i]->has_storage() && !c.arrays[i]->is_placeholder())
      throw Error("fz::inspect: the expression reads an empty Array (default-constructed, never assigned); give it "
                  "a shape with fz::placeholder, or memory with fz::empty / fz::asarray");
}

KernelInfo inspect(const Call& call) {
  refuse_empty_inputs(call);
  const Call c = as_asked(call);
  return assemble(kernels_of(on(Mode::unfused) ? c : with_shared_reductions(c)));
}

KernelInfo inspect_into(const Call& call, const ArrayBase& out) {
  refuse_empty_inputs(call);
  const Call asked = as_asked(call);
  const Call c = on(Mode::unfused) ? asked : with_shared_reductions(asked);
  std::vector<KernelInfo> steps = kernels_of(c);
  // The result's shape: `out = e` writes into `out` only when it has that shape (else `out` is replaced).
  const ir::Graph& g = c.lowered->graph;
  const Shape shape = node_shapes(c)[g.outputs[0]];
  if (out.shape() != shape) return assemble(std::move(steps));
  // The rule evaluation applies: an output overlapping an input other than element for element (any
  // overlap, for a reduction) is computed aside, then copied — every input read before anything is written.
  const ArrayBase* outs[1] = {&out};
  bool aside = false;
  if (c.lowered->has_reduction && plan_of(*c.lowered, PartitionMode::fused).part.direct)
    for (int i = 0; i < c.n_arrays; ++i) aside = aside || shares_memory(*c.arrays[i], out);
  else
    aside = overlaps_harmfully(c, outs, 1, shape);
  if (!aside) return assemble(std::move(steps));
  // (a direct reduction into an input's memory runs as its reduction kernel: a layer kernel refuses the overlap)
  if (c.lowered->has_reduction && plan_of(*c.lowered, PartitionMode::fused).part.direct) steps = {inspect_reduction(c)};
  const ArrayBase aside_result = ArrayBase::make_placeholder(out.dtype(), shape);
  const ArrayBase* copy_in[1] = {&aside_result};
  steps.push_back(inspect_elementwise(Call{&identity_lowered(out.dtype()), copy_in, nullptr, nullptr, 1, 0, 0, {}}));
  std::vector<std::string> notes(steps.size());
  notes.back() =
      ": the output overlaps an input in another layout, so the result is computed aside and copied (NumPy's answer)";
  return assemble(std::move(steps), notes);
}

bool& mode_flag(Mode m) { return tls_mode[static_cast<int>(m)]; }

}  // namespace detail

detail::PrecompileScope::PrecompileScope(int arch) : previous_(detail::tls_precompile_arch) {
  if (arch <= 0)
    throw Error(fmt::format("precompile: {} is not an architecture (compute capability as 80, 90, 100, ...)", arch));
  detail::tls_precompile_arch = arch;
}
detail::PrecompileScope::~PrecompileScope() { detail::tls_precompile_arch = previous_; }

}  // namespace fusion
