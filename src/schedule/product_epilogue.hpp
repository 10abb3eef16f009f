// SPDX-License-Identifier: Apache-2.0
// Which math after a matrix product cuBLASLt runs inside the product's own call (its epilogues), decided
// from the graph of the step that reads the product: `p + bias`, `maximum(p + bias, 0)`, `maximum(p, 0)`,
// all in the product's dtype. The run time then checks what the graph cannot say (bias a vector along the
// last axis, the scalar zero, nothing else reading the product) before it merges the two steps.
#pragma once
#include <cstdint>

#include "fusion/ir.hpp"

namespace fusion::detail {

enum class EpilogueKind : std::uint8_t { none, bias, relu, relu_bias };

struct EpilogueMatch {
  EpilogueKind kind = EpilogueKind::none;
  std::uint32_t product = 0, bias = 0;  // input slots: the product's result, the bias (when there is one)
  std::uint32_t zero = 0;               // scalar slot that must hold 0 (relu)
  DType dtype = DType::float32;
};

/// The epilogue step graph `g` is, if any (kind none otherwise). Either input of `p + bias` may be the
/// product: `product` and `bias` are one reading; the caller swaps them if its temporary is the other.
EpilogueMatch match_epilogue(const ir::Graph& g);

/// "bias", "relu", "bias+relu" (for plans and messages).
const char* epilogue_name(EpilogueKind k);

}  // namespace fusion::detail
