// SPDX-License-Identifier: Apache-2.0
#include "codegen/join_tests.hpp"

namespace fusion::codegen {

RowTests row_tests(const ir::Graph& g) {
  const std::size_t N = g.nodes.size();
  RowTests r;
  r.inside_interval.assign(N, false);
  std::vector<int> uses(N, 0);
  for (const ir::Node& n : g.nodes)
    for (std::uint32_t o : {n.a, n.b, n.c})
      if (o != ir::kNone) ++uses[o];
  for (std::uint32_t o : g.outputs) ++uses[o];
  for (std::uint32_t i = 0; i < N; ++i)
    if (g.nodes[i].op == ir::Op::leading) r.tests.push_back(i);

  // Collects the tests of the conjunction at `i` into `c`; false when something else is inside it. A node used
  // elsewhere too is not folded (it keeps its own value).
  auto collect = [&](auto&& self, std::uint32_t i, ColumnInterval& c, std::vector<std::uint32_t>& members) -> bool {
    const ir::Node& n = g.nodes[i];
    if (n.op == ir::Op::leading) return c.below.push_back(i), true;
    if (n.op == ir::Op::logical_not && g.nodes[n.a].op == ir::Op::leading)
      return members.push_back(i), c.not_below.push_back(n.a), true;
    if (n.op != ir::Op::logical_and) return false;
    members.push_back(i);
    for (std::uint32_t o : {n.a, n.b})
      if (uses[o] != 1 || !self(self, o, c, members)) return false;
    return true;
  };
  // (from the last node back: a conjunction's root comes after its members)
  for (std::uint32_t i = static_cast<std::uint32_t>(N); i-- > 0;) {
    if (g.nodes[i].op != ir::Op::logical_and || r.inside_interval[i]) continue;
    ColumnInterval c{i, {}, {}};
    std::vector<std::uint32_t> members;
    if (!collect(collect, i, c, members)) continue;
    for (std::uint32_t m : members)
      if (m != i) r.inside_interval[m] = true;
    r.intervals.push_back(std::move(c));
  }
  return r;
}

}  // namespace fusion::codegen
