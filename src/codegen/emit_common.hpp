// SPDX-License-Identifier: Apache-2.0
// What the elementwise and the reduction emitters share: kernel names, parameter dtypes, scalar slots,
// and writing a graph's nodes as `const T tN = ...;` lines.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/hash.hpp"
#include "codegen/launch_shape.hpp"
#include "codegen/spell.hpp"
#include "codegen/generated_kernel.hpp"
#include "codegen/source_writer.hpp"
#include "codegen/variant.hpp"

namespace fusion::codegen {

/// The kernel symbol for a graph: readable op names (or the user's) and the hash.
std::string kernel_name(const ir::Graph& g, DType out, std::uint64_t hash, std::string_view name_given);

/// A kernel for graph `g` in variant `v`, its hash (the canonical IR and the variant) and name set.
template <class V>
GeneratedKernel hashed_and_named(const ir::Graph& g, const V& v, DType out, std::string_view name_given) {
  StableHasher h;
  h.add_u64(ir::hash(g));
  v.hash_into(h, g.n_inputs);
  GeneratedKernel k;
  k.hash = h.digest();
  k.name = kernel_name(g, out, k.hash, name_given);
  // approximate float32 division, square root, exp/log/sin/cos... and flush-to-zero (NVRTC's own switch)
  if (g.fast_math) k.options.push_back("-use_fast_math");
  return k;
}

/// The dtype of each kernel parameter (input array), taken from the graph's input nodes.
std::vector<DType> param_dtypes(const ir::Graph& g, const std::array<std::uint8_t, kMaxParams>& param_of_slot,
                                int n_params);

/// `g` as a kernel of a variant whose inputs read `param_of_slot` computes it: slots reading one parameter
/// merged into one input, equal nodes then one (the graph every emitter is given; a layout deciding from what
/// the kernel will hold, as the shared memory of a layer kernel's kept values, asks of this graph too).
ir::Graph merged_inputs(const ir::Graph& g, const std::array<std::uint8_t, kMaxParams>& param_of_slot);

/// Per parameter: whether it is passed to the expression as a pointer at the element's position in it, never
/// loaded per element: fz::take's sources (read through the index), and a concatenate's pieces' arrays (read
/// only in their piece's branch, their views reaching past their own extent elsewhere).
std::vector<bool> gathered_params(const ir::Graph& g, const std::array<std::uint8_t, kMaxParams>& param_of_slot,
                                  int n_params);

/// The scalar slots the graph uses, in slot order, with their dtypes.
std::vector<std::pair<std::uint32_t, DType>> scalar_slots(const ir::Graph& g);

/// Nodes reachable from `root`, not looking past `stop` (kNone: no stop).
std::vector<bool> reachable(const ir::Graph& g, std::uint32_t root, std::uint32_t stop = ir::kNone);

/// The value to store for output node `node` into an array of dtype `out`: the node's value, except that a
/// cast to a 16-bit float stored in that same dtype stores the cast's float operand (rounding once, on
/// store, gives the same bits as rounding twice; the cast's own rounding is then dead code).
std::string stored_value(const ir::Graph& g, std::uint32_t node, DType out, const std::vector<std::string>& value);

/// A vector's elements computed together (Variant::vector_joins): per node, whether its value differs between
/// the vector's `width` elements. Such a node is an array `T tN[width]` filled by a loop over `k`, and its value
/// (and a caller's name for such a leaf) is its element `k`; the others, a join's tests among them, are one value.
struct Lanes {
  int width = 1;
  std::vector<bool> varies;
  /// Per node: where not empty, the node is a leaf loaded as a vector (`const auto tN = <load>;`, written where
  /// the node is first needed, as inside a join's branch), its element `k` then `element` (which names tN).
  std::vector<std::string> load, element;
};

/// Writes `const T tN = <spelling>;` for every wanted node whose `value` is still empty, in graph order,
/// and names it tN. Leaves must already be named by the caller. With `lanes`, the nodes that vary are arrays.
void write_values(SourceWriter& w, const ir::Graph& g, const std::vector<bool>& wanted, std::vector<std::string>& value,
                  SpellContext& ctx, const Lanes* lanes = nullptr);

/// Writes offsets `long long <offset> = ...;` of multi-index `index` over extents `shape` (a struct
/// with `.v[rank]`) along each target's strides (`<strides>.v[d]`): one div/mod per dimension.
void write_decode(SourceWriter& w, const std::string& index, const std::string& shape, int rank,
                  const std::vector<std::pair<std::string, std::string>>& targets);

/// Prepares `ctx` for a kernel: heavy-math outlining and the 16-bit conversion helpers its parameters need.
/// Returns the number of costly math calls.
int prepare_context(SpellContext& ctx, const ir::Graph& g, const std::vector<DType>& params, DType out);

/// What every emitter starts from, built once per kernel by emit_context: the kernel with its hash and
/// name (the emitter adds source and signature), each parameter's dtype, the scalar slots the graph reads,
/// and the spelling context (the conversions its dtypes need, heavy math outlined past the budget).
struct EmitContext {
  GeneratedKernel kernel;
  std::vector<DType> params;
  std::vector<std::pair<std::uint32_t, DType>> scalars;
  SpellContext spell;
  int heavy = 0;  ///< costly math calls in the graph
};

/// The context of graph `g`'s kernel in variant `v` writing outputs of dtypes `outs` (the name carries the first).
template <class V>
EmitContext emit_context(const ir::Graph& g, const V& v, std::string_view name_given, std::span<const DType> outs) {
  EmitContext e{hashed_and_named(g, v, outs[0], name_given), param_dtypes(g, v.param_of_slot, v.n_params),
                scalar_slots(g), {}, 0};
  for (DType o : outs) e.heavy = prepare_context(e.spell, g, e.params, o);
  return e;
}

/// The kernel text before the device functions: helpers and outlined math wrappers.
void write_prelude(SourceWriter& w, const SpellContext& ctx, int heavy);

}  // namespace fusion::codegen
