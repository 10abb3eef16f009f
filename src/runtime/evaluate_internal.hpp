// SPDX-License-Identifier: Apache-2.0
#pragma once
#include "fusion/evaluate.hpp"

namespace fusion::detail {
/// Writes `src` into `dst` (same shape or broadcastable), or into a new array when `dst` has no memory.
void copy_array(const ArrayBase& src, ArrayBase& dst, AssignMode mode);
}  // namespace fusion::detail
