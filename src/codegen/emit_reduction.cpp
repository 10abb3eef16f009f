// SPDX-License-Identifier: Apache-2.0
// IR + reduction variant -> CUDA source. The reduction is described by five small device functions
// (identity, lift, combine, shuffle, final) so that the kernel skeleton is the same for every op; the
// combination order is fixed by the thread layout alone, so results are bit-identical run to run.
#include "codegen/emit_reduction.hpp"

#include <fmt/format.h>

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

/// Moving an accumulator down a warp: shuffles take 32- and 64-bit values, so narrow types widen.
std::string shuffle(DType d, const std::string& x) {
  const std::string t(compute_type(d));
  if (itemsize(d) >= 4 || is_floating(d)) return fmt::format("__shfl_down_sync(0xffffffffu, {}, d)", x);
  return fmt::format("({})__shfl_down_sync(0xffffffffu, (int){}, d)", t, x);
}

/// A load from the split workspace that bypasses L1 (other blocks wrote it during this kernel).
std::string load_cg(DType d, const std::string& p) {
  if (d == DType::bool_) return fmt::format("(__ldcg((const unsigned char*){}) != 0)", p);
  return fmt::format("__ldcg({})", p);
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
  if (arg)
    fn.line("__device__ __forceinline__ FzArg fz_shfl_down(FzArg a, int d) {{ return FzArg{{{}, {}}}; }}",
            shuffle(vd, "a.v"), shuffle(DType::int64, "a.i"));
  else
    fn.line("__device__ __forceinline__ {0} fz_shfl_down({0} a, int d) {{ return {1}; }}", Acc, shuffle(vd, "a"));
  fn.line("__device__ __forceinline__ {0} fz_load_partial(const {0}* p) {{ return {1}; }}", Acc,
          arg ? fmt::format("FzArg{{{}, {}}}", load_cg(vd, "&p->v"), load_cg(DType::int64, "&p->i")) : load_cg(vd, "p"));
  {
    auto f = fn.block("__device__ __forceinline__ {} fz_warp_reduce({} a)", Acc, Acc);
    fn.line("#pragma unroll");
    fn.line("for (int d = 16; d > 0; d >>= 1) a = fz_combine(a, fz_shfl_down(a, d));");
    fn.line("return a;");
  }
  {
    auto f = fn.block("// The block's 8 warps, combined in warp order; the result is in thread 0.\n"
                      "__device__ __forceinline__ {0} fz_block_reduce({0} a)", Acc);
    fn.line("__shared__ {} warp_result[8];", Acc);
    fn.line("a = fz_warp_reduce(a);");
    fn.line("if (threadIdx.x % 32 == 0) warp_result[threadIdx.x / 32] = a;");
    fn.line("__syncthreads();");
    fn.line("if (threadIdx.x < 32) a = fz_warp_reduce(threadIdx.x < 8 ? warp_result[threadIdx.x] : fz_identity());");
    fn.line("return a;");
  }
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

  SourceWriter w;
  w.line("// Generated by fusion. Kernel {}: {}.", k.name, v.describe());
  write_prelude(w, ctx, heavy);
  const int rk = v.rank_kept, rr = v.rank_reduced;
  if (rk > 0) w.line("struct FzKept {{ long long v[{}]; }};", rk);
  if (rr > 0) w.line("struct FzReduced {{ long long v[{}]; }};", rr);
  if (v.vector_width > 1) w.line("template <class T, int N> struct alignas(sizeof(T) * N) FzVec {{ T v[N]; }};");
  w.blank().line("{}", fn.str());

  std::vector<std::string> params;
  for (int p = 0; p < v.n_params; ++p) params.push_back(fmt::format("const {}* __restrict__ in{}", storage_type(pdt[p]), p));
  params.push_back(fmt::format("{}* __restrict__ out", storage_type(v.out_dtype)));
  params.insert(params.end(), scalar_params.begin(), scalar_params.end());
  for (const char* s : {"const long long n_out", "const long long n_red", "const long long chunk", "const double divisor"})
    params.push_back(s);
  if (rk > 0) params.push_back("const FzKept kshape");
  if (rr > 0) params.push_back("const FzReduced rshape");
  for (int p = 0; p < v.n_params; ++p) {
    if (v.broadcast[p]) continue;
    if (rk > 0) params.push_back(fmt::format("const FzKept kst{}", p));
    if (rr > 0) params.push_back(fmt::format("const FzReduced rst{}", p));
  }
  if (rk > 0) params.push_back("const FzKept kst_out");
  if (v.split) {
    params.push_back(fmt::format("{}* __restrict__ partials", Acc));
    params.push_back("unsigned int* __restrict__ counters");
  }

  // Offsets of multi-index `index` over `shape` (rank `rank`) along each operand's strides.
  auto decode = [&](const char* index, const char* shape, int rank, const std::vector<std::pair<std::string, std::string>>& targets) {
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
  };
  std::vector<std::pair<std::string, std::string>> kept_targets, reduced_targets;
  for (int p = 0; p < v.n_params; ++p) {
    if (v.broadcast[p]) continue;
    kept_targets.emplace_back(fmt::format("k{}", p), fmt::format("kst{}", p));
    reduced_targets.emplace_back(fmt::format("q{}", p), fmt::format("rst{}", p));
  }
  kept_targets.emplace_back("ko", "kst_out");
  auto inputs = [&](auto&& element) {
    std::vector<std::string> in;
    for (int p = 0; p < v.n_params; ++p) in.push_back(v.broadcast[p] ? fmt::format("b{}", p) : element(p));
    in.insert(in.end(), scalar_args.begin(), scalar_args.end());
    return fmt::format("fz_expr({})", fmt::join(in, ", "));
  };
  auto strided_element = [&](int p) { return load_conversion(pdt[p], fmt::format("in{0}[k{0} + q{0}]", p)); };
  auto scalar_loop = [&](const std::string& head) {
    auto loop = w.block("{}", head);
    decode("r", "rshape", rr, reduced_targets);
    w.line("a = fz_combine(a, fz_lift({}, r));", inputs(strided_element));
  };
  std::vector<std::string> final_args{"a", "divisor"};
  final_args.insert(final_args.end(), scalar_args.begin(), scalar_args.end());
  const std::string store = fmt::format("out[k_out] = {};", store_conversion(g.nodes[result].dtype, v.out_dtype,
                                                                            fmt::format("fz_final({})", fmt::join(final_args, ", "))));

  const bool inner = v.mode == ReduceMode::inner;
  {  // the kernel's closing brace is written when this scope ends, before the text is taken
  auto kernel = w.block("extern \"C\" __global__ void __launch_bounds__(256) {}({})", k.name, fmt::join(params, ", "));
  if (inner) {
    w.line("const int lane = threadIdx.x % {};", v.group);
    w.line("const long long o = (long long)blockIdx.x * {} + threadIdx.x / {};", 256 / v.group, v.group);
  } else if (v.vector_width > 1) {
    w.line("// {} neighbouring outputs per thread, read with 16-byte loads.", v.vector_width);
    w.line("const long long o = ((long long)blockIdx.x * 256 + threadIdx.x) * {};", v.vector_width);
  } else {
    w.line("const long long o = (long long)blockIdx.x * 256 + threadIdx.x;");
  }
  w.line("const long long r0 = (long long)blockIdx.y * chunk;");
  w.line("const long long r1 = r0 + chunk < n_red ? r0 + chunk : n_red;");
  w.line("{} a = fz_identity();", Acc);
  w.line("long long k_out = 0;");
  if (!inner && v.vector_width > 1) {
    w.line("{} acc[{}];", Acc, v.vector_width);
    w.line("#pragma unroll");
    w.line("for (int j = 0; j < {}; ++j) acc[j] = fz_identity();", v.vector_width);
  }
  {
    auto active = w.block("if (o < n_out)");
    decode("o", "kshape", rk, kept_targets);
    w.line("k_out = ko;");
    for (int p = 0; p < v.n_params; ++p)
      if (v.broadcast[p]) w.line("const {} b{} = {};", compute_type(pdt[p]), p, load_conversion(pdt[p], fmt::format("in{}[0]", p)));
    if (inner && v.vector_width > 1) {
      const int V = v.vector_width;
      w.line("// {} elements per 16-byte load, each lane of the vector with its own accumulator.", V);
      w.line("{} acc[{}];", Acc, V);
      w.line("#pragma unroll");
      w.line("for (int j = 0; j < {}; ++j) acc[j] = fz_identity();", V);
      w.line("const long long r_vec = r0 + (r1 - r0) / {0} * {0};", V);
      {
        w.line("#pragma unroll 4");
        auto loop = w.block("for (long long r = r0 + lane * {0}; r < r_vec; r += {1} * {0})", V, v.group);
        for (int p = 0; p < v.n_params; ++p)
          if (!v.broadcast[p])
            w.line("const FzVec<{0}, {1}> v{2} = *reinterpret_cast<const FzVec<{0}, {1}>*>(in{2} + k{2} + r);", storage_type(pdt[p]), V, p);
        w.line("#pragma unroll");
        auto lanes = w.block("for (int j = 0; j < {}; ++j)", V);
        w.line("acc[j] = fz_combine(acc[j], fz_lift({}, r + j));",
               inputs([&](int p) { return load_conversion(pdt[p], fmt::format("v{}.v[j]", p)); }));
      }
      w.line("a = acc[0];");
      w.line("#pragma unroll");
      w.line("for (int j = 1; j < {}; ++j) a = fz_combine(a, acc[j]);", V);
      auto tail = w.block("for (long long r = r_vec + lane; r < r1; r += {})", v.group);
      w.line("a = fz_combine(a, fz_lift({}, r));",
             inputs([&](int p) { return load_conversion(pdt[p], fmt::format("in{0}[k{0} + r]", p)); }));
    } else if (inner && rr == 2) {
      // Two reduced dimensions (e.g. N and H*W of a batch norm): step the coordinates instead of
      // dividing every index.
      w.line("long long c0 = (r0 + lane) / rshape.v[1], c1 = (r0 + lane) % rshape.v[1];");
      auto loop = w.block("for (long long r = r0 + lane; r < r1; r += {})", v.group);
      for (const auto& [offset, strides] : reduced_targets)
        w.line("const long long {} = c0 * {}.v[0] + c1 * {}.v[1];", offset, strides, strides);
      w.line("a = fz_combine(a, fz_lift({}, r));", inputs(strided_element));
      w.line("c1 += {};", v.group);
      w.line("while (c1 >= rshape.v[1]) c1 -= rshape.v[1], ++c0;");
    } else if (inner) {
      scalar_loop(fmt::format("for (long long r = r0 + lane; r < r1; r += {})", v.group));
    } else if (v.vector_width > 1) {
      const int V = v.vector_width;
      w.line("#pragma unroll 4");
      auto loop = w.block("for (long long r = r0; r < r1; ++r)");
      decode("r", "rshape", rr, reduced_targets);
      for (int p = 0; p < v.n_params; ++p)
        if (!v.broadcast[p])
          w.line("const FzVec<{0}, {1}> v{2} = *reinterpret_cast<const FzVec<{0}, {1}>*>(in{2} + k{2} + q{2});", storage_type(pdt[p]), V, p);
      w.line("#pragma unroll");
      auto lanes = w.block("for (int j = 0; j < {}; ++j)", V);
      w.line("acc[j] = fz_combine(acc[j], fz_lift({}, r));",
             inputs([&](int p) { return load_conversion(pdt[p], fmt::format("v{}.v[j]", p)); }));
    } else {
      w.line("#pragma unroll 4");
      scalar_loop("for (long long r = r0; r < r1; ++r)");
    }
  }
  if (inner && v.group == 32) {
    w.line("a = fz_warp_reduce(a);");
    w.line("if (lane == 0 && o < n_out) {}", store);
  } else if (inner && !v.split) {
    w.line("a = fz_block_reduce(a);");
    w.line("if (threadIdx.x == 0) {}", store);
  } else if (inner) {
    w.line("a = fz_block_reduce(a);");
    w.line("// Blocks of one output meet here: the last to arrive combines every block's partial in order.");
    w.line("__shared__ bool last;");
    {
      auto t0 = w.block("if (threadIdx.x == 0)");
      w.line("partials[o * gridDim.y + blockIdx.y] = a;");
      w.line("__threadfence();");
      w.line("last = atomicAdd(&counters[o], 1u) == gridDim.y - 1;");
    }
    w.line("__syncthreads();");
    auto l = w.block("if (last)");
    w.line("a = fz_identity();");
    w.line("for (unsigned s = threadIdx.x; s < gridDim.y; s += 256) a = fz_combine(a, fz_load_partial(&partials[o * gridDim.y + s]));");
    w.line("a = fz_block_reduce(a);");
    auto t0 = w.block("if (threadIdx.x == 0)");
    w.line("counters[o] = 0;  // ready for the next launch");
    w.line("{}", store);
  } else if (v.vector_width > 1) {
    const int V = v.vector_width;
    const std::string store_j = fmt::format("out[k_out + j] = {};", store_conversion(g.nodes[result].dtype, v.out_dtype,
                                            fmt::format("fz_final({})", fmt::join(final_args, ", "))));
    if (!v.split) {
      w.line("#pragma unroll");
      w.line("for (int j = 0; j < {}; ++j) {{ {} a = acc[j]; if (o < n_out) {} }}", V, Acc, store_j);
    } else {
      w.line("// Blocks of one output tile meet here: the last to arrive combines every block's partial in order.");
      w.line("if (o < n_out) for (int j = 0; j < {}; ++j) partials[(o + j) * gridDim.y + blockIdx.y] = acc[j];", V);
      w.line("__threadfence();");
      w.line("__syncthreads();");
      w.line("__shared__ bool last;");
      w.line("if (threadIdx.x == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;");
      w.line("__syncthreads();");
      auto l = w.block("if (last)");
      {
        auto act = w.block("if (o < n_out) for (int j = 0; j < {}; ++j)", V);
        w.line("a = fz_identity();");
        w.line("#pragma unroll 8");
        w.line("for (unsigned s = 0; s < gridDim.y; ++s) a = fz_combine(a, fz_load_partial(&partials[(o + j) * gridDim.y + s]));");
        w.line("{}", store_j);
      }
      w.line("if (threadIdx.x == 0) counters[blockIdx.x] = 0;  // ready for the next launch");
    }
  } else if (!v.split) {
    w.line("if (o < n_out) {}", store);
  } else {
    w.line("// Blocks of one output tile meet here: the last to arrive combines every block's partial in order.");
    w.line("if (o < n_out) partials[o * gridDim.y + blockIdx.y] = a;");
    w.line("__threadfence();");
    w.line("__syncthreads();");
    w.line("__shared__ bool last;");
    w.line("if (threadIdx.x == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;");
    w.line("__syncthreads();");
    auto l = w.block("if (last)");
    {
      auto act = w.block("if (o < n_out)");
      w.line("a = fz_identity();");
      w.line("#pragma unroll 8");
      w.line("for (unsigned s = 0; s < gridDim.y; ++s) a = fz_combine(a, fz_load_partial(&partials[o * gridDim.y + s]));");
      w.line("{}", store);
    }
    w.line("if (threadIdx.x == 0) counters[blockIdx.x] = 0;  // ready for the next launch");
  }
  }
  k.source = w.str();
  return k;
}

}  // namespace fusion::codegen
