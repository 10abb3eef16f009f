// SPDX-License-Identifier: Apache-2.0
#include "schedule/product_epilogue.hpp"

namespace fusion::detail {

EpilogueMatch match_epilogue(const ir::Graph& g) {
  EpilogueMatch m;
  if (g.outputs.size() != 1) return m;
  const ir::Node& root = g.nodes[g.outputs[0]];
  const DType d = root.dtype;
  if (!is_floating(d)) return m;
  for (const ir::Node& n : g.nodes)  // one dtype throughout: no casts, no other math
    if (n.dtype != d) return m;
  auto is = [&](std::uint32_t i, ir::Op op) { return i != ir::kNone && g.nodes[i].op == op; };
  std::uint32_t x = g.outputs[0];
  bool relu = false;
  if (root.op == ir::Op::maximum && is(root.b, ir::Op::scalar)) {  // maximum(x, 0): NumPy's argument order
    relu = true;
    m.zero = g.nodes[root.b].slot;
    x = root.a;
  }
  const ir::Node& n = g.nodes[x];
  if (n.op == ir::Op::add && is(n.a, ir::Op::input) && is(n.b, ir::Op::input) && n.a != n.b) {
    m.kind = relu ? EpilogueKind::relu_bias : EpilogueKind::bias;
    m.product = g.nodes[n.a].slot;
    m.bias = g.nodes[n.b].slot;
  } else if (relu && n.op == ir::Op::input) {
    m.kind = EpilogueKind::relu;
    m.product = n.slot;
  } else {
    return m;
  }
  // nothing else in the graph: the nodes above and their leaves
  const std::size_t expected = m.kind == EpilogueKind::relu ? 3 : m.kind == EpilogueKind::bias ? 3 : 5;
  if (g.nodes.size() != expected) m.kind = EpilogueKind::none;
  m.dtype = d;
  return m;
}

const char* epilogue_name(EpilogueKind k) {
  switch (k) {
    case EpilogueKind::bias: return "bias";
    case EpilogueKind::relu: return "relu";
    case EpilogueKind::relu_bias: return "bias+relu";
    default: return "none";
  }
}

}  // namespace fusion::detail
