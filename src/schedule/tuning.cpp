// SPDX-License-Identifier: Apache-2.0
#include "schedule/tuning.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <string>

#include "fusion/error.hpp"

namespace fusion::detail {

Tuning& tuning() {
  static Tuning t = [] {
    Tuning d;
    const char* overlap = std::getenv("FUSION_LAUNCH_OVERLAP");
    d.launch_overlap = overlap == nullptr || std::string_view(overlap) != "0";
    return d;
  }();
  return t;
}

void set_tuning(std::string_view assignment) {
  const auto eq = assignment.find('=');
  const std::string_view name = assignment.substr(0, eq);
  std::int64_t value = 0;
  const std::string_view text = eq == std::string_view::npos ? std::string_view() : assignment.substr(eq + 1);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  // (reduce_cluster=-1 puts back its default, the choice from the split: the one tuning whose default is no number)
  const bool back_to_default = name == "reduce_cluster" && value == -1;
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || (value < 0 && !back_to_default))
    throw Error(fmt::format("tuning '{}': expected name=value with a non-negative integer value", assignment));
  Tuning& t = tuning();
  if (name == "cluster_slice" && value > 0) t.cluster_slice = value;
  else if (name == "max_cluster" && value >= 1 && value <= 16 && (value & (value - 1)) == 0)
    t.max_cluster = static_cast<int>(value);
  else if (name == "layer_fit_blocks" && value >= 0 && value <= 2) t.layer_fit_blocks = static_cast<int>(value);
  else if (name == "layer_min_blocks" && value <= 32) t.layer_min_blocks = static_cast<int>(value);
  else if (name == "layer_resident" && value >= 0 && value <= 1) t.layer_resident = value == 1;
  else if (name == "layer_spare_block" && value >= 0 && value <= 1) t.layer_spare_block = value == 1;
  else if (name == "layer_keep_values" && value >= 0 && value <= 1) t.layer_keep_values = value == 1;
  else if (name == "layer_keep_min_threads" && value >= 0 && value <= 2048) t.layer_keep_min_threads = static_cast<int>(value);
  else if (name == "layer_registers" && value >= 0 && value <= 128) t.layer_registers = static_cast<int>(value);
  else if (name == "layer_full_parts" && value <= 1) t.layer_full_parts = value == 1;
  else if (name == "layer_long_registers" && value <= 1) t.layer_long_registers = value == 1;
  else if (name == "layer_statistics" && value <= 2) t.layer_statistics = static_cast<int>(value);
  else if (name == "row_split_accesses" && value >= 1 && value <= 64) t.row_split_accesses = static_cast<int>(value);
  else if (name == "reduce_blocks_per_sm" && value >= 1 && value <= 32)
    t.reduce_blocks_per_sm = static_cast<int>(value);
  else if (name == "reduce_row_groups" && value >= 1 && value <= 32 && (value & (value - 1)) == 0)
    t.reduce_row_groups = static_cast<int>(value);
  else if (name == "reduce_grouped_blocks_per_sm" && value >= 1 && value <= 32)
    t.reduce_grouped_blocks_per_sm = static_cast<int>(value);
  else if (name == "reduce_outer_vectors" && value <= 1) t.reduce_outer_vectors = value == 1;
  else if (name == "reduce_min_rows" && value >= 1 && value <= 1024) t.reduce_min_rows = static_cast<int>(value);
  else if (name == "reduce_min_blocks" && value <= 8) t.reduce_min_blocks = static_cast<int>(value);
  else if (name == "reduce_unroll" && value <= 32) t.reduce_unroll = static_cast<int>(value);
  else if (name == "reduce_cluster" && (value == -1 || value == 0 || value == 2 || value == 4 || value == 8))
    t.reduce_cluster = static_cast<int>(value);
  else if (name == "reduce_warp_row" && value >= 32) t.reduce_warp_row = value;
  else if (name == "linear_blocks_per_sm" && value <= 64) t.linear_blocks_per_sm = static_cast<int>(value);
  else if (name == "launch_overlap" && value <= 1) t.launch_overlap = value == 1;
  else if (name == "linear_call_blocks_per_sm" && value <= 64) t.linear_call_blocks_per_sm = static_cast<int>(value);
  else if (name == "scan_items" && (value == 0 || value == 1 || value == 2 || value == 4 || value == 8 || value == 16 || value == 32))
    t.scan_items = static_cast<int>(value);
  else if (name == "scan_lookback" && value <= 2) t.scan_lookback = static_cast<int>(value);
  else if (name == "scan_min_blocks" && value <= 8) t.scan_min_blocks = static_cast<int>(value);
  else if (name == "scan_prefetch" && value <= 64) t.scan_prefetch = static_cast<int>(value);
  else if (name == "scan_strips" && value <= 2) t.scan_strips = static_cast<int>(value);
  else if (name == "scan_registers" && value <= 1) t.scan_registers = static_cast<int>(value);
  else if (name == "scan_pipelined" && value <= 1) t.scan_pipelined = static_cast<int>(value);
  else if (name == "scan_ahead" && value <= 1) t.scan_ahead = static_cast<int>(value);
  else if (name == "product_large" && value <= 3) t.product_large = static_cast<int>(value);
  else if (name == "product_large_fill" && value >= 1 && value <= 1000) t.product_large_fill = static_cast<int>(value);
  else if (name == "product_small" && value <= 2) t.product_small = static_cast<int>(value);
  else if (name == "product_skinny" && value <= 3) t.product_skinny = static_cast<int>(value);
  else if (name == "product_split_blocks_per_sm" && value <= 32) t.product_split_blocks_per_sm = static_cast<int>(value);
  else if (name == "product_hopper" && value <= 3) t.product_hopper = static_cast<int>(value);
  else if (name == "product_ahead" && value <= 8) t.product_ahead = static_cast<int>(value);
  else if (name == "product_cluster" && (value == 1 || value == 2)) t.product_cluster = static_cast<int>(value);
  else if (name == "product_candidates" && value >= 1 && value <= 4) t.product_candidates = static_cast<int>(value);
  else if (name == "layer_block" && (value == 0 || (value >= 64 && value <= 1024 && (value & (value - 1)) == 0)))
    t.layer_block = static_cast<int>(value);
  else
    throw Error(
        fmt::format("tuning '{}': known are cluster_slice=N (N > 0), max_cluster=1|2|4|8|16, layer_block=0|64..1024 (a "
                    "power of two), layer_fit_blocks=0|1|2, layer_min_blocks=0..32, layer_resident=0|1, layer_spare_block=0|1, layer_keep_values=0|1, layer_keep_min_threads=0..2048, layer_registers=0..128, layer_full_parts=0|1, layer_long_registers=0|1, layer_statistics=0|1|2, "
                    "row_split_accesses=1..64, reduce_blocks_per_sm=1..32, reduce_row_groups=1|2|4|..|32, "
                    "reduce_grouped_blocks_per_sm=1..32, reduce_outer_vectors=0|1, reduce_min_rows=1..1024, reduce_min_blocks=0..8, reduce_unroll=0..32, reduce_cluster=-1|0|2|4|8 (-1, the default: 8 where a split would cut 16 ways), reduce_warp_row=32.., linear_blocks_per_sm=0..64, linear_call_blocks_per_sm=0..64, launch_overlap=0|1, "
                    "scan_items=0|1|2|4|8|16|32, scan_lookback=0|1|2, scan_min_blocks=0..8, scan_prefetch=0..64, scan_strips=0|1|2, scan_registers=0|1, scan_pipelined=0|1, scan_ahead=0|1, "
                    "product_large=0..3, product_large_fill=1..1000, product_small=0..2, product_skinny=0..3, product_split_blocks_per_sm=0..32, product_hopper=0..3, product_ahead=0..8, product_cluster=1|2, product_candidates=1..4",
                    assignment));
}

}  // namespace fusion::detail
