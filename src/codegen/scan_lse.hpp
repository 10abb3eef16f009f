// SPDX-License-Identifier: Apache-2.0
// logcumsumexp's own steps in a tiled scan: a thread's pass in the exp domain, the block's prefixes and the
// tiles' carry as pairs (m, s), and each element's result with one log.
#pragma once
#include <string>

#include "codegen/source_writer.hpp"

namespace fusion::codegen {

/// logcumsumexp's thread pass, in the exp domain: with m the maximum of the thread's elements, the tile
/// keeps the running sums p_k of exp(x - m) (an exp each and a chain of adds: no log on the chain), and
/// the thread's total is m + log(p). Where m is not finite (all -inf, +inf, NaN) or the elements spread too
/// far below it (some exp(x - m) not a normal number) the thread scans with fz_combine as every other scan
/// does, and `fz_exp` says which form its tile holds.
void write_lse_thread_scan(SourceWriter& w, const std::string& acc, int items, bool registers, bool pairs);

/// logcumsumexp across a block's threads and warps and along its tiles as pairs (m, s), the value m + log s
/// (fz_pair): the thread's total, the prefixes before each thread (pm, ps), the tiles' carry (carry, carry_s).
/// Two pairs combine with one exponential, where two values combine with an exponential and an accurate log1p
/// (fz_combine): of the about 57 instructions an element the row-wise kernel issued (H200, rows of 8192 f32, 84% of
/// the issue slots busy), the 11 combines a thread makes a tile took about 25. With `folds` (the one-pass scan's
/// look-back) also fz_fold_pair and fz_fold: a warp's pairs, or values, as one value in lane 0.
void write_lse_pair_helpers(SourceWriter& w, const std::string& acc, bool folds);

/// The warp's lanes before this one (before_m, before_s) from each thread's total (run, run_s); lane 31 writes
/// the warp's total to fz_warp[fz_buf][warp] and fz_warp_s[fz_buf][warp].
void write_lse_lane_prefixes(SourceWriter& w, const std::string& acc);

/// After a barrier: the tile's W warps' totals scanned, then each thread's prefix (pm, ps), and pre = pm + log ps,
/// from the carry (carry, carry_s), the warps before its own and its lanes before.
void write_lse_warp_prefixes(SourceWriter& w, const std::string& acc, int W);

/// logcumsumexp's results from a thread's sums: with M = max(pre, m), each is M + log(a + b p_k) where
/// a = exp(pre - M) and b = exp(m - M), one log per element. A carry of +inf or NaN takes fz_combine.
void write_lse_results(SourceWriter& w, const std::string& acc, int items, bool exclusive, bool pairs);

}  // namespace fusion::codegen
