// SPDX-License-Identifier: Apache-2.0
// The intermediate representation every expression lowers to: a small DAG of typed nodes. The typing
// rules live here (constexpr) so that C++ result types and the IR can never disagree.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fusion/dtype.hpp"

namespace fusion::ir {

enum class Op : std::uint8_t {
  // leaves
  input, scalar, iota,
  // conversions
  cast,
  // unary, same dtype
  neg, abs, sign, square, reciprocal, floor, ceil, trunc, rint, round, bit_not,
  // unary, floating result (NumPy picks the float type for integer input)
  sqrt, rsqrt, cbrt, exp, exp2, expm1, log, log2, log10, log1p, sin, cos, tan, asin, acos, atan, sinh, cosh,
  tanh, asinh, acosh, atanh, erf, erfc, lgamma, tgamma,
  // unary, bool result
  logical_not, isnan, isinf, isfinite, signbit,
  // binary, promoted dtype
  add, sub, mul, floor_divide, remainder, fmod, pow, maximum, minimum, fmax, fmin, bit_and, bit_or, bit_xor,
  shl, shr,
  // binary, floating result
  div, atan2, hypot, copysign, logaddexp,
  // binary, bool result
  eq, ne, lt, le, gt, ge, logical_and, logical_or,
  // ternary
  where,
  // a user device function (fz::function) of 1 to 3 operands (a, b, c), already converted to its
  // parameter dtypes; Node::slot is the call's function slot (as lowered), then the function's id
  call,
  // reductions over the axes of a run-time descriptor (Node::slot); the operand is already converted
  // to the accumulator dtype (sum, prod, mean) or to bool (any, all)
  sum, prod, min, max, nanmin, nanmax, argmin, argmax, any, all, mean,
  count_
};
inline constexpr Op kLastElementwise = Op::where;

enum class Arity : std::uint8_t { leaf, unary, binary, ternary, call, reduction };
constexpr Arity arity(Op op) {
  if (op <= Op::iota) return Arity::leaf;
  if (op <= Op::signbit) return Arity::unary;
  if (op <= Op::logical_or) return Arity::binary;
  if (op == Op::where) return Arity::ternary;
  if (op == Op::call) return Arity::call;
  return Arity::reduction;
}
constexpr bool is_reduction(Op op) { return op > Op::call && op < Op::count_; }
/// Most operands a user function call takes (Node has three operand fields).
inline constexpr int kMaxCallArgs = 3;
constexpr bool is_float_result(Op op) {
  return (op >= Op::sqrt && op <= Op::tgamma) || (op >= Op::div && op <= Op::logaddexp);
}
constexpr bool is_bool_result(Op op) {
  return (op >= Op::logical_not && op <= Op::signbit) || (op >= Op::eq && op <= Op::logical_or);
}
constexpr bool is_bitwise(Op op) { return op == Op::bit_not || (op >= Op::bit_and && op <= Op::shr); }

/// The dtype an op's operands are converted to before it runs (the IR makes these casts explicit).
constexpr DType operand_dtype(Op op, DType a, DType b) {
  const DType p = promote_types(a, b);
  if (op == Op::logical_and || op == Op::logical_or || op == Op::logical_not) return DType::bool_;
  if (op == Op::div) return is_floating(p) ? p : DType::float64;  // true division
  if (is_float_result(op)) return float_for(p);
  // NumPy computes these on bool inputs as int8
  if (p == DType::bool_ && (op == Op::floor_divide || op == Op::remainder || op == Op::fmod || op == Op::pow ||
                            op == Op::shl || op == Op::shr))
    return DType::int8;
  return p;
}
constexpr DType operand_dtype(Op op, DType a) { return operand_dtype(op, a, a); }

/// The dtype of an op's result.
constexpr DType result_dtype(Op op, DType a, DType b) {
  return is_bool_result(op) ? DType::bool_ : operand_dtype(op, a, b);
}
constexpr DType result_dtype(Op op, DType a) { return result_dtype(op, a, a); }

/// Whether an op accepts operands of these dtypes (checked by static_assert in the front end).
constexpr bool accepts(Op op, DType a, DType b) {
  const DType p = operand_dtype(op, a, b);
  if (is_bitwise(op)) return !is_floating(p);
  if (op == Op::sub || op == Op::neg) return p != DType::bool_;  // NumPy forbids '-' on booleans
  if (op == Op::sign) return p != DType::bool_;
  return true;
}
constexpr bool accepts(Op op, DType a) { return accepts(op, a, a); }

/// NumPy's result dtype of a reduction: integer and bool sums and products widen to int64 (uint64 for
/// unsigned), the mean of integers is float64, arg-reductions give int64 indices, any/all give bool.
constexpr DType reduction_result_dtype(Op op, DType in) {
  switch (op) {
    case Op::sum: case Op::prod:
      if (in == DType::bool_ || is_signed_int(in)) return DType::int64;
      return is_unsigned_int(in) ? DType::uint64 : in;
    case Op::mean: return is_floating(in) ? in : DType::float64;
    case Op::argmin: case Op::argmax: return DType::int64;
    case Op::any: case Op::all: return DType::bool_;
    default: return in;  // min, max, nanmin, nanmax
  }
}
/// The dtype a reduction accumulates in for a given result dtype: 16-bit floats accumulate in float32.
constexpr DType reduction_accumulator_dtype(Op op, DType result) {
  if (op == Op::any || op == Op::all) return DType::bool_;
  if (op == Op::sum || op == Op::prod || op == Op::mean)
    return (result == DType::float16 || result == DType::bfloat16) ? DType::float32 : result;
  return result;
}
/// Reductions that have no identity: an empty extent is an error.
constexpr bool needs_nonempty(Op op) {
  return op == Op::min || op == Op::max || op == Op::nanmin || op == Op::nanmax || op == Op::argmin || op == Op::argmax;
}

inline constexpr std::uint32_t kNone = 0xffffffffu;

struct Node {
  Op op;
  DType dtype;
  std::uint32_t a = kNone, b = kNone, c = kNone;  // operand node indices
  std::uint32_t slot = 0;                        // input/scalar parameter index, or reduction descriptor
  bool operator==(const Node&) const = default;
};

/// An expression DAG. Nodes are in topological order (operands before users).
struct Graph {
  std::vector<Node> nodes;
  std::vector<std::uint32_t> outputs;
  std::uint32_t n_inputs = 0, n_scalars = 0, n_reductions = 0, n_functions = 0;

  // Builders used by lowering: they insert the casts the typing rules require.
  std::uint32_t input(DType d);
  std::uint32_t scalar(DType d);
  std::uint32_t iota();
  std::uint32_t cast(std::uint32_t x, DType to);
  /// A cast the user asked for: like cast(), but a computed 16-bit float value is rounded to its
  /// storage precision even when the dtype does not change (16-bit values otherwise stay in float).
  std::uint32_t explicit_cast(std::uint32_t x, DType to);
  std::uint32_t unary(Op op, std::uint32_t x);
  std::uint32_t binary(Op op, std::uint32_t x, std::uint32_t y);
  std::uint32_t where(std::uint32_t cond, std::uint32_t x, std::uint32_t y);
  /// A reduction with result dtype `result` (reduction_result_dtype unless the user chose one); takes
  /// the next reduction descriptor slot. `x` is converted to the accumulator dtype first.
  std::uint32_t reduce(Op op, std::uint32_t x, DType result);
  /// A call of the next function slot with result dtype `result`; each argument is converted to its
  /// parameter's dtype first.
  std::uint32_t call(DType result, const std::uint32_t* args, const DType* params, int n);
  /// Appends a node exactly as given (operands already in this graph), for graphs rebuilt from others.
  std::uint32_t append(const Node& n) {
    nodes.push_back(n);
    return static_cast<std::uint32_t>(nodes.size() - 1);
  }
  DType dtype(std::uint32_t n) const { return nodes[n].dtype; }
};

/// Canonical form: duplicate inputs merged (by `same_input`, slot -> representative slot), common
/// subexpressions removed, dead nodes dropped. Slots keep their numbering so arguments need no remap.
Graph canonicalize(const Graph& g, const std::vector<std::uint32_t>& input_representative = {});

/// Stable 64-bit hash of a graph's structure (same on every machine and run).
std::uint64_t hash(const Graph& g);

/// NumPy-style name of an op ("add", "sin", "floor_divide"), used in kernel names.
const char* op_name(Op op);

}  // namespace fusion::ir
