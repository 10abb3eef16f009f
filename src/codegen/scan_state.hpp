// SPDX-License-Identifier: Apache-2.0
// The state a one-pass scan (ScanVariant::lookback) shares between its blocks, in a buffer per stream
// (runtime/exec/scan.cpp): a header of four 32-bit words (the launch number, partitions claimed, blocks
// finished, padding), a 32-bit flag per tree node, then an 8-byte value per node.
//
// The tree, per row: a node for every aligned run of 2^l partitions [k 2^l, (k+1) 2^l), numbered
// k 2^(l+1) + 2^l - 1 (below 2 x partitions per row). Its value is its two halves combined, left then
// right, published by the run's last partition: the value, a fence, then the flag set to the launch
// number + 1. Partition c's carry combines the runs of c's set bits, the largest (leftmost) first; the
// runs of c's trailing ones are also the left halves of the runs c completes. Every value is combined in
// an order fixed by the partition numbers alone, so floating results are the same run to run, and a
// partition waits only for partitions before it (claimed earlier, by running blocks): no deadlock.
// The last block to finish resets the counters and advances the launch number: nothing is zeroed
// between launches, and flags of earlier launches hold smaller numbers (the number wraps after 2^32
// launches on one stream, which would need a flag left unwritten that long to be read as fresh).
#pragma once
#include <cstdint>

namespace fusion::codegen {

inline constexpr std::int64_t kScanStateHeaderBytes = 16;

constexpr std::int64_t scan_state_nodes(std::int64_t rows, std::int64_t partitions_per_row) {
  return rows * 2 * partitions_per_row;
}
/// Where the nodes' values start: after the header and the flags, 8-byte aligned.
constexpr std::int64_t scan_state_values_offset(std::int64_t nodes) {
  return kScanStateHeaderBytes + (4 * nodes + 7) / 8 * 8;
}
constexpr std::int64_t scan_state_bytes(std::int64_t nodes) { return scan_state_values_offset(nodes) + 8 * nodes; }

}  // namespace fusion::codegen
