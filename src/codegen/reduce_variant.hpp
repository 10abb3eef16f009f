// SPDX-License-Identifier: Apache-2.0
// The layout variant of a reduction kernel: how threads map onto outputs and reduced elements. As for
// elementwise kernels, extents, strides and the split size are kernel arguments, never baked in.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "common/hash.hpp"
#include "codegen/variant.hpp"

namespace fusion::codegen {

enum class ReduceMode : std::uint8_t {
  inner,  ///< the reduced elements are the fast-moving ones: a group of threads (warp or block) per output
  outer,  ///< the kept elements are: one thread per output, neighbouring threads read neighbouring outputs
};

struct ReduceVariant {
  ReduceMode mode = ReduceMode::inner;
  std::uint16_t group = 256;       ///< inner mode: threads per output, 32 (a warp) or 256 (the block)
  std::uint8_t vector_width = 1;   ///< elements per 16-byte load: inner mode along the reduced axis, outer
                                   ///< mode across neighbouring outputs (kept rank 1, unit strides)
  bool split = false;              ///< several blocks share an output; the last to finish combines them
  /// Outer mode: the block's threads form `row_groups` groups of kBlockThreads / row_groups, each group
  /// over the same outputs and every row_groups-th reduced row, combined through shared memory; so a
  /// block covers few columns but many rows, and fewer blocks share (split) each column. 1: a thread per
  /// output and column of the block.
  std::uint8_t row_groups = 1;
  std::uint8_t min_blocks = 0;     ///< blocks per SM the registers must allow (`__launch_bounds__`); 0: unstated
  std::uint8_t unroll = 0;         ///< row groups: the row loop's unrolling; 0: 4
  /// Row groups: > 1, the blocks of a column tile (blockIdx.y, one row range each) are a cluster of this many, rank 0
  /// combining their results through distributed shared memory (no split partials)
  std::uint8_t cluster = 1;
  std::uint8_t rank_kept = 0;      ///< dimensions of the output index space after collapsing
  std::uint8_t rank_reduced = 0;   ///< dimensions of the reduced index space after collapsing
  DType out_dtype = DType::float32;
  std::uint8_t n_outputs = 1;      ///< several: a multi-reduction (sibling reductions sharing one layout)
  std::array<DType, kMaxOutputs> out_dtypes{};  ///< per output when n_outputs > 1
  std::uint8_t n_params = 0;
  std::array<std::uint8_t, kMaxParams> param_of_slot{};
  std::array<bool, kMaxParams> broadcast{};  ///< one element for all (loaded once)

  bool operator==(const ReduceVariant&) const = default;
  void hash_into(StableHasher& h, std::uint32_t n_slots) const;
  std::string describe() const;
};

}  // namespace fusion::codegen
