// SPDX-License-Identifier: Apache-2.0
// The reduction kernel skeleton shared by fused reductions and ReductionKernel. The combination order
// is fixed by the thread layout alone, so results are bit-identical run to run.
#include "codegen/kernel_frame.hpp"
#include "codegen/reduce_skeleton.hpp"

#include <fmt/format.h>

#include "codegen/emit_common.hpp"
#include "codegen/launch_shape.hpp"
#include "codegen/spell.hpp"

namespace fusion::codegen {

void write_step_and_settle(SourceWriter& fn, const ReduceOpSpelling& op, const std::string& suffix) {
  {
    auto f = fn.block(
        "// One more element in a thread's accumulator.\n__device__ __forceinline__ {0} fz_step{1}({0} a, {2} x, long "
        "long r)",
        op.acc, suffix, op.value);
    if (op.step.empty()) fn.line("return fz_combine{0}(a, fz_lift{0}(x, r));", suffix);
    else fn.text(op.step);
  }
  auto f = fn.block(
      "// A thread's accumulator, ready to combine with another's.\n__device__ __forceinline__ {0} fz_settle{1}({0} a)",
      op.acc, suffix);
  fn.text(op.settle);
}

void write_reduce_helpers(SourceWriter& fn, const ReduceOpSpelling& op) {
  const std::string& acc = op.acc;
  write_step_and_settle(fn, op, "");
  fn.line("__device__ __forceinline__ {0} fz_shfl_down({0} a, int d) {{ return {1}; }}", acc, op.shuffle);
  fn.line("__device__ __forceinline__ {0} fz_load_partial(const {0}* p) {{ return {1}; }}", acc, op.load_partial);
  {
    auto f = fn.block("__device__ __forceinline__ {} fz_warp_reduce({} a)", acc, acc);
    fn.line("#pragma unroll");
    fn.line("for (int d = 16; d > 0; d >>= 1) a = fz_combine(a, fz_shfl_down(a, d));");
    fn.line("return a;");
  }
  auto f = fn.block("// The block's {1} warps, combined in warp order; the result is in thread 0.\n"
                    "__device__ __forceinline__ {0} fz_block_reduce({0} a)", acc, kBlockWarps);
  fn.line("__shared__ {} warp_result[{}];", acc, kBlockWarps);
  fn.line("a = fz_warp_reduce(a);");
  fn.line("if (threadIdx.x % 32 == 0) warp_result[threadIdx.x / 32] = a;");
  fn.line("__syncthreads();");
  fn.line("if (threadIdx.x < 32) a = fz_warp_reduce(threadIdx.x < {} ? warp_result[threadIdx.x] : fz_identity());",
          kBlockWarps);
  fn.line("return a;");
}

namespace {

/// The end of a split reduction, after each block wrote its partials: the last block of an output tile to
/// arrive runs `combine` (every block's partial, in order), then resets the tile's counter.
template <class Combine> void write_last_block_combines(SourceWriter& w, Combine&& combine) {
  w.line("__threadfence();");
  w.line("__syncthreads();");
  w.line("__shared__ bool last;");
  w.line("if (threadIdx.x == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;");
  w.line("__syncthreads();");
  auto l = w.block("if (last)");
  combine();
  w.line("if (threadIdx.x == 0) counters[blockIdx.x] = 0;  // ready for the next launch");
}

/// A grouped reduction's block: G row groups of TX threads, V accumulators a thread (a vector's lanes).
struct RowGroups {
  int G = 1, TX = 0, V = 1;
  std::string acc;
  /// Every lane's slots at once, so one barrier serves them all; else a lane at a time.
  bool all_lanes = false;
};

/// Shared memory the row groups' slots may take to meet at one barrier: a barrier a lane, and one more before the
/// slots were reused, took 8 a meeting (H200, column sums of 2,048^2 float32: 6.2-6.7 -> 5.7-6.3 us standalone;
/// bench/column_sum_probe.cu). Larger accumulators (an int64 argmin's would take 57 KB) meet a lane at a time.
constexpr std::size_t kOneMeetingBytes = 16384;

/// The row groups meet in `fz_rows`: row 0 combines the others' accumulators in row order (`settle`: once after the
/// rows, where accumulators become values; not after the split's partials, values already).
void write_row_groups_meet(SourceWriter& w, const RowGroups& g, bool settle) {
  if (!g.all_lanes) {
    w.line("#pragma unroll");
    auto lanes = w.block("for (int j = 0; j < {}; ++j)", g.V);
    if (settle) w.line("acc[j] = fz_settle(acc[j]);");
    w.line("if (ty > 0) fz_rows[0][(ty - 1) * {} + tx] = acc[j];", g.TX);
    w.line("__syncthreads();");
    w.line("if (ty == 0) for (int g = 0; g < {}; ++g) acc[j] = fz_combine(acc[j], fz_rows[0][g * {} + tx]);", g.G - 1, g.TX);
    w.line("__syncthreads();");
    return;
  }
  {
    w.line("#pragma unroll");
    auto lanes = w.block("for (int j = 0; j < {}; ++j)", g.V);
    if (settle) w.line("acc[j] = fz_settle(acc[j]);");
    w.line("if (ty > 0) fz_rows[j][(ty - 1) * {} + tx] = acc[j];", g.TX);
  }
  w.line("__syncthreads();");
  w.line("#pragma unroll");
  w.line("for (int j = 0; j < {}; ++j)", g.V);
  w.line("  if (ty == 0) for (int g = 0; g < {}; ++g) acc[j] = fz_combine(acc[j], fz_rows[j][g * {} + tx]);", g.G - 1, g.TX);
}

/// The end of a grouped reduction whose column tile's row ranges are the `cluster` ranks of a cluster (blockIdx.y):
/// row 0 of each holds its results; rank 0 combines them in rank order from their shared memory and `owner` stores.
void write_cluster_combines(SourceWriter& w, const RowGroups& g, int cluster, const std::string& owner,
                            const std::string& store_j) {
  w.line("// The cluster's blocks took the row ranges of this column tile (its ranks, blockIdx.y): rank 0 combines");
  w.line("// their results in rank order from their shared memory.");
  w.line("__shared__ {} fz_part[{}][{}];", g.acc, g.V, g.TX);
  w.line("#pragma unroll");
  w.line("for (int j = 0; j < {}; ++j) if (ty == 0) fz_part[j][tx] = acc[j];", g.V);
  w.line("fz_cluster_sync();");
  {
    auto rank0 = w.block("if (fz_cluster_rank() == 0 && {})", owner);
    w.line("#pragma unroll");
    w.line("for (int j = 0; j < {}; ++j)", g.V);
    w.line("  for (unsigned q = 1; q < {}; ++q) acc[j] = fz_combine(acc[j], *fz_cluster_peer(&fz_part[j][tx], q));", cluster);
    w.line("#pragma unroll");
    w.line("for (int j = 0; j < {}; ++j) {{ a = acc[j]; {} }}", g.V, store_j);
  }
  w.line("fz_cluster_sync();  // no block leaves while rank 0 may still read its results");
}

}  // namespace

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

void write_reduce_kernel(SourceWriter& w, const ReduceVariant& v, const ReduceSkeleton& s,
                         const std::string& functions) {
  const int rk = v.rank_kept, rr = v.rank_reduced;
  if (rk > 0) w.line("struct FzKept {{ long long v[{}]; }};", rk);
  if (rr > 0) w.line("struct FzReduced {{ long long v[{}]; }};", rr);
  if (v.vector_width > 1) w.line("template <class T, int N> struct alignas(sizeof(T) * N) FzVec {{ T v[N]; }};");
  if (v.cluster > 1) write_cluster_helpers(w);
  w.blank().line("{}", functions);

  // Arrays: the inputs, then the output (n_params). Dims entries: kept and reduced extents, the
  // output's kept strides, then per input its kept and reduced strides (ReduceLayout::dims()).
  KernelSignature& sig = *s.signature;
  for (int p = 0; p < v.n_params; ++p)
    sig.add(ArgSource::pointer, p, fmt::format("const {}* __restrict__ in{}", storage_type(s.params[p]), p));
  if (s.outputs.empty())
    sig.add(ArgSource::pointer, v.n_params, fmt::format("{}* __restrict__ out", storage_type(v.out_dtype)));
  for (std::size_t k = 0; k < s.outputs.size(); ++k)
    sig.add(ArgSource::pointer, v.n_params + static_cast<std::uint32_t>(k),
            fmt::format("{}* __restrict__ out{}", storage_type(s.outputs[k]), k));
  for (const auto& [index, declaration] : s.scalar_params) sig.add(ArgSource::scalar, index, declaration);
  sig.add(Count::n_out, "const long long n_out");
  sig.add(Count::n_red, "const long long n_red");
  sig.add(Count::chunk, "const long long chunk");
  sig.add(ArgSource::divisor, 0, "const double divisor");
  if (rk > 0) sig.add(ArgSource::dims, kKeptShape, "const FzKept kshape");
  if (rr > 0) sig.add(ArgSource::dims, kReducedShape, "const FzReduced rshape");
  for (int p = 0; p < v.n_params; ++p) {
    if (v.broadcast[p]) continue;
    if (rk > 0) sig.add(ArgSource::dims, kept_strides(p), fmt::format("const FzKept kst{}", p));
    if (rr > 0) sig.add(ArgSource::dims, reduced_strides(p), fmt::format("const FzReduced rst{}", p));
  }
  if (rk > 0) sig.add(ArgSource::dims, kOutKeptStrides, "const FzKept kst_out");
  if (v.split) {
    sig.add(ArgSource::workspace, 0, fmt::format("{}* __restrict__ partials", s.acc));
    sig.add(ArgSource::workspace, 1, "unsigned int* __restrict__ counters");
  }

  auto decode = [&](const char* index, const char* shape, int rank,
                    const std::vector<std::pair<std::string, std::string>>& targets) {
    write_decode(w, index, shape, rank, targets);
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
    in.insert(in.end(), s.scalar_args.begin(), s.scalar_args.end());
    return fmt::format("fz_expr({})", fmt::join(in, ", "));
  };
  auto strided_element = [&](int p) { return load_conversion(s.params[p], fmt::format("in{0}[k{0} + q{0}]", p)); };
  // One 16-byte vector of V elements per (not broadcast) operand p, from `in{p} + k{p} + offset` (`offset`
  // may name p as {0}: "q{0}"); then a loop over the vector's lanes, whose body the caller writes.
  auto vector_loads = [&](int V, const char* offset) {
    for (int p = 0; p < v.n_params; ++p)
      if (!v.broadcast[p])
        w.line("const FzVec<{0}, {1}> v{2} = *reinterpret_cast<const FzVec<{0}, {1}>*>(in{2} + k{2} + {3});",
               storage_type(s.params[p]), V, p, fmt::format(fmt::runtime(offset), p));
    w.line("#pragma unroll");
    return w.block("for (int j = 0; j < {}; ++j)", V);
  };
  auto vector_element = [&](int p) { return load_conversion(s.params[p], fmt::format("v{}.v[j]", p)); };
  auto scalar_loop = [&](const std::string& head) {
    auto loop = w.block("{}", head);
    decode("r", "rshape", rr, reduced_targets);
    w.line("a = fz_step(a, {}, r);", inputs(strided_element));
  };
  const std::string store = s.store("k_out");

  const bool inner = v.mode == ReduceMode::inner;
  // Outer mode in row groups: the block's threads are G rows of TX; row ty takes every G-th reduced row.
  const int G = v.row_groups, TX = kBlockThreads / G;
  const bool grouped = !inner && G > 1;
  {  // the kernel's closing brace is written when this scope ends, before the text is taken
    auto kernel =
        w.block("extern \"C\" __global__ void __launch_bounds__({}{}){} {}({})", kBlockThreads,
                v.min_blocks > 0 ? fmt::format(", {}", v.min_blocks) : std::string(),
                v.cluster > 1 ? fmt::format(" __cluster_dims__(1, {}, 1)", v.cluster) : std::string(), s.kernel_name,
                sig.list());
    write_wait_for_previous_kernel(w);
    if (!s.kernel_prep.empty()) w.text(s.kernel_prep);
    if (inner) {
      w.line("const int lane = threadIdx.x % {};", v.group);
      w.line("const long long o = (long long)blockIdx.x * {} + threadIdx.x / {};", kBlockThreads / v.group, v.group);
  } else if (grouped) {
    w.line("// {} rows of {} threads: thread (tx, ty) owns {} neighbouring output(s) and reads every {}th reduced row.",
           G, TX, v.vector_width, G);
    w.line("const int tx = threadIdx.x % {}, ty = threadIdx.x / {};", TX, TX);
    w.line("const long long o = ((long long)blockIdx.x * {} + tx) * {};", TX, v.vector_width);
  } else if (v.vector_width > 1) {
    w.line("// {} neighbouring outputs per thread, read with 16-byte loads.", v.vector_width);
    w.line("const long long o = ((long long)blockIdx.x * {} + threadIdx.x) * {};", kBlockThreads, v.vector_width);
  } else {
    w.line("const long long o = (long long)blockIdx.x * {} + threadIdx.x;", kBlockThreads);
  }
  const bool rows_of_vectors = inner && v.vector_width > 1 && rr == 2;
  if (rows_of_vectors) {
    w.line("// Each block's range lies in one outer row of the reduced space: chunk splits every row alike.");
    w.line("const long long per_row = (rshape.v[1] + chunk - 1) / chunk;");
    w.line("const long long c0 = blockIdx.y / per_row;");
    w.line("const long long r0 = (long long)(blockIdx.y % per_row) * chunk;");
    w.line("const long long r1 = r0 + chunk < rshape.v[1] ? r0 + chunk : rshape.v[1];");
    w.line("const long long r_base = c0 * rshape.v[1];  // the flat reduced index of the row's first element");
  } else {
    w.line("const long long r0 = (long long)blockIdx.y * chunk;");
    w.line("const long long r1 = r0 + chunk < n_red ? r0 + chunk : n_red;");
  }
  w.line("{} a = fz_identity();", s.acc);
  w.line("long long k_out = 0;");
  if (!inner && (v.vector_width > 1 || grouped)) {
    w.line("{} acc[{}];", s.acc, v.vector_width);
    w.line("#pragma unroll");
    w.line("for (int j = 0; j < {}; ++j) acc[j] = fz_identity();", v.vector_width);
  }
  {
    auto active = w.block("if (o < n_out)");
    decode("o", "kshape", rk, kept_targets);
    w.line("k_out = ko;");
    for (int p = 0; p < v.n_params; ++p)
      if (v.broadcast[p])
        w.line("const {} b{} = {};", compute_type(s.params[p]), p,
               load_conversion(s.params[p], fmt::format("in{}[0]", p)));
    if (rows_of_vectors)
      for (int p = 0; p < v.n_params; ++p)
        if (!v.broadcast[p]) w.line("k{0} += c0 * rst{0}.v[0];", p);
    if (inner && v.vector_width > 1) {
      const int V = v.vector_width;
      const std::string flat = rows_of_vectors ? "r_base + r" : "r";  // the reduced index fz_step sees
      const bool one = s.one_accumulator;
      if (one) {
        w.line("// {} elements per 16-byte load, into the thread's one accumulator.", V);
      } else {
        w.line("// {} elements per 16-byte load, each lane of the vector with its own accumulator.", V);
        w.line("{} acc[{}];", s.acc, V);
        w.line("#pragma unroll");
        w.line("for (int j = 0; j < {}; ++j) acc[j] = fz_identity();", V);
      }
      w.line("const long long r_vec = r0 + (r1 - r0) / {0} * {0};", V);
      {
        w.line("#pragma unroll 4");
        auto loop = w.block("for (long long r = r0 + lane * {0}; r < r_vec; r += {1} * {0})", V, v.group);
        auto lanes = vector_loads(V, "r");
        w.line("{0} = fz_step({0}, {1}, {2} + j);", one ? "a" : "acc[j]", inputs(vector_element), flat);
      }
      if (!one) {
        w.line("a = fz_settle(acc[0]);");
        w.line("#pragma unroll");
        w.line("for (int j = 1; j < {}; ++j) a = fz_combine(a, fz_settle(acc[j]));", V);
      }
      auto tail = w.block("for (long long r = r_vec + lane; r < r1; r += {})", v.group);
      w.line("a = fz_step(a, {}, {});",
             inputs([&](int p) { return load_conversion(s.params[p], fmt::format("in{0}[k{0} + r]", p)); }), flat);
    } else if (inner && rr == 2) {
      // Two reduced dimensions (e.g. N and H*W of a batch norm): step the coordinates instead of
      // dividing every index.
      w.line("long long c0 = (r0 + lane) / rshape.v[1], c1 = (r0 + lane) % rshape.v[1];");
      auto loop = w.block("for (long long r = r0 + lane; r < r1; r += {})", v.group);
      for (const auto& [offset, strides] : reduced_targets)
        w.line("const long long {} = c0 * {}.v[0] + c1 * {}.v[1];", offset, strides, strides);
      w.line("a = fz_step(a, {}, r);", inputs(strided_element));
      w.line("c1 += {};", v.group);
      w.line("while (c1 >= rshape.v[1]) c1 -= rshape.v[1], ++c0;");
    } else if (inner) {
      scalar_loop(fmt::format("for (long long r = r0 + lane; r < r1; r += {})", v.group));
    } else if (v.vector_width > 1 || grouped) {
      const int V = v.vector_width;
      w.line("#pragma unroll {}", v.unroll > 0 ? v.unroll : 4);
      auto loop = w.block("{}", grouped ? fmt::format("for (long long r = r0 + ty; r < r1; r += {})", G)
                                        : std::string("for (long long r = r0; r < r1; ++r)"));
      decode("r", "rshape", rr, reduced_targets);
      if (V == 1) {
        w.line("acc[0] = fz_step(acc[0], {}, r);", inputs(strided_element));
      } else {
        auto lanes = vector_loads(V, "q{0}");
        w.line("acc[j] = fz_step(acc[j], {}, r);", inputs(vector_element));
      }
    } else {
      w.line("#pragma unroll 4");
      scalar_loop("for (long long r = r0; r < r1; ++r)");
    }
  }
  if (inner || (v.vector_width == 1 && !grouped)) w.line("a = fz_settle(a);");
  const RowGroups rows{G, TX, v.vector_width, s.acc,
                        s.acc_bytes > 0 && s.acc_bytes * v.vector_width * (G - 1) * TX <= kOneMeetingBytes};
  if (grouped) {
    w.line("// The row groups meet in shared memory: row 0 combines the others' accumulators in row order.");
    w.line("__shared__ {} fz_rows[{}][{}];", s.acc, rows.all_lanes ? v.vector_width : 1, (G - 1) * TX);
    write_row_groups_meet(w, rows, true);
  }
  if (inner && v.group < kWarpThreads) {
    w.line("// {} outputs per warp: each group of {} lanes combines its own (lane 0 of a group gets only its lanes).",
           kWarpThreads / v.group, v.group);
    if (v.group > 1) {
      w.line("#pragma unroll");
      w.line("for (int d = {}; d > 0; d >>= 1) a = fz_combine(a, fz_shfl_down(a, d));", v.group / 2);
    }
    w.line("if (lane == 0 && o < n_out) {}", store);
  } else if (inner && v.group == kWarpThreads) {
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
    w.line(
        "for (unsigned s = threadIdx.x; s < gridDim.y; s += {}) a = fz_combine(a, fz_load_partial(&partials[o * "
        "gridDim.y + s]));",
        kBlockThreads);
    w.line("a = fz_block_reduce(a);");
    auto t0 = w.block("if (threadIdx.x == 0)");
    w.line("counters[o] = 0;  // ready for the next launch");
    w.line("{}", store);
  } else if (v.vector_width > 1 || grouped) {
    const int V = v.vector_width;
    const std::string store_j = s.store("k_out + j");
    // Row 0 of a grouped block holds its settled results; otherwise every thread its own accumulators.
    const std::string owner = grouped ? "ty == 0 && o < n_out" : "o < n_out";
    const std::string settled = grouped ? "acc[j]" : "fz_settle(acc[j])";
    if (v.cluster > 1) {
      write_cluster_combines(w, rows, v.cluster, owner, store_j);
    } else if (!v.split) {
      w.line("#pragma unroll");
      w.line("for (int j = 0; j < {}; ++j) {{ a = {}; if ({}) {} }}", V, settled, owner, store_j);
    } else {
      w.line("// Blocks of one output tile meet here: the last to arrive combines every block's partial in order.");
      w.line("// Partials split-major (the block's outputs side by side): written and read back in whole lines.");
      w.line("if ({}) for (int j = 0; j < {}; ++j) partials[(long long)blockIdx.y * n_out + o + j] = {};", owner, V,
             settled);
      write_last_block_combines(w, [&] {
        if (grouped) {
          // Every row group reads its share of the splits (ty, ty + G, ...), all in flight at once, and the groups
          // meet as after the rows: a fixed order, and one round trip for the partials where a row read them all
          // one after another (H200, sum(m, 0) of 4096^2 float32: 17 splits).
          w.line("#pragma unroll");
          w.line("for (int j = 0; j < {}; ++j) acc[j] = fz_identity();", V);
          {
            auto act = w.block("if (o < n_out)");
            w.line("#pragma unroll 4");
            auto splits = w.block("for (unsigned s = ty; s < gridDim.y; s += {})", G);
            w.line("#pragma unroll");
            w.line(
                "for (int j = 0; j < {}; ++j) acc[j] = fz_combine(acc[j], fz_load_partial(&partials[(long long)s * "
                "n_out + o + j]));",
                V);
          }
          write_row_groups_meet(w, rows, false);
          auto act = w.block("if ({})", owner);
          w.line("#pragma unroll");
          w.line("for (int j = 0; j < {}; ++j) {{ a = acc[j]; {} }}", V, store_j);
          return;
        }
        auto act = w.block("if ({})", owner);
        w.line("#pragma unroll");
        w.line("for (int j = 0; j < {}; ++j) acc[j] = fz_identity();", V);
        w.line("// The lanes' loads of one split are independent: {} in flight per step.", V);
        w.line("#pragma unroll 8");
        {
          auto splits = w.block("for (unsigned s = 0; s < gridDim.y; ++s)");
          w.line("#pragma unroll");
          w.line(
              "for (int j = 0; j < {}; ++j) acc[j] = fz_combine(acc[j], fz_load_partial(&partials[(long long)s * n_out "
              "+ o + j]));",
              V);
        }
        w.line("#pragma unroll");
        w.line("for (int j = 0; j < {}; ++j) {{ a = acc[j]; {} }}", V, store_j);
      });
    }
  } else if (!v.split) {
    w.line("if (o < n_out) {}", store);
  } else {
    w.line("// Blocks of one output tile meet here: the last to arrive combines every block's partial in order.");
    w.line("// Partials split-major (neighbouring outputs side by side): written and read back in whole lines.");
    w.line("if (o < n_out) partials[(long long)blockIdx.y * n_out + o] = a;");
    write_last_block_combines(w, [&] {
      auto act = w.block("if (o < n_out)");
      w.line("a = fz_identity();");
      w.line("#pragma unroll 8");
      w.line(
          "for (unsigned s = 0; s < gridDim.y; ++s) a = fz_combine(a, fz_load_partial(&partials[(long long)s * n_out + "
          "o]));");
      w.line("{}", store);
    });
  }
  }
}

}  // namespace fusion::codegen
