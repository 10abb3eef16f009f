// SPDX-License-Identifier: Apache-2.0
// Which math after a matrix product cuBLASLt runs inside the product's own call (its epilogues), decided
// from the graph of the step that reads the product: a sum of the product and up to two more arrays (a
// bias vector, a residual C added with beta = 1), then optionally ReLU (`maximum(x, 0)`) or GELU's tanh
// form, all in one dtype: the product's, or float32 with the 16-bit product cast to it (cuBLASLt writes
// a float32 result of float16 or bfloat16 operands). The partition marks a product step whose next step
// is such an epilogue (schedule/partition); the run time then asks choose_epilogue what only the arrays
// can say (which is the bias, which the residual; the scalar zero) before it merges the two steps.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fusion/ir.hpp"
#include "fusion/shape.hpp"

namespace fusion::detail {

enum class Activation : std::uint8_t { none, relu, gelu_tanh };

struct EpilogueMatch {
  bool found = false;
  Activation activation = Activation::none;
  std::vector<std::uint32_t> terms;  // input slots summed before the activation (1 to 3, distinct)
  std::uint32_t zero = 0;            // scalar slot that must hold 0 (relu)
  DType dtype = DType::float32;      // the result's
  std::uint32_t cast_term = ir::kNone;  // the term read through a cast from 16-bit floats (it must be the product)
};

/// The epilogue step graph `g` is, if any (found false otherwise).
EpilogueMatch match_epilogue(const ir::Graph& g);

/// What the run time knows of the array behind one term of a matched epilogue.
struct TermArray {
  bool is_product = false;  // the product's temporary
  bool is_temporary = false;  // another step's temporary
  Shape shape;
  DType dtype = DType::float32;
  bool c_ordered = false, aligned_16 = false;
};
/// Which terms cuBLASLt takes as the bias and the residual (-1: none).
struct EpilogueTerms {
  int bias = -1, residual = -1;
};
/// The terms of `m` (its `terms`, in order) as cuBLASLt's bias (a C-ordered, 16-byte aligned vector of the
/// product's last extent) and residual (a C-ordered array of its shape), both of the result's dtype; the
/// product once, read through the cast if there is one; `product_shape` not empty and `k` (the inner
/// extent) not 0; `zero_is_zero` for a ReLU's scalar. Nullopt where the call cannot take them.
std::optional<EpilogueTerms> choose_epilogue(const EpilogueMatch& m, const std::vector<TermArray>& terms,
                                             const Shape& product_shape, std::int64_t k, bool zero_is_zero);

/// An operand of a product as cuBLASLt takes it: an array (node `input`), times a scalar (node `scalar`,
/// or kNone) that the call folds into its alpha instead of a kernel scaling the array first.
struct ProductOperand {
  std::uint32_t input = ir::kNone, scalar = ir::kNone;
};
/// Node `i` of `g` as such an operand: an input, or an input times a scalar of its dtype (either order);
/// `input` kNone for anything else (computed first, into a temporary).
ProductOperand product_operand(const ir::Graph& g, std::uint32_t i);

/// What runs in the call, for plans and messages: "bias", "residual+bias+gelu_tanh", ...
std::string epilogue_name(Activation a, bool bias, bool residual);

}  // namespace fusion::detail
