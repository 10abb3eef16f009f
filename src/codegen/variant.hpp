// SPDX-License-Identifier: Apache-2.0
// A layout variant: the structural facts about a call that change the generated code. Sizes, strides,
// offsets and scalar values are never part of it (they are kernel arguments).
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "common/hash.hpp"
#include "fusion/dtype.hpp"

namespace fusion::codegen {

inline constexpr int kMaxParams = 64;  // distinct arrays one kernel reads
inline constexpr int kMaxOutputs = 8;  // arrays one kernel writes (fz::tie)

enum class Access : std::uint8_t {
  contiguous,  ///< element i at index i (in C order of the output)
  broadcast,   ///< inputs: one element for all, loaded once; outputs: smaller than the index space,
               ///< written only where its broadcast coordinates are 0 (fz::tie of different shapes)
  strided,     ///< offsets from the multi-index and per-dimension strides
  // Rows kernels only (Variant::rows): the last dimension is walked contiguously by the outputs.
  row,         ///< constant along the last dimension (a per-row scale): loaded once per row
  along,       ///< contiguous along the last dimension, each row at its own offset (a bias row, a view)
  // Tiles kernels only (Variant::tiles):
  across,      ///< contiguous along the second-to-last dimension (a transposed operand): read through a
               ///< shared-memory tile, so that both its reads and the outputs' writes are coalesced
  // Linear and rows kernels:
  stepped,     ///< element i at index i * Variant::step (`x[..., ::2]`; in a rows kernel, along each row from its
               ///< offset): read as whole vectors of the array it steps through, its elements picked from them
};

/// Tiles kernels: kTile x kTile tiles of the last two dimensions, kTileRows rows of threads per block.
inline constexpr int kTile = 32;
inline constexpr int kTileRows = 8;
/// Shared memory the transposed inputs of one tiles kernel may use (more of them are read as strided).
inline constexpr int kTileSharedBytes = 32 * 1024;

struct Variant {
  std::uint8_t rank = 1;          ///< dimensions of the index space after collapsing (1: linear kernel)
  std::uint8_t vector_width = 1;  ///< elements per vector access in linear and rows kernels (1: scalar accesses)
  /// A rows kernel: threads walk the last dimension (contiguous in every output) and compute each
  /// operand's offset once per row, so broadcast and strided inputs stream without per-element div/mod.
  bool rows = false;
  /// A tiles kernel: some input walks the second-to-last dimension contiguously (a transpose); blocks take
  /// kTile x kTile tiles, and such inputs go through shared memory (Access::across).
  bool tiles = false;
  /// A rows kernel's join whose every column limit is a whole number of vectors and whose pieces' arrays are
  /// aligned for vectors: a vector's elements all lie in one piece, so fz_expr computes the whole vector, choosing
  /// its piece once (not per element) and loading the piece's arrays as vectors.
  bool vector_joins = false;
  bool index64 = false;           ///< 64-bit index arithmetic (over 2^31 elements or offsets)
  bool out_aliases_input = false; ///< the output is also read (x = x + 1): no __restrict__
  /// A scatter (fz::index_add) into a small contiguous target every element addresses by its offset alone
  /// (bincount, a histogram): each block adds into its own copy of the target in shared memory, then adds
  /// that copy into the target once (a global atomic per bin and block instead of per element).
  bool private_bins = false;
  /// A floating scatter_add under fz::Deterministic: the kernel adds into exact sums of this many 64-bit words
  /// per target element (codegen/exact_sum.hpp; the output pointer is theirs, in the target's element order),
  /// which a second kernel rounds into the target. 0: atomics on the target itself.
  std::uint8_t exact_words = 0;
  /// The stride of the stepped inputs (Access::stepped, all the same: 2..4 elements of at most 16 bytes together)
  std::uint8_t step = 0;
  std::uint8_t n_outputs = 1;
  std::array<DType, kMaxOutputs> out_dtype{};    ///< per output
  std::array<Access, kMaxOutputs> out_access{};  ///< per output
  std::uint8_t n_params = 0;      ///< distinct input arrays
  std::array<std::uint8_t, kMaxParams> param_of_slot{};  ///< input slot -> parameter (an array read twice is one)
  std::array<Access, kMaxParams> access{};               ///< per parameter
  /// (stepped inputs, in vectors) how many elements past a vector boundary each one's first element lies, under
  /// `step` (`x[..., 1::2]`: 1): its vectors are loaded from that boundary
  std::array<std::uint8_t, kMaxParams> step_phase{};

  bool operator==(const Variant&) const = default;
  /// True when some operand needs N-d indexing (the kernel computes offsets from the multi-index).
  bool has_strided() const {
    if (rows || tiles) return false;
    for (int k = 0; k < n_outputs; ++k)
      if (out_access[k] != Access::contiguous) return true;
    for (int p = 0; p < n_params; ++p)
      if (access[p] == Access::strided) return true;
    return false;
  }
  void hash_into(StableHasher& h, std::uint32_t n_slots) const;
  /// In words, for fz::inspect: "linear, 16-byte vectors, 32-bit index".
  std::string describe() const;
};

}  // namespace fusion::codegen
