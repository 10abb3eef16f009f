// SPDX-License-Identifier: Apache-2.0
// The registry of lowered graphs: one Lowered per expression type (built once by the front end) or per
// distinct graph made at run time (plans, regions, the unfused path), alive for the process. Kernel lists,
// plans and derived graphs hang off it.
#include <map>
#include <mutex>
#include <vector>

#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/exec/plan.hpp"  // Lowered owns its plans
#include "schedule/call_graph.hpp"
#include "schedule/layout.hpp"  // loops_over_vectors

namespace fusion::detail {

std::mutex& build_mutex() {
  static std::mutex mu;
  return mu;
}

const Lowered* register_lowered(ir::Graph g) {
  auto* l = new Lowered;  // one per expression type, alive for the process
  l->canonical = ir::canonicalize(g);
  for (const ir::Node& n : g.nodes) {
    l->has_reduction = l->has_reduction || ir::is_reduction(n.op);
    l->has_product = l->has_product || ir::is_product(n.op);
    l->has_scan = l->has_scan || ir::is_scan(n.op);
    l->has_gather = l->has_gather || n.op == ir::Op::gather;
    l->has_join = l->has_join || n.op == ir::Op::leading;
  }
  l->loops = loops_over_vectors(g);
  l->graph = std::move(g);
  // Kept reachable from a list that is never destroyed: kernels may launch from static destructors,
  // and leak checkers then see the lifetime as intended.
  static std::mutex mu;
  static auto& all = *new std::vector<const Lowered*>;
  std::lock_guard lock(mu);
  all.push_back(l);
  return l;
}

const Lowered* lowered_for_graph(ir::Graph g) {
  static std::mutex mu;
  static auto& registry = *new std::multimap<std::uint64_t, const Lowered*>;  // never destroyed, as above
  const std::uint64_t h = ir::hash(g);
  std::lock_guard lock(mu);
  for (auto [it, end] = registry.equal_range(h); it != end; ++it)
    if (it->second->graph.nodes == g.nodes && it->second->graph.outputs == g.outputs &&
        it->second->graph.fast_math == g.fast_math)
      return it->second;
  const Lowered* l = register_lowered(std::move(g));
  registry.emplace(h, l);
  return l;
}

ir::Graph merged_graph(const Lowered& lw, const std::array<std::uint8_t, codegen::kMaxParams>& param_of_slot) {
  return codegen::merged_inputs(lw.graph, param_of_slot);
}

const ir::Graph& graph_of(const Call& c) { return c.lowered->graph; }

bool joins(const Call& c) { return c.lowered->has_join; }

}  // namespace fusion::detail
