// SPDX-License-Identifier: Apache-2.0
// A host reference for reductions: float64 (or exact wrapping integer) arithmetic over C-ordered
// values, in the element order NumPy defines (which matters for argmin/argmax ties and NaNs).
#pragma once
#include <vector>

#include "reference.hpp"

namespace test {

struct Reduced {
  std::vector<Scalar> values;     // one per output element, C order over the kept axes
  std::vector<double> magnitude;  // sum of |x| over each extent: the scale of a sum's rounding error
  std::int64_t count = 0;         // elements per extent
};

/// Reduction `op` (result dtype `result`) of `values` (dtype `in`, C order, `shape`) over the axes in `mask`.
Reduced reduce(fusion::ir::Op op, fusion::DType in, fusion::DType result, const std::vector<Scalar>& values,
               const fusion::Shape& shape, unsigned mask, double ddof = 0);

}  // namespace test
