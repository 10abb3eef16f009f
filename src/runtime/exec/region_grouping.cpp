// SPDX-License-Identifier: Apache-2.0
#include "runtime/exec/region_grouping.hpp"

#include <fmt/format.h>

#include <utility>

#include "codegen/launch_shape.hpp"

namespace fusion::detail {
namespace {

/// Why `s` cannot join group `g` (and how its inputs read when it can: `source`); empty when it joins.
/// `may_store(statement, out)`: whether that output may have to be written (counted against the
/// kernel's output limit).
template <class MayStore>
std::string try_join(const std::vector<Statement>& all, Group& g, int i, std::vector<int>& source, bool fast_math,
                     const MayStore& may_store) {
  const Statement& s = all[static_cast<std::size_t>(i)];
  const Statement& head = all[static_cast<std::size_t>(g.first)];
  if (s.space != head.space)
    return fmt::format("its results have shape {}, the kernel before {}", to_string(s.space), to_string(head.space));
  if (s.lowered->graph.fast_math != fast_math) return "fast math differs";
  int live = 0;
  for (std::size_t o = 0; o < s.outs.size(); ++o) live += may_store(i, static_cast<int>(o));
  for (const Value& v : g.values) live += !v.superseded && may_store(v.statement, v.out);
  if (live > codegen::kMaxOutputs) return fmt::format("a kernel writes at most {} arrays", codegen::kMaxOutputs);
  auto out_of = [&](const Value& v) -> const ArrayBase& {
    return all[static_cast<std::size_t>(v.statement)].outs[static_cast<std::size_t>(v.out)];
  };
  auto whole = [&](const ArrayBase& a, const ArrayBase& w) { return a.shape() == s.space && same_view(a, w); };
  int reads = 0;
  for (std::size_t k = 0; k < g.source.size(); ++k)
    for (int from : g.source[k]) reads += from == kFromMemory;
  source.assign(s.args.size(), kFromMemory);
  // A gather's source is read through a pointer, anywhere in it: never a value the kernel computes (found by
  // the region fuzzer: an array of extent 1 along the gather's axis looked whole, and the kernel indexed a float)
  std::vector<bool> gathered(s.args.size(), false);
  for (const ir::Node& n : s.lowered->graph.nodes)
    if (n.op == ir::Op::gather) gathered[s.lowered->graph.nodes[n.b].slot] = true;
  for (std::size_t slot = 0; slot < s.args.size(); ++slot) {
    const ArrayBase& a = s.args[slot];
    for (int v = static_cast<int>(g.values.size()) - 1; v >= 0 && source[slot] == kFromMemory; --v) {
      const Value& val = g.values[static_cast<std::size_t>(v)];
      if (!shares_memory(a, out_of(val))) continue;
      if (gathered[slot])
        return fmt::format("it gathers from {}, which the kernel before writes", describe(out_of(val)));
      if (val.superseded || !whole(a, out_of(val)))
        return fmt::format("it reads a {} view of memory the kernel before writes as {}", describe(a),
                           describe(out_of(val)));
      source[slot] = v;
    }
    reads += source[slot] == kFromMemory;
  }
  if (reads > codegen::kMaxParams) return fmt::format("a kernel reads at most {} arrays", codegen::kMaxParams);
  for (const ArrayBase& o : s.outs) {
    // Reads from memory by the group (and by this statement): the same view is read before it is written
    // in every element; another view of the same memory could be read after.
    for (int k = g.first; k <= i; ++k) {
      const auto& src = k == i ? source : g.source[static_cast<std::size_t>(k - g.first)];
      const Statement& r = all[static_cast<std::size_t>(k)];
      for (std::size_t slot = 0; slot < r.args.size(); ++slot)
        if (src[slot] == kFromMemory && shares_memory(o, r.args[slot]) && !whole(r.args[slot], o))
          return fmt::format("it writes {} over memory the kernel before reads as {}", describe(o),
                             describe(r.args[slot]));
    }
    for (const Value& val : g.values)
      if (!val.superseded && shares_memory(o, out_of(val)) && !whole(o, out_of(val)))
        return fmt::format("it writes {} over memory the kernel before writes as {}", describe(o),
                           describe(out_of(val)));
  }
  return {};
}

/// Adds statement i (whose inputs read as `source`) to g.
void join(const std::vector<Statement>& all, Group& g, int i, std::vector<int> source) {
  const Statement& s = all[static_cast<std::size_t>(i)];
  for (std::size_t o = 0; o < s.outs.size(); ++o)
    for (Value& val : g.values)
      if (!val.superseded &&
          same_view(s.outs[o], all[static_cast<std::size_t>(val.statement)].outs[static_cast<std::size_t>(val.out)]))
        val.superseded = true;
  for (std::size_t o = 0; o < s.outs.size(); ++o) g.values.push_back({i, static_cast<int>(o)});
  g.source.push_back(std::move(source));
  g.last = i + 1;
}

}  // namespace

std::vector<Group> group(const std::vector<Statement>& all, const std::vector<ArrayBase>& scratch_arrays, bool strict) {
  // Handles the region itself holds on each memory: more than these means the program still holds it.
  // (A flat list: a region touches tens of arrays, and this runs on every region.)
  std::vector<std::pair<const void*, long>> held;
  auto count = [&](const ArrayBase& a) {
    for (auto& [id, n] : held)
      if (id == a.memory_identity()) return void(++n);
    held.emplace_back(a.memory_identity(), 1);
  };
  auto held_by_region = [&](const ArrayBase& a) {
    for (const auto& [id, n] : held)
      if (id == a.memory_identity()) return n;
    return 0L;
  };
  for (const Statement& s : all) {
    for (const ArrayBase& a : s.args) count(a);
    for (const ArrayBase& a : s.outs) count(a);
  }
  for (const ArrayBase& a : scratch_arrays) count(a);
  auto out_of = [&](int statement, int out) -> const ArrayBase& {
    return all[static_cast<std::size_t>(statement)].outs[static_cast<std::size_t>(out)];
  };
  auto wanted_after = [&](const ArrayBase& o) {  // the program may read it after the region
    for (const ArrayBase& a : scratch_arrays)
      if (shares_memory(a, o)) return false;
    return o.memory_references() > held_by_region(o);
  };
  auto may_store = [&](int statement, int out) { return strict || wanted_after(out_of(statement, out)); };
  std::vector<Group> groups;
  std::vector<int> source;
  for (int i = 0; i < static_cast<int>(all.size()); ++i) {
    std::string why = "the region starts";
    if (!groups.empty()) {
      Group& g = groups.back();
      why = try_join(all, g, i, source, all[static_cast<std::size_t>(g.first)].lowered->graph.fast_math, may_store);
      if (why.empty()) {
        join(all, g, i, std::move(source));
        continue;
      }
    }
    Group g;
    g.first = i;
    g.reason = std::move(why);
    source.assign(all[static_cast<std::size_t>(i)].args.size(), kFromMemory);
    join(all, g, i, std::move(source));
    groups.push_back(std::move(g));
  }
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    int stored = 0;
    for (Value& v : groups[gi].values) {
      const ArrayBase& o = out_of(v.statement, v.out);
      if (v.superseded) {
        v.stored = false;
        continue;
      }
      bool read_later = false;  // from memory, by a later group
      for (std::size_t gj = gi + 1; gj < groups.size() && !read_later; ++gj)
        for (int k = groups[gj].first; k < groups[gj].last && !read_later; ++k)
          for (const ArrayBase& a : all[static_cast<std::size_t>(k)].args)
            read_later = read_later || shares_memory(a, o);
      v.stored = read_later || wanted_after(o);
      stored += v.stored;
    }
    if (stored > codegen::kMaxOutputs && !strict) return group(all, scratch_arrays, true);
  }
  return groups;
}

ir::Graph merge(const std::vector<Statement>& all, const Group& g) {
  ir::Graph m;
  m.fast_math = all[static_cast<std::size_t>(g.first)].lowered->graph.fast_math;
  std::vector<std::uint32_t> value_node;
  for (int i = g.first; i < g.last; ++i) {
    const Statement& s = all[static_cast<std::size_t>(i)];
    const ir::Graph& sg = s.lowered->graph;
    const std::vector<int>& source = g.source[static_cast<std::size_t>(i - g.first)];
    std::vector<std::uint32_t> at(sg.nodes.size());
    auto mapped = [&](std::uint32_t x) { return x == ir::kNone ? x : at[x]; };
    for (std::size_t j = 0; j < sg.nodes.size(); ++j) {
      ir::Node n = sg.nodes[j];
      if (n.op == ir::Op::input && source[n.slot] != kFromMemory) {
        at[j] = m.cast(value_node[static_cast<std::size_t>(source[n.slot])], n.dtype);
        continue;
      }
      if (n.op == ir::Op::input) n.slot = m.n_inputs++;
      if (n.op == ir::Op::scalar) n.slot += m.n_scalars;
      n.a = mapped(n.a);
      n.b = mapped(n.b);
      n.c = mapped(n.c);
      at[j] = m.append(n);
    }
    m.n_scalars += sg.n_scalars;
    for (std::size_t o = 0; o < s.outs.size(); ++o) {
      const Value& v = g.values[value_node.size()];
      // (A product handed to the next statement stays rounded on its own: generated code never fuses a
      // multiply into an add, codegen::spell.)
      const std::uint32_t x = m.explicit_cast(at[sg.outputs[o]], s.outs[o].dtype());
      value_node.push_back(x);
      if (v.stored) m.outputs.push_back(x);
    }
  }
  return m;
}

}  // namespace fusion::detail
