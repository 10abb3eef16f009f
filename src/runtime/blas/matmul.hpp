// SPDX-License-Identifier: Apache-2.0
// The product runner the plan's product steps call (the front end's fz::matmul builds an expression node).
#pragma once
#include "fusion/array_base.hpp"
#include "schedule/product_epilogue.hpp"

namespace fusion::detail {

/// `a @ b` written into `out`: operands of one floating dtype, `out` C-ordered of the product's shape and
/// dtype, not overlapping them. On the current stream.
/// `epilogue` (bias, ReLU, bias+ReLU) runs inside cuBLASLt's call: `bias` a C-ordered vector of the
/// result's last extent and dtype, 16-byte aligned.
struct Epilogue {
  EpilogueKind kind = EpilogueKind::none;
  const ArrayBase* bias = nullptr;
};
void matmul_into(const ArrayBase& a, const ArrayBase& b, ArrayBase& out, Epilogue epilogue = {});

}  // namespace fusion::detail
