// SPDX-License-Identifier: Apache-2.0
// A host interpreter of the IR: floats in double, integers exactly with the dtype's wrap-around, and
// NumPy's definitions for every op. GPU results are compared against it.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "fusion/fusion.hpp"

namespace test {

/// One element of any dtype: `f` for floats, `i` (two's complement bits) for integers and bool.
struct Scalar {
  double f = 0;
  std::int64_t i = 0;
};

/// Element `k` of each input slot and each scalar slot -> the graph's output element.
Scalar interpret(const fusion::ir::Graph& g, const std::vector<Scalar>& inputs, const std::vector<Scalar>& scalars,
                 std::int64_t index);

/// One node on its operands' values (of dtype `operand_dtype`), rounded as the GPU keeps it. Sets
/// `*undefined` where NumPy and C++ leave the result undefined (a float converted to an integer it does
/// not fit). An input or scalar node takes its value in `a`.
Scalar apply(const fusion::ir::Node& n, fusion::DType operand_dtype, Scalar a, Scalar b, Scalar c, std::int64_t index,
             bool* undefined = nullptr);
/// The dtype a node's operands have (its own for leaves; the branches' for where).
fusion::DType operand_dtype_of(const fusion::ir::Graph& g, const fusion::ir::Node& n);

/// The value of `s` (of dtype d) as a double, for comparisons.
double to_double(Scalar s, fusion::DType d);
/// Wraps an integer into dtype d's range (sign-extends or masks); rounds floats to d's precision.
Scalar normalize(Scalar s, fusion::DType d);

/// Raw element bytes <-> Scalar, for arrays of any dtype.
std::vector<unsigned char> to_bytes(const std::vector<Scalar>& v, fusion::DType d);
std::vector<Scalar> from_bytes(const std::vector<unsigned char>& b, fusion::DType d);

/// A device array of dtype d holding `values` (normalized to d).
fusion::ArrayBase upload(const std::vector<Scalar>& values, fusion::DType d, const fusion::Shape& shape);
/// A device array of dtype d filled with a poison pattern (all bits set: NaN for floats, -1 or max for ints).
fusion::ArrayBase poisoned(fusion::DType d, const fusion::Shape& shape);
std::vector<Scalar> download(const fusion::ArrayBase& a);

}  // namespace test
