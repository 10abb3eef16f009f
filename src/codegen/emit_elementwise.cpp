// SPDX-License-Identifier: Apache-2.0
// IR + variant -> CUDA source for an elementwise kernel. The expression becomes one inlined device
// function (fz_expr) of the loaded values; the kernel around it only decides how elements are
// addressed: a vectorized linear loop, a scalar linear loop, or N-d strided indexing.
#include "codegen/emit_elementwise.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include "codegen/op_table.hpp"
#include "codegen/source_writer.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {
namespace {

using ir::Node;
using ir::Op;

bool uses_iota(const ir::Graph& g) {
  for (const Node& n : g.nodes)
    if (n.op == Op::iota) return true;
  return false;
}

/// The dtype of each kernel parameter (input arrays), taken from the graph's input nodes.
std::vector<DType> param_dtypes(const ir::Graph& g, const Variant& v) {
  std::vector<DType> d(v.n_params, DType::float32);
  for (const Node& n : g.nodes)
    if (n.op == Op::input) d[v.param_of_slot[n.slot]] = n.dtype;
  return d;
}

/// The scalar slots the graph uses, in slot order, with their dtypes.
std::vector<std::pair<std::uint32_t, DType>> scalar_slots(const ir::Graph& g) {
  std::vector<std::pair<std::uint32_t, DType>> s;
  for (const Node& n : g.nodes)
    if (n.op == Op::scalar) s.emplace_back(n.slot, n.dtype);
  std::sort(s.begin(), s.end());
  return s;
}

void check_identifier(std::string_view name) {
  bool ok = !name.empty() && !(name[0] >= '0' && name[0] <= '9');
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) throw Error(fmt::format("kernel name '{}' is not a C identifier (letters, digits, '_')", name));
}

}  // namespace

std::string kernel_name(const ir::Graph& g, DType out, std::uint64_t hash, std::string_view user_name) {
  if (!user_name.empty()) {
    check_identifier(user_name);
    return fmt::format("{}_{}", user_name, hex16(hash));
  }
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) {
    if (arity(n.op) == ir::Arity::leaf || n.op == Op::cast) continue;
    std::string name = ir::op_name(n.op);
    if (std::find(ops.begin(), ops.end(), name) == ops.end() && ops.size() < 4) ops.push_back(name);
  }
  if (ops.empty()) ops.push_back(uses_iota(g) ? "arange" : "copy");
  return fmt::format("fz_{}_{}_{}", fmt::join(ops, "_"), dtype_tag(out), hex16(hash));
}

GeneratedKernel emit_elementwise(const ir::Graph& g, const Variant& v, std::string_view user_name) {
  if (g.outputs.size() != 1) throw Error("internal: elementwise kernels have exactly one output");
  StableHasher h;
  h.add_u64(ir::hash(g));
  v.hash_into(h, g.n_inputs);
  GeneratedKernel k;
  k.hash = h.digest();
  k.name = kernel_name(g, v.out_dtype, k.hash, user_name);

  const std::vector<DType> pdt = param_dtypes(g, v);
  const auto scalars = scalar_slots(g);
  const bool iota = uses_iota(g);
  const std::uint32_t result = g.outputs[0];
  const DType result_dtype = g.nodes[result].dtype;
  // A plain copy moves bits: no round trip through float that could change a 16-bit NaN's payload.
  const bool raw_copy = g.nodes[result].op == Op::input && result_dtype == v.out_dtype;
  auto value_type = [&](DType d) { return raw_copy ? storage_type(d) : compute_type(d); };
  auto load_conv = [&](DType d, const std::string& x) { return raw_copy ? x : load_conversion(d, x); };

  // Body first: it tells which helpers the kernel needs.
  SpellContext ctx;
  int heavy = 0;
  for (const Node& n : g.nodes) heavy += is_heavy_math(n.op);
  ctx.outline_heavy_math = heavy > kHeavyMathBudget;
  std::set<Helper>& needs = ctx.helpers;
  for (DType d : pdt) {
    if (d == DType::float16) needs.insert(Helper::half);
    if (d == DType::bfloat16) needs.insert(Helper::bfloat16);
  }
  if (v.out_dtype == DType::float16) needs.insert(Helper::half);
  if (v.out_dtype == DType::bfloat16) needs.insert(Helper::bfloat16);

  SourceWriter body;
  {
    std::vector<std::string> args;
    for (int p = 0; p < v.n_params; ++p) args.push_back(fmt::format("{} x{}", value_type(pdt[p]), p));
    for (auto [slot, d] : scalars) args.push_back(fmt::format("{} s{}", compute_type(d), slot));
    if (iota) args.push_back("long long i");
    auto fn = body.block("__device__ __forceinline__ {} fz_expr({})", value_type(result_dtype), fmt::join(args, ", "));
    std::vector<std::string> value(g.nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      switch (n.op) {
        case Op::input: value[i] = fmt::format("x{}", v.param_of_slot[n.slot]); continue;
        case Op::scalar: value[i] = fmt::format("s{}", n.slot); continue;
        case Op::iota: value[i] = "i"; continue;
        default: break;
      }
      auto name_of = [&](std::uint32_t o) { return o == ir::kNone ? std::string() : value[o]; };
      const DType operand = n.a == ir::kNone ? n.dtype : g.nodes[n.op == Op::where ? n.b : n.a].dtype;
      const std::string e = spell(n, operand, name_of(n.a), name_of(n.b), name_of(n.c), ctx);
      value[i] = fmt::format("t{}", i);
      body.line("const {} t{} = {};", compute_type(n.dtype), i, e);
    }
    body.line("return {};", value[result]);
  }

  const std::string index_t = v.index64 ? "long long" : "int";
  auto load = [&](int p, const std::string& at) { return load_conv(pdt[p], fmt::format("in{}[{}]", p, at)); };
  auto call = [&](const std::vector<std::string>& inputs, const std::string& index) {
    std::vector<std::string> args = inputs;
    for (auto [slot, d] : scalars) args.push_back(fmt::format("s{}", slot));
    if (iota) args.push_back(fmt::format("(long long)({})", index));
    const std::string value = fmt::format("fz_expr({})", fmt::join(args, ", "));
    return raw_copy ? value : store_conversion(result_dtype, v.out_dtype, value);
  };

  SourceWriter w;
  w.line("// Generated by fusion. Kernel {}: {}.", k.name, v.describe());
  for (Helper hp : needs) w.line("{}", helper_source(hp)).blank();
  if (!ctx.outlined.empty()) {
    w.line("// {} costly math calls: called, not inlined, to keep compile time linear.", heavy);
    for (const std::string& f : ctx.outlined) w.line("{}", outlined_source(f.substr(1), f[0] == '2'));
    w.blank();
  }
  if (v.has_strided()) w.line("struct FzDims {{ long long v[{}]; }};", v.rank).blank();
  if (v.vector_width > 1)
    w.line("template <class T, int N> struct alignas(sizeof(T) * N) FzVec {{ T v[N]; }};").blank();
  w.line("{}", body.str());

  std::vector<std::string> params;
  const char* restrict_ = v.out_aliases_input ? "" : " __restrict__";
  for (int p = 0; p < v.n_params; ++p) params.push_back(fmt::format("const {}*{} in{}", storage_type(pdt[p]), restrict_, p));
  params.push_back(fmt::format("{}*{} out", storage_type(v.out_dtype), restrict_));
  for (auto [slot, d] : scalars) params.push_back(fmt::format("const {} s{}", compute_type(d), slot));
  params.push_back("const long long n");
  if (v.has_strided()) {
    params.push_back("const FzDims shape");
    for (int p = 0; p < v.n_params; ++p)
      if (v.access[p] == Access::strided) params.push_back(fmt::format("const FzDims st{}", p));
    if (v.out_access == Access::strided) params.push_back("const FzDims st_out");
  }

  {
    auto kernel = w.block("extern \"C\" __global__ void __launch_bounds__(256) {}({})", k.name, fmt::join(params, ", "));
    w.line("const {0} step = ({0})gridDim.x * blockDim.x;", index_t);
    w.line("const {0} first = ({0})blockIdx.x * blockDim.x + threadIdx.x;", index_t);
    for (int p = 0; p < v.n_params; ++p)
      if (v.access[p] == Access::broadcast) w.line("const {} b{} = {};", value_type(pdt[p]), p, load(p, "0"));

    auto element_inputs = [&](auto&& at) {
      std::vector<std::string> in;
      for (int p = 0; p < v.n_params; ++p) in.push_back(v.access[p] == Access::broadcast ? fmt::format("b{}", p) : at(p));
      return in;
    };

    if (!v.has_strided() && v.vector_width > 1) {
      const int V = v.vector_width;
      w.line("// Main part: {} elements per 16-byte access, every pointer aligned for it.", V);
      w.line("const {0} n_vec = ({0})(n / {1});", index_t, V);
      {
        auto loop = w.block("for ({} iv = first; iv < n_vec; iv += step)", index_t);
        for (int p = 0; p < v.n_params; ++p)
          if (v.access[p] == Access::contiguous)
            w.line("const FzVec<{0}, {1}> v{2} = reinterpret_cast<const FzVec<{0}, {1}>*>(in{2})[iv];", storage_type(pdt[p]), V, p);
        w.line("FzVec<{}, {}> r;", storage_type(v.out_dtype), V);
        w.line("#pragma unroll");
        {
          auto lanes = w.block("for (int k = 0; k < {}; ++k)", V);
          auto in = element_inputs([&](int p) { return load_conv(pdt[p], fmt::format("v{}.v[k]", p)); });
          w.line("r.v[k] = {};", call(in, fmt::format("iv * {} + k", V)));
        }
        w.line("reinterpret_cast<FzVec<{0}, {1}>*>(out)[iv] = r;", storage_type(v.out_dtype), V);
      }
      w.line("// Tail: the last n % {} elements.", V);
      auto tail = w.block("for ({} i = n_vec * {} + first; i < n; i += step)", index_t, V);
      w.line("out[i] = {};", call(element_inputs([&](int p) { return load(p, "i"); }), "i"));
    } else if (!v.has_strided()) {
      auto loop = w.block("for ({} i = first; i < n; i += step)", index_t);
      w.line("out[i] = {};", call(element_inputs([&](int p) { return load(p, "i"); }), "i"));
    } else {
      auto loop = w.block("for ({} i = first; i < n; i += step)", index_t);
      std::vector<std::string> offsets;
      for (int p = 0; p < v.n_params; ++p)
        if (v.access[p] == Access::strided) offsets.push_back(fmt::format("o{}", p));
      if (v.out_access == Access::strided) offsets.push_back("o_out");
      w.line("{} rest = i;", index_t);
      for (const auto& o : offsets) w.line("{} {} = 0;", index_t, o);
      w.line("#pragma unroll");
      {
        auto dims = w.block("for (int d = {}; d >= 1; --d)", v.rank - 1);
        w.line("const {0} c = rest % ({0})shape.v[d];", index_t);
        w.line("rest /= ({})shape.v[d];", index_t);
        for (const auto& o : offsets)
          w.line("{} += c * ({})st{}.v[d];", o, index_t, o == "o_out" ? std::string("_out") : o.substr(1));
      }
      for (const auto& o : offsets)
        w.line("{} += rest * ({})st{}.v[0];", o, index_t, o == "o_out" ? std::string("_out") : o.substr(1));
      auto in = element_inputs([&](int p) { return load(p, v.access[p] == Access::strided ? fmt::format("o{}", p) : "i"); });
      w.line("out[{}] = {};", v.out_access == Access::strided ? "o_out" : "i", call(in, "i"));
    }
  }
  k.source = w.str();
  return k;
}

}  // namespace fusion::codegen
