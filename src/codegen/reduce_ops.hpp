// SPDX-License-Identifier: Apache-2.0
// How each reduction op is spelled in CUDA, for every kernel that reduces (fused reductions, layer
// kernels, ReductionKernel): its accumulator, identity, one-element lift, combine, warp shuffle, the
// load of a partial another block wrote, and the final value. One place, so the kernels agree.
#pragma once
#include <string>

#include "fusion/ir.hpp"

namespace fusion::codegen {

struct ReduceOpSpelling {
  std::string acc;           ///< the accumulator type ("float", "FzArg<float>", "FzWelford<float>")
  std::string identity;      ///< an expression: the accumulator of no elements
  std::string lift;          ///< an expression of `x` (one value) and `r` (its index in the reduced range)
  std::string combine;       ///< a function body of `a` and `b`, where `a` holds the earlier elements
  std::string shuffle;       ///< an expression: `a` moved down a warp by `d` lanes
  std::string from_lane0;    ///< an expression: `a` of lane `fz_lane0` (a variable the caller defines), in every lane
  std::string load_partial;  ///< an expression: the accumulator at pointer `p`, bypassing L1
  std::string result;        ///< an expression of `a` and `divisor`: the reduced value (value dtype)
  std::string value;         ///< the type of one value `x` (what lift takes)
  /// A function body of `a`, `x` and `r`: `a` with one more element. Empty: combine(a, lift(x, r)).
  /// A thread adds its elements with it, then settles `a` before combining it with other threads'.
  std::string step;
  /// A function body of `a`: the accumulator ready to combine (a no-op for most ops; see var).
  std::string settle = "return a;";
};

/// The spelling of reduction `op` over values of dtype `vd` (its operand's dtype).
ReduceOpSpelling reduce_op_spelling(ir::Op op, DType vd);

/// The definition the accumulator of `op` needs (FzArg, FzWelford), or "": written once per kernel.
std::string accumulator_struct(ir::Op op);

/// Bytes of one accumulator of `op` over values of dtype `vd` (a partial in the split workspace).
std::size_t accumulator_size(ir::Op op, DType vd);

}  // namespace fusion::codegen
