// SPDX-License-Identifier: Apache-2.0
// IR + variant -> CUDA source for an elementwise kernel. The expression becomes one inlined device
// function (fz_expr) of the loaded values; the kernel around it only decides how elements are
// addressed: a vectorized linear loop, a scalar linear loop, or N-d strided indexing.
// Longer than 450 lines: one emitter whose addressings (rows, tiles, linear vectors, stepped inputs, N-d indexing)
// share its lambdas for loads, the expression's call and the stores; apart, each would take them all as arguments.
#include "codegen/kernel_frame.hpp"
#include "codegen/emit_elementwise.hpp"
#include "codegen/join_tests.hpp"
#include "codegen/private_bins.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include "codegen/spell.hpp"
#include "codegen/source_writer.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {

using ir::Node;
using ir::Op;

GeneratedKernel emit_elementwise(const ir::Graph& g, const Variant& v, std::string_view name_given) {
  const int K = v.n_outputs;
  if (static_cast<int>(g.outputs.size()) != K) throw Error("internal: the graph's outputs and the variant's differ");
  auto [k, pdt, scalars, ctx, heavy] = emit_context(g, v, name_given, std::span(v.out_dtype.data(), K));
  bool iota = false;  // (the flat index: fz::arange's)
  for (const Node& n : g.nodes) iota = iota || n.op == Op::iota;
  const std::string index_t = v.index64 ? "long long" : "int";
  // A join's tests of where the element lies: positions, or a rows kernel's column limits (codegen/join_tests.hpp)
  const JoinTests joins(g, v.rows, index_t);
  if (joins.any()) ctx.helpers.insert(Helper::leading);  // (fz_position, fz_row_limit, fz_before)
  // fz::take's sources reach the expression as pointers at the element's position in them; a checked index
  // reports a bad value through the fault word.
  const std::vector<bool> gathered = gathered_params(g, v.param_of_slot, v.n_params);
  const bool fault = checks_indices(g);
  // fz::index_add: the output is the target, added to through fz_expr (its pointer at the element's position)
  const Op scatter_op = g.nodes[g.outputs[0]].op;
  const bool scatter = K == 1 && ir::is_scatter(scatter_op);
  if (scatter && !v.has_strided()) throw Error("internal: a scatter's kernel addresses its target by strides");
  // fz::Deterministic: the output is the target's exact sums, v.exact_words 64-bit words per element
  const int W = v.exact_words;
  ctx.exact_sums = W == 0 ? ExactSums::none : v.private_bins ? ExactSums::shared : ExactSums::global;
  auto target_type = [&] { return W ? std::string("long long") : std::string(storage_type(v.out_dtype[0])); };
  auto result_dtype = [&](int o) { return g.nodes[g.outputs[o]].dtype; };
  // A plain copy moves bits: no round trip through float that could change a 16-bit NaN's payload.
  const bool raw_copy = K == 1 && g.nodes[g.outputs[0]].op == Op::input && result_dtype(0) == v.out_dtype[0];
  auto value_type = [&](DType d) { return raw_copy ? storage_type(d) : compute_type(d); };
  auto load_conv = [&](DType d, const std::string& x) { return raw_copy ? x : load_conversion(d, x); };
  // A join whose pieces begin and end on vector boundaries (Variant::vector_joins, one output): fz_expr computes a
  // vector, a node that varies along the row an array of its elements, the join's tests one value for them all.
  const bool by_vector = v.vector_joins;
  const int V = v.vector_width;
  auto along = [&](int p) { return v.access[p] == Access::along; };
  Lanes lanes = by_vector ? vector_lanes(g, v) : Lanes{};
  auto param_type = [&](int p) {
    if (gathered[p]) return fmt::format("const {}*", storage_type(pdt[p]));
    if (by_vector && along(p)) return fmt::format("FzVec<{}, {}>", storage_type(pdt[p]), V);
    return std::string(value_type(pdt[p]));
  };
  const std::string vector_result = fmt::format("FzVec<{}, {}>", value_type(g.nodes[g.outputs[0]].dtype), V);
  // Names of output k's pointer, strides and offset (a single output keeps the plain names).
  auto out_name = [&](int o) { return K == 1 ? std::string("out") : fmt::format("out{}", o); };
  auto out_suffix = [&](int o) { return K == 1 ? std::string("_out") : fmt::format("_out{}", o); };

  // Body first: it tells which helpers the kernel needs.
  SourceWriter body;
  if (K > 1) {
    std::vector<std::string> fields;
    for (int o = 0; o < K; ++o) fields.push_back(fmt::format("{} r{};", compute_type(result_dtype(o)), o));
    body.line("struct FzOut {{ {} }};", fmt::join(fields, " "));
  }
  {
    std::vector<std::string> args;
    for (int p = 0; p < v.n_params; ++p) args.push_back(fmt::format("{} x{}", param_type(p), p));
    for (auto [slot, d] : scalars) args.push_back(fmt::format("{} s{}", compute_type(d), slot));
    if (iota) args.push_back("long long i");
    for (const std::string& p : joins.params()) args.push_back(p);
    if (fault) args.push_back(fmt::format("unsigned long long* {}", kIndexFault));
    if (scatter) args.push_back(fmt::format("{}* {}", target_type(), kScatterTarget));
    if (scatter && W) args.push_back("long long fz_plane");
    auto fn = body.block("__device__ __forceinline__ {} fz_expr({})",
                         by_vector ? vector_result : K == 1 ? std::string(value_type(result_dtype(0))) : "FzOut",
                         fmt::join(args, ", "));

    std::vector<std::string> value(g.nodes.size());
    std::vector<bool> gather_source(g.nodes.size(), false);
    for (const Node& n : g.nodes)
      if (n.op == Op::gather) gather_source[n.b] = true;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      const int p = n.op == Op::input ? v.param_of_slot[n.slot] : 0;
      // (a piece's array is loaded where its branch reads it; by vector, as one vector: the layout found it aligned)
      if (n.op == Op::input && by_vector && along(p) && gathered[p]) {
        lanes.load[i] = fmt::format("*reinterpret_cast<const FzVec<{}, {}>*>(x{})", storage_type(pdt[p]), V, p);
        lanes.element[i] = load_conv(pdt[p], fmt::format("t{}.v[k]", i));
      } else if (n.op == Op::input && by_vector && along(p))
        value[i] = load_conv(pdt[p], fmt::format("x{}.v[k]", p));
      else if (n.op == Op::input)
        value[i] = gathered[p] && !gather_source[i] ? load_conv(pdt[p], fmt::format("x{}[0]", p)) : fmt::format("x{}", p);
      if (n.op == Op::scalar) value[i] = fmt::format("s{}", n.slot);
      if (n.op == Op::iota) value[i] = "i";
    }
    std::vector<bool> wanted(g.nodes.size(), true);
    joins.preset(value, wanted);
    write_values(body, g, wanted, value, ctx, by_vector ? &lanes : nullptr);
    std::vector<std::string> results;
    for (int o = 0; o < K; ++o)
      results.push_back(raw_copy ? value[g.outputs[o]] : stored_value(g, g.outputs[o], v.out_dtype[o], value));
    if (by_vector) {
      body.line("{} fz_r;", vector_result);
      body.line("#pragma unroll");
      body.line("for (int k = 0; k < {}; ++k) fz_r.v[k] = {};", V, results[0]);
      body.line("return fz_r;");
    } else if (K == 1) body.line("return {};", results[0]);
    else body.line("return FzOut{{{}}};", fmt::join(results, ", "));
  }

  auto load = [&](int p, const std::string& at) {
    return gathered[p] ? fmt::format("(in{} + ({}))", p, at) : load_conv(pdt[p], fmt::format("in{}[{}]", p, at));
  };
  // A stepped input's element k of a vector of outputs, from the `step` vectors v<p>[] loaded for them.
  auto stepped_element = [&](int p) {
    const int ph = v.step_phase[p];
    return fmt::format("v{0}[({1}k * {2}) / {3}].v[({1}k * {2}) % {3}]", p, ph ? fmt::format("{} + ", ph) : "", v.step,
                       v.vector_width);
  };
  // Parameter p's element i in a linear kernel (a stepped input's at i * step).
  auto linear_load = [&](int p) { return load(p, v.access[p] == Access::stepped ? fmt::format("i * {}", v.step) : "i"); };
  std::string row_column;  // (a rows kernel's column expression, set there: its joins' tests read it)
  auto call = [&](const std::vector<std::string>& inputs, const std::string& index) {
    std::vector<std::string> args = inputs;
    for (auto [slot, d] : scalars) args.push_back(fmt::format("s{}", slot));
    if (iota) args.push_back(fmt::format("(long long)({})", index));
    for (const std::string& a : joins.args(index, row_column)) args.push_back(a);
    if (fault) args.push_back(kIndexFault);
    if (scatter) args.push_back(v.private_bins ? "fz_bins" : v.out_access[0] == Access::contiguous ? "out + i" : "out + o_out");
    if (scatter && W) args.push_back(v.private_bins ? "fz_nbins" : "fz_plane");  // (exact sums: a plane per word)
    return fmt::format("fz_expr({})", fmt::join(args, ", "));
  };
  auto stored = [&](int o, const std::string& value) {
    return raw_copy ? value : store_conversion(result_dtype(o), v.out_dtype[o], value);
  };
  // `dest(o) = value of output o;` for every output, evaluating the expression once.
  auto store_all = [&](SourceWriter& w, const std::string& value, auto&& dest) {
    if (scatter) {  // fz_expr adds into the target itself
      w.line("(void){};", value);
      return;
    }
    if (K == 1) {
      w.line("{} = {};", dest(0), stored(0, value));
      return;
    }
    w.line("const FzOut r = {};", value);
    for (int o = 0; o < K; ++o) {
      const std::string guard = v.out_access[o] == Access::broadcast ? fmt::format("if (w{}) ", o) : "";
      w.line("{}{} = {};", guard, dest(o), stored(o, fmt::format("r.r{}", o)));
    }
  };

  SourceWriter w;
  // A stepped input's `step` vectors v<p>[] for one vector of outputs, the first output's element at `first` of in<p>:
  // loaded from the vector boundary at or before it (its phase).
  auto load_stepped = [&](int p, const std::string& first) {
    const int ph = v.step_phase[p], S = v.step, V = v.vector_width;
    w.line("FzVec<{0}, {1}> v{2}[{3}];  // this input's elements: from the {4} of these, one in every {3}", storage_type(pdt[p]),
           V, p, S, ph == 0 ? std::string("first") : fmt::format("one at {}", ph));
    w.line("#pragma unroll");
    w.line("for (int j = 0; j < {3}; ++j) v{2}[j] = *reinterpret_cast<const FzVec<{0}, {1}>*>(in{2} + {4}{5} + j * {1});",
           storage_type(pdt[p]), V, p, S, first, ph == 0 ? std::string() : fmt::format(" - {}", ph));
  };
  w.line("// Generated by fusion. Kernel {}: {}.", k.name, v.describe());
  write_prelude(w, ctx, heavy);
  if (v.has_strided() || v.rows || v.tiles) w.line("struct FzDims {{ long long v[{}]; }};", v.rank).blank();
  if (v.vector_width > 1)
    w.line("template <class T, int N> struct alignas(sizeof(T) * N) FzVec {{ T v[N]; }};").blank();
  w.line("{}", body.str());

  // Arrays are numbered parameters first, then outputs; dims entries are the shape, then each
  // operand's strides (outputs first, then parameters), as the launcher's Layout holds them.
  KernelSignature& sig = k.signature;
  const char* restrict_ = v.out_aliases_input ? "" : " __restrict__";
  for (int p = 0; p < v.n_params; ++p)
    sig.add(ArgSource::pointer, p, fmt::format("const {}*{} in{}", storage_type(pdt[p]), restrict_, p));
  for (int o = 0; o < K; ++o)
    sig.add(ArgSource::pointer, v.n_params + o,
            fmt::format("{}*{} {}", scatter ? target_type() : std::string(storage_type(v.out_dtype[o])), restrict_,
                        out_name(o)));
  for (auto [slot, d] : scalars) sig.add(ArgSource::scalar, slot, fmt::format("const {} s{}", compute_type(d), slot));
  if (fault) sig.add(ArgSource::workspace, kIndexFaultWorkspace, fmt::format("unsigned long long* {}", kIndexFault));
  sig.add(Count::n, "const long long n");
  if (v.private_bins) sig.add(Count::lanes, "const long long fz_nbins");
  if (scatter && W) sig.add(Count::chunk, "const long long fz_plane");
  if (v.rows) {
    sig.add(Count::lanes, "const long long lanes");
    sig.add(ArgSource::dims, 0, "const FzDims shape");
    for (int p = 0; p < v.n_params; ++p)
      if (v.access[p] == Access::row || v.access[p] == Access::along || v.access[p] == Access::stepped)
        sig.add(ArgSource::dims, 1 + K + p, fmt::format("const FzDims st{}", p));
  }
  if (v.tiles) {
    sig.add(ArgSource::dims, 0, "const FzDims shape");
    for (int p = 0; p < v.n_params; ++p)
      if (v.access[p] == Access::strided || v.access[p] == Access::across)
        sig.add(ArgSource::dims, 1 + K + p, fmt::format("const FzDims st{}", p));
  }
  if (v.has_strided()) {
    sig.add(ArgSource::dims, 0, "const FzDims shape");
    for (int p = 0; p < v.n_params; ++p)
      if (v.access[p] == Access::strided) sig.add(ArgSource::dims, 1 + K + p, fmt::format("const FzDims st{}", p));
    for (int o = 0; o < K; ++o)
      if (v.out_access[o] != Access::contiguous)
        sig.add(ArgSource::dims, 1 + o, fmt::format("const FzDims st{}", out_suffix(o)));
  }

  {
    auto kernel =
        w.block("extern \"C\" __global__ void __launch_bounds__({}) {}({})", kBlockThreads, k.name, sig.list());
    write_wait_for_previous_kernel(w);
    if (!v.rows && !v.tiles) {
      w.line("const {0} step = ({0})gridDim.x * blockDim.x;", index_t);
      w.line("const {0} first = ({0})blockIdx.x * blockDim.x + threadIdx.x;", index_t);
    }
    for (int p = 0; p < v.n_params; ++p)
      if (v.access[p] == Access::broadcast) w.line("const {} b{} = {};", param_type(p), p, load(p, "0"));

    auto element_inputs = [&](auto&& at) {
      std::vector<std::string> in;
      for (int p = 0; p < v.n_params; ++p)
        in.push_back(v.access[p] == Access::broadcast ? fmt::format("b{}", p) : at(p));
      return in;
    };
    auto at_index = [&](const std::string& i) {
      return [&, i](int o) { return fmt::format("{}[{}]", out_name(o), i); };
    };
    // One 16-byte vector of every output: its lanes (`k`) computed from `in` at element `index`, then the
    // vectors stored at `destination(o)` (linear and rows kernels).
    auto vector_of_outputs = [&](const std::vector<std::string>& in, const std::string& index, auto&& destination) {
      const int V = v.vector_width;
      auto vec_name = [&](int o) { return K == 1 ? std::string("r") : fmt::format("r{}", o); };
      for (int o = 0; o < K; ++o) w.line("FzVec<{}, {}> {};", storage_type(v.out_dtype[o]), V, vec_name(o));
      w.line("#pragma unroll");
      {
        auto lanes = w.block("for (int k = 0; k < {}; ++k)", V);
        store_all(w, call(in, index), [&](int o) { return vec_name(o) + ".v[k]"; });
      }
      for (int o = 0; o < K; ++o) w.line("{} = {};", destination(o), vec_name(o));
    };

    if (v.rows) {
      const int R = v.rank, V = v.vector_width;
      w.line("// Rows: `lanes` threads per row walk its last dimension; offsets are computed once per row.");
      // Row and column indices in 32 bits when the layout allows (fewer registers: 48 -> 32 for a batch
      // norm's normalize, so 8 blocks an SM instead of 5), else 64.
      const std::string I = index_t;
      w.line("const {0} cols = ({0})shape.v[{1}], rows = ({0})(n / cols);", I, R - 1);
      w.line("const int per_block = {} / (int)lanes, lane = threadIdx.x % (int)lanes;", kBlockThreads);
      auto rows_loop = w.block("for ({0} row = ({0})blockIdx.y * per_block + threadIdx.x / (int)lanes; row < rows; "
                               "row += ({0})gridDim.y * per_block)", I);
      std::vector<int> offset_params;
      for (int p = 0; p < v.n_params; ++p)
        if (v.access[p] == Access::row || v.access[p] == Access::along || v.access[p] == Access::stepped)
          offset_params.push_back(p);
      if (!offset_params.empty()) {
        w.line("{} rest = row;", I);
        for (int p : offset_params) w.line("{} o{} = 0;", I, p);
        if (R > 2) {
          w.line("#pragma unroll");
          auto dims = w.block("for (int d = {}; d >= 1; --d)", R - 2);
          w.line("const {0} c = rest % ({0})shape.v[d];", I);
          w.line("rest /= ({})shape.v[d];", I);
          for (int p : offset_params) w.line("o{0} += c * ({1})st{0}.v[d];", p, I);
        }
        for (int p : offset_params) w.line("o{0} += rest * ({1})st{0}.v[0];", p, I);
      }
      for (int p = 0; p < v.n_params; ++p)
        if (v.access[p] == Access::row)
          w.line("const {} per_row{} = {};", param_type(p), p, load(p, fmt::format("o{}", p)));
      w.line("const {} base = row * cols;  // the outputs' row", I);
      joins.write_row(w, I);
      auto row_inputs = [&](auto&& along) {
        std::vector<std::string> in;
        for (int p = 0; p < v.n_params; ++p)
          in.push_back(v.access[p] == Access::broadcast ? fmt::format("b{}", p)
                       : v.access[p] == Access::row     ? fmt::format("per_row{}", p)
                                                        : along(p));
        return in;
      };
      row_column = V > 1 && !by_vector ? "col + k" : "col";
      w.line("#pragma unroll 4  // a few accesses per thread along the row: their loads in flight together");
      auto cols_loop = w.block(
          "for ({0} col = (({0})blockIdx.x * ({0})lanes + lane) * {1}; col < cols; col += ({0})gridDim.x * ({0})lanes "
          "* {1})",
          I, V);
      const int S = v.step;
      // A stepped input's element at column `col` of its row (Access::stepped: every S-th of the row it steps through)
      auto along_at = [&](int p, const std::string& col) {
        return v.access[p] == Access::stepped ? fmt::format("o{} + ({}) * {}", p, col, S) : fmt::format("o{} + {}", p, col);
      };
      if (V > 1) {
        w.line(
            "// {} elements per 16-byte access: rows hold a multiple of {} and every pointer and row offset is "
            "aligned.",
            V, V);
        bool past_end = false;  // (a stepped input's last vector reaching past its row's last element)
        for (int p = 0; p < v.n_params; ++p) past_end = past_end || (v.access[p] == Access::stepped && v.step_phase[p] + 1 < S);
        if (past_end) {
          w.line("// The last vector of the last row element by element: a stepped input's vectors would reach past the");
          w.line("// view's last element (elsewhere they reach into the next row's span).");
          auto last = w.block("if (row + 1 == rows && col + {} == cols)", V);
          w.line("#pragma unroll");
          {
            auto lanes = w.block("for (int k = 0; k < {}; ++k)", V);
            auto in = row_inputs([&](int p) { return load(p, along_at(p, "col + k")); });
            store_all(w, call(in, "base + col + k"), [&](int o) { return fmt::format("{}[base + col + k]", out_name(o)); });
          }
          w.line("continue;");
        }
        for (int p = 0; p < v.n_params; ++p)
          if (v.access[p] == Access::along && !gathered[p])
            w.line("const FzVec<{0}, {1}> v{2} = *reinterpret_cast<const FzVec<{0}, {1}>*>(in{2} + o{2} + col);",
                   storage_type(pdt[p]), V, p);
          else if (v.access[p] == Access::stepped)
            load_stepped(p, fmt::format("o{} + col * {}", p, S));
        if (by_vector) {  // (the vector's elements lie in one piece: fz_expr computes them together)
          const std::string e = call(row_inputs([&](int p) {
                                       return gathered[p] ? load(p, fmt::format("o{} + col", p)) : fmt::format("v{}", p);
                                     }),
                                     "base + col");
          w.line("const {} e = {};", vector_result, e);
          w.line("FzVec<{}, {}> r;", storage_type(v.out_dtype[0]), V);
          w.line("#pragma unroll");
          w.line("for (int k = 0; k < {}; ++k) r.v[k] = {};", V, stored(0, "e.v[k]"));
          w.line("*reinterpret_cast<FzVec<{0}, {1}>*>(out + base + col) = r;", storage_type(v.out_dtype[0]), V);
        } else
        vector_of_outputs(row_inputs([&](int p) {
                            return gathered[p] ? load(p, fmt::format("o{} + col + k", p))
                                   : v.access[p] == Access::stepped ? load_conv(pdt[p], stepped_element(p))
                                                                     : load_conv(pdt[p], fmt::format("v{}.v[k]", p));
                          }),
                          "base + col + k", [&](int o) {
                            return fmt::format("*reinterpret_cast<FzVec<{0}, {1}>*>({2} + base + col)",
                                               storage_type(v.out_dtype[o]), V, out_name(o));
                          });
      } else {
        auto in = row_inputs([&](int p) { return load(p, along_at(p, "col")); });
        store_all(w, call(in, "base + col"), [&](int o) { return fmt::format("{}[base + col]", out_name(o)); });
      }
    } else if (v.tiles) {
      static_assert(kTile * kTileRows == kBlockThreads, "a tile is a block: kTileRows rows of kTile threads");
      const int R = v.rank, T = kTile, TR = kTileRows;
      w.line("// Tiles of {0}x{0} of the last two dimensions, a block each. Transposed inputs (contiguous along the",
             T);
      w.line(
          "// second-to-last dimension) are read along it into shared memory; the outputs are written along the last.");
      for (int p = 0; p < v.n_params; ++p)
        if (v.access[p] == Access::across)
          w.line("__shared__ {} tile{}[{}][{}];  // [column][row]; the padding spreads a column over the banks",
                 storage_type(pdt[p]), p, T, T + 1);
      const std::string I = index_t;  // 32-bit where every offset fits
      w.line("const {0} cols = ({0})shape.v[{1}], rows = ({0})shape.v[{2}];", I, R - 1, R - 2);
      w.line(
          "const {0} tiles_c = (cols + {1}) / {2}, per_matrix = tiles_c * ((rows + {1}) / {2}), tiles = per_matrix * "
          "({0})(n / ((long long)rows * cols));",
          I, T - 1, T);
      w.line("const int tx = threadIdx.x % {0}, ty = threadIdx.x / {0};", T);
      auto loop = w.block("for ({} t = blockIdx.x; t < tiles; t += gridDim.x)", I);
      w.line("const {0} matrix = t / per_matrix, in_matrix = t - matrix * per_matrix;", I);
      w.line("const {0} r0 = in_matrix / tiles_c * {1}, c0 = in_matrix % tiles_c * {1};", I, T);
      w.line("const {} base = matrix * rows * cols;  // the outputs' matrix", I);
      std::vector<int> offset_params;
      for (int p = 0; p < v.n_params; ++p)
        if (v.access[p] == Access::strided || v.access[p] == Access::across) offset_params.push_back(p);
      for (int p : offset_params) w.line("{} o{} = 0;", I, p);
      if (R > 2 && !offset_params.empty()) {
        w.line("{} rest = matrix;", I);
        w.line("#pragma unroll");
        auto dims = w.block("for (int d = {}; d >= 0; --d)", R - 3);
        w.line("const {0} c = rest % ({0})shape.v[d];", I);
        w.line("rest /= ({})shape.v[d];", I);
        for (int p : offset_params) w.line("o{0} += c * ({1})st{0}.v[d];", p, I);
      }
      bool any_across = false;
      for (int p = 0; p < v.n_params; ++p) any_across = any_across || v.access[p] == Access::across;
      if (any_across) {
        w.line("__syncthreads();  // the previous tile is read");
        w.line("#pragma unroll");
        {
          auto fill = w.block("for (int j = 0; j < {}; j += {})", T, TR);
          w.line(
              "const {} ri = r0 + tx, ci = c0 + ty + j;  // consecutive threads: consecutive rows, contiguous in these "
              "inputs",
              I);
          auto in = w.block("if (ri < rows && ci < cols)");
          for (int p = 0; p < v.n_params; ++p)
            if (v.access[p] == Access::across)
              w.line("tile{0}[ty + j][tx] = in{0}[o{0} + ri + ci * ({2})st{0}.v[{1}]];", p, R - 1, I);
        }
        w.line("__syncthreads();");
      }
      w.line("#pragma unroll");
      auto elems = w.block("for (int j = 0; j < {}; j += {})", T, TR);
      w.line("const {} ri = r0 + ty + j, ci = c0 + tx;  // consecutive threads: consecutive columns of the outputs", I);
      auto in = w.block("if (ri < rows && ci < cols)");
      std::vector<std::string> inputs;
      for (int p = 0; p < v.n_params; ++p) {
        if (v.access[p] == Access::broadcast) inputs.push_back(fmt::format("b{}", p));
        else if (v.access[p] == Access::across)
          inputs.push_back(load_conv(pdt[p], fmt::format("tile{}[tx][ty + j]", p)));
        else
          inputs.push_back(
              load(p, fmt::format("o{0} + ri * ({3})st{0}.v[{1}] + ci * ({3})st{0}.v[{2}]", p, R - 2, R - 1, I)));
      }
      store_all(w, call(inputs, "base + ri * cols + ci"),
                [&](int o) { return fmt::format("{}[base + ri * cols + ci]", out_name(o)); });
    } else if (!v.has_strided() && v.vector_width > 1) {
      const int V = v.vector_width, S = v.step;
      w.line("// Main part: {} elements per 16-byte access, every pointer aligned for it.", V);
      int first_phase = S;  // (the least of the stepped inputs' phases)
      for (int p = 0; p < v.n_params; ++p)
        if (v.access[p] == Access::stepped) first_phase = std::min<int>(first_phase, v.step_phase[p]);
      if (S > 0) {
        w.line("// (a stepped input's vectors hold {0} x {1} of its array's elements: the last one could reach past", V, S);
        w.line("// the input's last element, so vectors stop where a whole one still ends inside it)");
        w.line("const {0} n_vec = n > 0 ? ({0})(((n - 1) * {1} + {2}) / {3}) : 0;", index_t, S, first_phase + 1, V * S);
      } else
        w.line("const {0} n_vec = ({0})(n / {1});", index_t, V);
      {
        auto loop = w.block("for ({} iv = first; iv < n_vec; iv += step)", index_t);
        for (int p = 0; p < v.n_params; ++p)
          if (v.access[p] == Access::contiguous && !gathered[p])
            w.line("const FzVec<{0}, {1}> v{2} = reinterpret_cast<const FzVec<{0}, {1}>*>(in{2})[iv];",
                   storage_type(pdt[p]), V, p);
          else if (v.access[p] == Access::stepped)
            load_stepped(p, fmt::format("iv * {}", S * V));
        vector_of_outputs(element_inputs([&](int p) {
                            return gathered[p] ? load(p, fmt::format("iv * {} + k", V))
                                   : v.access[p] == Access::stepped ? load_conv(pdt[p], stepped_element(p))
                                                                     : load_conv(pdt[p], fmt::format("v{}.v[k]", p));
                          }),
                          // (the element's index as an or, not a sum: NVVM then sees that the vector's elements
                          // share iv, and a random leaf computes its Philox block once per vector, not per element)
                          fmt::format("(long long)iv * {} | k", V), [&](int o) {
                            return fmt::format("reinterpret_cast<FzVec<{0}, {1}>*>({2})[iv]",
                                               storage_type(v.out_dtype[o]), V, out_name(o));
                          });
      }
      if (S > 0) w.line("// Tail: the elements past whole vectors.");
      else w.line("// Tail: the last n % {} elements.", V);
      auto tail = w.block("for ({} i = n_vec * {} + first; i < n; i += step)", index_t, V);
      store_all(w, call(element_inputs(linear_load), "i"), at_index("i"));
    } else if (!v.has_strided()) {
      auto loop = w.block("for ({} i = first; i < n; i += step)", index_t);
      store_all(w, call(element_inputs(linear_load), "i"), at_index("i"));
    } else {
      const std::string bins_t = scatter ? target_type() : "";
      // (exact sums: W words a bin)
      const std::string bin_words = W ? fmt::format("fz_nbins * {}", W) : "fz_nbins";
      if (v.private_bins)
        write_bins_open(w, bins_t, bin_words, W ? "0" : scatter_identity(scatter_op, v.out_dtype[0]));
      {
      auto loop = w.block("for ({} i = first; i < n; i += step)", index_t);
      std::vector<std::pair<std::string, std::string>> offsets;  // offset name, strides suffix
      for (int p = 0; p < v.n_params; ++p)
        if (v.access[p] == Access::strided) offsets.emplace_back(fmt::format("o{}", p), std::to_string(p));
      for (int o = 0; o < K; ++o)
        if (v.out_access[o] != Access::contiguous) offsets.emplace_back("o" + out_suffix(o), out_suffix(o));
      w.line("{} rest = i;", index_t);
      for (const auto& [o, st] : offsets) w.line("{} {} = 0;", index_t, o);
      for (int o = 0; o < K; ++o)
        if (v.out_access[o] == Access::broadcast) w.line("bool w{} = true;  // false off output {}'s own extent", o, o);
      w.line("#pragma unroll");
      {
        auto dims = w.block("for (int d = {}; d >= 1; --d)", v.rank - 1);
        w.line("const {0} c = rest % ({0})shape.v[d];", index_t);
        w.line("rest /= ({})shape.v[d];", index_t);
        for (const auto& [o, st] : offsets) w.line("{} += c * ({})st{}.v[d];", o, index_t, st);
        for (int o = 0; o < K; ++o)
          if (v.out_access[o] == Access::broadcast)
            w.line("w{0} = w{0} && (c == 0 || st{1}.v[d] != 0);", o, out_suffix(o));
      }
      for (const auto& [o, st] : offsets) w.line("{} += rest * ({})st{}.v[0];", o, index_t, st);
      for (int o = 0; o < K; ++o)
        if (v.out_access[o] == Access::broadcast)
          w.line("w{0} = w{0} && (rest == 0 || st{1}.v[0] != 0);", o, out_suffix(o));
      auto in =
          element_inputs([&](int p) { return load(p, v.access[p] == Access::strided ? fmt::format("o{}", p) : "i"); });
      store_all(w, call(in, "i"), [&](int o) {
        return fmt::format("{}[{}]", out_name(o), v.out_access[o] == Access::contiguous ? "i" : "o" + out_suffix(o));
      });
      }
      if (v.private_bins) write_bins_flush(w, W, bins_t, bin_words, scatter_op, v.out_dtype[0]);
    }
  }
  k.source = w.str();
  return k;
}

}  // namespace fusion::codegen
