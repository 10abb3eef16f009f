// SPDX-License-Identifier: Apache-2.0
// The launch of one reduction kernel laid out by analyze_reduction (reduce_layout.hpp), shared by fused
// reductions and ReductionKernel: arguments packed by the kernel's signature, the split workspace.
#pragma once
#include <cuda.h>

#include <memory>
#include <span>

#include "codegen/signature.hpp"
#include "schedule/reduce_layout.hpp"

namespace fusion::detail {

struct StreamState;

/// Launches a kernel written by write_reduce_kernel (its signature `sig`); `scalars` by scalar index.
/// (`outs`: one output, or a multi-reduction's several with equal kept strides.)
void launch_reduction(CUfunction f, const codegen::KernelSignature& sig, ReduceLayout& L,
                      std::span<const ScalarArg> scalars, std::span<const ArrayBase* const> outs,
                      const std::shared_ptr<StreamState>& stream);

}  // namespace fusion::detail
