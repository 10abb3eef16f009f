// SPDX-License-Identifier: Apache-2.0
#include "runtime/exec/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <memory>
#include <optional>

#include "codegen/emit_common.hpp"
#include "fusion/error.hpp"
#include "fusion/stream.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/exec/product_race.hpp"
#include "schedule/call_graph.hpp"
#include "schedule/layout.hpp"
#include "schedule/pieces.hpp"
#include "schedule/product_epilogue.hpp"

namespace fusion::detail {
namespace {

/// The step's own Call: its arrays, scalars and reductions picked from the outer call and temporaries.
struct StepCall {
  std::vector<const ArrayBase*> arrays;
  std::vector<ScalarArg> scalars;
  std::vector<ReduceArg> reductions;
  Call call;
  StepCall(const Plan& p, const KernelStep& s, const Call& c, const std::vector<ArrayBase>& temps) {
    for (int a : s.arrays) arrays.push_back(a >= 0 ? c.arrays[a] : &temps[static_cast<std::size_t>(~a)]);
    for (std::uint32_t i : s.scalars) scalars.push_back(c.scalars[i]);
    for (std::uint32_t i : s.reductions) reductions.push_back(c.reductions[i]);
    call = Call{p.lowered[static_cast<std::size_t>(s.kernel)], arrays.data(), scalars.data(), reductions.data(), static_cast<int>(arrays.size()),
                static_cast<int>(scalars.size()), static_cast<int>(reductions.size()), c.name};
  }
};


/// The epilogue cuBLASLt runs for steps i (a product the partition marked, KernelStep::epilogue) and i + 1
/// as one call, when their arrays allow it (schedule/product_epilogue's choose_epilogue) and the result
/// is written in the epilogue's dtype. `product` and `next` are the two steps' calls.
std::optional<Epilogue> merged_epilogue(const Plan& p, std::size_t i, const Call& product, const Call& next,
                                        DType out_dtype) {
  const KernelStep& s = p.part.steps[i];
  const EpilogueMatch& m = s.epilogue;
  if (!m.found || m.dtype != out_dtype) return {};
  const KernelStep& n = p.part.steps[i + 1];
  std::vector<TermArray> terms;
  for (std::uint32_t slot : m.terms) {
    const ArrayBase& x = *next.arrays[slot];
    const int from = n.arrays[slot];
    terms.push_back({from == ~s.targets[0], from < 0, x.shape(), x.dtype(), x.is_contiguous(), x.data_ptr() % 16 == 0});
  }
  const ArrayBase& a = *product.arrays[0];
  const std::int64_t k = a.ndim() > 0 ? a.shape()[a.ndim() - 1] : 0;
  const bool zero = m.activation != Activation::relu || (is_floating(next.scalars[m.zero].dtype) && floating_value(next.scalars[m.zero]) == 0);
  const auto chosen = choose_epilogue(m, terms, product_output_shape(product), k, zero);
  if (!chosen) return {};
  Epilogue e;
  e.activation = m.activation;
  if (chosen->bias >= 0) e.bias = next.arrays[m.terms[static_cast<std::size_t>(chosen->bias)]];
  if (chosen->residual >= 0) e.residual = next.arrays[m.terms[static_cast<std::size_t>(chosen->residual)]];
  return e;
}

/// Per input slot of `next`: whether it reads the temporary product step `product` writes.
std::vector<bool> product_slots(const KernelStep& product, const KernelStep& next) {
  std::vector<bool> slots;
  for (int a : next.arrays) slots.push_back(a == ~product.targets[0]);
  return slots;
}

}  // namespace

Call with_shared_reductions(const Call& c) {
  // (a product's operands too: `h = x @ w + b` used five times in a GELU is one product, not five)
  // (and fz::take's: a gather used twice, a norm's `x` that is `take(table, ids, 0) + pos`, packs its axis's
  // extent and stride twice; with equal scalars merged its two reads are one)
  const bool gathers = c.lowered->has_gather;
  if (c.n_reductions < 2 && !c.lowered->has_product && !gathers) return c;
  const auto equal = [](const ReduceArg& a, const ReduceArg& b) {
    if (a.n_axes != b.n_axes || a.keepdims != b.keepdims || a.ddof != b.ddof || a.exclusive != b.exclusive ||
        a.reverse != b.reverse)
      return false;
    for (int i = 0; i < a.n_axes; ++i)
      if (a.axes[static_cast<std::size_t>(i)] != b.axes[static_cast<std::size_t>(i)]) return false;
    return true;
  };
  // Equal reductions read their arrays through different input slots (each use of `x` is one), so
  // inputs that are the same view merge first; then reductions with equal arguments share a slot.
  std::vector<std::uint32_t> key(static_cast<std::size_t>(c.n_arrays + c.n_reductions + (gathers ? c.n_scalars : 0)));
  // (a gather's source is read through a pointer: it merges only with other sources, never with the same
  // view loaded per element; found by the fuzzer: take_along_axis(x, cast(minimum(y, x)), 0) of one element)
  const std::vector<bool> source = gather_sources(c);  // (empty without a gather)
  auto is_source = [&](int s) { return !source.empty() && source[static_cast<std::size_t>(s)]; };
  for (int s = 0; s < c.n_arrays; ++s) {
    int r = 0;
    while (!same_view(*c.arrays[r], *c.arrays[s]) || is_source(r) != is_source(s)) ++r;
    key[static_cast<std::size_t>(s)] = static_cast<std::uint32_t>(r);
  }
  bool any = false;
  for (int s = 0; s < c.n_arrays && (c.lowered->has_product || gathers); ++s)
    any = any || key[static_cast<std::size_t>(s)] != static_cast<std::uint32_t>(s);
  // (a join's positions are rewritten at launch: never shared)
  const std::vector<bool> positions = gathers ? position_scalars(c.lowered->graph) : std::vector<bool>();
  auto kept = [&](int j) { return static_cast<std::size_t>(j) < positions.size() && positions[static_cast<std::size_t>(j)]; };
  for (int j = 0; j < c.n_scalars && gathers; ++j) {  // equal values of one dtype: one slot
    int r = 0;
    while (r < j && (kept(r) || kept(j) || c.scalars[r].dtype != c.scalars[j].dtype || c.scalars[r].bits != c.scalars[j].bits)) ++r;
    key[static_cast<std::size_t>(c.n_arrays + c.n_reductions + j)] = static_cast<std::uint32_t>(r);
    any = any || r != j;
  }
  for (int j = 0; j < c.n_reductions; ++j) {
    int r = 0;
    while (!equal(c.reductions[r], c.reductions[j])) ++r;
    key[static_cast<std::size_t>(c.n_arrays + j)] = static_cast<std::uint32_t>(r);
    any = any || r != j;
  }
  if (!any) return c;
  Call merged = c;
  key.insert(key.begin(), 1);  // the kind of derived graph: reductions merged
  merged.lowered = &derived(*c.lowered, key, [&] {
    ir::Graph g = c.lowered->graph;
    for (ir::Node& n : g.nodes) {
      if (ir::takes_descriptor(n.op)) n.slot = key[1 + static_cast<std::size_t>(c.n_arrays) + n.slot];
      if (n.op == ir::Op::scalar && gathers)
        n.slot = key[1 + static_cast<std::size_t>(c.n_arrays + c.n_reductions) + n.slot];
    }
    const std::vector<std::uint32_t> inputs(key.begin() + 1, key.begin() + 1 + c.n_arrays);
    return ir::canonicalize(g, inputs);  // equal nodes are one node now
  });
  return merged;
}

const Plan& plan_of(const Lowered& lw, PartitionMode mode) {
  const int i = static_cast<int>(mode);
  std::call_once(lw.plan_once[i], [&] {
    auto plan = std::make_unique<Plan>();
    plan->part = partition(lw.canonical, mode);
    plan->lowered.resize(static_cast<std::size_t>(plan->part.kernels));
    auto add = [&](auto&& self, const KernelStep& s) -> void {
      plan->lowered[static_cast<std::size_t>(s.kernel)] = lowered_for_graph(s.graph);
      for (const KernelStep& one : s.alone) self(self, one);
    };
    for (const KernelStep& s : plan->part.steps) add(add, s);
    lw.plans[i] = std::move(plan);
  });
  return *lw.plans[i];
}

namespace {

/// The shape a whole_index step writes (see KernelStep): its region's arrays broadcast, and the output
/// when the region is an output's and the call writes into an existing array.
Shape index_space(const KernelStep& s, const Call& c, const ArrayBase* const* outs, AssignMode mode) {
  Shape shape;
  for (int a : s.index_arrays) shape = broadcast_shapes(shape, c.arrays[a]->shape());
  if (s.index_output >= 0 && outs && mode != AssignMode::fresh && outs[s.index_output]->has_storage())
    shape = broadcast_shapes(shape, outs[s.index_output]->shape());
  return shape;
}

/// The shape of each output of a whole step's call (an expression of its own), from its graph.
std::vector<Shape> output_shapes(const Call& c) {
  const std::vector<Shape> all = node_shapes(c);
  std::vector<Shape> shapes;
  for (std::uint32_t o : graph_of(c).outputs) shapes.push_back(all[o]);
  return shapes;
}

/// Walks the steps with placeholder temporaries of the shapes they will have: `visit(step, call, shapes)`
/// with a shape per target of the step (`outs` may be null: then no output's shape counts).
/// Computing a step's shape checks it (broadcasting, axes, empty extents) without touching memory.
template <class Visit>
void walk_shapes(const Plan& p, const Call& c, const ArrayBase* const* outs, AssignMode mode, Visit&& visit) {
  std::vector<ArrayBase> temps;
  for (DType d : p.part.temp_dtypes) temps.emplace_back(d);
  auto walk = [&](const KernelStep& s) {
    const StepCall sc(p, s, c, temps);
    const std::size_t K = s.targets.size();
    const Lowered& lw = p.lowered_of(s);
    const std::vector<Shape> shapes = s.whole || lw.has_scan ? output_shapes(sc.call)
                                      : s.whole_index    ? std::vector<Shape>(K, index_space(s, c, outs, mode))
                                      : lw.has_product   ? std::vector<Shape>(K, product_output_shape(sc.call))
                                      : lw.has_reduction ? std::vector<Shape>(K, reduction_output_shape(sc.call))
                                                         : std::vector<Shape>(K, broadcast_shape_of(sc.call));
    visit(s, sc.call, shapes);
    for (std::size_t k = 0; k < K; ++k) {
      const int t = s.targets[k];
      if (t >= 0)
        temps[static_cast<std::size_t>(t)] =
            ArrayBase::make_placeholder(p.part.temp_dtypes[static_cast<std::size_t>(t)], shapes[k]);
    }
  };
  for (const KernelStep& s : p.part.steps) {
    if (!s.alone.empty() && !reductions_share_space(StepCall(p, s, c, temps).call))
      for (const KernelStep& one : s.alone) walk(one);
    else
      walk(s);
  }
}

/// Whether a step reads memory an earlier step of the plan wrote as an output (a tie whose output is one of
/// its inputs, run as several kernels): then the outputs must not be written in place step by step.
bool later_step_reads_written_output(const Plan& p, const Call& c, ArrayBase* const* outs, int K, AssignMode mode) {
  bool aliased = false;
  for (int k = 0; k < K && !aliased; ++k)
    for (int i = 0; i < c.n_arrays && !aliased; ++i) aliased = outs[k]->has_storage() && shares_memory(*c.arrays[i], *outs[k]);
  if (!aliased) return false;
  std::vector<int> written;
  bool reads = false;
  walk_shapes(p, c, outs, mode, [&](const KernelStep& s, const Call& step, const std::vector<Shape>&) {
    for (int i = 0; i < step.n_arrays; ++i)
      for (int k : written) reads = reads || shares_memory(*step.arrays[i], *outs[k]);
    for (int t : s.targets)
      if (t < 0) written.push_back(~t);
  });
  return reads;
}

}  // namespace

void run_plan(const Plan& p, const Call& c, ArrayBase* const* outs, AssignMode mode) {
  const int K = static_cast<int>(c.lowered->graph.outputs.size());
  // The first run of a plan of several kernels compiles them all at once (inspect_plan does, in parallel)
  // instead of one after another as the steps launch. Errors are the steps' to report, below. Not while
  // a graph is being captured: other threads' driver calls could break a global-mode capture.
  if (p.part.steps.size() > 1 && !p.compiled.load(std::memory_order_acquire) && !fusion::current_stream().is_capturing())
    std::call_once(p.compiled_together, [&] {
      try {
        (void)inspect_plan(p, c);
      } catch (...) {
      }
      p.compiled.store(true, std::memory_order_release);  // later runs skip even the capture query
    });
  if (p.part.layer && evaluate_layer(c, outs, K, mode)) return;
  // Every step's shapes first: a step that fails must not leave the outputs of earlier steps written.
  // Only a plan that writes outputs in several steps can do that (earlier steps write temporaries; a
  // step checks itself before it writes), so the common plan skips this pass on its repeated path.
  int output_steps = 0;
  for (const KernelStep& s : p.part.steps) output_steps += s.targets[0] < 0;
  if (output_steps > 1 && later_step_reads_written_output(p, c, outs, K, mode)) {
    // NumPy's answer for a tie whose output is also an input (fz::tie(x, y) = (f(x), g(x)) as several kernels,
    // as fz::Unfused runs it): every input read before any output is written. The plan runs into new
    // arrays, then each is copied into its output.
    std::vector<ArrayBase> fresh;
    ArrayBase* fresh_ptrs[codegen::kMaxOutputs];
    for (int k = 0; k < K; ++k) fresh.emplace_back(outs[k]->dtype());
    for (int k = 0; k < K; ++k) fresh_ptrs[k] = &fresh[static_cast<std::size_t>(k)];
    run_plan(p, c, fresh_ptrs, AssignMode::fresh);
    for (int k = 0; k < K; ++k) copy_array(fresh[static_cast<std::size_t>(k)], *outs[k], mode);
    return;
  }
  if (output_steps > 1)
    walk_shapes(p, c, outs, mode, [&](const KernelStep& s, const Call& step, const std::vector<Shape>& shapes) {
      check_operand_count(step);
      for (std::size_t k = 0; k < s.targets.size(); ++k) {
        const int t = s.targets[k];
        const ArrayBase* out = t < 0 ? outs[~t] : nullptr;
        if (out && mode == AssignMode::into && out->has_storage() &&
            broadcast_shapes(shapes[k], out->shape()) != out->shape())
          throw ShapeError(fmt::format("cannot write a result of shape {} into an array of shape {}",
                                       to_string(shapes[k]), to_string(out->shape())));
      }
    });
  std::vector<ArrayBase> temps;
  for (DType d : p.part.temp_dtypes) temps.emplace_back(d);
  auto run = [&](const KernelStep& s) {
    const StepCall sc(p, s, c, temps);
    ArrayBase* targets[codegen::kMaxOutputs];
    const int K = static_cast<int>(s.targets.size());
    for (int k = 0; k < K; ++k) {
      const int t = s.targets[static_cast<std::size_t>(k)];
      targets[k] = t >= 0 ? &temps[static_cast<std::size_t>(t)] : outs[~t];
    }
    AssignMode m = s.targets[0] >= 0 ? AssignMode::fresh : mode;
    if (s.whole_index) {
      *targets[0] = ArrayBase::make_empty(targets[0]->dtype(), index_space(s, c, outs, mode));
      m = AssignMode::into;
    }
    if (s.whole)
      evaluate_call(sc.call, targets, K, m);  // its own partition
    else if (p.lowered_of(s).has_product)
      (void)evaluate_product(sc.call, *targets[0], m);  // (no epilogue: true)
    else if (p.lowered_of(s).has_scan)
      evaluate_scan(sc.call, *targets[0], m);
    else if (!p.lowered_of(s).has_reduction)
      evaluate_elementwise(sc.call, targets, K, m);
    else if (K == 1)
      evaluate_reduction(sc.call, *targets[0], m);
    else
      return evaluate_reductions(sc.call, targets, K, m);
    return true;
  };
  const std::vector<KernelStep>& steps = p.part.steps;
  // A product raced against its generated kernel (product_race.hpp) may ask for the two steps to be timed: its
  // sample starts before the product and ends after the step that reads it.
  RaceSample timing;
  std::size_t timing_ends = 0;
  const auto ran = [&](std::size_t last) {
    if (timing && last >= timing_ends) timing.end(current_stream_state()->handle);
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    // A product and the step reading it as one kernel: generated where fz::GeneratedProducts or the product race
    // takes it, else inside cuBLASLt's call where its epilogues express the math (the partition checked the
    // steps' shapes; the arrays are checked here). The mode is checked first: a product plan's repeated path
    // builds no step calls.
    const bool generated = steps[i].generated_epilogue && generated_products_on(current_stream_state()->device);
    if (generated || steps[i].epilogue.found) {
      const StepCall product(p, steps[i], c, temps), next(p, steps[i + 1], c, temps);
      ArrayBase* results[codegen::kMaxOutputs];  // (the epilogue step writes outputs only: mark_epilogues)
      const int n_results = static_cast<int>(steps[i + 1].targets.size());
      for (int r = 0; r < n_results; ++r) results[r] = outs[~steps[i + 1].targets[static_cast<std::size_t>(r)]];
      ArrayBase& out = *results[0];
      if (generated && evaluate_generated_product(product.call, next.call, product_slots(steps[i], steps[i + 1]), results,
                                                  n_results, mode, timing)) {
        ++i;
        continue;
      }
      if (timing) {
        timing.begin(current_stream_state()->handle);
        timing_ends = i + 1;
      }
      const auto e = steps[i].epilogue.found ? merged_epilogue(p, i, product.call, next.call, out.dtype()) : std::nullopt;
      if (e && evaluate_product(product.call, out, mode, *e)) {  // the next step's math inside the call
        ran(++i);
        continue;
      }
    }
    if (!run(steps[i]))
      for (const KernelStep& one : steps[i].alone) run(one);  // the grouped reductions one by one
    ran(i);
  }
}

std::vector<KernelInfo> inspect_plan(const Plan& p, const Call& c) {
  if (KernelInfo layer; p.part.layer && inspect_layer(c, layer)) return {std::move(layer)};
  // Each step's kernel compiles on a thread of its own (NVRTC is nearly all the time): a plan of several
  // kernels is ready in about the time of its slowest one. A step keeps its own copies of what it reads,
  // as walk_shapes reuses its temporaries for the next step.
  struct Step {
    const KernelStep* step;
    std::vector<ArrayBase> arrays;
    std::vector<const ArrayBase*> pointers;
    std::vector<ScalarArg> scalars;
    std::vector<ReduceArg> reductions;
    Call call;
    std::optional<Epilogue> epilogue;
    DType written = DType::float32;  // the merged result's dtype
    std::optional<KernelInfo> generated;  // the product and its epilogue as one generated kernel
    std::string declined;                  // ... or why fz::GeneratedProducts kept cuBLASLt
  };
  std::vector<std::unique_ptr<Step>> steps;
  walk_shapes(p, c, nullptr, AssignMode::fresh, [&](const KernelStep& s, const Call& call, const std::vector<Shape>&) {
    auto o = std::make_unique<Step>();
    o->step = &s;
    for (int i = 0; i < call.n_arrays; ++i) o->arrays.push_back(*call.arrays[i]);
    for (const ArrayBase& a : o->arrays) o->pointers.push_back(&a);
    o->scalars.assign(call.scalars, call.scalars + call.n_scalars);
    o->reductions.assign(call.reductions, call.reductions + call.n_reductions);
    o->call = call;
    o->call.arrays = o->pointers.data();
    o->call.scalars = o->scalars.data();
    o->call.reductions = o->reductions.data();
    steps.push_back(std::move(o));
  });
  const int device = tls_current_device, arch = tls_precompile_arch;
  const bool separate = mode_flag(Mode::separate_reductions);
  auto inspect_step = [device, arch, separate](const Step& o) -> std::vector<KernelInfo> {
    tls_current_device = device;  // the caller's device, fz::precompile target and mode, on this thread too
    tls_precompile_arch = arch;
    mode_flag(Mode::separate_reductions) = separate;
    if (o.generated) return {*o.generated};
    if (o.step->whole) return kernels_of(with_shared_reductions(o.call));  // its own partition
    if (o.call.lowered->has_product) {
      KernelInfo info = inspect_product(o.call);
      if (const auto& e = o.epilogue; e && e->any())
        info.variant +=
            fmt::format(", with cuBLASLt's {} epilogue", epilogue_name(e->activation, e->bias, e->residual));
      if (o.epilogue && o.written != graph_of(o.call).dtype(graph_of(o.call).outputs[0]))
        info.variant += fmt::format(", the result written as {}", dtype_name(o.written));
      if (!o.declined.empty()) info.variant += "; " + o.declined;
      return {info};
    }
    if (o.call.lowered->has_scan) return inspect_scan(o.call);
    if (!o.call.lowered->has_reduction) return {inspect_elementwise(o.call)};
    if (o.step->targets.size() == 1) return {inspect_reduction(o.call)};
    return {inspect_reductions(o.call)};
  };
  // A product and its epilogue step that run as one generated kernel or one cuBLASLt call show as that one.
  for (std::size_t i = 0; i + 1 < steps.size(); ++i) {
    if (!steps[i]->step->epilogue.found && !steps[i]->step->generated_epilogue) continue;
    const std::size_t j = static_cast<std::size_t>(steps[i]->step - p.part.steps.data());  // (products are top-level steps)
    if (j + 1 >= p.part.steps.size() || steps[i + 1]->step != &p.part.steps[j + 1]) continue;
    const ir::Graph& epilogue = graph_of(steps[i + 1]->call);
    const DType out_dtype = epilogue.dtype(epilogue.outputs[0]);
    if (steps[i]->step->generated_epilogue) {
      std::vector<DType> out_dtypes;
      for (std::uint32_t o : epilogue.outputs) out_dtypes.push_back(epilogue.dtype(o));
      steps[i]->generated = inspect_generated_product(steps[i]->call, steps[i + 1]->call,
                                                      product_slots(*steps[i]->step, *steps[i + 1]->step), out_dtypes,
                                                      steps[i]->declined);
      if (steps[i]->generated) {
        steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(i + 1));
        continue;
      }
    }
    if (!steps[i]->step->epilogue.found) continue;
    if (const auto e = merged_epilogue(p, j, steps[i]->call, steps[i + 1]->call, out_dtype)) {
      steps[i]->epilogue = e;
      steps[i]->written = out_dtype;
      steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(i + 1));
    }
  }
  std::vector<std::future<std::vector<KernelInfo>>> compiled;
  for (std::size_t i = 1; i < steps.size(); ++i)
    compiled.push_back(std::async(std::launch::async, inspect_step, std::cref(*steps[i])));
  std::vector<KernelInfo> infos;
  if (!steps.empty()) infos = inspect_step(*steps[0]);  // the first on this thread
  for (auto& f : compiled)
    for (KernelInfo& k : f.get()) infos.push_back(std::move(k));
  return infos;
}

}  // namespace fusion::detail
