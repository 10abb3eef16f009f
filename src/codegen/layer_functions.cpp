// SPDX-License-Identifier: Apache-2.0
#include "codegen/layer_functions.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "codegen/launch_shape.hpp"
#include "codegen/reduce_skeleton.hpp"

namespace fusion::codegen {

void write_layer_reduction(SourceWriter& fn, std::size_t i, const ir::Graph& g, std::uint32_t node,
                           const ReduceOpSpelling& op, DType vd, int wave, int group, int cluster, SpellContext& ctx) {
  const ir::Node& rn = g.nodes[node];
  const std::string& Acc = op.acc;
  const std::string VT(compute_type(vd));
  const int G = group, C = cluster;
  fn.line("// reduction {}: {} (wave {})", i, ir::op_name(rn.op), wave);
  fn.line("__device__ __forceinline__ {} fz_identity{}() {{ return {}; }}", Acc, i, op.identity);
  fn.line("__device__ __forceinline__ {} fz_lift{}({} x, long long r) {{ return {}; }}", Acc, i, VT, op.lift);
  {
    auto f = fn.block("__device__ __forceinline__ {0} fz_combine{1}({0} a, {0} b)", Acc, i);
    fn.text(op.combine);
  }
  write_step_and_settle(fn, op, std::to_string(i));
  {
    auto f = fn.block(
        "// The group's accumulators combined in a fixed order; every thread of the group gets the result.\n"
        "__device__ __forceinline__ {0} fz_row_reduce{1}({0} a{2}{3})",
        Acc, i, G <= kWarpThreads ? "" : fmt::format(", {}* scratch", Acc),
        C > 1 ? fmt::format(", {}* slot", Acc) : "");
    fn.line("a = fz_settle{}(a);", i);
    fn.line("#pragma unroll");
    fn.line("for (int d = {}; d > 0; d >>= 1) a = fz_combine{}(a, {});", std::min(G, kWarpThreads) / 2, i,
            op.shuffle);
    if (G <= kWarpThreads) {
      fn.line("const int fz_lane0 = {};  // the group's first lane",
              G == kWarpThreads ? "0" : fmt::format("(threadIdx.x % 32) & ~{}", G - 1));
      fn.line("return {};", op.from_lane0);
    } else {
      // Every warp combines the warps' results as a shuffle tree (a few levels, not one long chain of
      // combines: a Welford combine divides) and takes lane 0's: the same order, so the same bits, in each.
      const int W = G / kWarpThreads;
      fn.line("if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = a;");
      fn.line("__syncthreads();");
      fn.line("a = threadIdx.x % 32 < {} ? scratch[threadIdx.x % 32] : fz_identity{}();", W, i);
      fn.line("#pragma unroll");
      fn.line("for (int d = {}; d > 0; d >>= 1) a = fz_combine{}(a, {});", W / 2, i, op.shuffle);
      fn.line("{{");
      fn.line("  const int fz_lane0 = 0;");
      fn.line("  a = {};", op.from_lane0);
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
  std::string result = op.result;
  if (compute_type(rn.dtype) != VT) result = spell(ir::Node{ir::Op::cast, rn.dtype, node}, vd, result, "", "", ctx);
  fn.line("__device__ __forceinline__ {} fz_result{}({} a, double divisor) {{ return {}; }}",
          compute_type(rn.dtype), i, Acc, result);
}

}  // namespace fusion::codegen
