// SPDX-License-Identifier: Apache-2.0
// The product runner the plan's product steps call (the front end's fz::matmul builds an expression node).
#pragma once
#include "fusion/array_base.hpp"

namespace fusion::detail {

/// `a @ b` written into `out`: operands of one floating dtype, `out` C-ordered of the product's shape and
/// dtype, not overlapping them. On the current stream.
void matmul_into(const ArrayBase& a, const ArrayBase& b, ArrayBase& out);

}  // namespace fusion::detail
