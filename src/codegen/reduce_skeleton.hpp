// SPDX-License-Identifier: Apache-2.0
// The reduction kernel around an op: the thread layouts of a ReduceVariant (warp, block or thread per
// output, 16-byte vectors, split over blocks with a last-block combine). The op itself is device
// functions the caller writes first: fz_expr (one element), fz_identity, fz_lift, fz_combine.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "codegen/reduce_variant.hpp"
#include "codegen/source_writer.hpp"

namespace fusion::codegen {

/// Writes fz_shfl_down, fz_load_partial, fz_warp_reduce and fz_block_reduce for accumulator type
/// `acc` holding values of dtype `vd` (`arg`: the FzArg value-and-index pair of argmin/argmax).
void write_reduce_helpers(SourceWriter& fn, const std::string& acc, DType vd, bool arg);

struct ReduceSkeleton {
  std::string kernel_name;
  std::vector<DType> params;               ///< per array parameter (in0, in1, ...)
  std::string acc;                         ///< the accumulator type
  std::vector<std::string> scalar_params;  ///< "float s0", after the output pointer
  std::vector<std::string> scalar_args;    ///< "s0": passed to fz_expr after the elements
  std::string kernel_prep;                 ///< statements at the start of the kernel body
  /// The statement that writes output element `index` (of `out`) from the accumulator `a`.
  std::function<std::string(const std::string& index)> store;
};

/// Writes the layout structs, `functions` (the op's device functions and the helpers) and the kernel.
/// Kernel parameters, in order: the input arrays, the output, the scalars, n_out, n_red, chunk, divisor,
/// then the kept and reduced extents and, per non-broadcast input, its kept and reduced strides, the
/// output's kept strides, and for split kernels the partials and counters workspace.
void write_reduce_kernel(SourceWriter& w, const ReduceVariant& v, const ReduceSkeleton& s, const std::string& functions);

}  // namespace fusion::codegen
