// SPDX-License-Identifier: Apache-2.0
// The variant of a layer kernel: one kernel for an expression whose reductions run over the same axes
// and whose results meet the rows again (softmax, layer norm, RMSNorm, x / sum(x), var per row, a tie
// of row reductions). A group of threads owns a row; each reduction is one pass over it; the row's
// inputs are read from memory once and kept in shared memory when they fit (resident), else re-read
// (looped, served mostly from L2); a row too long for one block's shared memory can be split over a
// cluster of blocks. Sizes and strides are kernel arguments, as everywhere.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "codegen/variant.hpp"

namespace fusion::codegen {

/// How a layer kernel reads one input array.
enum class LayerRole : std::uint8_t {
  row,     ///< constant along the row (a per-row scale, a scalar-like array): loaded once per row
  stream,  ///< varies along the row, read from memory in each pass that uses it
  cached,  ///< varies along the row and is used by several passes: read once into shared memory
};

struct LayerVariant {
  std::uint16_t block = 256;       ///< threads per block
  std::uint16_t group = 32;        ///< threads per row: 32 (a warp) or `block` (the whole block)
  std::uint8_t min_blocks = 0;  ///< __launch_bounds__' blocks per SM to fit (caps registers); 0: the compiler's choice
  std::uint8_t cluster = 1;        ///< blocks per row (a Hopper thread block cluster): each block keeps a
                                   ///< slice of the row and the blocks combine their partials through
                                   ///< distributed shared memory; 1: one block (or less) per row
  std::uint8_t vector_width = 1;   ///< elements per 16-byte access along the row (1: strided rows)
  bool segmented = false;          ///< the row is segments of equal length apart in memory (a batch norm's
                                   ///< N and H·W around C): element j sits at (j / length, j % length)
  bool resident = false;           ///< some input is cached in shared memory
  bool partly_resident = false;    ///< only the first `keep` elements of a block's slice are cached (a kernel
                                   ///< argument); later passes re-read the rest, mostly from L2
  bool keep_values = false;        ///< values a later pass needs (softmax's exp(x - max)) are kept beside the
                                   ///< cached row in shared memory, not computed again (codegen/layer_passes.hpp)
  std::uint8_t registers = 0;      ///< > 0: each thread holds its `registers` vectors of the row (cached inputs and
                                   ///< kept values) in registers, not shared memory; the row is at most
                                   ///< group x vector_width x registers elements, a whole number of vectors
  /// (registers) The row is exactly group x vector_width x registers elements: every vector a thread holds lies in
  /// it, so the kernel spells the row's vector count as that constant and no load or step tests it. (The one row
  /// length such a kernel serves, a fact of the variant's own fields: rows of other lengths with as many vectors a
  /// thread share the kernel that reads the count from its arguments.) (H200, an
  /// embedding's RMSNorm over bfloat16 rows of 4,096 with the count a kernel argument: 112 registers a thread, 4
  /// blocks an SM, 104.3 us; the same kernel written with it constant, 62 registers, 96.2 us:
  /// bench/embedding_probe.cu.)
  bool full_parts = false;
  bool out_aliases_input = false;  ///< an output is also an input (x = softmax(x)): no __restrict__
  std::uint8_t rank_kept = 0;      ///< dimensions of the row index space after collapsing
  std::uint8_t n_params = 0;
  std::uint8_t n_outputs = 1;
  std::array<std::uint8_t, kMaxParams> param_of_slot{};
  std::array<LayerRole, kMaxParams> role{};
  std::array<DType, kMaxOutputs> out_dtype{};
  std::array<bool, kMaxOutputs> out_per_row{};  ///< one value per row (a reduction's result), else per element

  bool operator==(const LayerVariant&) const = default;
  void hash_into(StableHasher& h, std::uint32_t n_slots) const;
  std::string describe() const;
};

/// Dims entries of a layer kernel: the kept extents, the segment length of a segmented row, then per
/// operand (parameters, then outputs) its kept strides, its stride along the row (within a segment) and
/// from one segment to the next.
inline constexpr std::uint32_t kLayerKeptShape = 0;
inline constexpr std::uint32_t kLayerSegment = 1;
constexpr std::uint32_t layer_kept_strides(int operand) { return 2 + 3 * static_cast<std::uint32_t>(operand); }
constexpr std::uint32_t layer_row_stride(int operand) { return 3 + 3 * static_cast<std::uint32_t>(operand); }
constexpr std::uint32_t layer_segment_stride(int operand) { return 4 + 3 * static_cast<std::uint32_t>(operand); }
/// Dims entries of a kernel with `operands` parameters and outputs.
constexpr std::uint32_t layer_dims_count(int operands) { return 2 + 3 * static_cast<std::uint32_t>(operands); }

}  // namespace fusion::codegen
