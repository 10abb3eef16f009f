// SPDX-License-Identifier: Apache-2.0
// Layout of a scan call: the rows (every axis but the scanned one, collapsed where every operand allows),
// each operand's strides over them and along the axis, and whether long rows split into chunks.
#pragma once
#include <cstdint>

#include "codegen/scan_variant.hpp"
#include "codegen/target_device.hpp"
#include "fusion/array_base.hpp"
#include "fusion/evaluate.hpp"

namespace fusion::detail {

struct ScanLayout {
  codegen::ScanVariant v;
  const ArrayBase* params[codegen::kMaxParams];
  Shape kshape;                                 // the rows' extents (collapsed)
  Strides kst[codegen::kMaxParams + 1];         // per operand (the parameters, then the output) over the rows
  std::int64_t ast[codegen::kMaxParams + 1]{};  // ... and along the axis
  std::int64_t n_rows = 0, n = 0;               // rows, and the axis's extent
  std::int64_t chunk = 0, chunks = 1;           // elements per block's part of a row, parts per row
  std::int64_t resident_blocks = 0;             // (lookback) blocks launched: 8 per SM, pipelined those resident
  unsigned shared_bytes = 0;                    // dynamic shared memory per block (the pipelined kernel's two tiles)
};

/// The layout of scan call `c` (its graph: one scan of a prologue) writing `out` (of the scan's shape
/// `shape`) along `axis`: rows of the other axes, chunks over blocks when the rows are few and long.
void analyze_scan(const Call& c, const ArrayBase& out, const Shape& shape, int axis,
                  const codegen::TargetDevice& device, ScanLayout& L);

}  // namespace fusion::detail
