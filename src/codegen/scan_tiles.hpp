// SPDX-License-Identifier: Apache-2.0
// How a scan kernel moves a tile between device memory and shared memory (ScanVariant's tiles). Each warp
// moves its own span of the tile (its threads' consecutive elements), coalesced, so only a warp barrier
// stands between the moves and the threads' scans. Contiguous rows take whole tiles without bounds tests,
// addressed from one pointer per operand, in 16-byte vectors where the variant allows.
#pragma once
#include <functional>
#include <span>
#include <string>

#include "codegen/scan_variant.hpp"
#include "codegen/source_writer.hpp"

namespace fusion::codegen {

/// fz_expr's call for one element, given each parameter's stored element (an expression of storage type).
using ElementCall = std::function<std::string(const std::function<std::string(int)>&)>;

/// 16-byte loads and stores of four 4-byte elements (emitted where ScanVariant::vector is 4).
void write_vector_helpers(SourceWriter& w);

/// The tile at `base` loaded into fz_tile: fz_expr of each element of the row's part [base, hi), the
/// identity `fz_none` past its end. `pdt`: the parameters' dtypes.
void write_tile_loads(SourceWriter& w, const ScanVariant& v, std::span<const DType> pdt, const std::string& acc,
                      const ElementCall& call);

/// fz_tile's results stored into `out`: `stored(x)` converts fz_tile's element x (an expression).
void write_tile_stores(SourceWriter& w, const ScanVariant& v, const std::string& acc,
                       const std::function<std::string(const std::string&)>& stored);

/// (ScanVariant::prefetch) What warps 1.. do while warp 0 looks back on partition b: pull partition
/// b + gridDim.x * prefetch / 16 into L2, a 128-byte line per thread and step for each operand.
/// `decode(row, prefix)` declares each parameter p's row offset <prefix>p.
void write_next_tile_prefetch(SourceWriter& w, const ScanVariant& v,
                              const std::function<void(const char*, const char*)>& decode);

/// A thread's results over its `items` elements, in place: each element's running form x becomes value(x)
/// (inclusive), or the form before it does, `last_init` before the first (exclusive; `first`, when given,
/// is element 0's result as it is).
void write_thread_results(SourceWriter& w, const std::string& acc, int items, bool exclusive, const std::string& last_init,
                          const std::string& first, const std::function<std::string(const char*)>& value);

}  // namespace fusion::codegen
