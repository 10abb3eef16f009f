// SPDX-License-Identifier: Apache-2.0
#include "codegen/join_tests.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace fusion::codegen {

bool lanes_alike(const ir::Graph& g) {
  if (g.outputs.size() != 1) return false;
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::iota || n.op == ir::Op::gather || n.op == ir::Op::take_index || ir::is_scatter(n.op))
      return false;
  return true;
}

Lanes vector_lanes(const ir::Graph& g, const Variant& v) {
  Lanes lanes;
  lanes.width = v.vector_width;
  lanes.varies.assign(g.nodes.size(), false);
  lanes.load.resize(g.nodes.size());
  lanes.element.resize(g.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.op == ir::Op::input) lanes.varies[i] = v.access[v.param_of_slot[n.slot]] == Access::along;
    else if (n.op != ir::Op::leading)
      for (std::uint32_t o : {n.a, n.b, n.c})
        if (o != ir::kNone && lanes.varies[o]) lanes.varies[i] = true;
  }
  return lanes;
}

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

JoinTests::JoinTests(const ir::Graph& g, bool rows, std::string index_t)
    : g_(g), rows_(rows), index_t_(std::move(index_t)), limit_used_(g.nodes.size(), false) {
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::leading) {
      const std::string s = fmt::format("s{}", g.nodes[n.a].slot);
      if (std::find(periods_.begin(), periods_.end(), s) == periods_.end()) periods_.push_back(s);
    }
  rows_ = rows_ && any();
  if (!rows_) return;
  row_ = row_tests(g);
  std::vector<bool> root(g.nodes.size(), false);
  for (const ColumnInterval& c : row_.intervals) root[c.node] = true;
  for (std::size_t j = 0; j < g.nodes.size(); ++j)
    if (!root[j] && !row_.inside_interval[j])
      for (std::uint32_t o : {g.nodes[j].a, g.nodes[j].b, g.nodes[j].c})
        if (o != ir::kNone && g.nodes[o].op == ir::Op::leading) limit_used_[o] = true;
}

std::vector<std::string> JoinTests::params() const {
  std::vector<std::string> p;
  if (!rows_) {
    for (const std::string& s : periods_) p.push_back(fmt::format("{} {}_at", index_t_, s));
    return p;
  }
  p.push_back(fmt::format("{} fz_c", index_t_));
  for (std::uint32_t t : row_.tests)
    if (limit_used_[t]) p.push_back(fmt::format("{} t{}_lim", index_t_, t));
  for (const ColumnInterval& c : row_.intervals) p.push_back(fmt::format("{0} t{1}_lo, {0} t{1}_hi", index_t_, c.node));
  return p;
}

void JoinTests::preset(std::vector<std::string>& value, std::vector<bool>& wanted) const {
  if (!rows_) return;  // (spell.cpp writes fz_before(<period>_at, <bound>))
  for (std::uint32_t t : row_.tests) value[t] = fmt::format("(fz_c < t{}_lim)", t);
  for (const ColumnInterval& c : row_.intervals) value[c.node] = fmt::format("(t{0}_lo <= fz_c && fz_c < t{0}_hi)", c.node);
  for (std::size_t i = 0; i < wanted.size(); ++i) wanted[i] = wanted[i] && !row_.inside_interval[i];
}

std::vector<std::string> JoinTests::args(const std::string& index, const std::string& column) const {
  std::vector<std::string> a;
  if (!rows_) {
    // (in a kernel of 32-bit indices the positions are 32-bit too, and so are their tests: fz_before)
    for (const std::string& s : periods_) a.push_back(fmt::format("({})fz_position((long long)({}), {})", index_t_, index, s));
    return a;
  }
  a.push_back(column);
  for (std::uint32_t t : row_.tests)
    if (limit_used_[t]) a.push_back(fmt::format("t{}_lim", t));
  for (const ColumnInterval& c : row_.intervals) a.push_back(fmt::format("t{0}_lo, t{0}_hi", c.node));
  return a;
}

void JoinTests::write_row(SourceWriter& w, const std::string& I) const {
  if (!rows_) return;
  w.line("// where the row lies along each joined axis, a whole number of rows into its period (layout.cpp), and so");
  w.line("// each test's column limit and each conjunction's interval of columns (codegen/join_tests.hpp)");
  for (const std::string& s : periods_) w.line("const long long {0}_row = fz_position((long long)base, {0});", s);
  for (std::uint32_t t : row_.tests) {
    const ir::Node& n = g_.nodes[t];
    w.line("const {0} t{1}_lim = ({0})fz_row_limit(s{2}_row, s{3}, (long long)cols);", I, t, g_.nodes[n.a].slot,
           g_.nodes[n.b].slot);
  }
  for (const ColumnInterval& c : row_.intervals) {
    std::string lo = fmt::format("({})0", I), hi = "cols";
    for (std::uint32_t t : c.not_below) lo = fmt::format("max({}, t{}_lim)", lo, t);
    for (std::uint32_t t : c.below) hi = fmt::format("min({}, t{}_lim)", hi, t);
    w.line("const {0} t{1}_lo = {2}, t{1}_hi = {3};", I, c.node, lo, hi);
  }
}

}  // namespace fusion::codegen
