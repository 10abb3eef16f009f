// SPDX-License-Identifier: Apache-2.0
// IR + reduction variant -> CUDA source. The reduction is described by five small device functions
// (identity, lift, combine, shuffle, final) so that the kernel skeleton is the same for every op; the
// combination order is fixed by the thread layout alone, so results are bit-identical run to run.
#include "codegen/emit_reduction.hpp"

#include <fmt/format.h>

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

namespace {

bool is_arg(Op op) { return op == Op::argmin || op == Op::argmax; }

/// The extreme value of a dtype as a CUDA literal: `high` the largest (+inf for floats), else the lowest.
std::string extreme(DType d, bool high) {
  switch (d) {
    case DType::bool_: return high ? "true" : "false";
    case DType::int8: return high ? "(signed char)127" : "(signed char)-128";
    case DType::int16: return high ? "(short)32767" : "(short)-32768";
    case DType::int32: return high ? "2147483647" : "(-2147483647 - 1)";
    case DType::int64: return high ? "9223372036854775807ll" : "(-9223372036854775807ll - 1)";
    case DType::uint8: return high ? "(unsigned char)255" : "(unsigned char)0";
    case DType::uint16: return high ? "(unsigned short)65535" : "(unsigned short)0";
    case DType::uint32: return high ? "4294967295u" : "0u";
    case DType::uint64: return high ? "18446744073709551615ull" : "0ull";
    case DType::float64: return high ? "__longlong_as_double(0x7ff0000000000000ll)" : "__longlong_as_double(0xfff0000000000000ll)";
    default: return high ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  }
}

std::string nan_of(DType d) {
  return d == DType::float64 ? "__longlong_as_double(0x7ff8000000000000ll)" : "__int_as_float(0x7fc00000)";
}

/// The value an empty reduction starts from.
std::string identity(Op op, DType d) {
  const std::string t(compute_type(d));
  switch (op) {
    case Op::sum: case Op::mean: return fmt::format("({})0", t);
    case Op::prod: return fmt::format("({})1", t);
    case Op::any: return "false";
    case Op::all: return "true";
    case Op::min: case Op::argmin: return extreme(d, true);
    case Op::max: case Op::argmax: return extreme(d, false);
    case Op::nanmin: return is_floating(d) ? nan_of(d) : extreme(d, true);
    case Op::nanmax: return is_floating(d) ? nan_of(d) : extreme(d, false);
    default: throw Error("internal: not a reduction");
  }
}

/// Body of fz_combine(a, b), where `a` always holds earlier elements than `b`.
std::string combine(Op op, DType d) {
  const std::string t(compute_type(d));
  const bool fl = is_floating(d);
  switch (op) {
    case Op::sum: case Op::mean: return fmt::format("return ({})(a + b);", t);
    case Op::prod: return fmt::format("return ({})(a * b);", t);
    case Op::any: return "return a || b;";
    case Op::all: return "return a && b;";
    // min/max propagate NaN; the nan- forms skip it (NaN only when both are NaN)
    case Op::min: return fl ? "return (a < b || a != a) ? a : b;" : "return a < b ? a : b;";
    case Op::max: return fl ? "return (a > b || a != a) ? a : b;" : "return a > b ? a : b;";
    case Op::nanmin: return fl ? "return (b < a || a != a) ? b : a;" : "return a < b ? a : b;";
    case Op::nanmax: return fl ? "return (b > a || a != a) ? b : a;" : "return a > b ? a : b;";
    case Op::argmin: case Op::argmax: {
      const char* better = op == Op::argmin ? "<" : ">";
      std::string s;
      // the first NaN wins, as NumPy's argmin/argmax; ties go to the lower index
      if (fl) s += "const bool an = a.v != a.v, bn = b.v != b.v;\n  if (an || bn) return (an && (!bn || a.i <= b.i)) ? a : b;\n  ";
      s += fmt::format("if (a.v != b.v) return a.v {} b.v ? a : b;\n  return a.i <= b.i ? a : b;", better);
      return s;
    }
    default: throw Error("internal: not a reduction");
  }
}

}  // namespace

std::size_t accumulator_bytes(const ir::Graph& g) {
  const Node& r = g.nodes[reduction_node(g)];
  const DType d = g.nodes[r.a].dtype;
  const std::size_t value = compute_type(d) == "float" ? 4 : itemsize(d);
  return is_arg(r.op) ? 16 : value;
}

GeneratedKernel emit_reduction(const ir::Graph& g, const ReduceVariant& v, std::string_view user_name) {
  if (g.outputs.size() != 1) throw Error("internal: reduction kernels have exactly one output");
  const std::uint32_t R = reduction_node(g);
  const Node& rn = g.nodes[R];
  const DType vd = g.nodes[rn.a].dtype;  // the reduced values' dtype (the accumulator's, for sum/prod/mean)
  const bool arg = is_arg(rn.op);
  const std::string VT(compute_type(vd));
  const std::string Acc = arg ? "FzArg" : VT;
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
  if (arg) fn.line("struct FzArg {{ {} v; long long i; }};", VT).blank();
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
  fn.line("__device__ __forceinline__ {} fz_identity() {{ return {}; }}", Acc,
          arg ? fmt::format("FzArg{{{}, 9223372036854775807ll}}", identity(rn.op, vd)) : identity(rn.op, vd));
  fn.line("__device__ __forceinline__ {} fz_lift({} x, long long r) {{ return {}; }}", Acc, VT, arg ? "FzArg{x, r}" : "x");
  {
    auto f = fn.block("__device__ __forceinline__ {0} fz_combine({0} a, {0} b)", Acc);
    fn.line("{}", combine(rn.op, vd));
  }
  write_reduce_helpers(fn, Acc, vd, arg);
  {
    std::vector<std::string> args{fmt::format("{} a", Acc), "double divisor"};
    args.insert(args.end(), scalar_params.begin(), scalar_params.end());
    auto f = fn.block("// The reduced value, then the fused epilogue.\n__device__ __forceinline__ {} fz_final({})",
                      compute_type(g.nodes[result].dtype), fmt::join(args, ", "));
    std::string r = arg ? "a.i" : rn.op == Op::mean ? fmt::format("a / ({})divisor", VT) : "a";
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
