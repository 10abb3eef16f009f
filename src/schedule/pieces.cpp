// SPDX-License-Identifier: Apache-2.0
#include "schedule/pieces.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

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

struct Placed {
  std::int64_t period, below;  // the test `i % period < below` on the flat index i
};

/// One test of where an element lies (ir::Op::leading: the axes after the joined one, a bound along it and its
/// own extent there) resolved for index space `space`. A test of no axis (fz::pad's unused ones) and one along
/// an axis the join is broadcast over (coordinate 0 everywhere) are true or false everywhere: their period is the
/// whole space, a whole number of rows, which a rows kernel tests without a division.
Placed resolve(std::int64_t after, std::int64_t bound, std::int64_t extent, const Shape& space) {
  const int rank = space.size();
  const std::int64_t whole = std::max<std::int64_t>(numel(space), 1);
  const int axis = rank - 1 - static_cast<int>(after);
  if (after >= 0 && (axis < 0 || (space[axis] != extent && extent != 1)))
    throw Error(fmt::format("internal: a join of extent {} along axis -{} in index space {}", extent, after + 1,
                            to_string(space)));
  if (after < 0 || space[axis] != extent) return {whole, bound > 0 ? whole : 0};
  std::int64_t inner = 1;
  for (int d = axis + 1; d < rank; ++d) inner *= space[d];
  return {std::max<std::int64_t>(space[axis] * inner, 1), bound * inner};
}

}  // namespace

const ScalarArg* place_pieces(const Call& c, const Shape& space, std::vector<ScalarArg>& storage) {
  const ir::Graph& g = graph_of(c);
  storage.assign(c.scalars, c.scalars + c.n_scalars);
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::leading) continue;
    // (read from the call: a join's tests share their `after` and `extent` slots, which are rewritten)
    const Placed p = resolve(value_of(c.scalars[g.nodes[n.a].slot]), value_of(c.scalars[g.nodes[n.b].slot]),
                             value_of(c.scalars[g.nodes[n.c].slot]), space);
    storage[g.nodes[n.a].slot] = int64_arg(p.period);
    storage[g.nodes[n.b].slot] = int64_arg(p.below);
  }
  return storage.data();
}

namespace {

/// Whether `holds` is true of every join test of `c` resolved for index space `space`.
template <class F> bool every_test(const Call& c, const Shape& space, F&& holds) {
  const ir::Graph& g = graph_of(c);
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::leading &&
        !holds(resolve(value_of(c.scalars[g.nodes[n.a].slot]), value_of(c.scalars[g.nodes[n.b].slot]),
                       value_of(c.scalars[g.nodes[n.c].slot]), space)))
      return false;
  return true;
}

}  // namespace

bool periods_whole_rows(const Call& c, const Shape& space, std::int64_t row) {
  if (row <= 0) return true;  // (no elements)
  return every_test(c, space, [&](const Placed& p) { return p.period % row == 0; });
}

bool bounds_whole_vectors(const Call& c, const Shape& space, std::int64_t width) {
  return every_test(c, space, [&](const Placed& p) { return p.below % width == 0; });
}

std::vector<bool> position_scalars(const ir::Graph& g) {
  std::vector<bool> used(g.n_scalars, false);
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::leading)
      for (std::uint32_t o : {n.a, n.b, n.c}) used[g.nodes[o].slot] = true;
  return used;
}

}  // namespace fusion::detail
