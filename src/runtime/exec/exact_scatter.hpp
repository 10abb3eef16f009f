// SPDX-License-Identifier: Apache-2.0
// fz::Deterministic's floating scatter_add (exact_scatter.cpp): exact sums beside the target, then rounded in.
#pragma once
#include <cstdint>
#include <memory>

#include "fusion/array_base.hpp"
#include "runtime/cuda/stream_state.hpp"

namespace fusion::detail {

struct ExactSums {
  int words = 0;               ///< planes of `span` words (codegen::exact_sum_words)
  std::int64_t lowest = 0;     ///< the target's lowest element offset (<= 0: negative strides reach below)
  std::int64_t span = 0;       ///< element offsets from the lowest to the highest
  ArrayBase all{DType::int64}; ///< span * words words, zeroed on the stream
  ArrayBase at_target{DType::int64};  ///< from the target's first element's word on: the scatter kernel's output
};

/// Zeroed exact sums for every element `target` spans.
ExactSums begin_exact_sums(const ArrayBase& target, int words, const std::shared_ptr<StreamState>& stream);

/// Rounds each element's old value plus its sum into `target` (where something was added).
void finish_exact_sums(const ExactSums& s, ArrayBase& target, const std::shared_ptr<StreamState>& stream);

}  // namespace fusion::detail
