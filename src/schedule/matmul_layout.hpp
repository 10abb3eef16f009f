// SPDX-License-Identifier: Apache-2.0
// How a matrix product's operands reach cuBLASLt, decided from shapes and strides alone (no GPU): NumPy's
// matmul rules (1-D operands promoted and squeezed, batch axes broadcast), and each operand's memory
// taken as it is where a (possibly transposed) matrix layout can describe it, else copied.
//
// cuBLASLt is column-major and fusion row-major: C = A·B (row-major, m×n) is computed as Cᵀ = Bᵀ·Aᵀ, whose
// column-major operands are B's and A's memory as they lie. cuBLASLt's first operand is therefore ours B
// (`first`), its second ours A (`second`); a row-major operand needs no transpose flag, a column-major one
// (a transposed view) takes one.
#pragma once
#include <cstdint>
#include <vector>

#include "fusion/shape.hpp"

namespace fusion::detail {

/// One operand as cuBLASLt's matrix layout sees it: op(matrix) is what enters the product.
struct BlasMatrix {
  bool transpose = false;  // CUBLAS_OP_T
  std::int64_t rows = 0, cols = 0, ld = 0;  // the column-major matrix in memory (before the transpose flag)
  std::int64_t batch_stride = 0;           // elements between consecutive batch items (0: broadcast)
};

struct MatmulLayout {
  Shape out_shape;             // NumPy's result shape
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;      // items of one strided-batched call (the innermost batch axes, collapsed)
  Shape outer_shape;           // batch axes outside it, one call each (empty: a single call)
  Strides outer_a, outer_b, outer_out;  // element strides of those axes per operand
  BlasMatrix first, second, out;  // cuBLASLt's A (ours b), B (ours a) and D (the contiguous result)
  bool copy_a = false, copy_b = false;  // an operand no layout describes: copy it C-ordered, then plan again
};

/// The shape of `a @ b` (the same errors as matmul_layout).
Shape matmul_shape(const Shape& a, const Shape& b);

/// The layout of `a @ b` (element strides, as ArrayBase holds them). ShapeError for 0-d operands, inner
/// dimensions that differ or batch axes that do not broadcast, naming both shapes.
MatmulLayout matmul_layout(const Shape& a_shape, const Strides& a_strides, const Shape& b_shape,
                           const Strides& b_strides);

}  // namespace fusion::detail
