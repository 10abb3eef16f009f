// SPDX-License-Identifier: Apache-2.0
// The one launcher of generated kernels (fused, reduction, user): it packs the arguments in the order
// the kernel's signature lists them, launches on a stream, and keeps the launch and traffic counters.
#pragma once
#include <cuda.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "codegen/launch_shape.hpp"
#include "codegen/signature.hpp"
#include "fusion/evaluate.hpp"

namespace fusion::detail {

struct StreamState;

/// The values a launch draws its arguments from; each kernel parameter names one by source and index.
struct LaunchArgs {
  std::span<const std::uint64_t> pointers;      ///< device pointers, by array index
  std::span<const ScalarArg> scalars;           ///< by scalar index
  std::array<std::int64_t, 5> counts{};         ///< by codegen::Count
  std::span<const double> divisors;             ///< of mean/var, by reduction
  std::span<const std::int64_t* const> dims;    ///< extents and strides, by dims index
  std::span<void* const> raw;                   ///< user kernels' raw-array structs, by parameter
  std::array<std::uint64_t, 2> workspace{};     ///< partials, counters
  std::span<const CUtensorMap> tensor_maps;     ///< bulk tensor copies' maps, by index
  std::int64_t& count(codegen::Count c) { return counts[static_cast<std::size_t>(c)]; }
};

struct Grid {
  std::int64_t x = 1, y = 1;
  unsigned block = codegen::kBlockThreads;  ///< threads per block (layer kernels choose their own)
  unsigned shared_bytes = 0;       ///< dynamic shared memory per block
};

/// Launches `f` with `grid.block` threads per block on `stream`, arguments packed by `sig`.
void launch_kernel(CUfunction f, const codegen::KernelSignature& sig, const LaunchArgs& args, Grid grid,
                   const StreamState& stream);

/// Counts one launch: `read` and `written` arrays are marked used on `stream` (their memory is not
/// reused before it finishes) and their bytes added to the traffic counters.
void note_launch(std::span<const ArrayBase* const> read, std::span<const ArrayBase* const> written,
                 const std::shared_ptr<StreamState>& stream);

/// Counts what one evaluation had to move at least (Stats::min_bytes): each distinct array of `read`
/// once (the same view read twice counts once), each of `written` once.
void note_minimum(std::span<const ArrayBase* const> read, std::span<const ArrayBase* const> written);

/// Blocks of kBlockThreads covering `work` items, one per thread (at most codegen::kMaxGridX).
std::int64_t blocks_for(std::int64_t work);

}  // namespace fusion::detail
