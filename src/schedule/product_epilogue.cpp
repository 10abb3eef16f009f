// SPDX-License-Identifier: Apache-2.0
#include "schedule/product_epilogue.hpp"

namespace fusion::detail {

EpilogueMatch match_epilogue(const ir::Graph& g) {
  EpilogueMatch m;
  if (g.outputs.size() != 1) return m;
  const ir::Node& root = g.nodes[g.outputs[0]];
  const DType d = root.dtype;
  if (!is_floating(d)) return m;
  auto is = [&](std::uint32_t i, ir::Op op) { return i != ir::kNone && g.nodes[i].op == op; };
  std::uint32_t x = g.outputs[0];
  std::size_t activation_nodes = 0;
  if (root.op == ir::Op::maximum && is(root.b, ir::Op::scalar) && g.nodes[root.b].dtype == d) {  // maximum(x, 0)
    m.activation = Activation::relu;
    m.zero = g.nodes[root.b].slot;
    x = root.a, activation_nodes = 2;
  } else if (root.op == ir::Op::gelu_tanh) {
    m.activation = Activation::gelu_tanh;
    x = root.a, activation_nodes = 1;
  }
  // A tree of additions in the result's dtype whose leaves are distinct inputs of that dtype, or one
  // 16-bit input cast to float32.
  std::size_t inner = 0;
  auto leaves = [&](auto&& self, std::uint32_t i) -> bool {
    const ir::Node& n = g.nodes[i];
    if (n.dtype != d) return false;
    std::uint32_t leaf = i;
    if (n.op == ir::Op::cast && d == DType::float32 && is(n.a, ir::Op::input) && is_16bit_float(g.nodes[n.a].dtype)) {
      if (m.cast_term != ir::kNone) return false;
      leaf = n.a, m.cast_term = g.nodes[n.a].slot, ++inner;
    } else if (n.op != ir::Op::input) {
      ++inner;
      return n.op == ir::Op::add && self(self, n.a) && self(self, n.b);
    }
    for (std::uint32_t t : m.terms)
      if (t == g.nodes[leaf].slot) return false;
    m.terms.push_back(g.nodes[leaf].slot);
    return true;
  };
  if (!leaves(leaves, x) || m.terms.size() > 3) return m;
  // a copy in the product's own dtype has nothing to merge (a cast alone does: the result written as float32)
  if (m.terms.size() == 1 && m.activation == Activation::none && m.cast_term == ir::kNone) return m;
  // nothing else in the graph: the nodes above and their leaves
  m.found = g.nodes.size() == activation_nodes + inner + m.terms.size();
  m.dtype = d;
  return m;
}

std::optional<EpilogueTerms> choose_epilogue(const EpilogueMatch& m, const std::vector<TermArray>& terms,
                                             const Shape& product_shape, std::int64_t k, bool zero_is_zero) {
  if (!m.found || terms.size() != m.terms.size() || product_shape.empty() || k == 0) return {};
  if (m.activation == Activation::relu && !zero_is_zero) return {};
  EpilogueTerms e;
  int products = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const TermArray& x = terms[i];
    const bool cast = m.terms[i] == m.cast_term;
    if (m.cast_term != ir::kNone && x.is_product != cast) return {};  // only the product is cast
    const bool usable = x.c_ordered && x.dtype == m.dtype;
    if (x.is_product) ++products;
    else if (x.is_temporary) return {};
    else if (e.bias < 0 && usable && x.aligned_16 && x.shape.size() == 1 && x.shape[0] == product_shape[product_shape.size() - 1])
      e.bias = static_cast<int>(i);
    else if (e.residual < 0 && usable && x.shape == product_shape)
      e.residual = static_cast<int>(i);
    else
      return {};
  }
  if (products != 1) return {};
  return e;
}

ProductOperand product_operand(const ir::Graph& g, std::uint32_t i) {
  const ir::Node& n = g.nodes[i];
  if (n.op == ir::Op::input) return {i, ir::kNone};
  if (n.op != ir::Op::mul || !is_floating(n.dtype)) return {};
  for (auto [x, s] : {std::pair{n.a, n.b}, std::pair{n.b, n.a}})
    if (g.nodes[x].op == ir::Op::input && g.nodes[s].op == ir::Op::scalar && g.nodes[x].dtype == n.dtype &&
        g.nodes[s].dtype == n.dtype)
      return {x, s};
  return {};
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
