// SPDX-License-Identifier: Apache-2.0
// IR + reduction variant -> CUDA source. The reduction is described by five small device functions
// (identity, lift, combine, shuffle, final) so that the kernel skeleton is the same for every op; the
// combination order is fixed by the thread layout alone, so results are bit-identical run to run.
#include "codegen/emit_reduction.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <set>

#include "codegen/reduce_ops.hpp"
#include "codegen/reduce_skeleton.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {

using ir::Node;
using ir::Op;

std::uint32_t reduction_node(const ir::Graph& g) {
  std::uint32_t r = ir::kNone;
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i)
    if (ir::is_reduction(g.nodes[i].op)) {
      if (r != ir::kNone) throw Error("internal: a reduction kernel holds exactly one reduction");
      r = i;
    }
  if (r == ir::kNone) throw Error("internal: no reduction in a reduction kernel");
  return r;
}

std::size_t accumulator_bytes(const ir::Graph& g) {
  std::size_t bytes = 0, n = 0;
  for (const Node& r : g.nodes)
    if (ir::is_reduction(r.op)) bytes += (accumulator_size(r.op, g.nodes[r.a].dtype) + 7) / 8 * 8, ++n;
  return n == 1 ? accumulator_size(g.nodes[reduction_node(g)].op, g.nodes[g.nodes[reduction_node(g)].a].dtype) : bytes;
}

namespace {

/// A reduction kernel's scalars as the device functions and the skeleton take them.
struct ScalarLists {
  std::vector<std::string> params;  ///< "float s0": parameters of fz_expr and fz_final
  std::vector<std::string> args;    ///< "s0"
  std::vector<std::string> final_args{"a", "divisor"};  ///< fz_final's arguments
  std::vector<std::pair<std::uint32_t, std::string>> kernel_params;  ///< (slot, declaration) for the kernel
  explicit ScalarLists(const std::vector<std::pair<std::uint32_t, DType>>& scalars) {
    for (auto [slot, d] : scalars) {
      params.push_back(fmt::format("{} s{}", compute_type(d), slot));
      args.push_back(fmt::format("s{}", slot));
      kernel_params.emplace_back(slot, params.back());
    }
    final_args.insert(final_args.end(), args.begin(), args.end());
  }
};

/// Several reductions of one layout in one pass (fz::tie(sum(x), sum(x*x)), a batch norm's mean and
/// variance): one accumulator struct holding each reduction's, combined member by member, and one
/// finalization per output. The kernel skeleton is the single reduction's.
GeneratedKernel emit_multi_reduction(const ir::Graph& g, const ReduceVariant& v, std::string_view name_given) {
  const int K = static_cast<int>(g.outputs.size());
  std::vector<std::uint32_t> reds;
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i)
    if (ir::is_reduction(g.nodes[i].op)) {
      if (g.nodes[i].op == Op::argmin || g.nodes[i].op == Op::argmax)
        throw Error("internal: arg-reductions do not share a multi-reduction kernel");
      reds.push_back(i);
    }
  GeneratedKernel k = hashed_and_named(g, v, v.out_dtype, name_given);

  const std::vector<DType> pdt = param_dtypes(g, v.param_of_slot, v.n_params);
  const auto scalars = scalar_slots(g);
  SpellContext ctx;
  int heavy = 0;
  for (int o = 0; o < K; ++o) heavy = prepare_context(ctx, g, pdt, v.out_dtypes[o]);
  const ScalarLists sl(scalars);
  const std::vector<std::string>& scalar_params = sl.params;
  std::vector<ReduceOpSpelling> ops;
  for (std::uint32_t r : reds) ops.push_back(reduce_op_spelling(g.nodes[r].op, g.nodes[g.nodes[r].a].dtype));

  SourceWriter fn;
  {
    std::set<Op> seen;
    for (std::uint32_t r : reds)
      if (seen.insert(g.nodes[r].op).second && !accumulator_struct(g.nodes[r].op).empty()) fn.text(accumulator_struct(g.nodes[r].op));
  }
  std::vector<std::string> acc_fields, in_fields;
  for (std::size_t i = 0; i < reds.size(); ++i) {
    acc_fields.push_back(fmt::format("{} a{};", ops[i].acc, i));
    in_fields.push_back(fmt::format("{} v{};", compute_type(g.nodes[g.nodes[reds[i]].a].dtype), i));
  }
  fn.line("// Every reduction's accumulator (FzAcc) and value of one element (FzIn).");
  fn.line("struct FzAcc {{ {} }};", fmt::join(acc_fields, " "));
  fn.line("struct FzIn {{ {} }};", fmt::join(in_fields, " "));
  {
    std::vector<std::string> args;
    for (int p = 0; p < v.n_params; ++p) args.push_back(fmt::format("{} x{}", compute_type(pdt[p]), p));
    args.insert(args.end(), scalar_params.begin(), scalar_params.end());
    auto f = fn.block("// One element, as each reduction sees it (the fused prologues).\n__device__ __forceinline__ FzIn fz_expr({})",
                      fmt::join(args, ", "));
    std::vector<std::string> value(g.nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      if (g.nodes[i].op == Op::input) value[i] = fmt::format("x{}", v.param_of_slot[g.nodes[i].slot]);
      if (g.nodes[i].op == Op::scalar) value[i] = fmt::format("s{}", g.nodes[i].slot);
    }
    std::vector<bool> wanted(g.nodes.size(), false);
    for (std::uint32_t r : reds) {
      const std::vector<bool> under = reachable(g, g.nodes[r].a);
      for (std::size_t i = 0; i < wanted.size(); ++i) wanted[i] = wanted[i] || under[i];
    }
    write_values(fn, g, wanted, value, ctx);
    std::vector<std::string> fields;
    for (std::uint32_t r : reds) fields.push_back(value[g.nodes[r].a]);
    fn.line("return FzIn{{{}}};", fmt::join(fields, ", "));
  }
  std::vector<std::string> ids, lifts, combines, shuffles, loads;
  for (std::size_t i = 0; i < reds.size(); ++i) {
    const ReduceOpSpelling& op = ops[i];
    const std::string VT(compute_type(g.nodes[g.nodes[reds[i]].a].dtype));
    fn.line("// reduction {}: {}", i, ir::op_name(g.nodes[reds[i]].op));
    fn.line("__device__ __forceinline__ {} fz_lift{}({} x, long long r) {{ return {}; }}", op.acc, i, VT, op.lift);
    {
      auto f = fn.block("__device__ __forceinline__ {0} fz_combine{1}({0} a, {0} b)", op.acc, i);
      fn.text(op.combine);
    }
    fn.line("__device__ __forceinline__ {0} fz_shfl_down{1}({0} a, int d) {{ return {2}; }}", op.acc, i, op.shuffle);
    fn.line("__device__ __forceinline__ {0} fz_load_partial{1}(const {0}* p) {{ return {2}; }}", op.acc, i, op.load_partial);
    write_step_and_settle(fn, op, std::to_string(i));
    ids.push_back(op.identity);
    lifts.push_back(fmt::format("fz_lift{0}(x.v{0}, r)", i));
    combines.push_back(fmt::format("fz_combine{0}(a.a{0}, b.a{0})", i));
    shuffles.push_back(fmt::format("fz_shfl_down{0}(a.a{0}, d)", i));
    loads.push_back(fmt::format("fz_load_partial{0}(&p->a{0})", i));
  }
  fn.line("__device__ __forceinline__ FzAcc fz_identity() {{ return FzAcc{{{}}}; }}", fmt::join(ids, ", "));
  fn.line("__device__ __forceinline__ FzAcc fz_lift(FzIn x, long long r) {{ return FzAcc{{{}}}; }}", fmt::join(lifts, ", "));
  fn.line("__device__ __forceinline__ FzAcc fz_combine(FzAcc a, FzAcc b) {{ return FzAcc{{{}}}; }}", fmt::join(combines, ", "));
  ReduceOpSpelling whole;
  whole.acc = "FzAcc";
  whole.value = "FzIn";
  {
    std::vector<std::string> steps, settles;
    for (std::size_t i = 0; i < reds.size(); ++i) {
      steps.push_back(fmt::format("fz_step{0}(a.a{0}, x.v{0}, r)", i));
      settles.push_back(fmt::format("fz_settle{0}(a.a{0})", i));
    }
    whole.step = fmt::format("return FzAcc{{{}}};", fmt::join(steps, ", "));
    whole.settle = fmt::format("return FzAcc{{{}}};", fmt::join(settles, ", "));
  }
  whole.shuffle = fmt::format("FzAcc{{{}}}", fmt::join(shuffles, ", "));
  whole.load_partial = fmt::format("FzAcc{{{}}}", fmt::join(loads, ", "));
  write_reduce_helpers(fn, whole);
  for (int o = 0; o < K; ++o) {
    const std::uint32_t result = g.outputs[static_cast<std::size_t>(o)];
    std::vector<std::string> args{"FzAcc a", "double divisor"};
    args.insert(args.end(), scalar_params.begin(), scalar_params.end());
    auto f = fn.block("// Output {}: its reduced value, then its epilogue.\n__device__ __forceinline__ {} fz_final{}({})", o,
                      compute_type(g.nodes[result].dtype), o, fmt::join(args, ", "));
    std::vector<std::string> value(g.nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].op == Op::scalar) value[i] = fmt::format("s{}", g.nodes[i].slot);
    const std::vector<bool> wanted = reachable(g, result);
    for (std::size_t i = 0; i < reds.size(); ++i) {
      if (!wanted[reds[i]]) continue;
      const Node& rn = g.nodes[reds[i]];
      const DType vd = g.nodes[rn.a].dtype;
      std::string r = ops[i].result;  // an expression of the accumulator `a`: here a.a<i>
      if (r.rfind("a", 0) == 0) r = fmt::format("a.a{}", i) + r.substr(1);
      if (compute_type(rn.dtype) != compute_type(vd)) r = spell(Node{Op::cast, rn.dtype, reds[i]}, vd, r, "", "", ctx);
      fn.line("const {} r{} = {};", compute_type(rn.dtype), i, r);
      value[reds[i]] = fmt::format("r{}", i);
    }
    // The epilogue: what the output computes from the reduced values (never below a reduction).
    std::vector<bool> epilogue(g.nodes.size(), false);
    epilogue[result] = true;
    for (std::size_t i = g.nodes.size(); i-- > 0;) {
      if (!epilogue[i] || ir::is_reduction(g.nodes[i].op)) continue;
      for (std::uint32_t x : {g.nodes[i].a, g.nodes[i].b, g.nodes[i].c})
        if (x != ir::kNone) epilogue[x] = true;
    }
    write_values(fn, g, epilogue, value, ctx);
    fn.line("return {};", value[result]);
  }

  ReduceSkeleton sk{k.name, pdt, "FzAcc", sl.kernel_params, sl.args, "", [&](const std::string& index) {
    std::string body = "{";
    for (int o = 0; o < K; ++o)
      body += fmt::format(" out{}[{}] = {};", o, index,
                          store_conversion(g.nodes[g.outputs[static_cast<std::size_t>(o)]].dtype, v.out_dtypes[o],
                                           fmt::format("fz_final{}({})", o, fmt::join(sl.final_args, ", "))));
    return body + " }";
  }, &k.signature, std::vector<DType>(v.out_dtypes.begin(), v.out_dtypes.begin() + K)};
  sk.one_accumulator = std::any_of(ops.begin(), ops.end(), [](const ReduceOpSpelling& op) { return !op.step.empty(); });
  SourceWriter w;
  w.line("// Generated by fusion. Kernel {}: {}.", k.name, v.describe());
  write_prelude(w, ctx, heavy);
  write_reduce_kernel(w, v, sk, fn.str());
  k.source = w.str();
  return k;
}

}  // namespace

GeneratedKernel emit_reduction(const ir::Graph& g, const ReduceVariant& v, std::string_view name_given) {
  int n_reductions = 0;
  for (const Node& n : g.nodes) n_reductions += ir::is_reduction(n.op);
  if (g.outputs.size() > 1 || n_reductions > 1) return emit_multi_reduction(g, v, name_given);
  const std::uint32_t R = reduction_node(g);
  const Node& rn = g.nodes[R];
  const DType vd = g.nodes[rn.a].dtype;  // the reduced values' dtype (the accumulator's, for sum/prod/mean)
  const bool arg = rn.op == Op::argmin || rn.op == Op::argmax;
  const std::string VT(compute_type(vd));
  const ReduceOpSpelling op = reduce_op_spelling(rn.op, vd);
  const std::string& Acc = op.acc;
  const std::uint32_t result = g.outputs[0];

  GeneratedKernel k = hashed_and_named(g, v, v.out_dtype, name_given);

  const std::vector<DType> pdt = param_dtypes(g, v.param_of_slot, v.n_params);
  const auto scalars = scalar_slots(g);
  SpellContext ctx;
  const int heavy = prepare_context(ctx, g, pdt, v.out_dtype);

  const ScalarLists sl(scalars);
  const std::vector<std::string>& scalar_params = sl.params;

  // The device functions first: writing them tells which helpers the kernel needs.
  SourceWriter fn;
  if (const std::string def = accumulator_struct(rn.op); !def.empty()) fn.text(def).blank();
  {
    std::vector<std::string> args;
    for (int p = 0; p < v.n_params; ++p) args.push_back(fmt::format("{} x{}", compute_type(pdt[p]), p));
    args.insert(args.end(), scalar_params.begin(), scalar_params.end());
    auto f = fn.block("// One element, as the reduction sees it (the fused prologue).\n__device__ __forceinline__ {} fz_expr({})", VT,
                      fmt::join(args, ", "));
    std::vector<std::string> value(g.nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      if (g.nodes[i].op == Op::input) value[i] = fmt::format("x{}", v.param_of_slot[g.nodes[i].slot]);
      if (g.nodes[i].op == Op::scalar) value[i] = fmt::format("s{}", g.nodes[i].slot);
    }
    write_values(fn, g, reachable(g, rn.a), value, ctx);
    fn.line("return {};", value[rn.a]);
  }
  fn.line("__device__ __forceinline__ {} fz_identity() {{ return {}; }}", Acc, op.identity);
  fn.line("__device__ __forceinline__ {} fz_lift({} x, long long r) {{ return {}; }}", Acc, VT, op.lift);
  {
    auto f = fn.block("__device__ __forceinline__ {0} fz_combine({0} a, {0} b)", Acc);
    fn.text(op.combine);
  }
  write_reduce_helpers(fn, op);
  {
    std::vector<std::string> args{fmt::format("{} a", Acc), "double divisor"};
    args.insert(args.end(), scalar_params.begin(), scalar_params.end());
    auto f = fn.block("// The reduced value, then the fused epilogue.\n__device__ __forceinline__ {} fz_final({})",
                      compute_type(g.nodes[result].dtype), fmt::join(args, ", "));
    std::string r = op.result;
    if (!arg && compute_type(rn.dtype) != VT) r = spell(Node{Op::cast, rn.dtype, R}, vd, r, "", "", ctx);
    fn.line("const {} r = {};", compute_type(rn.dtype), r);
    std::vector<std::string> value(g.nodes.size());
    value[R] = "r";
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].op == Op::scalar) value[i] = fmt::format("s{}", g.nodes[i].slot);
    write_values(fn, g, reachable(g, result, R), value, ctx);
    fn.line("return {};", value[result]);
  }

  ReduceSkeleton sk{k.name, pdt, Acc, sl.kernel_params, sl.args, "", [&](const std::string& index) {
    return fmt::format("out[{}] = {};", index, store_conversion(g.nodes[result].dtype, v.out_dtype,
                                                               fmt::format("fz_final({})", fmt::join(sl.final_args, ", "))));
  }, &k.signature, {}};
  sk.one_accumulator = !op.step.empty();
  SourceWriter w;
  w.line("// Generated by fusion. Kernel {}: {}.", k.name, v.describe());
  write_prelude(w, ctx, heavy);
  write_reduce_kernel(w, v, sk, fn.str());
  k.source = w.str();
  return k;
}

}  // namespace fusion::codegen
