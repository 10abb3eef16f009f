// SPDX-License-Identifier: Apache-2.0
// A walk down an expression graph, each node once: the regions the decisions look at (the tree below an output or an
// operand, not entering what has a shape of its own) are found with it.
#pragma once
#include <cstdint>
#include <vector>

#include "fusion/ir.hpp"

namespace fusion::detail {

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

}  // namespace fusion::detail
