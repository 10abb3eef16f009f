// SPDX-License-Identifier: Apache-2.0
// A plan's matrix-product step: the partition gives every fz::matmul a step of its own whose graph is the
// product of two arrays (inputs or temporaries); cuBLASLt computes it (runtime/blas), and the fused code
// around it reads the result once.
#include <fmt/format.h>

#include "fusion/error.hpp"
#include "fusion/matmul.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "schedule/call_graph.hpp"
#include "runtime/blas/matmul.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "schedule/layout.hpp"
#include "schedule/matmul_layout.hpp"

namespace fusion::detail {
namespace {

/// The step's two operands, checked to be what the partition makes: matmul(input 0, input 1).
std::pair<const ArrayBase*, const ArrayBase*> operands(const Call& c) {
  const ir::Graph& g = graph_of(c);
  const ir::Node& n = g.nodes[g.outputs.at(0)];
  if (!ir::is_product(n.op) || g.nodes[n.a].op != ir::Op::input || g.nodes[n.b].op != ir::Op::input)
    throw Error("internal: a product step is the product of two arrays");
  return {c.arrays[g.nodes[n.a].slot], c.arrays[g.nodes[n.b].slot]};
}

}  // namespace

Shape product_output_shape(const Call& c) {
  const auto [a, b] = operands(c);
  return matmul_shape(a->shape(), b->shape());
}

bool evaluate_product(const Call& c, ArrayBase& out, AssignMode mode, const Epilogue& e) {
  const auto [a, b] = operands(c);
  const Shape shape = matmul_shape(a->shape(), b->shape());
  if (!prepare_output(c, out, mode, current_stream_state()->device, shape)) return true;
  // cuBLASLt writes the result in place when it can: the whole of a C-ordered output apart from the
  // operands. Else (a broadcast `+=`-style target, another layout, an operand's own memory) it is computed
  // aside and copied in.
  if (out.shape() == shape && out.is_contiguous() && !shares_memory(out, *a) && !shares_memory(out, *b) &&
      !(e.bias && shares_memory(out, *e.bias)) && !(e.residual && shares_memory(out, *e.residual))) {
    return matmul_into(*a, *b, out, e);
  }
  ArrayBase aside = ArrayBase::make_empty(out.dtype(), shape);
  if (!matmul_into(*a, *b, aside, e)) return false;
  copy_array(aside, out, AssignMode::into);
  return true;
}

KernelInfo inspect_product(const Call& c) {
  const auto [a, b] = operands(c);
  KernelInfo info;
  info.name = "cublasLtMatmul";
  info.variant = describe_matmul(*a, *b, a->dtype());
  info.source = fmt::format("// {} (a cuBLASLt call: no generated source)\n", info.variant);
  return info;
}

}  // namespace fusion::detail
