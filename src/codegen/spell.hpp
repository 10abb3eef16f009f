// SPDX-License-Identifier: Apache-2.0
// Spelling IR ops in CUDA: types and conversions from the dtype table, math calls from the op table,
// the rest (NumPy semantics, helpers, heavy-math outlining) here. Nothing else writes operator text.
#pragma once
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fusion/ir.hpp"

namespace fusion::codegen {

/// The type values of a dtype live in while computing (16-bit floats compute in float).
std::string_view compute_type(DType d);
/// The type of a dtype's elements in memory (16-bit floats are raw bits).
std::string_view storage_type(DType d);
/// Converts a loaded element to its compute type.
std::string load_conversion(DType d, const std::string& value);
/// Converts a compute value of `from` to the storage of `to` (rounding once for 16-bit floats).
std::string store_conversion(DType from, DType to, const std::string& value);

/// Helper functions an op may need; emitted once per kernel, only when used.
enum class Helper {
  floor_divide,
  remainder,
  fmod_int,
  pow_int,
  maximum,
  minimum,
  logaddexp,
  shifts,
  sign,
  tgamma,
  log1p_fast,
  exp16,            // exp, division and sqrt whose result is a half or a bfloat16: float's full-range
  div16,            // approximations (spell.cpp)
  sqrt16,
  gelu,
  take_index,
  scatter_add,
  scatter_extreme,  // scatter_max and scatter_min
  scatter_exact,    // a deterministic floating scatter_add (exact_sum.hpp)
  leading,          // fz::concatenate's test of where an element lies
  abs_int,          // abs of a signed integer, through PTX
  neg_int,          // negation of an integer, through PTX
  wrap_narrow       // an 8- or 16-bit integer result wrapped to its width, through PTX
};
const char* helper_source(Helper h);
/// The device functions converting a 16-bit float dtype to and from float (its to_float, from_float).
const char* conversion_source(DType d);

struct SpellContext;
/// Where a deterministic scatter's exact sums are: none (atomics on the target), in global memory, or in each
/// block's shared copy of the bins.
enum class ExactSums : std::uint8_t { none, global, shared };
/// Records the conversion helpers loading and storing dtype `d` needs (16-bit floats).
void need_conversions(SpellContext& ctx, DType d);

/// What spelling a kernel's ops needs around them.
struct SpellContext {
  std::set<DType> conversions;       ///< dtypes whose load/store conversions to emit (16-bit floats)
  std::set<Helper> helpers;          ///< helper functions to emit
  std::set<std::string> outlined;    ///< math functions called through a __noinline__ wrapper
  bool outline_heavy_math = false;   ///< route costly math calls through wrappers (see kHeavyMathBudget)
  std::set<std::uint32_t> functions; ///< fz::function ids the kernel calls (defined once each)
  bool fast_math = false;            ///< the kernel compiles with fast math: float log1p is spelled approximately
  ExactSums exact_sums = ExactSums::none;  ///< where a floating scatter_add's exact sums are (Variant::exact_words)
};

/// Kernels with more costly math calls than this call them through __noinline__ wrappers: inlining
/// each sinf/powf slow path makes ptxas time grow steeply (a 256-sin chain: 114 s inlined, 1 s outlined).
inline constexpr int kHeavyMathBudget = 8;
/// True for ops whose CUDA implementation is large (trigonometric, hyperbolic, pow, gamma, erf, ...).
bool is_heavy_math(ir::Op op);
/// The __noinline__ wrapper for math function `f` (a template over float and double).
std::string outlined_source(const std::string& f, bool binary);

/// The name of the kernel parameter (and fz_expr argument) that a checked index reports a bad value through.
inline constexpr const char* kIndexFault = "fz_fault";
/// Its ArgSource::workspace index: the launcher passes the device's fault word and reports what it holds.
inline constexpr int kIndexFaultWorkspace = 2;
/// The name of fz_expr's pointer argument at the element's position in a scatter's target.
inline constexpr const char* kScatterTarget = "fz_target";
/// The value a scatter's private bin starts from and leaves unflushed: 0 for adds, the dtype's lowest
/// (highest) for max (min).
std::string scatter_identity(ir::Op op, DType d);
/// The device function writing through an index for scatter op `op` (fz_scatter_add, _max, _min).
std::string scatter_function(ir::Op op);
/// Whether graph `g` checks an index (fz::take in IndexMode::raise): its kernel takes kIndexFault.
bool checks_indices(const ir::Graph& g);

/// The expression computing node `n` from its operands' value names (`a`, `b`, `c`) in compute types.
/// `operand` is the operands' dtype. Records the helpers it relies on in `ctx`. `approximate`: the node's
/// approximated() entry.
std::string spell(const ir::Node& n, DType operand, const std::string& a, const std::string& b,
                  const std::string& c, SpellContext& ctx, bool approximate = false);
/// Per node of `g`: whether spell() computes it with float's approximations, far inside the 16-bit rounding its
/// value meets (a half or bfloat16 result; a float32 value that reaches only 16-bit roundings). Not under fast math,
/// which has its own.
std::vector<bool> approximated(const ir::Graph& g);

}  // namespace fusion::codegen
