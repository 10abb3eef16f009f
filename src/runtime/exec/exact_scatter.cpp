// SPDX-License-Identifier: Apache-2.0
// fz::Deterministic's floating scatter_add: the scatter kernel adds into exact sums beside the target
// (codegen/exact_sum.hpp), and one more kernel rounds each element that received something into the target.
// The sums mirror the target's memory: each plane of words has a word for every element offset its view
// spans, so the scatter kernel addresses them with the target's own strides (a view that skips memory costs
// the words between).
#include "runtime/exec/exact_scatter.hpp"

#include <algorithm>

#include "codegen/exact_sum.hpp"
#include "runtime/compile/kernel_cache.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/exec/launch.hpp"

namespace fusion::detail {

ExactSums begin_exact_sums(const ArrayBase& target, int words, const std::shared_ptr<StreamState>& stream) {
  ExactSums s;
  s.words = words;
  std::int64_t hi = 0;
  for (int d = 0; d < target.ndim(); ++d) {
    const std::int64_t reach = target.strides()[d] * (target.shape()[d] - 1);
    (reach < 0 ? s.lowest : hi) += reach;
  }
  s.span = hi - s.lowest + 1;
  s.all = ArrayBase::make_empty(DType::int64, {s.span * words});
  FUSION_CU(cuMemsetD8Async, s.all.data_ptr(), 0, static_cast<std::size_t>(s.span * words) * 8, stream->handle);
  s.at_target = s.all.sliced({Slice{-s.lowest, std::nullopt, 1}});
  return s;
}

void finish_exact_sums(const ExactSums& s, ArrayBase& target, const std::shared_ptr<StreamState>& stream) {
  auto made = [](DType d) { return codegen::exact_sum_finish_kernel(d); };
  static const codegen::GeneratedKernel f16 = made(DType::float16), bf16 = made(DType::bfloat16),
                                        f32 = made(DType::float32), f64 = made(DType::float64);
  const DType d = target.dtype();
  const codegen::GeneratedKernel* k = d == DType::float16 ? &f16 : d == DType::bfloat16 ? &bf16 : d == DType::float32 ? &f32 : &f64;
  const LoadedKernel& f = load_kernel(*k, stream->device);
  const std::uint64_t lowest = target.data_ptr() + s.lowest * static_cast<std::int64_t>(itemsize(target.dtype()));
  const std::uint64_t ptrs[2] = {lowest, s.all.data_ptr()};
  LaunchArgs a;
  a.pointers = ptrs;
  a.count(codegen::Count::n) = s.span;
  launch_kernel(f.function, k->signature, a, Grid{blocks_for(s.span)}, *stream);
  const ArrayBase* read[1] = {&s.all};
  ArrayBase* written[1] = {&target};
  note_launch(read, written, stream);
}

}  // namespace fusion::detail
