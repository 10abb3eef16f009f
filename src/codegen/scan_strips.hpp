// SPDX-License-Identifier: Apache-2.0
// A scan along an axis that is not the contiguous one (`cumsum(x, 0)` of a C-ordered matrix), in one pass:
// a block per strip of 32 neighbouring rows (a lane each: every load and store of a warp touches 32
// neighbours, coalesced), walking the axis in tiles. In a tile each warp takes a run of `items`
// consecutive positions, each thread scanning its run in registers; the warps' totals meet in shared
// memory, and each thread starts its run from the strip's carry and the runs of the warps before it.
// (Where the rows are too few for a strip per SM, ScanVariant::chunked splits the axis over threads
// instead, in two kernels.)
#pragma once
#include <functional>
#include <string>

#include "codegen/scan_tiles.hpp"

namespace fusion::codegen {

/// The body of a strip kernel (ScanVariant::strips), inside its braces. `decode(row, prefix, out)`
/// declares each operand's offset of row `row`; `stored(x)` converts an accumulator for `out`.
void write_strip_scan(SourceWriter& w, const ScanVariant& v, const std::string& acc, const std::string& identity,
                      const ElementCall& call, const std::function<void(const char*, const char*, bool)>& decode,
                      const std::function<std::string(const std::string&)>& stored);

}  // namespace fusion::codegen
