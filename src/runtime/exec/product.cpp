// SPDX-License-Identifier: Apache-2.0
// A plan's matrix-product step: the partition gives every fz::matmul a step of its own whose graph is the
// product of two arrays (inputs or temporaries); cuBLASLt computes it (runtime/blas), and the fused code
// around it reads the result once.
#include <fmt/format.h>

#include <bit>

#include "fusion/error.hpp"
#include "fusion/matmul.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "schedule/call_graph.hpp"
#include "runtime/blas/matmul.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "schedule/layout.hpp"
#include "schedule/matmul_layout.hpp"

namespace fusion::detail {

ProductOperands product_operands(const Call& c) {
  const ir::Graph& g = graph_of(c);
  const ir::Node& n = g.nodes[g.outputs.at(0)];
  const ProductOperand x = product_operand(g, n.a), y = product_operand(g, n.b);
  if (!ir::is_product(n.op) || x.input == ir::kNone || y.input == ir::kNone)
    throw Error("internal: a product step is the product of two arrays, each perhaps times a scalar");
  ProductOperands o{c.arrays[g.nodes[x.input].slot], c.arrays[g.nodes[y.input].slot]};
  for (std::uint32_t s : {x.scalar, y.scalar})
    if (s != ir::kNone) o.scale *= floating_value(c.scalars[g.nodes[s].slot]);
  return o;
}

double floating_value(const ScalarArg& s) {
  if (itemsize(dtype_info(s.dtype).compute) == 8) return std::bit_cast<double>(s.bits);
  return std::bit_cast<float>(static_cast<std::uint32_t>(s.bits));
}

Shape product_output_shape(const Call& c) {
  const ProductOperands o = product_operands(c);
  return matmul_shape(o.a->shape(), o.b->shape());
}

bool evaluate_product(const Call& c, ArrayBase& out, AssignMode mode, const Epilogue& e) {
  const auto [a, b, scale] = product_operands(c);
  const Shape shape = matmul_shape(a->shape(), b->shape());
  if (!prepare_output(c, out, mode, current_stream_state()->device, shape)) return true;
  // cuBLASLt writes the result in place when it can: the whole of a C-ordered output apart from the
  // operands. Else (a broadcast `+=`-style target, another layout, an operand's own memory) it is computed
  // aside and copied in.
  if (out.shape() == shape && out.is_contiguous() && !shares_memory(out, *a) && !shares_memory(out, *b) &&
      !(e.bias && shares_memory(out, *e.bias)) && !(e.residual && shares_memory(out, *e.residual))) {
    return matmul_into(*a, *b, out, e, scale);
  }
  ArrayBase aside = ArrayBase::make_empty(out.dtype(), shape);
  if (!matmul_into(*a, *b, aside, e, scale)) return false;
  copy_array(aside, out, AssignMode::into);
  return true;
}

KernelInfo inspect_product(const Call& c) {
  const auto [a, b, scale] = product_operands(c);
  KernelInfo info;
  info.name = "cublasLtMatmul";
  info.variant = describe_matmul(*a, *b, a->dtype());
  if (scale != 1) info.variant += fmt::format(", alpha = {} (the operands' scalar factors)", scale);
  info.source = fmt::format("// {} (a cuBLASLt call: no generated source)\n", info.variant);
  return info;
}

}  // namespace fusion::detail
