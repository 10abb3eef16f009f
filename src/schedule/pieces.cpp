// SPDX-License-Identifier: Apache-2.0
#include "schedule/pieces.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "fusion/error.hpp"
#include "schedule/call_graph.hpp"

namespace fusion::detail {
namespace {

std::int64_t value_of(const ScalarArg& s) {
  std::int64_t v;
  std::memcpy(&v, &s.bits, sizeof v);
  return v;
}

ScalarArg int64_arg(std::int64_t v) {
  ScalarArg s;
  s.dtype = DType::int64;
  std::memcpy(&s.bits, &v, sizeof v);
  return s;
}

}  // namespace

const ScalarArg* place_pieces(const Call& c, const Shape& space, std::vector<ScalarArg>& storage) {
  const ir::Graph& g = graph_of(c);
  storage.assign(c.scalars, c.scalars + c.n_scalars);
  const int rank = space.size();
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::leading) continue;
    // (read from the call: a join's tests share their `after` and `extent` slots, which are rewritten)
    const std::int64_t after = value_of(c.scalars[g.nodes[n.a].slot]);
    const std::int64_t bound = value_of(c.scalars[g.nodes[n.b].slot]);
    const std::int64_t extent = value_of(c.scalars[g.nodes[n.c].slot]);
    if (after < 0) {  // a test of no axis (fz::pad's unused ones): the element lies before any positive bound
      // (its period the whole space: a whole number of rows, which a rows kernel tests without a division)
      const std::int64_t whole = std::max<std::int64_t>(numel(space), 1);
      storage[g.nodes[n.a].slot] = int64_arg(whole);
      storage[g.nodes[n.b].slot] = int64_arg(bound > 0 ? whole : 0);
      continue;
    }
    const int axis = rank - 1 - static_cast<int>(after);
    if (axis < 0 || (space[axis] != extent && extent != 1))
      throw Error(fmt::format("internal: a join of extent {} along axis -{} in index space {}", extent, after + 1,
                              to_string(space)));
    std::int64_t inner = 1;
    for (int d = axis + 1; d < rank; ++d) inner *= space[d];
    std::int64_t period = space[axis] * inner, below = bound * inner;
    if (space[axis] != extent) period = 1, below = bound > 0 ? 1 : 0;  // broadcast along the axis: coordinate 0
    storage[g.nodes[n.a].slot] = int64_arg(period > 0 ? period : 1);
    storage[g.nodes[n.b].slot] = int64_arg(below);
  }
  return storage.data();
}

std::vector<bool> position_scalars(const ir::Graph& g) {
  std::vector<bool> used(g.n_scalars, false);
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::leading)
      for (std::uint32_t o : {n.a, n.b, n.c}) used[g.nodes[o].slot] = true;
  return used;
}

}  // namespace fusion::detail
