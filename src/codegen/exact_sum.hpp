// SPDX-License-Identifier: Apache-2.0
// Exact sums for a deterministic floating fz::index_add (fz::Deterministic). Each target element owns a set
// of 64-bit words (in planes: word k of every element together): the fixed-point digits of its sum, counted from the dtype's smallest subnormal, and a word of
// flags for infinities and NaN. Every finite value is a whole number of digits, so adding values is integer
// addition: exact, and the same in any order the atomics happen to run. A second kernel adds each element's
// old value and rounds once (correctly, the last rounding aside for subnormal and 16-bit results).
#pragma once
#include "codegen/generated_kernel.hpp"
#include "fusion/dtype.hpp"

namespace fusion::codegen {

/// The 64-bit words per target element of dtype `d` (float32 and the 16-bit floats sum as float: 9 digits and
/// the flags; float64: 66 digits and the flags). 0 for dtypes whose sums are exact already (integers).
int exact_sum_words(DType d);

/// The device functions: fz_scatter_exact (the atomic add of a value into an element's words, in global or
/// shared memory) and what the finishing kernel uses.
const char* exact_sum_source();

/// The kernel that finishes the sums into a target of dtype `d`: for each of `n` (Count::n) elements whose
/// words are not all zero, target[p] = round(target[p] + sum). Pointers: 0 the target at its lowest element,
/// 1 the words (exact_sum_words(d) planes of `n`, from that element on).
GeneratedKernel exact_sum_finish_kernel(DType d);

}  // namespace fusion::codegen
