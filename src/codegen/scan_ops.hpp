// SPDX-License-Identifier: Apache-2.0
// A scan's operator in generated source: its identity, and its step fz_combine(a, b) (with the exponential
// and logarithms logcumsumexp's kernels call, fz_lse_*).
#pragma once
#include <string>

#include "codegen/source_writer.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

/// The accumulator's value with no element: combine(identity, x) is x exactly (-0 for float sums, so that a
/// running sum of -0 stays -0, as NumPy's).
std::string scan_identity(ir::Op op, DType d);

/// Writes fz_combine(a, b) for scan `op` of result dtype `rd` (`a` holding the earlier elements), and for
/// logcumsumexp the fz_lse_exp, fz_lse_log and fz_lse_log1p it and the kernels use.
void write_scan_step(SourceWriter& w, ir::Op op, DType rd);

}  // namespace fusion::codegen
