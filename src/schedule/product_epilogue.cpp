// SPDX-License-Identifier: Apache-2.0
#include "schedule/product_epilogue.hpp"

namespace fusion::detail {

EpilogueMatch match_epilogue(const ir::Graph& g) {
  EpilogueMatch m;
  if (g.outputs.size() != 1) return m;
  const ir::Node& root = g.nodes[g.outputs[0]];
  const DType d = root.dtype;
  if (!is_floating(d)) return m;
  for (const ir::Node& n : g.nodes)  // one dtype throughout: no casts
    if (n.dtype != d) return m;
  auto is = [&](std::uint32_t i, ir::Op op) { return i != ir::kNone && g.nodes[i].op == op; };
  std::uint32_t x = g.outputs[0];
  std::size_t activation_nodes = 0;
  if (root.op == ir::Op::maximum && is(root.b, ir::Op::scalar)) {  // maximum(x, 0): NumPy's argument order
    m.activation = Activation::relu;
    m.zero = g.nodes[root.b].slot;
    x = root.a, activation_nodes = 2;
  } else if (root.op == ir::Op::gelu_tanh) {
    m.activation = Activation::gelu_tanh;
    x = root.a, activation_nodes = 1;
  }
  // A tree of additions whose leaves are distinct inputs.
  std::size_t adds = 0;
  auto leaves = [&](auto&& self, std::uint32_t i) -> bool {
    const ir::Node& n = g.nodes[i];
    if (n.op == ir::Op::input) {
      for (std::uint32_t t : m.terms)
        if (t == n.slot) return false;
      m.terms.push_back(n.slot);
      return true;
    }
    ++adds;
    return n.op == ir::Op::add && self(self, n.a) && self(self, n.b);
  };
  if (!leaves(leaves, x) || m.terms.size() > 3) return m;
  if (m.terms.size() == 1 && m.activation == Activation::none) return m;  // a copy: nothing to merge
  // nothing else in the graph: the nodes above and their leaves
  m.found = g.nodes.size() == activation_nodes + adds + m.terms.size();
  m.dtype = d;
  return m;
}

std::string epilogue_name(Activation a, bool bias, bool residual) {
  std::string s;
  auto add = [&](const char* part) { s += s.empty() ? part : std::string("+") + part; };
  if (residual) add("residual");
  if (bias) add("bias");
  if (a == Activation::relu) add("relu");
  if (a == Activation::gelu_tanh) add("gelu_tanh");
  return s.empty() ? "none" : s;
}

}  // namespace fusion::detail
