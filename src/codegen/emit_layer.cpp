// SPDX-License-Identifier: Apache-2.0
// IR + layer variant -> CUDA source of a layer kernel. The thread->element mapping is the same in every
// pass, so each thread re-reads from shared memory exactly the elements it cached: no barrier is needed
// between passes beyond the row reductions themselves, and the combination order (hence every bit of the
// result) is fixed by the layout alone.
#include "codegen/emit_layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "codegen/reduce_ops.hpp"
#include "codegen/reduce_skeleton.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {

using ir::Node;
using ir::Op;

namespace {

/// The nodes computing `roots`, stopping at reductions (their results are per-row values by then).
std::vector<bool> needed(const ir::Graph& g, const std::vector<std::uint32_t>& roots) {
  std::vector<bool> r(g.nodes.size(), false);
  for (std::uint32_t x : roots) r[x] = true;
  for (std::size_t i = g.nodes.size(); i-- > 0;) {
    if (!r[i] || ir::is_reduction(g.nodes[i].op)) continue;
    for (std::uint32_t o : {g.nodes[i].a, g.nodes[i].b, g.nodes[i].c})
      if (o != ir::kNone) r[o] = true;
  }
  return r;
}

struct Reduction {
  std::uint32_t node;
  int wave;  // 1: reads no other reduction; w + 1: reads a result of wave w
  ReduceOpSpelling op;
  DType vd;  // the reduced values' dtype
};

/// Each reduction's wave: 1 when its operand reads no reduction, else one more than the latest it reads.
std::vector<int> waves_of(const ir::Graph& g) {
  std::vector<int> wave(g.nodes.size(), 0);
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (std::uint32_t o : {n.a, n.b, n.c})
      if (o != ir::kNone) wave[i] = std::max(wave[i], wave[o]);
    if (ir::is_reduction(n.op)) wave[i] += 1;
  }
  return wave;
}

/// Hopper's thread block clusters in inline PTX (no cooperative_groups header to find at run time).
void write_cluster_helpers(SourceWriter& w) {
  w.line(
      "__device__ __forceinline__ unsigned fz_cluster_rank() {{ unsigned r; asm volatile(\"mov.u32 %0, "
      "%%cluster_ctarank;\" : \"=r\"(r)); return r; }}");
  w.line("// Every thread of every block of the cluster arrives; shared-memory writes before it are seen after it.");
  w.line(
      "__device__ __forceinline__ void fz_cluster_sync() {{ asm "
      "volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: "
      "\"memory\"); }}");
  w.line("// The same shared variable in block `rank` of the cluster (a generic address).");
  w.line("template <class T> __device__ __forceinline__ const T* fz_cluster_peer(const T* p, unsigned rank) {{");
  w.line("  unsigned long long q;");
  w.line("  asm volatile(\"mapa.u64 %0, %1, %2;\" : \"=l\"(q) : \"l\"(p), \"r\"(rank));");
  w.line("  return reinterpret_cast<const T*>(q);");
  w.line("}}");
}

}  // namespace

std::vector<std::vector<bool>> layer_pass_nodes(const ir::Graph& g, const std::array<bool, kMaxOutputs>& out_per_row) {
  const std::vector<int> wave = waves_of(g);
  int waves = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (ir::is_reduction(g.nodes[i].op)) waves = std::max(waves, wave[i]);
  std::vector<std::vector<bool>> passes;
  for (int w = 1; w <= waves; ++w) {
    std::vector<std::uint32_t> roots;
    for (std::uint32_t i = 0; i < g.nodes.size(); ++i)
      if (ir::is_reduction(g.nodes[i].op) && wave[i] == w) roots.push_back(g.nodes[i].a);
    passes.push_back(needed(g, roots));
  }
  std::vector<std::uint32_t> element_outputs;
  for (std::size_t o = 0; o < g.outputs.size(); ++o)
    if (!out_per_row[o]) element_outputs.push_back(g.outputs[o]);
  if (!element_outputs.empty()) passes.push_back(needed(g, element_outputs));
  return passes;
}

GeneratedKernel emit_layer(const ir::Graph& g, const LayerVariant& v, std::string_view name_given) {
  const int K = v.n_outputs, np = v.n_params, V = v.vector_width, G = v.group, C = v.cluster;
  if (C > 1 && G != v.block) throw Error("internal: a cluster of blocks per row needs a block per row");
  if (static_cast<int>(g.outputs.size()) != K)
    throw Error("internal: the graph's outputs and the layer variant's differ");
  auto [k, pdt, scalars, ctx, heavy] = emit_context(g, v, name_given, std::span(v.out_dtype.data(), K));
  auto param_of = [&](std::uint32_t node) { return v.param_of_slot[g.nodes[node].slot]; };
  auto varies = [&](int p) { return v.role[p] != LayerRole::row; };

  // Reductions in waves.
  std::vector<Reduction> reds;
  const std::vector<int> wave_of_node = waves_of(g);
  int waves = 0;
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!ir::is_reduction(n.op)) continue;
    if (ir::is_arg_reduction(n.op)) throw Error("internal: arg-reductions do not run in layer kernels");
    waves = std::max(waves, wave_of_node[i]);
    reds.push_back({i, wave_of_node[i], reduce_op_spelling(n.op, g.nodes[n.a].dtype), g.nodes[n.a].dtype});
  }
  const std::vector<std::vector<bool>> pass_nodes = layer_pass_nodes(g, v.out_per_row);
  if (reds.empty()) throw Error("internal: a layer kernel without a reduction");

  // Device functions: each reduction's identity, lift, combine, row reduction and result.
  SourceWriter fn;
  {
    std::set<Op> structs;
    for (const Reduction& r : reds)
      if (structs.insert(g.nodes[r.node].op).second && !accumulator_struct(g.nodes[r.node].op).empty())
        fn.text(accumulator_struct(g.nodes[r.node].op));
  }
  for (std::size_t i = 0; i < reds.size(); ++i) {
    const Reduction& r = reds[i];
    const Node& rn = g.nodes[r.node];
    const std::string& Acc = r.op.acc;
    const std::string VT(compute_type(r.vd));
    fn.line("// reduction {}: {} (wave {})", i, ir::op_name(rn.op), r.wave);
    fn.line("__device__ __forceinline__ {} fz_identity{}() {{ return {}; }}", Acc, i, r.op.identity);
    fn.line("__device__ __forceinline__ {} fz_lift{}({} x, long long r) {{ return {}; }}", Acc, i, VT, r.op.lift);
    {
      auto f = fn.block("__device__ __forceinline__ {0} fz_combine{1}({0} a, {0} b)", Acc, i);
      fn.text(r.op.combine);
    }
    write_step_and_settle(fn, r.op, std::to_string(i));
    {
      auto f = fn.block(
          "// The group's accumulators combined in a fixed order; every thread of the group gets the result.\n"
          "__device__ __forceinline__ {0} fz_row_reduce{1}({0} a{2}{3})",
          Acc, i, G <= kWarpThreads ? "" : fmt::format(", {}* scratch", Acc),
          C > 1 ? fmt::format(", {}* slot", Acc) : "");
      fn.line("a = fz_settle{}(a);", i);
      fn.line("#pragma unroll");
      fn.line("for (int d = {}; d > 0; d >>= 1) a = fz_combine{}(a, {});", std::min(G, kWarpThreads) / 2, i,
              r.op.shuffle);
      if (G <= kWarpThreads) {
        fn.line("const int fz_lane0 = {};  // the group's first lane",
                G == kWarpThreads ? "0" : fmt::format("(threadIdx.x % 32) & ~{}", G - 1));
        fn.line("return {};", r.op.from_lane0);
      } else {
        // Every warp combines the warps' results as a shuffle tree (a few levels, not one long chain of
        // combines: a Welford combine divides) and takes lane 0's: the same order, so the same bits, in each.
        const int W = G / kWarpThreads;
        fn.line("if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = a;");
        fn.line("__syncthreads();");
        fn.line("a = threadIdx.x % 32 < {} ? scratch[threadIdx.x % 32] : fz_identity{}();", W, i);
        fn.line("#pragma unroll");
        fn.line("for (int d = {}; d > 0; d >>= 1) a = fz_combine{}(a, {});", W / 2, i, r.op.shuffle);
        fn.line("{{");
        fn.line("  const int fz_lane0 = 0;");
        fn.line("  a = {};", r.op.from_lane0);
        fn.line("}}");
        if (C > 1) {
          fn.line(
              "// The cluster's blocks (a slice of the row each) meet: every block combines all partials in rank "
              "order.");
          fn.line("if (threadIdx.x == 0) *slot = a;");
          fn.line("fz_cluster_sync();");
          fn.line("a = *fz_cluster_peer(slot, 0);");
          fn.line("for (unsigned q = 1; q < {}; ++q) a = fz_combine{}(a, *fz_cluster_peer(slot, q));", C, i);
        }
        fn.line("return a;");
      }
    }
    std::string result = r.op.result;
    if (compute_type(rn.dtype) != VT) result = spell(Node{Op::cast, rn.dtype, r.node}, r.vd, result, "", "", ctx);
    fn.line("__device__ __forceinline__ {} fz_result{}({} a, double divisor) {{ return {}; }}", compute_type(rn.dtype),
            i, Acc, result);
  }

  // The signature: arrays, scalars, counts, divisors, dims.
  KernelSignature& sig = k.signature;
  const char* restrict_ = v.out_aliases_input ? "" : " __restrict__";
  for (int p = 0; p < np; ++p)
    sig.add(ArgSource::pointer, p, fmt::format("const {}*{} in{}", storage_type(pdt[p]), restrict_, p));
  for (int o = 0; o < K; ++o)
    sig.add(ArgSource::pointer, np + o, fmt::format("{}*{} out{}", storage_type(v.out_dtype[o]), restrict_, o));
  for (auto [slot, d] : scalars) sig.add(ArgSource::scalar, slot, fmt::format("const {} s{}", compute_type(d), slot));
  sig.add(Count::n_out, "const long long n_rows");
  sig.add(Count::n_red, "const long long n_red");
  const bool partly = v.partly_resident;
  if (partly) sig.add(Count::chunk, "const long long fz_keep");
  for (std::size_t i = 0; i < reds.size(); ++i) {
    const Op op = g.nodes[reds[i].node].op;
    if (ir::divides_by_count(op))
      sig.add(ArgSource::divisor, static_cast<std::uint32_t>(i), fmt::format("const double divisor{}", i));
  }
  const int rk = v.rank_kept;
  if (rk > 0) sig.add(ArgSource::dims, kLayerKeptShape, "const FzKept kshape");
  const bool seg = v.segmented;
  if (seg) sig.add(ArgSource::dims, kLayerSegment, "const long long fz_segment");
  for (int p = 0; p < np; ++p) {
    if (rk > 0) sig.add(ArgSource::dims, layer_kept_strides(p), fmt::format("const FzKept kst{}", p));
    if (varies(p) && V == 1) sig.add(ArgSource::dims, layer_row_stride(p), fmt::format("const long long rst{}", p));
    if (varies(p) && seg) sig.add(ArgSource::dims, layer_segment_stride(p), fmt::format("const long long sst{}", p));
  }
  for (int o = 0; o < K; ++o) {
    if (rk > 0) sig.add(ArgSource::dims, layer_kept_strides(np + o), fmt::format("const FzKept kst_out{}", o));
    if (!v.out_per_row[o] && V == 1)
      sig.add(ArgSource::dims, layer_row_stride(np + o), fmt::format("const long long rst_out{}", o));
    if (!v.out_per_row[o] && seg)
      sig.add(ArgSource::dims, layer_segment_stride(np + o), fmt::format("const long long sst_out{}", o));
  }
  // Where element j of the row sits in an operand (`k`: its row's offset, `suffix`: "0" or "_out0"); a
  // segmented row's fz_q (segment) and fz_r (place in it) are computed once per access at the loop's top.
  auto element_at = [&](const std::string& k, const std::string& suffix) {
    const std::string along = seg ? "fz_r" : "j";
    const std::string within = V > 1 ? along : fmt::format("{} * rst{}", along, suffix);
    return seg ? fmt::format("{} + fz_q * sst{} + {}", k, suffix, within) : fmt::format("{} + {}", k, within);
  };

  // The passes: which nodes each computes and which inputs it reads.
  const int passes = static_cast<int>(pass_nodes.size());
  std::vector<int> first_pass(static_cast<std::size_t>(np), -1);  // the pass that reads a cached input from memory

  SourceWriter w;  // the kernel; written first, as it tells which helpers the prelude needs
  {
  auto kernel = w.block("extern \"C\" __global__ void __launch_bounds__({}{}){} {}({})", v.block,
                        v.min_blocks > 0 ? fmt::format(", {}", v.min_blocks) : "",
                        C > 1 ? fmt::format(" __cluster_dims__({}, 1, 1)", C) : "", k.name, sig.list());
  const int rows_per_block = v.block / G;
  if (v.resident) w.line("extern __shared__ __align__(16) unsigned char fz_row_cache[];");
  if (G > kWarpThreads)
    for (std::size_t i = 0; i < reds.size(); ++i)
      w.line("__shared__ {} fz_scratch{}[{}];", reds[i].op.acc, i, G / kWarpThreads);
  if (C > 1)
    for (std::size_t i = 0; i < reds.size(); ++i)
      w.line("__shared__ {} fz_slot{};  // the block's partial, read by the cluster", reds[i].op.acc, i);
  w.line("const int lane = threadIdx.x % {};", G);
  const bool sub_warp = G < kWarpThreads;  // several rows per warp: its shuffles need every lane
  if (sub_warp) {
    w.line(
        "// {} rows per warp: a warp past the last row leaves; a group past it redoes the last row and stores nothing.",
        kWarpThreads / G);
    w.line("if ((long long)blockIdx.x * {} + threadIdx.x / 32 * {} >= n_rows) return;", rows_per_block,
           kWarpThreads / G);
    w.line("const long long row_here = (long long)blockIdx.x * {} + threadIdx.x / {};", rows_per_block, G);
    w.line("const bool live = row_here < n_rows;");
    w.line("const long long row = live ? row_here : n_rows - 1;");
  } else if (C > 1) {
    w.line("const long long row = (long long)blockIdx.x / {};", C);
    w.line("if (row >= n_rows) return;  // uniform over the cluster");
    w.line("// This block's slice of the row: whole vectors, the last block's may be shorter.");
    w.line("const long long fz_slice = ((n_red + {0}) / {1} + {2}) / {3} * {3};", C - 1, C, V - 1, V);
    w.line("const unsigned fz_rank = fz_cluster_rank();");
    w.line("const long long fz_lo = fz_rank * fz_slice < n_red ? fz_rank * fz_slice : n_red;");
    w.line("const long long fz_hi = fz_lo + fz_slice < n_red ? fz_lo + fz_slice : n_red;");
  } else {
    w.line("const long long row = (long long)blockIdx.x * {} + threadIdx.x / {};", rows_per_block, G);
    w.line("if (row >= n_rows) return;  // uniform over the group: {}",
           G == kWarpThreads ? "a warp" : "the whole block");
  }
  // The range this block covers along the row, and where element j sits in its cache.
  const std::string lo = C > 1 ? "fz_lo + " : "", hi = C > 1 ? "fz_hi" : "n_red", at_j = C > 1 ? "j - fz_lo" : "j";
  const std::string if_live = sub_warp ? "if (live) " : "";
  {
    std::vector<std::pair<std::string, std::string>> targets;
    for (int p = 0; p < np; ++p) targets.emplace_back(fmt::format("k{}", p), fmt::format("kst{}", p));
    for (int o = 0; o < K; ++o) targets.emplace_back(fmt::format("ko{}", o), fmt::format("kst_out{}", o));
    write_decode(w, "row", "kshape", rk, targets);
  }
  for (int p = 0; p < np; ++p)
    if (!varies(p))
      w.line("const {} x{} = {};", compute_type(pdt[p]), p, load_conversion(pdt[p], fmt::format("in{0}[k{0}]", p)));
  if (v.resident) {
    w.line("// The row's cached inputs: {} rows per block, each padded to 16 elements.", rows_per_block);
    if (partly) w.line("const long long fz_pad = fz_keep;  // (a multiple of 16) the rest of the row is re-read");
    else w.line("const long long fz_pad = ({} + 15) / 16 * 16;", C > 1 ? "fz_slice" : "n_red");
    w.line("unsigned char* fz_at = fz_row_cache;");
    for (int p = 0; p < np; ++p) {
      if (v.role[p] != LayerRole::cached) continue;
      w.line("{0}* const c{1} = reinterpret_cast<{0}*>(fz_at) + (threadIdx.x / {2}) * fz_pad;", storage_type(pdt[p]), p,
             G);
      w.line("fz_at += {} * fz_pad * sizeof({});", rows_per_block, storage_type(pdt[p]));
    }
  }
  if (seg) w.line("const unsigned fz_seg = (unsigned)fz_segment;  // (segmented rows hold under 2^31 elements)");
  if (V > 1 && C > 1) w.line("const long long n_vec = fz_lo + (fz_hi - fz_lo) / {0} * {0};", V);
  else if (V > 1) w.line("const long long n_vec = n_red / {0} * {0};", V);

  std::vector<std::string> base(g.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op == Op::input) base[i] = fmt::format("x{}", param_of(static_cast<std::uint32_t>(i)));
    if (n.op == Op::scalar) base[i] = fmt::format("s{}", n.slot);
  }

  for (int pass = 1; pass <= passes; ++pass) {
    const bool final_pass = pass > waves;
    std::vector<std::size_t> in_wave;
    for (std::size_t i = 0; i < reds.size() && !final_pass; ++i)
      if (reds[i].wave == pass) in_wave.push_back(i);
    const std::vector<bool>& nodes = pass_nodes[static_cast<std::size_t>(pass - 1)];
    std::vector<int> reads;  // element inputs this pass reads
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      if (nodes[i] && g.nodes[i].op == Op::input && varies(param_of(static_cast<std::uint32_t>(i)))) {
        const int p = param_of(static_cast<std::uint32_t>(i));
        if (std::find(reads.begin(), reads.end(), p) == reads.end()) reads.push_back(p);
      }
    std::sort(reads.begin(), reads.end());
    for (int p : reads)
      if (first_pass[static_cast<std::size_t>(p)] < 0) first_pass[static_cast<std::size_t>(p)] = pass;
    auto from_cache = [&](int p) {
      return v.role[p] == LayerRole::cached && first_pass[static_cast<std::size_t>(p)] < pass;
    };
    auto to_cache = [&](int p) {
      return v.role[p] == LayerRole::cached && first_pass[static_cast<std::size_t>(p)] == pass;
    };
    bool touches_memory = false;  // reads an input from memory or writes an output: a segmented row locates j
    for (int p : reads) touches_memory = touches_memory || !from_cache(p) || partly;
    for (int o = 0; o < K && final_pass; ++o) touches_memory = touches_memory || !v.out_per_row[o];
    auto locate = [&] {
      if (seg && touches_memory) w.line("const long long fz_q = (unsigned)j / fz_seg, fz_r = j - fz_q * fz_seg;");
    };
    // A partly kept row: cache index `at` is in shared memory below fz_keep, else read from memory again.
    auto kept = [&](const std::string& at) { return fmt::format("{} < fz_keep", at); };
    auto if_kept = [&](const std::string& at) { return partly ? fmt::format("if ({}) ", kept(at)) : std::string(); };

    if (final_pass) w.line("// Last pass: the per-element outputs.");
    else {
      std::vector<std::string> names;
      for (std::size_t i : in_wave) names.push_back(fmt::format("{} ({})", i, ir::op_name(g.nodes[reds[i].node].op)));
      w.line("// Pass {}: reduction{} {}.", pass, in_wave.size() > 1 ? "s" : "", fmt::join(names, ", "));
      for (std::size_t i : in_wave) w.line("{} a{} = fz_identity{}();", reds[i].op.acc, i, i);
    }
    // The loop body over element `j` (`e`: its lane in a vector, or empty for scalar accesses).
    auto body = [&](const std::string& j, bool vector) {
      const std::string cache_index = j == "j" ? at_j : j;
      for (int p : reads) {
        const std::string memory = fmt::format("in{}[{}]", p, element_at(fmt::format("k{}", p), std::to_string(p)));
        const std::string raw =
            vector          ? fmt::format("v{}.v[e]", p)
            : from_cache(p) ? (partly ? fmt::format("({} ? c{}[{}] : {})", kept(cache_index), p, cache_index, memory)
                                      : fmt::format("c{}[{}]", p, cache_index))
                            : memory;
        if (!vector && to_cache(p)) {
          w.line("const {} raw{} = {};", storage_type(pdt[p]), p, raw);
          w.line("{}c{}[{}] = raw{};", if_kept(cache_index), p, cache_index, p);
          w.line("const {} x{} = {};", compute_type(pdt[p]), p, load_conversion(pdt[p], fmt::format("raw{}", p)));
        } else {
          w.line("const {} x{} = {};", compute_type(pdt[p]), p, load_conversion(pdt[p], raw));
        }
      }
      std::vector<std::string> value = base;
      for (std::size_t i = 0; i < reds.size(); ++i)
        if (reds[i].wave < pass) value[reds[i].node] = fmt::format("r{}", i);
      write_values(w, g, nodes, value, ctx);
      const std::string index = vector ? fmt::format("{} + e", j) : j;
      for (std::size_t i : in_wave)
        w.line("a{0} = fz_step{0}(a{0}, {1}, {2});", i, value[g.nodes[reds[i].node].a], index);
      for (int o = 0; o < K && final_pass; ++o) {
        if (v.out_per_row[o]) continue;
        const std::string stored = store_conversion(g.dtype(g.outputs[o]), v.out_dtype[o],
                                                    stored_value(g, g.outputs[o], v.out_dtype[o], value));
        if (vector) w.line("o{}.v[e] = {};", o, stored);
        else
          w.line("{}out{}[{}] = {};", if_live, o, element_at(fmt::format("ko{}", o), fmt::format("_out{}", o)), stored);
      }
    };
    if (V > 1) {
      w.line("#pragma unroll 4");
      auto loop = w.block("for (long long j = {2}(long long)lane * {0}; j < n_vec; j += {1} * {0})", V, G, lo);
      locate();
      const std::string cache_index = C > 1 ? "(j - fz_lo)" : "j";
      for (int p : reads) {
        const std::string type = fmt::format("FzVec<{}, {}>", storage_type(pdt[p]), V);
        const std::string cached = fmt::format("*reinterpret_cast<const {}*>(c{} + {})", type, p, cache_index);
        const std::string memory = fmt::format("*reinterpret_cast<const {}*>(in{} + {})", type, p,
                                               element_at(fmt::format("k{}", p), std::to_string(p)));
        w.line("const {} v{} = {};", type, p,
               !from_cache(p) ? memory
               : partly       ? fmt::format("{} ? {} : {}", kept(cache_index), cached, memory)
                              : cached);
        if (to_cache(p))
          w.line("{}*reinterpret_cast<{}*>(c{} + {}) = v{};", if_kept(cache_index), type, p, cache_index, p);
      }
      if (final_pass)
        for (int o = 0; o < K; ++o)
          if (!v.out_per_row[o]) w.line("FzVec<{}, {}> o{};", storage_type(v.out_dtype[o]), V, o);
      {
        w.line("#pragma unroll");
        auto lanes = w.block("for (int e = 0; e < {}; ++e)", V);
        body("j", true);
      }
      if (final_pass)
        for (int o = 0; o < K; ++o)
          if (!v.out_per_row[o])
            w.line("{3}*reinterpret_cast<FzVec<{0}, {1}>*>(out{2} + {4}) = o{2};", storage_type(v.out_dtype[o]), V, o,
                   if_live, element_at(fmt::format("ko{}", o), fmt::format("_out{}", o)));
    }
    {
      auto loop = V > 1 ? w.block("for (long long j = n_vec + lane; j < {}; j += {})", hi, G)
                        : w.block("for (long long j = {}lane; j < {}; j += {})", lo, hi, G);
      locate();
      body("j", false);
    }
    for (std::size_t i : in_wave) {
      const Op op = g.nodes[reds[i].node].op;
      w.line("const {} r{} = fz_result{}(fz_row_reduce{}(a{}{}{}), {});", compute_type(g.dtype(reds[i].node)), i, i, i,
             i, G <= kWarpThreads ? "" : fmt::format(", fz_scratch{}", i), C > 1 ? fmt::format(", &fz_slot{}", i) : "",
             ir::divides_by_count(op) ? fmt::format("divisor{}", i) : "0.0");
    }
  }
  // Per-row outputs, once per row.
  bool any_row = false;
  for (int o = 0; o < K; ++o) any_row = any_row || v.out_per_row[o];
  if (any_row) {
    auto once = w.block("if (lane == 0{})", sub_warp ? " && live" : C > 1 ? " && fz_rank == 0" : "");
    std::vector<std::uint32_t> roots;
    for (int o = 0; o < K; ++o)
      if (v.out_per_row[o]) roots.push_back(g.outputs[static_cast<std::size_t>(o)]);
    std::vector<std::string> value = base;
    for (std::size_t i = 0; i < reds.size(); ++i) value[reds[i].node] = fmt::format("r{}", i);
    write_values(w, g, needed(g, roots), value, ctx);
    for (int o = 0; o < K; ++o)
      if (v.out_per_row[o])
        w.line("out{0}[ko{0}] = {1};", o, store_conversion(g.dtype(g.outputs[o]), v.out_dtype[o], value[g.outputs[o]]));
  }
  if (C > 1) w.line("fz_cluster_sync();  // no block leaves while another may still read its partials");
  }
  SourceWriter head;
  head.line("// Generated by fusion. Kernel {}: {}.", k.name, v.describe());
  write_prelude(head, ctx, heavy);
  if (rk > 0) head.line("struct FzKept {{ long long v[{}]; }};", rk);
  if (V > 1) head.line("template <class T, int N> struct alignas(sizeof(T) * N) FzVec {{ T v[N]; }};");
  if (C > 1) write_cluster_helpers(head);
  head.blank().text(fn.str());
  k.source = head.str() + w.str();
  return k;
}

}  // namespace fusion::codegen
