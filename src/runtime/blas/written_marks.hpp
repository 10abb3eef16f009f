// SPDX-License-Identifier: Apache-2.0
// Telling compute-sanitizer's initcheck which memory a library kernel wrote.
#pragma once

#include "fusion/array_base.hpp"
#include <cuda.h>

namespace fusion::detail {

/// Marks every byte `out` spans as initialized for compute-sanitizer's initcheck, in stream order on `h`.
/// Some of cuBLASLt's Hopper kernels store their results with the Tensor Memory Accelerator, whose stores
/// initcheck does not see: without the mark every read of a product (an epilogue kernel's, a download)
/// is reported as a read of uninitialized memory, and the real reports drown. Outside the sanitizer this
/// is one NVTX call that returns at once (no tool is attached to receive it).
void mark_written_by_library(CUstream h, const ArrayBase& out);

}  // namespace fusion::detail
