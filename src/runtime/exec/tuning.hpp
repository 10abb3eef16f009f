// SPDX-License-Identifier: Apache-2.0
// Layout thresholds a benchmark may override to measure alternatives in one run (fusion-bench --tune).
// Every choice they steer is part of the kernel's variant, so kernel names and caches stay exact.
// Not an API: programs get the defaults, which come from measurements on an H100 (bench/results).
#pragma once
#include <cstdint>
#include <string_view>

#include "codegen/launch_shape.hpp"

namespace fusion::detail {

struct Tuning {
  std::int64_t cluster_slice = 16384;  ///< elements of a row one block of a cluster keeps (layer kernels)
  int max_cluster = 8;                 ///< blocks per cluster at most (8: the portable cluster size)
  int layer_block = 0;                 ///< threads per row of a long-row layer kernel (0: the layout's choice)
  int layer_fit_blocks = 0;            ///< 1: cap a long-row layer kernel's registers so as many blocks fit an SM
                                       ///< as its shared memory allows (__launch_bounds__' second argument)
  /// vectors each thread streams when a reduction over two dimensions splits its rows over blocks (a batch
  /// norm's statistics)
  int row_split_accesses = codegen::kLongRowAccesses;
  int reduce_blocks_per_sm = codegen::kBlocksPerSm;  ///< blocks per SM a reduction's split aims at
};

/// The process's tuning (defaults unless a benchmark changed them).
Tuning& tuning();

/// Sets one field from "name=value"; throws fusion::Error naming the fields for an unknown one.
void set_tuning(std::string_view assignment);

}  // namespace fusion::detail
