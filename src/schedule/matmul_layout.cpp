// SPDX-License-Identifier: Apache-2.0
#include "schedule/matmul_layout.hpp"

#include <fmt/format.h>

#include "fusion/error.hpp"

namespace fusion::detail {
namespace {

/// `matrix` (R×C, strides sr, sc) as the column-major matrix cuBLASLt reads for its transpose: a row-major
/// matrix's memory is its transpose as it lies (no flag); a column-major one is itself (flag set). False
/// when neither describes it (broadcast or gapped inner axes, negative strides).
bool as_transposed(std::int64_t R, std::int64_t C, std::int64_t sr, std::int64_t sc, BlasMatrix& m) {
  // An axis of extent 1 has no stride that matters: give it the one that fits.
  if (C == 1) sc = 1;
  if (R == 1) sr = C;
  if (sc == 1 && sr >= C && sr > 0) {  // row-major: memory is the C×R column-major transpose
    m = {false, C, R, sr, 0};
    return true;
  }
  if ((sr == 1 || R == 1) && sc >= R && sc > 0) {  // column-major (a transposed view): memory is R×C, transpose it
    m = {true, R, C, sc, 0};
    return true;
  }
  return false;
}

}  // namespace

MatmulLayout matmul_layout(const Shape& a_shape, const Strides& a_strides, const Shape& b_shape,
                           const Strides& b_strides) {
  auto names = [&] { return fmt::format("matmul: shapes {} and {}", to_string(a_shape), to_string(b_shape)); };
  if (a_shape.empty() || b_shape.empty())
    throw ShapeError(names() + ": a 0-d operand has no matrix product (multiply by the scalar instead)");
  // NumPy: a 1-D a is a row (1, k), a 1-D b a column (k, 1); the added axis leaves the result.
  Shape as = a_shape, bs = b_shape;
  Strides ast = a_strides, bst = b_strides;
  const bool a_vector = as.size() == 1, b_vector = bs.size() == 1;
  if (a_vector) as.insert(0, 1), ast.insert(0, 0);
  if (b_vector) bs.push_back(1), bst.push_back(0);
  const int ra = as.size(), rb = bs.size();
  MatmulLayout L;
  L.m = as[ra - 2];
  L.k = as[ra - 1];
  L.n = bs[rb - 1];
  if (bs[rb - 2] != L.k)
    throw ShapeError(fmt::format("{} do not line up: a's last axis ({}) must equal b's {} ({})", names(), L.k,
                                 b_vector ? "only axis" : "second to last", bs[rb - 2]));
  // Batch axes broadcast as NumPy's do; an operand's broadcast axes get stride 0.
  Shape batch;
  try {
    batch = broadcast_shapes(Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2));
  } catch (const ShapeError&) {
    throw ShapeError(fmt::format("{}: the batch axes {} and {} do not broadcast", names(),
                                 to_string(Shape(as.begin(), as.end() - 2)), to_string(Shape(bs.begin(), bs.end() - 2))));
  }
  const int nb = batch.size();
  auto batch_strides = [&](const Shape& s, const Strides& st) {
    Strides r;
    r.resize(nb, 0);
    const int own = s.size() - 2;
    for (int i = 0; i < own; ++i)
      if (s[i] != 1) r[nb - own + i] = st[i];
    return r;
  };
  const Strides sa = batch_strides(as, ast), sb = batch_strides(bs, bst);
  Strides so;  // the result is C-ordered: (batch..., m, n)
  so.resize(nb, 0);
  for (int i = nb - 1; i >= 0; --i) so[i] = i == nb - 1 ? L.m * L.n : so[i + 1] * batch[i + 1];
  // The result's shape: the batch axes, then m and n unless an operand was a vector.
  L.out_shape = batch;
  if (!a_vector) L.out_shape.push_back(L.m);
  if (!b_vector) L.out_shape.push_back(L.n);
  // The innermost batch axes that every operand walks with one stride become one strided batch.
  int inner = nb;  // batch axes [inner, nb) form the strided batch
  if (nb > 0) {
    inner = nb - 1;
    while (inner > 0) {
      const int i = inner - 1;
      auto joins = [&](const Strides& st) { return st[i] == st[i + 1] * batch[i + 1]; };
      if (!(joins(sa) && joins(sb) && joins(so))) break;
      --inner;
    }
  }
  for (int i = inner; i < nb; ++i) L.batch *= batch[i];
  for (int i = 0; i < inner; ++i) {
    L.outer_shape.push_back(batch[i]);
    L.outer_a.push_back(sa[i]);
    L.outer_b.push_back(sb[i]);
    L.outer_out.push_back(so[i]);
  }
  L.copy_a = !as_transposed(L.m, L.k, ast[ra - 2], ast[ra - 1], L.second);
  L.copy_b = !as_transposed(L.k, L.n, bst[rb - 2], bst[rb - 1], L.first);
  L.second.batch_stride = nb > 0 ? sa[nb - 1] : 0;
  L.first.batch_stride = nb > 0 ? sb[nb - 1] : 0;
  L.out = {false, L.n, L.m, L.n, nb > 0 ? so[nb - 1] : 0};
  return L;
}

Shape matmul_shape(const Shape& a, const Shape& b) {
  return matmul_layout(a, contiguous_strides(a), b, contiguous_strides(b)).out_shape;
}

}  // namespace fusion::detail
