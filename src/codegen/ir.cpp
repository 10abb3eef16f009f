// SPDX-License-Identifier: Apache-2.0
// IR construction (with the casts the typing rules imply) and canonicalization.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "fusion/error.hpp"
#include "fusion/ir.hpp"

namespace fusion::ir {

namespace {
std::uint32_t push(Graph& g, Node n) {
  g.nodes.push_back(n);
  return static_cast<std::uint32_t>(g.nodes.size() - 1);
}
}  // namespace

std::uint32_t Graph::input(DType d) { return push(*this, {Op::input, d, kNone, kNone, kNone, n_inputs++}); }
std::uint32_t Graph::scalar(DType d) { return push(*this, {Op::scalar, d, kNone, kNone, kNone, n_scalars++}); }
std::uint32_t Graph::iota() { return push(*this, {Op::iota, DType::int64}); }

std::uint32_t Graph::cast(std::uint32_t x, DType to) {
  if (dtype(x) == to) return x;
  return push(*this, {Op::cast, to, x});
}

std::uint32_t Graph::explicit_cast(std::uint32_t x, DType to) {
  const bool rounds = is_16bit_float(to) && nodes[x].op != Op::input;
  if (dtype(x) == to && !rounds) return x;
  return push(*this, {Op::cast, to, x});
}

std::uint32_t Graph::unary(Op op, std::uint32_t x) {
  const DType d = dtype(x);
  if (arity(op) != Arity::unary) throw Error(fmt::format("internal: {} is not a unary op", op_name(op)));
  if (!accepts(op, d)) throw TypeError(fmt::format("{} does not accept {}", op_name(op), dtype_name(d)));
  return push(*this, {op, result_dtype(op, d), cast(x, operand_dtype(op, d))});
}

std::uint32_t Graph::binary(Op op, std::uint32_t x, std::uint32_t y) {
  const DType dx = dtype(x), dy = dtype(y);
  if (arity(op) != Arity::binary) throw Error(fmt::format("internal: {} is not a binary op", op_name(op)));
  if (!accepts(op, dx, dy))
    throw TypeError(fmt::format("{} does not accept {} and {}", op_name(op), dtype_name(dx), dtype_name(dy)));
  const DType od = operand_dtype(op, dx, dy);
  const std::uint32_t cx = cast(x, od);
  const std::uint32_t cy = cast(y, od);
  return push(*this, {op, result_dtype(op, dx, dy), cx, cy});
}

std::uint32_t Graph::product(std::uint32_t x, std::uint32_t y, DType result) {
  if (!is_floating(result)) throw TypeError(fmt::format("matmul does not accept {}", dtype_name(result)));
  const std::uint32_t cx = cast(x, result);
  const std::uint32_t cy = cast(y, result);
  return push(*this, {Op::matmul, result, cx, cy});
}

std::uint32_t Graph::take_index(std::uint32_t x, std::uint32_t n, IndexMode mode) {
  if (is_floating(dtype(x)) || dtype(x) == DType::bool_)
    throw TypeError(fmt::format("indices must be integers, not {}", dtype_name(dtype(x))));
  return push(*this, {Op::take_index, DType::int64, cast(x, DType::int64), cast(n, DType::int64), kNone,
                      static_cast<std::uint32_t>(mode)});
}

std::uint32_t Graph::gather(std::uint32_t offset, std::uint32_t source, std::uint32_t checked) {
  if (nodes[source].op != Op::input) throw Error("internal: a gather reads an input array");
  return push(*this, {Op::gather, dtype(source), cast(offset, DType::int64), source, checked});
}

std::uint32_t Graph::scatter(Op op, std::uint32_t offset, std::uint32_t value, DType target, std::uint32_t checked) {
  if (!is_scatter(op)) throw Error("internal: not a scatter");
  return push(*this, {op, target, cast(offset, DType::int64), cast(value, target), checked});
}

std::uint32_t Graph::scan(Op op, std::uint32_t x) {
  if (!is_scan(op)) throw Error(fmt::format("internal: {} is not a scan", op_name(op)));
  const DType result = scan_result_dtype(op, dtype(x));
  return push(*this, {op, result, cast(x, result), kNone, kNone, n_reductions++});
}

namespace {
/// `cond ? x : y` as op `op` (where, or a join's lazy choice): the condition as bool, x and y promoted.
std::uint32_t choose(Graph& g, Op op, std::uint32_t cond, std::uint32_t x, std::uint32_t y) {
  const DType d = promote_types(g.dtype(x), g.dtype(y));
  const std::uint32_t c = g.cast(cond, DType::bool_);
  const std::uint32_t cx = g.cast(x, d);
  const std::uint32_t cy = g.cast(y, d);
  return push(g, {op, d, c, cx, cy});
}
}  // namespace

std::uint32_t Graph::where(std::uint32_t cond, std::uint32_t x, std::uint32_t y) {
  return choose(*this, Op::where, cond, x, y);
}

std::uint32_t Graph::leading(std::uint32_t after, std::uint32_t bound, std::uint32_t extent) {
  for (std::uint32_t s : {after, bound, extent})
    if (nodes[s].op != Op::scalar || dtype(s) != DType::int64) throw Error("internal: a join's position takes int64 scalars");
  return push(*this, {Op::leading, DType::bool_, after, bound, extent});
}

std::uint32_t Graph::join(std::uint32_t cond, std::uint32_t x, std::uint32_t y) {
  return choose(*this, Op::concatenate, cond, x, y);
}

std::uint32_t Graph::reduce(Op op, std::uint32_t x, DType result) {
  if (!is_reduction(op)) throw Error(fmt::format("internal: {} is not a reduction", op_name(op)));
  if (reduce_info(op).accumulator != ReduceAccumulator::result) x = cast(x, reduction_accumulator_dtype(op, result));
  return push(*this, {op, result, x, kNone, kNone, n_reductions++});
}

std::uint32_t Graph::call(DType result, const std::uint32_t* args, const DType* params, int n) {
  if (n < 1 || n > kMaxCallArgs) throw Error("internal: a function call takes 1 to 3 arguments");
  std::uint32_t x[kMaxCallArgs] = {kNone, kNone, kNone};
  for (int k = 0; k < n; ++k) x[k] = cast(args[k], params[k]);
  return push(*this, {Op::call, result, x[0], x[1], x[2], n_functions++});
}

Graph canonicalize(const Graph& g, const std::vector<std::uint32_t>& input_representative) {
  Graph out;
  out.fast_math = g.fast_math;
  out.n_inputs = g.n_inputs;
  out.n_scalars = g.n_scalars;
  out.n_reductions = g.n_reductions;
  out.n_functions = g.n_functions;
  std::vector<std::uint32_t> remap(g.nodes.size(), kNone);
  std::map<std::tuple<Op, DType, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t>, std::uint32_t> seen;

  // Mark live nodes first so that dead ones (never the case from the front end, but possible from
  // hand-built graphs) do not reach the hash.
  std::vector<bool> live(g.nodes.size(), false);
  for (std::uint32_t o : g.outputs) live[o] = true;
  for (std::size_t i = g.nodes.size(); i-- > 0;) {
    if (!live[i]) continue;
    const Node& n = g.nodes[i];
    for (std::uint32_t operand : {n.a, n.b, n.c})
      if (operand != kNone) live[operand] = true;
  }

  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (!live[i]) continue;
    Node n = g.nodes[i];
    if (n.op == Op::input && n.slot < input_representative.size()) n.slot = input_representative[n.slot];
    for (std::uint32_t* operand : {&n.a, &n.b, &n.c})
      if (*operand != kNone) *operand = remap[*operand];
    // Commutative ops list their operands in a fixed order, so `x*y` and `y*x` share one node.
    if (is_commutative(n.op) && n.a > n.b) std::swap(n.a, n.b);
    const auto key = std::make_tuple(n.op, n.dtype, n.a, n.b, n.c, n.slot);
    auto [it, inserted] = seen.emplace(key, static_cast<std::uint32_t>(out.nodes.size()));
    if (inserted) out.nodes.push_back(n);
    remap[i] = it->second;
  }
  for (std::uint32_t o : g.outputs) out.outputs.push_back(remap[o]);
  return out;
}

std::uint32_t join_tree(Graph& g, const std::uint32_t* value, const std::uint32_t* below, int n) {
  if (n == 1) return value[0];
  const int half = n / 2;  // pieces [0, half) lie before piece half - 1's end
  const std::uint32_t left = join_tree(g, value, below, half);
  const std::uint32_t right = join_tree(g, value + half, below + half, n - half);
  return g.join(below[half - 1], left, right);
}

std::vector<bool> inside_pieces(const Graph& g) {
  // Nodes the outputs reach without passing a piece (eager), then every node a piece reaches (inside);
  // a node both reach is eager: it is read at every element anyway.
  std::vector<bool> eager(g.nodes.size(), false), inside(g.nodes.size(), false);
  for (std::uint32_t o : g.outputs) eager[o] = true;
  for (std::size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if (!eager[i] && !inside[i]) continue;
    const bool join = n.op == Op::concatenate;
    for (std::uint32_t o : {n.a, n.b, n.c}) {
      if (o == kNone) continue;
      if (eager[i] && !(join && o != n.a)) eager[o] = true;
      else inside[o] = true;
    }
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) inside[i] = inside[i] && !eager[i];
  return inside;
}

bool has_pieces(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.op == Op::concatenate) return true;
  return false;
}

bool has_floating_variance(const Graph& g) {
  for (const Node& n : g.nodes)
    if (is_floating_variance(n)) return true;
  return false;
}

std::vector<bool> pointer_inputs(const Graph& g) {
  std::vector<bool> pointer;
  auto mark = [&](std::uint32_t slot) {
    pointer.resize(std::max<std::size_t>(g.n_inputs, slot + 1), false);
    pointer[slot] = true;
  };
  for (const Node& n : g.nodes)
    if (n.op == Op::gather) mark(g.nodes[n.b].slot);
  if (has_pieces(g)) {
    const std::vector<bool> inside = inside_pieces(g);
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      if (inside[i] && g.nodes[i].op == Op::input) mark(g.nodes[i].slot);
  }
  return pointer;
}

}  // namespace fusion::ir
