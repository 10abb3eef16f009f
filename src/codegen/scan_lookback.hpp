// SPDX-License-Identifier: Apache-2.0
// The one-pass scan's look-back (ScanVariant::lookback): each partition publishes its total and the groups it
// completes into the tree of published sums (scan_state.hpp), then takes its carry from the nodes before it,
// gathered by one warp and folded across its lanes in a fixed order.
#pragma once
#include <functional>
#include <string>

#include "codegen/source_writer.hpp"

namespace fusion::codegen {

/// Where row `row`'s nodes of the tree start (an expression; scan_state.hpp's layout: 2 * chunks + 8 a row).
inline std::string row_nodes(const char* row) { return std::string("fz_nodes + ") + row + " * (2 * chunks + 8)"; }

/// The device helpers the look-back uses: fz_node (a tree node, flag and value in one 16-byte word),
/// fz_publish, fz_load, and unless `fold` is false (logcumsumexp writes its own, scan_lse.hpp) fz_fold (a warp's
/// values combined in lane order; needs fz_combine and fz_shfl_down).
void write_lookback_helpers(SourceWriter& w, const std::string& acc, bool fold = true);

/// The look-back of one warp on partition c of row `row` (both in scope, and lane): `total` is the partition's
/// total in lane 0 (its warps' totals folded); the carry goes to shared `carry_to`. Unless `publish_total` is
/// false (the pipelined kernel's loading warps published it), the partition's total first. With `fold_all`
/// (logcumsumexp: fz_fold_all, scan_lse.hpp) the nodes before c's of every level fold in one step.
void write_lookback_warp(SourceWriter& w, const std::string& acc, const std::string& total,
                         const std::string& carry_to, bool publish_total, bool fold_all);

/// Warp 0 looks back while the block's other warps run `others` (a prefetch; may be empty), then every thread
/// takes the carry (`carry`) after a block barrier (`total` and `fold_all` as write_lookback_warp takes them).
void write_lookback(SourceWriter& w, const std::string& acc, const std::string& total, bool fold_all,
                    const std::function<void()>& others);

}  // namespace fusion::codegen
