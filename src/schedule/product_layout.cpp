// SPDX-License-Identifier: Apache-2.0
#include "schedule/product_layout.hpp"

#include <algorithm>
#include <vector>

#include "schedule/reduce_layout.hpp"
#include "schedule/tuning.hpp"

namespace fusion::detail {

using codegen::ProductTiles;

namespace {

/// Tiles per shape class, a table each (row 0 the default; Tuning::product_large, product_small and
/// product_skinny pick another): large tiles where the result has one per multiprocessor at least, else small
/// ones, or for results of 32 rows at most (the tokens of inference) tiles of 32 rows, so that fewer of their
/// tensor-core products run on rows of zeros. Where the tiles are too few to fill the device, K is split.
constexpr ProductTiles kLargeTiles[] = {
    {128, 128, 32, 2, 2, 4},  // warps of 64 x 64, 4 stages
    {128, 128, 32, 2, 4, 3},  // warps of 64 x 32
    {128, 128, 32, 2, 4, 4},  // warps of 64 x 32, 4 stages
    {128, 128, 64, 2, 2, 3},  // warps of 64 x 64, steps of 64 along K
};
constexpr ProductTiles kSmallTiles[] = {
    {64, 64, 64, 2, 2, 4},   // warps of 32 x 32, steps of 64 along K
    {64, 64, 32, 2, 2, 4},   // steps of 32
    {64, 128, 32, 2, 2, 4},  // warps of 32 x 64
};
constexpr ProductTiles kSkinnyTiles[] = {
    {32, 64, 64, 1, 4, 4},   // warps of 32 x 16, steps of 64 along K
    {32, 64, 32, 1, 4, 6},   // steps of 32, 6 stages
    {32, 128, 32, 1, 4, 4},  // warps of 32 x 32
    {16, 128, 64, 1, 4, 4},  // a 16-row tile (warps of 16 x 32)
};
/// The Hopper path (sm_90a: bulk tensor copies, wgmma; Tuning::product_hopper picks the row, 0 none), where the
/// large tiles would be chosen. H100, bfloat16, the bare product (a scratch probe of the same main loop, all
/// against cuBLAS in one run): 8192^3 128x256 tiles 3 stages 816 TFLOPS, 4 stages 780, 128x128 5 stages 573;
/// cuBLAS 872. (The stages and the staged result tile share 227 KB: 128x256 tiles take 3 stages at most.)
constexpr ProductTiles kHopperTiles[] = {
    {128, 256, 64, 0, 0, 3, 2, 4},  // two consumer warpgroups of 64 x 256, 3 stages
    {128, 192, 64, 0, 0, 4, 2, 4},  // 64 x 192 each, 4 stages
    {128, 128, 64, 0, 0, 5, 2, 4},  // 64 x 128 each, 5 stages
};
/// ... and where even 128 x 128 tiles are too few (a few hundred rows): 64 x 128 tiles, one consumer warpgroup
constexpr ProductTiles kHopperRowTiles = {64, 128, 64, 0, 0, 6, 1, 4};
/// Why the mma.sync kernel is not raced against cuBLASLt by default (fz::GeneratedProducts takes it): bfloat16,
/// relu(a @ b + bias) * 0.5 + residual, H100, fusion-bench-matmul --generated with the Hopper path off.
constexpr const char* kMmaSyncUnraced = "the mma.sync kernel measured 1.06-2.5x cuBLASLt + the epilogue kernel (H100)";

/// A slice of K is this long at least (shorter ones spend more on their partial tiles than they stream).
constexpr std::int64_t kMinSlice = 256;

/// K of `L` split into up to `split` slices over the blocks of `out`'s `tiles` tiles (each kMinSlice long at
/// least, whole BK steps, the last may be shorter, none empty; the partial tiles within the per-stream workspace,
/// a counter a tile).
void split_k(ProductLayout& out, const MatmulLayout& L, std::int64_t tiles, std::int64_t split) {
  split = std::min(split, L.k / kMinSlice);
  split = std::min<std::int64_t>(split, static_cast<std::int64_t>(kPartialBytes) / (tiles * out.tiles.bm * out.tiles.bn * 4));
  if (tiles > static_cast<std::int64_t>(kMaxCounters)) split = 1;
  std::int64_t slice = L.k;
  if (split > 1) {
    slice = (L.k + split - 1) / split;
    slice = (slice + out.tiles.bk - 1) / out.tiles.bk * out.tiles.bk;
    split = (L.k + slice - 1) / slice;
  }
  out.split = std::max<std::int64_t>(split, 1);
  out.slice = slice;
}

}  // namespace

std::vector<ProductLayout> product_layouts(const MatmulLayout& L, bool aligned16, const codegen::TargetDevice& dev) {
  ProductLayout out;
  const bool a_rows = !L.second.transpose, b_rows = !L.first.transpose;  // (cuBLASLt's second operand is ours a)
  const std::int64_t lda = L.second.ld, ldb = L.first.ld, sa = L.second.batch_stride, sb = L.first.batch_stride;
  // 16-byte copies (cp.async and the tensor copies alike): every row start of both operands on a 16-byte boundary
  const bool rows16 = aligned16 && lda % 8 == 0 && ldb % 8 == 0 && sa % 8 == 0 && sb % 8 == 0;
  // ... and for cp.async, contiguous extents of whole 16-byte chunks
  out.async = rows16 && (a_rows ? L.k : L.m) % 8 == 0 && (b_rows ? L.n : L.k) % 8 == 0;
  const auto tiles_of = [&](const ProductTiles& t) { return ((L.m + t.bm - 1) / t.bm) * ((L.n + t.bn - 1) / t.bn); };
  const std::int64_t sms = dev.sms;
  const ProductTiles& large = kLargeTiles[tuning().product_large];
  // (H100, bfloat16: 512x4096x4096 157 -> 130 us on 128 large tiles instead of 512 small ones; 64x14336x4096 on
  // 112 large tiles half of whose rows are zeros 74 -> 97 us: a large tile pays from half the SMs when its rows
  // are full)
  const int fill = L.m >= large.bm ? tuning().product_large_fill / 2 : tuning().product_large_fill;
  // The Hopper path where its tiles fill the device: 128 x 256 ones, else 128 x 128, else 64 x 128 (H100,
  // 512x4096x4096 with an epilogue: 31.6 us, mma.sync's 128 x 128 tiles 130). Its tensor copies need the 16-byte row starts (not whole
  // chunks: they fill past the end with zeros) and coordinates within 32 bits.
  const bool hopper = tuning().product_hopper > 0 && dev.compute_major == 9 && dev.compute_minor == 0 && rows16 &&
                      std::max({L.m, L.n, L.k}) < (std::int64_t{1} << 31);
  if (hopper) {
    // `t`, `units` (tiles x slices) over the persistent blocks; raced against cuBLASLt by default
    const auto take = [&](const ProductTiles& t, std::int64_t units) {
      ProductLayout h = out;
      h.tiles = t;
      if (tuning().product_ahead) h.tiles.ahead = static_cast<std::uint8_t>(tuning().product_ahead);
      h.raced = true;
      h.tile_count = tiles_of(t);
      h.blocks = std::min(units, sms);
      // clusters of 2 where every pair of units the blocks take shares its column of tiles: an even number of
      // row tiles (so the groups of fz_tile_at's order are even too), K not split
      const int c = tuning().product_cluster;
      if (c > 1 && h.split <= 1 && ((L.m + t.bm - 1) / t.bm) % c == 0 && h.blocks >= c) {
        h.cluster = c;
        h.blocks -= h.blocks % c;
      }
      return h;
    };
    // (64-row tiles where they give half the SMs one: H100, 64x14336x4096 with an epilogue, 112 of them,
    // 46.9 us; mma.sync's 62.8)
    const auto fills = [&](const ProductTiles& h) {
      return tiles_of(h) * L.batch * 100 >= sms * (h.warpgroups == 1 ? std::min(fill, 50) : fill);
    };
    // The first candidate: the tuned row where its tiles fill the device, else 128 x 128, else 64 x 128; then
    // every other row of the table whose tiles fill it, for the race to time (which wins varies with the shape
    // and the device: 8192^3 with an epilogue, 128 x 192 tiles 1.003-1.006x the bare cuBLASLt product on an H200,
    // 128 x 256 1.05-1.06x; at 4096^3 128 x 256 lead 128 x 192 by 9%)
    const int row = tuning().product_hopper - 1;
    std::vector<ProductLayout> all;
    const auto add = [&](const ProductTiles& h) {
      if (!fills(h) || static_cast<int>(all.size()) >= tuning().product_candidates) return;
      for (const ProductLayout& x : all)
        if (x.tiles.bm == h.bm && x.tiles.bn == h.bn && x.tiles.stages == h.stages) return;
      out.slice = L.k;
      all.push_back(take(h, tiles_of(h) * L.batch));
    };
    for (const ProductTiles& h : {kHopperTiles[row], kHopperTiles[2], kHopperRowTiles}) {
      if (!fills(h)) continue;
      add(h);
      break;
    }
    if (!all.empty()) {
      for (const ProductTiles& h : kHopperTiles) add(h);
      add(kHopperRowTiles);
      return all;
    }
    // Too few even of those (the tokens of inference: tens of rows): K split over 64-row tiles, a slice (a unit)
    // for each persistent block, one round
    const std::int64_t tiles = tiles_of(kHopperRowTiles) * L.batch;
    out.tiles = kHopperRowTiles;
    split_k(out, L, tiles, sms / tiles);
    if (out.split > 1) return {take(kHopperRowTiles, tiles * out.split)};
  }
  out.unraced = kMmaSyncUnraced;
  out.tiles = tiles_of(large) * L.batch * 100 >= sms * fill ? large
              : L.m <= 32                     ? kSkinnyTiles[tuning().product_skinny]
                                              : kSmallTiles[tuning().product_small];
  if (!out.async) out.tiles.stages = 2;  // (plain loads land before the barrier: two buffers alternate)
  out.tile_count = tiles_of(out.tiles);
  // Too few tiles to fill the device: K split into slices over blocks, as many as reach the blocks per SM aimed at
  const std::int64_t aim = sms * tuning().product_split_blocks_per_sm, tiles = out.tile_count * L.batch;
  split_k(out, L, tiles, tiles < aim ? (aim + tiles - 1) / tiles : 1);
  return {out};
}

ProductLayout product_layout(const MatmulLayout& L, bool aligned16, const codegen::TargetDevice& dev) {
  return product_layouts(L, aligned16, dev).front();
}

}  // namespace fusion::detail
