// SPDX-License-Identifier: Apache-2.0
// IR + reduction variant -> CUDA source. The reduction is described by five small device functions
// (identity, lift, combine, shuffle, final) so that the kernel skeleton is the same for every op; the
// combination order is fixed by the thread layout alone, so results are bit-identical run to run.
#include "codegen/emit_reduction.hpp"

#include <fmt/format.h>

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
  const Node& r = g.nodes[reduction_node(g)];
  return accumulator_size(r.op, g.nodes[r.a].dtype);
}

GeneratedKernel emit_reduction(const ir::Graph& g, const ReduceVariant& v, std::string_view user_name) {
  if (g.outputs.size() != 1) throw Error("internal: reduction kernels have exactly one output");
  const std::uint32_t R = reduction_node(g);
  const Node& rn = g.nodes[R];
  const DType vd = g.nodes[rn.a].dtype;  // the reduced values' dtype (the accumulator's, for sum/prod/mean)
  const bool arg = rn.op == Op::argmin || rn.op == Op::argmax;
  const std::string VT(compute_type(vd));
  const ReduceOpSpelling op = reduce_op_spelling(rn.op, vd);
  const std::string& Acc = op.acc;
  const std::uint32_t result = g.outputs[0];

  StableHasher h;
  h.add_u64(ir::hash(g));
  v.hash_into(h, g.n_inputs);
  GeneratedKernel k;
  k.hash = h.digest();
  k.name = kernel_name(g, v.out_dtype, k.hash, user_name);

  const std::vector<DType> pdt = param_dtypes(g, v.param_of_slot, v.n_params);
  const auto scalars = scalar_slots(g);
  SpellContext ctx;
  const int heavy = prepare_context(ctx, g, pdt, v.out_dtype);

  std::vector<std::string> scalar_params, scalar_args;
  for (auto [slot, d] : scalars) {
    scalar_params.push_back(fmt::format("{} s{}", compute_type(d), slot));
    scalar_args.push_back(fmt::format("s{}", slot));
  }

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

  std::vector<std::string> final_args{"a", "divisor"};
  final_args.insert(final_args.end(), scalar_args.begin(), scalar_args.end());
  std::vector<std::pair<std::uint32_t, std::string>> kernel_scalars;
  for (std::size_t j = 0; j < scalars.size(); ++j) kernel_scalars.emplace_back(scalars[j].first, scalar_params[j]);
  ReduceSkeleton sk{k.name, pdt, Acc, kernel_scalars, scalar_args, "", [&](const std::string& index) {
    return fmt::format("out[{}] = {};", index, store_conversion(g.nodes[result].dtype, v.out_dtype,
                                                               fmt::format("fz_final({})", fmt::join(final_args, ", "))));
  }, &k.signature};
  SourceWriter w;
  w.line("// Generated by fusion. Kernel {}: {}.", k.name, v.describe());
  write_prelude(w, ctx, heavy);
  write_reduce_kernel(w, v, sk, fn.str());
  k.source = w.str();
  return k;
}

}  // namespace fusion::codegen
