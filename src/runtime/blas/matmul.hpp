// SPDX-License-Identifier: Apache-2.0
// The product runner the plan's product steps call (the front end's fz::matmul builds an expression node).
#pragma once
#include "fusion/array_base.hpp"
#include "schedule/product_epilogue.hpp"

namespace fusion::detail {

/// `a @ b` written into `out`: operands of one floating dtype, `out` C-ordered of the product's shape and
/// dtype, not overlapping them. On the current stream.
/// `epilogue` runs inside cuBLASLt's call: act(a @ b + residual + bias), `bias` a C-ordered vector of the
/// result's last extent and dtype, 16-byte aligned, `residual` (C, added with beta = 1) a C-ordered array
/// of the result's shape and dtype; either may be null.
struct Epilogue {
  Activation activation = Activation::none;
  const ArrayBase* bias = nullptr;
  const ArrayBase* residual = nullptr;
  bool any() const { return activation != Activation::none || bias || residual; }
};
/// `scale` multiplies the product (cuBLASLt's alpha: scalar factors of the operands, folded in).
/// False, with nothing launched, when cuBLASLt has no algorithm for the epilogue with these types.
[[nodiscard]] bool matmul_into(const ArrayBase& a, const ArrayBase& b, ArrayBase& out, Epilogue epilogue = {},
                               double scale = 1);

}  // namespace fusion::detail
