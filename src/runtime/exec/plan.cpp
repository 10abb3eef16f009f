// SPDX-License-Identifier: Apache-2.0
#include "runtime/exec/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <memory>

#include "codegen/emit_common.hpp"
#include "fusion/error.hpp"
#include "fusion/stream.hpp"
#include "runtime/cuda/device_state.hpp"
#include "schedule/layout.hpp"

namespace fusion::detail {
namespace {

bool is_op(const ir::Node& n) { return ir::arity(n.op) != ir::Arity::leaf && n.op != ir::Op::cast; }

/// Visits each node `root` is computed from once, depth first; `visit(i)` says whether to look below i.
template <class Visit> void walk_below(const ir::Graph& g, std::uint32_t root, Visit&& visit) {
  std::vector<bool> seen(g.nodes.size(), false);
  std::vector<std::uint32_t> stack{root};
  while (!stack.empty()) {
    const std::uint32_t i = stack.back();
    stack.pop_back();
    if (seen[i]) continue;
    seen[i] = true;
    if (!visit(i)) continue;
    for (std::uint32_t o : {g.nodes[i].a, g.nodes[i].b, g.nodes[i].c})
      if (o != ir::kNone) stack.push_back(o);
  }
}

/// The reduction that can run at the root of the kernel computing `root`: the only one reachable
/// without passing through a reduction, with no array read outside it (its epilogue takes scalars only).
std::uint32_t root_reduction(const ir::Graph& g, std::uint32_t root) {
  std::uint32_t found = ir::kNone;
  bool fits = true;
  walk_below(g, root, [&](std::uint32_t i) {
    const ir::Node& n = g.nodes[i];
    if (ir::is_reduction(n.op)) {
      fits = fits && found == ir::kNone;
      found = i;
      return false;
    }
    fits = fits && n.op != ir::Op::input;
    return fits;
  });
  return fits ? found : ir::kNone;
}

/// The step computing nodes `roots` of `g` (one kernel, an output each), reading temporaries for the
/// nodes in `temp_of` (>= 0).
PlanStep extract(const ir::Graph& g, const std::vector<std::uint32_t>& roots, const std::vector<int>& temp_of,
                 std::vector<int> targets) {
  PlanStep step;
  step.targets = std::move(targets);
  ir::Graph sub;
  sub.fast_math = g.fast_math;
  std::vector<std::uint32_t> memo(g.nodes.size(), ir::kNone);
  auto visit = [&](auto&& self, std::uint32_t i) -> std::uint32_t {
    if (memo[i] != ir::kNone) return memo[i];
    ir::Node n = g.nodes[i];
    if (std::find(roots.begin(), roots.end(), i) == roots.end() && temp_of[i] >= 0) {
      step.arrays.push_back(~temp_of[i]);
      return memo[i] = sub.input(n.dtype);
    }
    switch (n.op) {
      case ir::Op::input: step.arrays.push_back(static_cast<int>(n.slot)); return memo[i] = sub.input(n.dtype);
      case ir::Op::scalar: step.scalars.push_back(n.slot); return memo[i] = sub.scalar(n.dtype);
      default: break;
    }
    for (std::uint32_t* o : {&n.a, &n.b, &n.c})
      if (*o != ir::kNone) *o = self(self, *o);
    if (ir::is_reduction(n.op)) {
      // Reductions of one step share their descriptor (make_plan groups them so): one slot serves all.
      const auto at = std::find(step.reductions.begin(), step.reductions.end(), n.slot);
      n.slot = static_cast<std::uint32_t>(at - step.reductions.begin());
      if (at == step.reductions.end()) step.reductions.push_back(g.nodes[i].slot), sub.n_reductions++;
    }
    return memo[i] = sub.append(n);
  };
  for (std::uint32_t r : roots) sub.outputs.push_back(visit(visit, r));
  step.lowered = lowered_for_graph(std::move(sub));
  return step;
}

/// The temporaries that computing `root` reads.
std::vector<int> temps_read(const ir::Graph& g, std::uint32_t root, const std::vector<int>& temp_of) {
  std::vector<int> read;
  walk_below(g, root, [&](std::uint32_t i) {
    if (i == root || temp_of[i] < 0) return true;
    read.push_back(temp_of[i]);
    return false;
  });
  return read;
}

/// Whether the value of node `root` depends on the flat index of the result (an iota leaf below it).
bool reads_index(const ir::Graph& g, std::uint32_t root) {
  bool found = false;
  walk_below(g, root, [&](std::uint32_t i) {
    found = found || g.nodes[i].op == ir::Op::iota;
    return !ir::is_reduction(g.nodes[i].op);  // a reduction's result has its own shape
  });
  return found;
}

/// Marks `step` (computing elementwise node `root`) as spanning its region's index space: the region is
/// the elementwise part of the graph around `root` (the tree below an output or a reduction's operand,
/// not entering reductions) that reaches it.
void set_index_region(const ir::Graph& g, std::uint32_t root, PlanStep& step) {
  std::vector<std::pair<std::uint32_t, int>> tops;  // (node, output k or -1)
  for (std::size_t k = 0; k < g.outputs.size(); ++k) tops.emplace_back(g.outputs[k], static_cast<int>(k));
  for (const ir::Node& n : g.nodes)
    if (ir::is_reduction(n.op)) tops.emplace_back(n.a, -1);
  for (const auto& [top, k] : tops) {
    bool reaches = false;
    std::vector<int> arrays;
    walk_below(g, top, [&](std::uint32_t i) {
      reaches = reaches || i == root;
      if (g.nodes[i].op == ir::Op::input) arrays.push_back(static_cast<int>(g.nodes[i].slot));
      return !ir::is_reduction(g.nodes[i].op);
    });
    if (!reaches) continue;
    step.whole_index = true;
    step.index_arrays = std::move(arrays);
    step.index_output = k;
    return;
  }
}

std::unique_ptr<Plan> make_plan(const Lowered& lw, PlanMode mode) {
  const bool unfused = mode == PlanMode::unfused;
  const ir::Graph& g = lw.canonical;
  auto plan = std::make_unique<Plan>();
  std::vector<bool> own_kernel(g.nodes.size(), false);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    own_kernel[i] = unfused ? is_op(g.nodes[i]) : ir::is_reduction(g.nodes[i].op);
  // A reduction reads its operand through its own layout, which has no flat index of the result: an
  // operand that needs one (fz::random's generators) is computed first, into a temporary.
  if (!unfused)
    for (const ir::Node& n : g.nodes)
      if (ir::is_reduction(n.op) && reads_index(g, n.a)) own_kernel[n.a] = true;
  for (std::uint32_t o : g.outputs) own_kernel[o] = false;  // the outputs' steps come last
  if (!unfused && g.outputs.size() == 1) {
    const std::uint32_t r = root_reduction(g, g.outputs[0]);
    if (r != ir::kNone) own_kernel[r] = false;
  }
  bool any = false;
  for (bool b : own_kernel) any = any || b;
  // A layer kernel can take an expression whose reductions meet their rows again; whether they do
  // depends on the call's shapes and axes, so the plan only says when to ask.
  plan->layer = mode == PlanMode::fused && lw.has_reduction;
  for (const ir::Node& n : g.nodes)
    plan->layer = plan->layer && n.op != ir::Op::iota && !ir::is_arg_reduction(n.op);
  // One kernel over the expression's own graph: the evaluators take the call as it is.
  if (!any && (g.outputs.size() == 1 || (!lw.has_reduction && !unfused))) {
    plan->direct = true;
    return plan;
  }
  std::vector<int> temp_of(g.nodes.size(), -1);
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    if (!own_kernel[i]) continue;
    temp_of[i] = static_cast<int>(plan->temp_dtypes.size());
    plan->temp_dtypes.push_back(g.nodes[i].dtype);
  }
  // The kernels in order: each reduction with its own kernel, then the outputs. A kernel joins the one
  // before it when both are reductions (with scalar-only epilogues) of the same descriptor slot and the
  // same kind (temporaries or outputs), and it reads nothing the one before writes: one pass, several
  // results (a batch norm's mean and variance; fz::tie(sum(x), sum(x * x))).
  struct Group {
    std::vector<std::uint32_t> roots;
    std::vector<int> targets;
    std::uint32_t slot = ir::kNone;  // the shared reduction descriptor; kNone: takes no other
  };
  std::vector<Group> groups;
  auto add = [&](std::uint32_t root, int target) {
    std::uint32_t r = ir::is_reduction(g.nodes[root].op) ? root : root_reduction(g, root);
    // A reduction with its own kernel is a temporary here: the step computing `root` is elementwise
    // (tie(max(x), cast(prod(y))) runs prod alone, then the cast; it must not join max's kernel).
    if (r != root && r != ir::kNone && temp_of[r] >= 0) r = ir::kNone;
    const bool arg = r != ir::kNone && ir::is_arg_reduction(g.nodes[r].op);
    const std::uint32_t slot = mode != PlanMode::fused || r == ir::kNone || arg ? ir::kNone : g.nodes[r].slot;
    if (!groups.empty() && slot != ir::kNone && groups.back().slot == slot &&
        (groups.back().targets[0] < 0) == (target < 0) &&
        groups.back().roots.size() < static_cast<std::size_t>(codegen::kMaxOutputs)) {
      bool reads_group = false;
      for (int t : temps_read(g, root, temp_of))
        for (int gt : groups.back().targets) reads_group = reads_group || t == gt;
      if (!reads_group) {
        groups.back().roots.push_back(root);
        groups.back().targets.push_back(target);
        return;
      }
    }
    groups.push_back({{root}, {target}, slot});
  };
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i)
    if (own_kernel[i]) add(i, temp_of[i]);
  for (std::size_t k = 0; k < g.outputs.size(); ++k) add(g.outputs[k], ~static_cast<int>(k));
  for (Group& gr : groups) {
    plan->steps.push_back(extract(g, gr.roots, temp_of, gr.targets));
    // fz::Unfused splits `random::bits(s) + x` into the generator's kernel, which reads no array (its
    // own shape is a scalar's), and the addition: the generator's temporary must be as large as the
    // index space the fused kernel numbers, or every element would see index 0.
    const std::uint32_t r = gr.roots[0];
    if (gr.targets[0] >= 0 && !ir::is_reduction(g.nodes[r].op) && reads_index(g, r))
      set_index_region(g, r, plan->steps.back());
    if (gr.roots.size() > 1)
      for (std::size_t k = 0; k < gr.roots.size(); ++k)
        plan->steps.back().alone.push_back(extract(g, {gr.roots[k]}, temp_of, {gr.targets[k]}));
  }
  return plan;
}

/// The step's own Call: its arrays, scalars and reductions picked from the outer call and temporaries.
struct StepCall {
  std::vector<const ArrayBase*> arrays;
  std::vector<ScalarArg> scalars;
  std::vector<ReduceArg> reductions;
  Call call;
  StepCall(const PlanStep& s, const Call& c, const std::vector<ArrayBase>& temps) {
    for (int a : s.arrays) arrays.push_back(a >= 0 ? c.arrays[a] : &temps[static_cast<std::size_t>(~a)]);
    for (std::uint32_t i : s.scalars) scalars.push_back(c.scalars[i]);
    for (std::uint32_t i : s.reductions) reductions.push_back(c.reductions[i]);
    call = Call{s.lowered, arrays.data(), scalars.data(), reductions.data(), static_cast<int>(arrays.size()),
                static_cast<int>(scalars.size()), static_cast<int>(reductions.size()), c.name};
  }
};

}  // namespace

Call with_shared_reductions(const Call& c) {
  if (c.n_reductions < 2) return c;
  const auto equal = [](const ReduceArg& a, const ReduceArg& b) {
    if (a.n_axes != b.n_axes || a.keepdims != b.keepdims || a.ddof != b.ddof) return false;
    for (int i = 0; i < a.n_axes; ++i)
      if (a.axes[static_cast<std::size_t>(i)] != b.axes[static_cast<std::size_t>(i)]) return false;
    return true;
  };
  // Equal reductions read their arrays through different input slots (each use of `x` is one), so
  // inputs that are the same view merge first; then reductions with equal arguments share a slot.
  std::vector<std::uint32_t> key(static_cast<std::size_t>(c.n_arrays + c.n_reductions));
  for (int s = 0; s < c.n_arrays; ++s) {
    int r = 0;
    while (!same_view(*c.arrays[r], *c.arrays[s])) ++r;
    key[static_cast<std::size_t>(s)] = static_cast<std::uint32_t>(r);
  }
  bool any = false;
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
    for (ir::Node& n : g.nodes)
      if (ir::is_reduction(n.op)) n.slot = key[1 + static_cast<std::size_t>(c.n_arrays) + n.slot];
    const std::vector<std::uint32_t> inputs(key.begin() + 1, key.begin() + 1 + c.n_arrays);
    return ir::canonicalize(g, inputs);  // equal nodes are one node now
  });
  return merged;
}

const Plan& plan_of(const Lowered& lw, PlanMode mode) {
  const int i = static_cast<int>(mode);
  std::call_once(lw.plan_once[i], [&] { lw.plans[i] = make_plan(lw, mode); });
  return *lw.plans[i];
}

namespace {

/// The shape a whole_index step writes (see PlanStep): its region's arrays broadcast, and the output
/// when the region is an output's and the call writes into an existing array.
Shape index_space(const PlanStep& s, const Call& c, const ArrayBase* const* outs, AssignMode mode) {
  Shape shape;
  for (int a : s.index_arrays) shape = broadcast_shapes(shape, c.arrays[a]->shape());
  if (s.index_output >= 0 && outs && mode != AssignMode::fresh && outs[s.index_output]->has_storage())
    shape = broadcast_shapes(shape, outs[s.index_output]->shape());
  return shape;
}

/// Walks the steps with placeholder temporaries of the shapes they will have: `visit(step, call, shapes)`
/// with a shape per target of the step (`outs` may be null: then no output's shape counts).
/// Computing a step's shape checks it (broadcasting, axes, empty extents) without touching memory.
template <class Visit>
void walk_shapes(const Plan& p, const Call& c, const ArrayBase* const* outs, AssignMode mode, Visit&& visit) {
  std::vector<ArrayBase> temps;
  for (DType d : p.temp_dtypes) temps.emplace_back(d);
  auto walk = [&](const PlanStep& s) {
    const StepCall sc(s, c, temps);
    const std::size_t K = s.targets.size();
    const std::vector<Shape> shapes = s.whole_index ? std::vector<Shape>(K, index_space(s, c, outs, mode))
                                      : !s.lowered->has_reduction
                                          ? std::vector<Shape>(K, broadcast_shape_of(sc.call))
                                          : std::vector<Shape>(K, reduction_output_shape(sc.call));
    visit(s, sc.call, shapes);
    for (std::size_t k = 0; k < K; ++k) {
      const int t = s.targets[k];
      if (t >= 0)
        temps[static_cast<std::size_t>(t)] =
            ArrayBase::make_placeholder(p.temp_dtypes[static_cast<std::size_t>(t)], shapes[k]);
    }
  };
  for (const PlanStep& s : p.steps) {
    if (!s.alone.empty() && !reductions_share_space(StepCall(s, c, temps).call))
      for (const PlanStep& one : s.alone) walk(one);
    else
      walk(s);
  }
}

}  // namespace

void run_plan(const Plan& p, const Call& c, ArrayBase* const* outs, AssignMode mode) {
  const int K = static_cast<int>(c.lowered->graph.outputs.size());
  // The first run of a plan of several kernels compiles them all at once (inspect_plan does, in parallel)
  // instead of one after another as the steps launch. Errors are the steps' to report, below. Not while
  // a graph is being captured: other threads' driver calls could break a global-mode capture.
  if (p.steps.size() > 1 && !p.compiled.load(std::memory_order_acquire) && !fusion::current_stream().is_capturing())
    std::call_once(p.compiled_together, [&] {
      try {
        (void)inspect_plan(p, c);
      } catch (...) {
      }
      p.compiled.store(true, std::memory_order_release);  // later runs skip even the capture query
    });
  if (p.layer && evaluate_layer(c, outs, K, mode)) return;
  // Every step's shapes first: a step that fails must not leave the outputs of earlier steps written.
  // Only a plan that writes outputs in several steps can do that (earlier steps write temporaries; a
  // step checks itself before it writes), so the common plan skips this pass on its repeated path.
  int output_steps = 0;
  for (const PlanStep& s : p.steps) output_steps += s.targets[0] < 0;
  if (output_steps > 1)
    walk_shapes(p, c, outs, mode, [&](const PlanStep& s, const Call& step, const std::vector<Shape>& shapes) {
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
  for (DType d : p.temp_dtypes) temps.emplace_back(d);
  auto run = [&](const PlanStep& s) {
    const StepCall sc(s, c, temps);
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
    if (!s.lowered->has_reduction) evaluate_elementwise(sc.call, targets, K, m);
    else if (K == 1) evaluate_reduction(sc.call, *targets[0], m);
    else return evaluate_reductions(sc.call, targets, K, m);
    return true;
  };
  for (const PlanStep& s : p.steps)
    if (!run(s))
      for (const PlanStep& one : s.alone) run(one);  // the grouped reductions one by one
}

std::vector<KernelInfo> inspect_plan(const Plan& p, const Call& c) {
  if (KernelInfo layer; p.layer && inspect_layer(c, layer)) return {std::move(layer)};
  // Each step's kernel compiles on a thread of its own (NVRTC is nearly all the time): a plan of several
  // kernels is ready in about the time of its slowest one. A step keeps its own copies of what it reads,
  // as walk_shapes reuses its temporaries for the next step.
  struct Step {
    const PlanStep* step;
    std::vector<ArrayBase> arrays;
    std::vector<const ArrayBase*> pointers;
    std::vector<ScalarArg> scalars;
    std::vector<ReduceArg> reductions;
    Call call;
  };
  std::vector<std::unique_ptr<Step>> steps;
  walk_shapes(p, c, nullptr, AssignMode::fresh, [&](const PlanStep& s, const Call& call, const std::vector<Shape>&) {
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
  auto inspect_step = [device, arch](const Step& o) {
    tls_current_device = device;  // the caller's device and fz::precompile target, on this thread too
    tls_precompile_arch = arch;
    if (!o.step->lowered->has_reduction) return inspect_elementwise(o.call);
    if (o.step->targets.size() == 1) return inspect_reduction(o.call);
    return inspect_reductions(o.call);
  };
  std::vector<std::future<KernelInfo>> compiled;
  for (std::size_t i = 1; i < steps.size(); ++i)
    compiled.push_back(std::async(std::launch::async, inspect_step, std::cref(*steps[i])));
  std::vector<KernelInfo> infos;
  if (!steps.empty()) infos.push_back(inspect_step(*steps[0]));  // the first on this thread
  for (auto& f : compiled) infos.push_back(f.get());
  return infos;
}

}  // namespace fusion::detail
