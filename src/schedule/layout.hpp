// SPDX-License-Identifier: Apache-2.0
// Layout analysis: from a call's arrays (shapes, strides, alignment; placeholders are enough) to the
// structural facts a kernel is generated for (the variant) and the run-time values launched with it.
// Pure logic with no GPU: fused elementwise, reduction and custom kernels all use it.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "codegen/target_device.hpp"
#include "codegen/variant.hpp"
#include "fusion/array_base.hpp"
#include "fusion/evaluate.hpp"

namespace fusion::detail {

/// Strides for up to N operands, of which a call uses its few: each is constructed where it is written
/// (collapse_dims, or placement new), not all N up front (default-constructing 72 of them was a fifth of a
/// small elementwise call's layout analysis).
template <int N> struct StridesSlots {
  StridesSlots() {}  // NOLINT: leaves the slots unconstructed on purpose
  union {
    Strides slot[N];
  };
  Strides& operator[](int i) { return slot[i]; }
  const Strides& operator[](int i) const { return slot[i]; }
  Strides* data() { return slot; }
  const Strides* data() const { return slot; }
};

/// Whether `a`'s first element sits on a boundary of `v` of its elements (a `v`-wide vector's); `v` and the
/// item sizes are powers of two, so a mask does what a 64-bit division would, on every launch.
inline bool vector_aligned(const ArrayBase& a, std::int64_t v) {
  return (a.data_ptr() & (static_cast<std::uint64_t>(v) * itemsize(a.dtype()) - 1)) == 0;
}

/// The largest element offset an operand with strides `st` reaches over `shape`.
std::int64_t max_offset(const Strides& st, const Shape& shape);
/// Merges the dimensions of `full` that every operand walks as one and drops extent-1 ones (most calls
/// become one linear loop): `st[k]` are operand k's strides over `full`, `out[k]` its collapsed strides.
/// A 0-d or all-ones shape becomes one dimension of extent 1. `out[0..n_ops)` need not be constructed.
void collapse_dims(const Shape& full, const Strides* st, int n_ops, Shape& shape, Strides* out);
/// `a`'s strides when broadcast to `shape` (0 along broadcast dimensions).
Strides broadcast_strides(const ArrayBase& a, const Shape& shape);
/// The same memory walked the same way (so one kernel parameter can serve both).
bool same_view(const ArrayBase& a, const ArrayBase& b);
/// Whether the memory spans of two arrays overlap.
bool shares_memory(const ArrayBase& a, const ArrayBase& b);
/// Per array slot of the call: whether a gather reads it (fz::take's source); empty when none does. Such a slot
/// never shares a parameter with one read per element (a concatenate's piece's arrays may: both are loads).
std::vector<bool> gather_sources(const Call& c);
/// Distinct arrays of a call (the same view read twice is one parameter); fills `param_of_slot`.
/// Throws when one kernel would take more array operands than it has parameter slots.
void check_operand_count(const Call& c);
int distinct_params(const Call& c, const ArrayBase** params,
                    std::array<std::uint8_t, codegen::kMaxParams>& param_of_slot);
/// The broadcast shape of the call's arrays.
Shape broadcast_shape_of(const Call& c);
/// NumPy's shape of every node of the call's graph (a ShapeError where shapes do not broadcast or an axis is bad).
std::vector<Shape> node_shapes(const Call& c);

/// The layout of one elementwise call: the variant plus the run-time values that go with it.
struct Layout {
  codegen::Variant v;
  std::int64_t n = 0;
  Shape shape;                                                     // collapsed
  Shape space;                                                     // the index space, not collapsed
  const ArrayBase* params[codegen::kMaxParams];
  StridesSlots<codegen::kMaxParams + codegen::kMaxOutputs> strides;  // collapsed; outputs first, then the parameters
  std::int64_t bins = 0;  // Variant::private_bins: the target's elements (each block's copy in shared memory)
  std::int64_t exact_plane = 0;  // Variant::exact_words: the words of one plane of the exact sums
};
/// The index space of a call: the broadcast of every output's shape.
Shape index_space(const ArrayBase* const* outs, int K);
/// Analyzes a call writing outputs `outs[0..K)`: dimensions collapsed, each operand contiguous,
/// broadcast or strided, the vector width (16-byte accesses when every pointer allows), index width.
void analyze(const Call& c, const ArrayBase* const* outs, int K, Layout& L);
/// Whether a linear elementwise kernel of graph `g` is better off looping over vectors than taking a thread per
/// vector: it calls a device function (fz::random's generators, fz::function: each thread's setup, a generator's
/// key schedule, is repaid over several vectors), or it computes in float over 16-bit floats with at least
/// kLoopingMathOps operations (H200, 2^26 bfloat16 at 32 blocks an SM: softplus 63 -> 71%, GELU 80 -> 90%, Horner-10
/// 83 -> 93% of the limit, sin+cos/sqrt even; float32 kernels lost 2-5 points, so they keep a thread a vector).
bool loops_over_vectors(const ir::Graph& g);
inline constexpr int kLoopingMathOps = 4;
/// Blocks of a linear elementwise kernel over `work` threads' worth of vectors: a thread each (the loads of a
/// memory-bound kernel in flight at once), or, where `loops` (above), at most tuning().linear_call_blocks_per_sm
/// blocks an SM looping over the rest. tuning().linear_blocks_per_sm, when set, caps every such kernel.
std::int64_t linear_grid(std::int64_t work, bool loops, int sms);
/// A scatter under fz::Deterministic (analyzed first): floating sums into exact sums of `words` 64-bit words per
/// element of the target, each block's private bins kept only where a copy of them fits twice in a
/// multiprocessor's shared memory.
void plan_exact_scatter(int words, const codegen::TargetDevice& device, Layout& L);

}  // namespace fusion::detail
