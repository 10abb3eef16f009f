// SPDX-License-Identifier: Apache-2.0
#include "codegen/emit_common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "common/hash.hpp"
#include "codegen/device_functions.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {
namespace {

void check_identifier(std::string_view name) {
  bool ok = !name.empty() && !(name[0] >= '0' && name[0] <= '9');
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) throw Error(fmt::format("kernel name '{}' is not a C identifier (letters, digits, '_')", name));
}

}  // namespace

std::string kernel_name(const ir::Graph& g, DType out, std::uint64_t hash, std::string_view name_given) {
  if (!name_given.empty()) {
    check_identifier(name_given);
    return fmt::format("{}_{}", name_given, hex16(hash));
  }
  std::vector<std::string> ops;
  bool iota = false;
  // fz::take's index arithmetic (made valid, times the stride) shows as the take itself
  std::vector<bool> index_math(g.nodes.size(), false);
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::gather) index_math[n.a] = true;
  // a join's tests of where an element lies, and fz::pad's and/not of them, show as the join itself; a join
  // whose test is such a combination is a pad
  std::vector<bool> position_math(g.nodes.size(), false);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const bool logical = n.op == ir::Op::logical_and || n.op == ir::Op::logical_not;
    position_math[i] = n.op == ir::Op::leading ||
                       (logical && position_math[n.a] && (n.op == ir::Op::logical_not || position_math[n.b]));
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    iota = iota || n.op == ir::Op::iota;
    if (arity(n.op) == ir::Arity::leaf || n.op == ir::Op::cast || n.op == ir::Op::take_index || position_math[i] ||
        index_math[i])
      continue;
    std::string name = n.op == ir::Op::call                                          ? device_function(n.slot).name
                       : n.op == ir::Op::concatenate && g.nodes[n.a].op != ir::Op::leading ? "pad"
                                                                                     : ir::op_name(n.op);
    if (std::find(ops.begin(), ops.end(), name) == ops.end() && ops.size() < 4) ops.push_back(name);
  }
  if (ops.empty()) ops.push_back(iota ? "arange" : "copy");
  return fmt::format("fz_{}_{}_{}", fmt::join(ops, "_"), dtype_tag(out), hex16(hash));
}

std::vector<DType> param_dtypes(const ir::Graph& g, const std::array<std::uint8_t, kMaxParams>& param_of_slot,
                                int n_params) {
  std::vector<DType> d(static_cast<std::size_t>(n_params), DType::float32);
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::input) d[param_of_slot[n.slot]] = n.dtype;
  return d;
}

ir::Graph merged_inputs(const ir::Graph& g, const std::array<std::uint8_t, kMaxParams>& param_of_slot) {
  std::vector<std::uint32_t> representative(g.n_inputs);
  for (std::uint32_t s = 0; s < g.n_inputs; ++s) {
    std::uint32_t r = 0;
    while (param_of_slot[r] != param_of_slot[s]) ++r;
    representative[s] = r;
  }
  return ir::canonicalize(g, representative);
}

std::vector<bool> gathered_params(const ir::Graph& g, const std::array<std::uint8_t, kMaxParams>& param_of_slot,
                                  int n_params) {
  std::vector<bool> gathered(static_cast<std::size_t>(n_params), false);
  const std::vector<bool> pointer = ir::pointer_inputs(g);
  for (std::size_t slot = 0; slot < pointer.size(); ++slot)
    if (pointer[slot]) gathered[param_of_slot[slot]] = true;
  return gathered;
}

std::vector<std::pair<std::uint32_t, DType>> scalar_slots(const ir::Graph& g) {
  std::vector<std::pair<std::uint32_t, DType>> s;
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::scalar) s.emplace_back(n.slot, n.dtype);
  std::sort(s.begin(), s.end());
  return s;
}

std::vector<bool> reachable(const ir::Graph& g, std::uint32_t root, std::uint32_t stop) {
  std::vector<bool> r(g.nodes.size(), false);
  r[root] = true;
  for (std::size_t i = g.nodes.size(); i-- > 0;) {
    if (!r[i] || i == stop) continue;
    for (std::uint32_t o : {g.nodes[i].a, g.nodes[i].b, g.nodes[i].c})
      if (o != ir::kNone) r[o] = true;
  }
  return r;
}

std::string stored_value(const ir::Graph& g, std::uint32_t node, DType out, const std::vector<std::string>& value) {
  const ir::Node& n = g.nodes[node];
  if (n.op == ir::Op::cast && is_16bit_float(n.dtype) && out == n.dtype && compute_type(g.nodes[n.a].dtype) == "float")
    return value[n.a];
  return value[node];
}

namespace {

/// Writes the wanted, not yet named nodes `scope` marks, in graph order; a concatenate becomes an if/else whose
/// branches write the nodes only their piece needs (named inside the branch, forgotten after it).
void write_scope(SourceWriter& w, const ir::Graph& g, const std::vector<bool>& scope, std::vector<std::string>& value,
                 SpellContext& ctx, const Lanes* lanes) {
  // (a node that varies across a vector's elements: an array, its element k written in a loop over them)
  const bool any_lanes = lanes != nullptr;
  auto varies = [&](std::size_t i) { return any_lanes && lanes->varies[i]; };
  auto assign = [&](std::size_t i, const std::string& e) {
    if (!varies(i)) return w.line("t{} = {};", i, e), void();
    w.line("#pragma unroll");
    w.line("for (int k = 0; k < {}; ++k) t{}[k] = {};", lanes->width, i, e);
  };
  const std::vector<bool> approximate = approximated(g);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (!scope[i] || !value[i].empty()) continue;
    const ir::Node& n = g.nodes[i];
    const std::string lanes_of = varies(i) ? fmt::format("[{}]", lanes->width) : std::string();
    if (any_lanes && !lanes->load.empty() && !lanes->load[i].empty()) {
      w.line("const auto t{} = {};", i, lanes->load[i]);
      value[i] = lanes->element[i];
      continue;
    }
    if (n.op == ir::Op::concatenate) {
      if (varies(n.a)) throw Error("internal: a join's test differs between a vector's elements");
      w.line("{} t{}{};", compute_type(n.dtype), i, lanes_of);
      bool first = true;
      for (std::uint32_t piece : {n.b, n.c}) {
        // the piece's own nodes: those it reaches that no outer scope named, not looking into the pieces of a
        // concatenate inside it (their nodes belong to its branches: found by the fuzzer, an empty third piece's
        // array read in the second's branch)
        std::vector<bool> own(g.nodes.size(), false);
        own[piece] = true;
        for (std::size_t j = piece + 1; j-- > 0;) {
          if (!own[j] || !value[j].empty()) continue;
          const ir::Node& m = g.nodes[j];
          for (std::uint32_t o : {m.a, m.b, m.c})
            if (o != ir::kNone && (m.op != ir::Op::concatenate || o == m.a)) own[o] = true;
        }
        for (std::size_t j = 0; j < g.nodes.size(); ++j) own[j] = own[j] && value[j].empty();
        auto branch = w.block("{}", first ? fmt::format("if ({})", value[n.a]) : std::string("else"));
        write_scope(w, g, own, value, ctx, lanes);
        assign(i, value[piece]);
        for (std::size_t j = 0; j < g.nodes.size(); ++j)
          if (own[j]) value[j].clear();
        first = false;
      }
      value[i] = fmt::format("t{}{}", i, varies(i) ? "[k]" : "");
      continue;
    }
    auto name_of = [&](std::uint32_t o) { return o == ir::kNone ? std::string() : value[o]; };
    const DType operand = n.a == ir::kNone ? n.dtype : g.nodes[n.op == ir::Op::where ? n.b : n.a].dtype;
    const std::string e = spell(n, operand, name_of(n.a), name_of(n.b), name_of(n.c), ctx, approximate[i]);
    if (varies(i)) {
      w.line("{} t{}{};", compute_type(n.dtype), i, lanes_of);
      assign(i, e);
      value[i] = fmt::format("t{}[k]", i);
    } else {
      value[i] = fmt::format("t{}", i);
      w.line("const {} t{} = {};", compute_type(n.dtype), i, e);
    }
  }
}

}  // namespace

void write_values(SourceWriter& w, const ir::Graph& g, const std::vector<bool>& wanted, std::vector<std::string>& value,
                  SpellContext& ctx, const Lanes* lanes) {
  // A concatenate's pieces are written inside its branches: only the nodes outside every piece come first.
  std::vector<bool> scope = wanted;
  if (ir::has_pieces(g)) {
    const std::vector<bool> inside = ir::inside_pieces(g);
    for (std::size_t i = 0; i < scope.size(); ++i) scope[i] = scope[i] && !inside[i];
  }
  write_scope(w, g, scope, value, ctx, lanes);
}

void write_decode(SourceWriter& w, const std::string& index, const std::string& shape, int rank,
                  const std::vector<std::pair<std::string, std::string>>& targets) {
  for (const auto& [offset, strides] : targets) w.line("long long {} = 0;", offset);
  if (rank == 0 || targets.empty()) return;
  auto b = w.block("");
  w.line("long long rest = {};", index);
  for (int d = rank - 1; d >= 1; --d) {
    w.line("const long long c{0} = rest % {1}.v[{0}];", d, shape);
    w.line("rest /= {}.v[{}];", shape, d);
    for (const auto& [offset, strides] : targets) w.line("{} += c{} * {}.v[{}];", offset, d, strides, d);
  }
  for (const auto& [offset, strides] : targets) w.line("{} += rest * {}.v[0];", offset, strides);
}

int prepare_context(SpellContext& ctx, const ir::Graph& g, const std::vector<DType>& params, DType out) {
  ctx.fast_math = g.fast_math;
  int heavy = 0;
  for (const ir::Node& n : g.nodes) heavy += is_heavy_math(n.op);
  ctx.outline_heavy_math = heavy > kHeavyMathBudget;
  for (DType d : params) {
    need_conversions(ctx, d);
  }
  need_conversions(ctx, out);
  return heavy;
}

void write_prelude(SourceWriter& w, const SpellContext& ctx, int heavy) {
  for (DType d : ctx.conversions) w.line("{}", conversion_source(d)).blank();
  for (Helper hp : ctx.helpers) w.line("{}", helper_source(hp)).blank();
  std::set<std::string> names;
  for (std::uint32_t id : ctx.functions) {
    const DeviceFunction& f = device_function(id);
    if (!names.insert(f.name).second)
      throw TypeError(
          fmt::format("two different fz::functions named '{}' meet in one kernel; give them different names", f.name));
    w.line("// fz::function {}", f.name);
    const std::string_view body = std::string_view(f.body).substr(f.body.find('('));
    w.text(fmt::format("__device__ __forceinline__ {} {}{}", compute_type(f.result), f.name, body)).blank();
  }
  if (!ctx.outlined.empty()) {
    w.line("// {} costly math calls: called, not inlined, to keep compile time linear.", heavy);
    for (const std::string& f : ctx.outlined) w.line("{}", outlined_source(f.substr(1), f[0] == '2'));
    w.blank();
  }
}

}  // namespace fusion::codegen
