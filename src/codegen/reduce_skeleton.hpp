// SPDX-License-Identifier: Apache-2.0
// The reduction kernel around an op: the thread layouts of a ReduceVariant (warp, block or thread per
// output, 16-byte vectors, split over blocks with a last-block combine). The op itself is device
// functions the caller writes first: fz_expr (one element), fz_identity, fz_lift, fz_combine; a thread
// adds its elements with fz_step and settles its accumulator (fz_settle) before combining it with others.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "codegen/reduce_ops.hpp"
#include "codegen/reduce_variant.hpp"
#include "codegen/signature.hpp"
#include "codegen/source_writer.hpp"

namespace fusion::codegen {

/// Writes fz_step<suffix> and fz_settle<suffix> for `op` (they call fz_combine<suffix> and fz_lift<suffix>).
void write_step_and_settle(SourceWriter& fn, const ReduceOpSpelling& op, const std::string& suffix);

/// Writes fz_step, fz_settle, fz_shfl_down, fz_load_partial, fz_warp_reduce and fz_block_reduce for the
/// accumulator of `op`.
void write_reduce_helpers(SourceWriter& fn, const ReduceOpSpelling& op);

/// Hopper's thread block clusters in inline PTX (no cooperative_groups header to find at run time): a
/// block's rank, a barrier over the cluster, and a peer block's shared variable (for layer kernels whose
/// row is split over a cluster).
void write_cluster_helpers(SourceWriter& w);

/// The dims entries of a reduction kernel (extents and strides), as ReduceLayout::dims() lists them.
inline constexpr std::uint32_t kKeptShape = 0, kReducedShape = 1, kOutKeptStrides = 2;
constexpr std::uint32_t kept_strides(int p) { return 3 + 2 * static_cast<std::uint32_t>(p); }
constexpr std::uint32_t reduced_strides(int p) { return 4 + 2 * static_cast<std::uint32_t>(p); }

struct ReduceSkeleton {
  std::string kernel_name;
  std::vector<DType> params;               ///< per array parameter (in0, in1, ...)
  std::string acc;                         ///< the accumulator type
  /// (scalar index, "const float s0"): after the output pointer
  std::vector<std::pair<std::uint32_t, std::string>> scalar_params;
  std::vector<std::string> scalar_args;    ///< "s0": passed to fz_expr after the elements
  std::string kernel_prep;                 ///< statements at the start of the kernel body
  /// The statement that writes output element `index` (of `out`) from the accumulator `a`.
  std::function<std::string(const std::string& index)> store;
  KernelSignature* signature = nullptr;  ///< filled with the kernel's parameters
  /// Several outputs of one reduction layout (a multi-reduction): out0, out1, ... of these dtypes, all
  /// with the same kept strides; `store` writes them all. Empty: one output `out` of the variant's dtype.
  std::vector<DType> outputs;
  /// One accumulator per thread even along 16-byte vectors (var: its accumulator is large and adding an
  /// element is cheap, so one accumulator per vector lane would only cost registers).
  bool one_accumulator = false;
  /// Bytes of one accumulator, where known (0: not): row groups meet at one barrier where every vector lane's slots
  /// fit in kOneMeetingBytes of shared memory, else at one a lane.
  std::size_t acc_bytes = 0;
};

/// Writes the layout structs, `functions` (the op's device functions and the helpers) and the kernel,
/// whose parameters it records in `s.signature`.
void write_reduce_kernel(SourceWriter& w, const ReduceVariant& v, const ReduceSkeleton& s,
                         const std::string& functions);

}  // namespace fusion::codegen
