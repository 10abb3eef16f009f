// SPDX-License-Identifier: Apache-2.0
// The state a one-pass scan (ScanVariant::lookback) shares between its blocks, in a buffer per stream
// (runtime/exec/scan.cpp): a header of four 32-bit words (the launch number, partitions claimed, blocks
// finished, padding), then a 16-byte word per tree node: its flag and its value, written and read whole.
//
// The tree, per row: levels of nodes, node k of level l the combined total of partitions
// [k 32^l, (k+1) 32^l): level 0 a partition's total, level l+1 a group of 32 nodes of level l combined in
// order. The group's last partition publishes it, its flag set to the launch number + 1. Partition c's carry combines, from the highest level down, the nodes before its own in its
// group at each level (its base-32 digits say how many); the nodes a completed group needs are those same
// nodes of the levels where c's digit is 31. Every value is combined in an order fixed by the partition
// numbers alone, so floating results are the same run to run, and a partition waits only for partitions
// before it (claimed earlier, by running blocks): no deadlock. Waits stay short: a group's node is
// published as soon as its 32 members' totals are, not after any carry.
// The last block to finish resets the counters and advances the launch number: nothing is zeroed
// between launches, and flags of earlier launches hold smaller numbers (the number wraps after 2^32
// launches on one stream, which would need a flag left unwritten that long to be read as fresh).
#pragma once
#include <cstdint>

namespace fusion::codegen {

inline constexpr std::int64_t kScanStateHeaderBytes = 16;
inline constexpr int kScanLevels = 7;  ///< base-32 digits of a partition number below 2^31

/// Nodes of all rows (levels 0.. of a row: p, p/32 + 1, p/1024 + 1, ... nodes; fewer than 2p + 8).
constexpr std::int64_t scan_state_nodes(std::int64_t rows, std::int64_t partitions_per_row) {
  return rows * (2 * partitions_per_row + 8);
}
constexpr std::int64_t scan_state_bytes(std::int64_t nodes) { return kScanStateHeaderBytes + 16 * nodes; }

}  // namespace fusion::codegen
