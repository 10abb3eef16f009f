// SPDX-License-Identifier: Apache-2.0
#include "schedule/partition.hpp"

#include <algorithm>

#include "codegen/emit_product.hpp"
#include "codegen/variant.hpp"
#include "schedule/graph_walk.hpp"
#include "schedule/product_epilogue.hpp"

namespace fusion::detail {
namespace {

/// (fz::Unfused runs each op as a kernel of its own; a concatenate's test of where an element lies is part of it)
bool is_op(const ir::Node& n) {
  return ir::arity(n.op) != ir::Arity::leaf && n.op != ir::Op::cast && n.op != ir::Op::leading;
}

/// The reduction that can run at the root of the kernel computing `root`: the only one reachable
/// without passing through a reduction, with no array or index read outside it (its epilogue takes scalars only).
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
    if (ir::is_scan(n.op)) {  // a scan's kernel computes no reduction: it reads one from a temporary
      fits = false;
      return false;
    }
    // (nor an index: the reduction's kernel has none of the result's elements; `uniform(seed) + sum(x)` failed
    // to compile with the iota in the reduction's epilogue, found by fusion-fuzz --calls)
    fits = fits && n.op != ir::Op::input && n.op != ir::Op::iota && n.op != ir::Op::leading;
    return fits;
  });
  return fits ? found : ir::kNone;
}

/// The step computing nodes `roots` of `g` (one kernel, an output each), reading temporaries for the
/// nodes in `temp_of` (>= 0).
/// `roots_from_temps`: a root with a temporary is read from it (a whole step's output that is a product).
KernelStep extract(const ir::Graph& g, const std::vector<std::uint32_t>& roots, const std::vector<int>& temp_of,
                   std::vector<int> targets, int& kernels, bool roots_from_temps = false) {
  KernelStep step;
  step.kernel = kernels++;
  step.targets = std::move(targets);
  ir::Graph sub;
  sub.fast_math = g.fast_math;
  std::vector<std::uint32_t> memo(g.nodes.size(), ir::kNone);
  auto visit = [&](auto&& self, std::uint32_t i) -> std::uint32_t {
    if (memo[i] != ir::kNone) return memo[i];
    ir::Node n = g.nodes[i];
    if ((roots_from_temps || std::find(roots.begin(), roots.end(), i) == roots.end()) && temp_of[i] >= 0) {
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
    if (ir::takes_descriptor(n.op)) {
      // Reductions of one step share their descriptor (make_plan groups them so): one slot serves all.
      const auto at = std::find(step.reductions.begin(), step.reductions.end(), n.slot);
      n.slot = static_cast<std::uint32_t>(at - step.reductions.begin());
      if (at == step.reductions.end()) step.reductions.push_back(g.nodes[i].slot), sub.n_reductions++;
    }
    return memo[i] = sub.append(n);
  };
  for (std::uint32_t r : roots) sub.outputs.push_back(visit(visit, r));
  step.graph = std::move(sub);
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
/// A reduction's or a product's result has a shape of its own, not its operands' region's.
bool has_own_shape(ir::Op op) { return ir::is_reduction(op) || ir::is_product(op); }

bool reads_index(const ir::Graph& g, std::uint32_t root) {
  bool found = false;
  walk_below(g, root, [&](std::uint32_t i) {
    found = found || g.nodes[i].op == ir::Op::iota || g.nodes[i].op == ir::Op::leading;
    return !has_own_shape(g.nodes[i].op);
  });
  return found;
}

/// Marks `step` (computing elementwise node `root`) as spanning its region's index space: the region is
/// the elementwise part of the graph around `root` (the tree below an output or a reduction's operand,
/// not entering reductions) that reaches it.
void set_index_region(const ir::Graph& g, std::uint32_t root, KernelStep& step) {
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
      return !has_own_shape(g.nodes[i].op);  // (a product's operands are not in the region: fz::Unfused's
    });                                       // fmax(matmul(x, y), pad(z)) broadcast y with the pad, found by fusion-fuzz)
    if (!reaches) continue;
    step.whole_index = true;
    step.index_arrays = std::move(arrays);
    step.index_output = k;
    return;
  }
}

/// Graph `g` with matrix products, in the fused or separate mode: each product a step of its own; each of
/// its operands that is an expression a whole step before it; the outputs one whole step after them.
Partition partition_around_products(const ir::Graph& g) {
  Partition plan;
  std::vector<int> temp_of(g.nodes.size(), -1);
  auto temporary = [&](std::uint32_t i) {
    if (temp_of[i] >= 0) return;
    temp_of[i] = static_cast<int>(plan.temp_dtypes.size());
    plan.temp_dtypes.push_back(g.nodes[i].dtype);
  };
  const bool lone_product = g.outputs.size() == 1 && ir::is_product(g.nodes[g.outputs[0]].op);
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {  // (operands come before the nodes reading them)
    const ir::Node& n = g.nodes[i];
    if (!ir::is_product(n.op)) continue;
    for (std::uint32_t o : {n.a, n.b})  // (an array, or an array times a scalar: cuBLASLt's alpha takes it)
      if (product_operand(g, o).input == ir::kNone && temp_of[o] < 0) {
        temporary(o);
        plan.steps.push_back(extract(g, {o}, temp_of, {temp_of[o]}, plan.kernels));
        plan.steps.back().whole = true;
      }
    if (lone_product && i == g.outputs[0]) {  // the product writes the output itself
      plan.steps.push_back(extract(g, {i}, temp_of, {~0}, plan.kernels));
      return plan;
    }
    temporary(i);
    plan.steps.push_back(extract(g, {i}, temp_of, {temp_of[i]}, plan.kernels));
  }
  std::vector<int> targets;
  for (std::size_t k = 0; k < g.outputs.size(); ++k) targets.push_back(~static_cast<int>(k));
  plan.steps.push_back(extract(g, g.outputs, temp_of, targets, plan.kernels, true));
  plan.steps.back().whole = true;
  return plan;
}

/// Marks each product step whose next step cuBLASLt can run as its epilogue (KernelStep::epilogue).
void mark_epilogues(Partition& plan) {
  std::vector<KernelStep>& steps = plan.steps;
  for (std::size_t i = 0; i + 1 < steps.size(); ++i) {
    KernelStep& s = steps[i];
    const KernelStep& n = steps[i + 1];
    if (!ir::is_product(s.graph.nodes[s.graph.outputs[0]].op) || s.targets.size() != 1 || s.targets[0] < 0) continue;
    // (the step reading it writes outputs only: one for cuBLASLt's epilogues, several (fz::tie) for a generated kernel)
    if (n.whole_index || !n.alone.empty() || std::any_of(n.targets.begin(), n.targets.end(), [](int t) { return t >= 0; }))
      continue;
    bool read_later = false;  // the product's temporary, read after its epilogue
    for (std::size_t j = i + 2; j < steps.size(); ++j)
      for (int a : steps[j].arrays) read_later = read_later || a == ~s.targets[0];
    if (read_later) continue;
    if (n.targets.size() == 1) s.epilogue = match_epilogue(n.graph);
    s.generated_epilogue = codegen::is_product_epilogue(n.graph);
  }
}

/// The steps of `g` in `mode` (partition, before the epilogues are marked).
Partition split(const ir::Graph& g, PartitionMode mode) {
  const bool unfused = mode == PartitionMode::unfused;
  bool has_reduction = false, has_product = false, has_scan = false;
  for (const ir::Node& n : g.nodes) {
    has_reduction = has_reduction || ir::is_reduction(n.op);
    has_product = has_product || ir::is_product(n.op);
    has_scan = has_scan || ir::is_scan(n.op);
  }
  if (has_product && !unfused) return partition_around_products(g);
  Partition plan;
  std::vector<bool> own_kernel(g.nodes.size(), false);
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    own_kernel[i] = unfused ? is_op(g.nodes[i]) : ir::takes_descriptor(g.nodes[i].op);
  // A reduction reads its operand through its own layout, which has no flat index of the result: an
  // operand that needs one (fz::random's generators) is computed first, into a temporary.
  if (!unfused)
    for (const ir::Node& n : g.nodes)
      if (ir::takes_descriptor(n.op) && reads_index(g, n.a)) own_kernel[n.a] = true;
  // Reduction kernels read their operands through a layout of their own, which passes no gather source
  // through: a gather below a reduction (`sum(take(table, ids))`) is computed first, into a temporary
  // (a layer kernel, tried first, reads it in place: `rms_norm(take(table, ids, 0) + pos)`).
  // So is a concatenate below one (fz::sum(fz::concatenate(0, x, y))), with its pieces.
  for (const ir::Node& n : g.nodes) {
    if (!unfused && ir::takes_descriptor(n.op))  // (and a scan's kernel, likewise)
      walk_below(g, n.a, [&](std::uint32_t i) {
        const ir::Op op = g.nodes[i].op;
        if (op == ir::Op::gather || op == ir::Op::concatenate) own_kernel[i] = true;
        return !ir::takes_descriptor(op) && op != ir::Op::concatenate;
      });
  }
  // A matrix product is a library call of its own, on arrays: what it reads is computed first, into
  // temporaries (a cast, `x * mask`), and what reads it is fused code reading its result once.
  for (const ir::Node& n : g.nodes)
    if (ir::is_product(n.op))
      for (std::uint32_t o : {n.a, n.b})
        if (g.nodes[o].op != ir::Op::input) own_kernel[o] = true;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (ir::is_product(g.nodes[i].op)) own_kernel[i] = true;
  // A piece's nodes run in its concatenate's branch, where its arrays' shifted views are valid: never alone
  // (fz::Unfused included: the concatenate is one kernel, its pieces' math inside).
  if (ir::has_pieces(g)) {
    const std::vector<bool> inside = ir::inside_pieces(g);
    for (std::size_t i = 0; i < g.nodes.size(); ++i) own_kernel[i] = own_kernel[i] && !inside[i];
  }
  for (std::uint32_t o : g.outputs) own_kernel[o] = false;  // the outputs' steps come last
  if (!unfused && g.outputs.size() == 1) {
    const std::uint32_t r = root_reduction(g, g.outputs[0]);
    if (r != ir::kNone) own_kernel[r] = false;
  }
  bool any = false;
  for (bool b : own_kernel) any = any || b;
  // A layer kernel can take an expression whose reductions meet their rows again; whether they do
  // depends on the call's shapes and axes, so the plan only says when to ask.
  bool layer_takes = has_reduction && !has_product && !has_scan;
  for (const ir::Node& n : g.nodes)
    layer_takes = layer_takes && n.op != ir::Op::iota && n.op != ir::Op::concatenate && !ir::is_arg_reduction(n.op);
  plan.layer = mode == PartitionMode::fused && layer_takes;
  // One kernel over the expression's own graph: the evaluators take the call as it is.
  // (A scan runs as a step of a plan, even alone: its kernel is its own kind.)
  if (!any && !has_product && !has_scan && (g.outputs.size() == 1 || (!has_reduction && !unfused))) {
    plan.direct = true;
    // A lone reduction tries a layer kernel first only where it computes a variance: over rows one block holds,
    // two float passes over the held row beat one reduction kernel of Welford accumulators in double (H200,
    // float32 rows of 128-16,384: 102-108% of the limit against 90-95%; layer_layout.cpp's statistics_layer).
    plan.layer = !unfused && layer_takes && ir::has_floating_variance(g);
    return plan;
  }
  std::vector<int> temp_of(g.nodes.size(), -1);
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    if (!own_kernel[i]) continue;
    temp_of[i] = static_cast<int>(plan.temp_dtypes.size());
    plan.temp_dtypes.push_back(g.nodes[i].dtype);
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
    const std::uint32_t slot = mode != PartitionMode::fused || r == ir::kNone || arg ? ir::kNone : g.nodes[r].slot;
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
    plan.steps.push_back(extract(g, gr.roots, temp_of, gr.targets, plan.kernels));
    // fz::Unfused splits `random::bits(s) + x` into the generator's kernel, which reads no array (its
    // own shape is a scalar's), and the addition: the generator's temporary must be as large as the
    // index space the fused kernel numbers, or every element would see index 0.
    const std::uint32_t r = gr.roots[0];
    if (gr.targets[0] >= 0 && !ir::is_reduction(g.nodes[r].op) && reads_index(g, r))
      set_index_region(g, r, plan.steps.back());
    if (gr.roots.size() > 1)
      for (std::size_t k = 0; k < gr.roots.size(); ++k)
        plan.steps.back().alone.push_back(extract(g, {gr.roots[k]}, temp_of, {gr.targets[k]}, plan.kernels));
  }
  return plan;
}

}  // namespace

Partition partition(const ir::Graph& g, PartitionMode mode) {
  Partition plan = split(g, mode);
  mark_epilogues(plan);
  return plan;
}

}  // namespace fusion::detail
