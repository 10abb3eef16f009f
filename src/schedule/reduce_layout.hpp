// SPDX-License-Identifier: Apache-2.0
// The layout of one reduction kernel, shared by fused reductions and ReductionKernel: the reduced axes,
// the kept/reduced split with collapsed dimensions, the thread layout, the split workspace's size. Its
// launch is reduce_launch.hpp.
#pragma once
#include <functional>
#include <span>

#include "codegen/reduce_variant.hpp"
#include "codegen/target_device.hpp"
#include "fusion/evaluate.hpp"

namespace fusion::detail {


// The per-stream workspace of split reductions: one counter per output (or output tile), then partials.
inline constexpr std::size_t kMaxCounters = 4096;
inline constexpr std::size_t kCounterBytes = kMaxCounters * sizeof(unsigned);
inline constexpr std::size_t kPartialBytes = std::size_t{4} << 20;

struct Reduced {
  Shape in;          // the operand's (broadcast) shape
  unsigned mask = 0;
  Shape out;         // the result's shape
};
/// The reduced axes of an operand of shape `in`; a ShapeError names a bad or repeated axis.
Reduced reduced_shapes(const Shape& in, const ReduceArg& arg);

/// Splits the dimensions of `in` into kept and reduced ones (bit d of `mask`), merging neighbours within
/// each group that every operand walks as one and dropping extent-1 ones, so common cases become a 1-d by
/// 1-d problem. `st[k]` are operand k's strides over `in`; `kst(k)`/`rst(k)` receive its collapsed ones.
void split_kept_reduced(const Shape& in, unsigned mask, const Strides* st, int n_ops, Shape& kshape, Shape& rshape,
                        const std::function<Strides&(int)>& kst, const std::function<Strides&(int)>& rst);

/// The strides over `in` of a reduction result `out` (0 along the reduced axes, bits of `mask`); `out`
/// has in's rank (keepdims) or only the kept axes.
Strides result_strides(const ArrayBase& out, const Shape& in, unsigned mask);

struct ReduceLayout {
  codegen::ReduceVariant v;
  Shape kshape, rshape;    // collapsed kept and reduced extents
  const ArrayBase* params[codegen::kMaxParams];
  Strides kst[codegen::kMaxParams], rst[codegen::kMaxParams], kst_out;
  std::int64_t n_out = 1, n_red = 1, chunk = 0;
  std::int64_t blocks = 1, splits = 1;
  double divisor = 0;
  std::size_t acc_bytes = 0;   // one accumulator's bytes
  std::int64_t per_block = 1;  // outputs per block (before splitting)
  bool rows_split = false;     // rows of vectors split over blocks (sized by split_rows)
};

/// Fills `L` for reducing `L.params[0..np)` (set by the caller, with `L.v.param_of_slot`) into `out`:
/// accumulators of `acc_bytes` each, on `device`.
void analyze_reduction(int np, const ArrayBase& out, const Reduced& shapes, const ReduceArg& arg, std::size_t acc_bytes,
                       const codegen::TargetDevice& device, ReduceLayout& L);

/// Resizes a split reduction's blocks to one wave of those that fit an SM at the compiled kernel's
/// `registers` (the layout assumed codegen::kBlocksPerSm); the kernel stays the same.
void fit_split_to_kernel(ReduceLayout& L, int registers, const codegen::TargetDevice& device);

}  // namespace fusion::detail
