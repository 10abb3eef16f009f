// SPDX-License-Identifier: Apache-2.0
// A copy between arrays of any layout, for the memory layer's own needs (a view's contiguous copy, host data
// staged into a view). Through a view it takes a generated kernel, so the evaluator defines it
// (exec/evaluate.cpp): declared here, this layer needs nothing from the layers above it.
#pragma once
#include "fusion/array_base.hpp"
#include "fusion/evaluate.hpp"

namespace fusion::detail {

/// Writes `src` into `dst` (same shape or broadcastable), or into a new array when `dst` has no memory.
void copy_array(const ArrayBase& src, ArrayBase& dst, AssignMode mode);

}  // namespace fusion::detail
