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
  input,
  scalar,
  iota,
  // conversions
  cast,
  // unary, same dtype
  neg,
  abs,
  sign,
  square,
  reciprocal,
  floor,
  ceil,
  trunc,
  rint,
  round,
  bit_not,
  // unary, floating result (NumPy picks the float type for integer input)
  sqrt,
  rsqrt,
  cbrt,
  exp,
  exp2,
  expm1,
  log,
  log2,
  log10,
  log1p,
  sin,
  cos,
  tan,
  asin,
  acos,
  atan,
  sinh,
  cosh,
  tanh,
  asinh,
  acosh,
  atanh,
  erf,
  erfc,
  lgamma,
  tgamma,
  // unary, bool result
  logical_not,
  isnan,
  isinf,
  isfinite,
  signbit,
  // binary, promoted dtype
  add,
  sub,
  mul,
  floor_divide,
  remainder,
  fmod,
  pow,
  maximum,
  minimum,
  fmax,
  fmin,
  bit_and,
  bit_or,
  bit_xor,
  shl,
  shr,
  // binary, floating result
  div,
  atan2,
  hypot,
  copysign,
  logaddexp,
  // binary, bool result
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  logical_and,
  logical_or,
  // ternary
  where,
  // a user device function (fz::function) of 1 to 3 operands (a, b, c), already converted to its
  // parameter dtypes; Node::slot is the call's function slot (as lowered), then the function's id
  call,
  // reductions (sum to var: tests walk that range) over the axes of a run-time descriptor (Node::slot); the operand is
  // already converted
  // to the accumulator dtype (sum, prod, mean, var) or to bool (any, all); var is one pass (Welford)
  sum,
  prod,
  min,
  max,
  nanmin,
  nanmax,
  argmin,
  argmax,
  any,
  all,
  mean,
  var,
  // a library call, not spelled in fused code: the matrix product of a and b (NumPy's matmul; operands
  // already converted to the result dtype), run by cuBLASLt as a step of its own (schedule/partition)
  matmul,
  // Ops added later go last: an op's number is part of every kernel's hash (names and cache entries stay).
  // unary, floating result
  gelu,       // x * Phi(x), Phi the normal distribution through erf
  gelu_tanh,  // its tanh approximation (cuBLASLt's GELU epilogue computes this one)
  // indexing (fz::take and its kin, include/fusion/indexing.hpp)
  take_index,  // a: an int64 index, b: the axis's extent (int64); the index made valid by the mode in `slot`
               // (IndexMode: raise records the first bad index for the launcher to report, wrap, clip)
  gather,      // a: an int64 element offset, b: the source array (an input read through a pointer, never
               // loaded per element): the source's element at its own position plus the offset; c (optional):
               // the checked index it came from, -1 when bad (0 is read then)
  // scans (running reductions) along one axis of a run-time descriptor (Node::slot, a ReduceArg: the axis,
  // exclusive, reverse); the operand is already converted to the result dtype
  cumsum,
  cumprod,
  cummax,
  cummin,
  logcumsumexp,
  // a write through an index (fz::index_add, scatter_add, bincount): a: an int64 element offset, b: the value
  // (the target's dtype); adds b atomically to the target's element at its own position plus the offset. The
  // only output of its graph, whose target array is that output (exec's scatter_into)
  scatter_add,
  // the same writes keeping the larger (smaller) of the target's element and b: NumPy's maximum.at, PyTorch's
  // scatter_reduce_ "amax" (NaN wins, as in fz::maximum; of equal values the target's stays)
  scatter_max,
  scatter_min,
  // joining (fz::concatenate, fz::stack): the pieces of a result, each chosen where the element lies
  leading,      // bool: whether the element's coordinate along a joined axis lies before a bound. As packed:
                // a = the axes after the joined one, b = the bound, c = the join's extent along it; the
                // launcher resolves a and b for its index space (schedule/pieces.hpp): a = the axis's extent
                // times those after it, b = the bound times those; the kernel tests i % a < b
  concatenate,  // a ? b : c, except that b's and c's own nodes run only in their branch: a piece's arrays are
                // viewed in the result's index space, shifted to its place, and read only where it lies
  count_
};

enum class Arity : std::uint8_t { leaf, unary, binary, ternary, call, reduction, product, indexing, scan };
/// The dtype an op computes in, from its operands' promoted dtype p.
enum class Operands : std::uint8_t {
  promoted,  ///< p itself
  floating,  ///< NumPy's float type for p (int8 -> float16, int32 -> float64)
  division,  ///< true division: p if floating, else float64
  boolean,   ///< logical ops: bool
};
/// Which operand dtypes an op accepts (checked at compile time in the front end).
enum class Accepts : std::uint8_t { any, not_bool, integers };
/// Ops with more than kHeavyMathBudget costly calls in one kernel call them through __noinline__ wrappers.
enum class Cost : std::uint8_t { cheap, heavy };

/// Everything fusion knows about an op, in one row. Adding an op is a row here, its spelling when it is
/// not a plain math call (src/codegen/spell.cpp), a front-end function and its host reference.
struct OpInfo {
  Op op;
  const char* name;            ///< the public name (fz:: function or NumPy ufunc), used in kernel names
  Arity arity;
  Operands operands = Operands::promoted;
  bool bool_as_int8 = false;   ///< NumPy computes it on bool operands as int8
  Accepts accepts = Accepts::any;
  bool bool_result = false;    ///< the result is bool (comparisons, tests, logical ops)
  bool commutative = false;    ///< operands may be swapped (canonical order merges x*y and y*x)
  Cost cost = Cost::cheap;
  const char* math = "";       ///< the CUDA math function computing it on floating operands, if one does
};

inline constexpr OpInfo kOps[] = {
    // leaves
    {Op::input, "input", Arity::leaf},
    {Op::scalar, "scalar", Arity::leaf},
    {Op::iota, "arange", Arity::leaf},
    {Op::cast, "cast", Arity::unary},
    // unary, same dtype
    {Op::neg, "negative", Arity::unary, Operands::promoted, false, Accepts::not_bool},
    {Op::abs, "abs", Arity::unary, Operands::promoted, false, Accepts::any, false, false, Cost::cheap, "fabs"},
    {Op::sign, "sign", Arity::unary, Operands::promoted, false, Accepts::not_bool},
    {Op::square, "square", Arity::unary},
    {Op::reciprocal, "reciprocal", Arity::unary},
    {Op::floor, "floor", Arity::unary, Operands::promoted, false, Accepts::any, false, false, Cost::cheap, "floor"},
    {Op::ceil, "ceil", Arity::unary, Operands::promoted, false, Accepts::any, false, false, Cost::cheap, "ceil"},
    {Op::trunc, "trunc", Arity::unary, Operands::promoted, false, Accepts::any, false, false, Cost::cheap, "trunc"},
    {Op::rint, "rint", Arity::unary, Operands::promoted, false, Accepts::any, false, false, Cost::cheap, "rint"},
    {Op::round, "round", Arity::unary, Operands::promoted, false, Accepts::any, false, false, Cost::cheap, "round"},
    {Op::bit_not, "invert", Arity::unary, Operands::promoted, false, Accepts::integers},
    // unary, floating result
    {Op::sqrt, "sqrt", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::cheap, "sqrt"},
    {Op::rsqrt, "rsqrt", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::cheap, "rsqrt"},
    {Op::cbrt, "cbrt", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "cbrt"},
    {Op::exp, "exp", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::cheap, "exp"},
    {Op::exp2, "exp2", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::cheap, "exp2"},
    {Op::expm1, "expm1", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "expm1"},
    {Op::log, "log", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::cheap, "log"},
    {Op::log2, "log2", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::cheap, "log2"},
    {Op::log10, "log10", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::cheap, "log10"},
    {Op::log1p, "log1p", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "log1p"},
    {Op::sin, "sin", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "sin"},
    {Op::cos, "cos", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "cos"},
    {Op::tan, "tan", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "tan"},
    {Op::asin, "asin", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "asin"},
    {Op::acos, "acos", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "acos"},
    {Op::atan, "atan", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "atan"},
    {Op::sinh, "sinh", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "sinh"},
    {Op::cosh, "cosh", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "cosh"},
    {Op::tanh, "tanh", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "tanh"},
    {Op::asinh, "asinh", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "asinh"},
    {Op::acosh, "acosh", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "acosh"},
    {Op::atanh, "atanh", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "atanh"},
    {Op::erf, "erf", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "erf"},
    {Op::erfc, "erfc", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "erfc"},
    {Op::lgamma, "lgamma", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "lgamma"},
    {Op::tgamma, "tgamma", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "tgamma"},
    // unary, bool result
    {Op::logical_not, "logical_not", Arity::unary, Operands::boolean, false, Accepts::any, true},
    {Op::isnan, "isnan", Arity::unary, Operands::promoted, false, Accepts::any, true},
    {Op::isinf, "isinf", Arity::unary, Operands::promoted, false, Accepts::any, true},
    {Op::isfinite, "isfinite", Arity::unary, Operands::promoted, false, Accepts::any, true},
    {Op::signbit, "signbit", Arity::unary, Operands::promoted, false, Accepts::any, true},
    // binary, promoted dtype
    {Op::add, "add", Arity::binary, Operands::promoted, false, Accepts::any, false, true},
    {Op::sub, "sub", Arity::binary, Operands::promoted, false, Accepts::not_bool},
    {Op::mul, "mul", Arity::binary, Operands::promoted, false, Accepts::any, false, true},
    {Op::floor_divide, "floor_divide", Arity::binary, Operands::promoted, true},
    {Op::remainder, "remainder", Arity::binary, Operands::promoted, true},
    {Op::fmod, "fmod", Arity::binary, Operands::promoted, true, Accepts::any, false, false, Cost::cheap, "fmod"},
    {Op::pow, "pow", Arity::binary, Operands::promoted, true, Accepts::any, false, false, Cost::heavy, "pow"},
    // not commutative: with operands that compare equal (0 and -0) NumPy returns the first
    {Op::maximum, "maximum", Arity::binary},
    {Op::minimum, "minimum", Arity::binary},
    {Op::fmax, "fmax", Arity::binary, Operands::promoted, false, Accepts::any, false, false, Cost::cheap, "fmax"},
    {Op::fmin, "fmin", Arity::binary, Operands::promoted, false, Accepts::any, false, false, Cost::cheap, "fmin"},
    {Op::bit_and, "bitwise_and", Arity::binary, Operands::promoted, false, Accepts::integers, false, true},
    {Op::bit_or, "bitwise_or", Arity::binary, Operands::promoted, false, Accepts::integers, false, true},
    {Op::bit_xor, "bitwise_xor", Arity::binary, Operands::promoted, false, Accepts::integers, false, true},
    {Op::shl, "left_shift", Arity::binary, Operands::promoted, true, Accepts::integers},
    {Op::shr, "right_shift", Arity::binary, Operands::promoted, true, Accepts::integers},
    // binary, floating result
    {Op::div, "div", Arity::binary, Operands::division},
    {Op::atan2, "atan2", Arity::binary, Operands::floating, false, Accepts::any, false, false, Cost::heavy, "atan2"},
    {Op::hypot, "hypot", Arity::binary, Operands::floating, false, Accepts::any, false, true, Cost::heavy, "hypot"},
    {Op::copysign, "copysign", Arity::binary, Operands::floating, false, Accepts::any, false, false, Cost::cheap,
     "copysign"},
    {Op::logaddexp, "logaddexp", Arity::binary, Operands::floating},
    // binary, bool result
    {Op::eq, "eq", Arity::binary, Operands::promoted, false, Accepts::any, true, true},
    {Op::ne, "ne", Arity::binary, Operands::promoted, false, Accepts::any, true, true},
    {Op::lt, "lt", Arity::binary, Operands::promoted, false, Accepts::any, true},
    {Op::le, "le", Arity::binary, Operands::promoted, false, Accepts::any, true},
    {Op::gt, "gt", Arity::binary, Operands::promoted, false, Accepts::any, true},
    {Op::ge, "ge", Arity::binary, Operands::promoted, false, Accepts::any, true},
    {Op::logical_and, "logical_and", Arity::binary, Operands::boolean, false, Accepts::any, true, true},
    {Op::logical_or, "logical_or", Arity::binary, Operands::boolean, false, Accepts::any, true, true},
    // ternary
    {Op::where, "where", Arity::ternary},
    {Op::call, "call", Arity::call},
    // reductions
    {Op::sum, "sum", Arity::reduction},
    {Op::prod, "prod", Arity::reduction},
    {Op::min, "min", Arity::reduction},
    {Op::max, "max", Arity::reduction},
    {Op::nanmin, "nanmin", Arity::reduction},
    {Op::nanmax, "nanmax", Arity::reduction},
    {Op::argmin, "argmin", Arity::reduction},
    {Op::argmax, "argmax", Arity::reduction},
    {Op::any, "any", Arity::reduction},
    {Op::all, "all", Arity::reduction},
    {Op::mean, "mean", Arity::reduction},
    {Op::var, "var", Arity::reduction},
    {Op::matmul, "matmul", Arity::product},
    {Op::gelu, "gelu", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy},
    {Op::gelu_tanh, "gelu_tanh", Arity::unary, Operands::floating, false, Accepts::any, false, false, Cost::heavy},
    {Op::take_index, "index", Arity::indexing},
    {Op::gather, "take", Arity::indexing},
    {Op::cumsum, "cumsum", Arity::scan},
    {Op::cumprod, "cumprod", Arity::scan},
    {Op::cummax, "cummax", Arity::scan},
    {Op::cummin, "cummin", Arity::scan},
    {Op::logcumsumexp, "logcumsumexp", Arity::scan},
    {Op::scatter_add, "scatter_add", Arity::indexing},
    {Op::scatter_max, "scatter_max", Arity::indexing},
    {Op::scatter_min, "scatter_min", Arity::indexing},
    {Op::leading, "leading", Arity::ternary, Operands::promoted, false, Accepts::any, true},
    {Op::concatenate, "concatenate", Arity::ternary},
};
constexpr bool rows_in_enum_order() {
  int i = 0;
  for (const OpInfo& o : kOps)
    if (static_cast<int>(o.op) != i++) return false;
  return i == static_cast<int>(Op::count_);
}
static_assert(rows_in_enum_order(), "kOps has one row per Op, in the enum's order");

constexpr const OpInfo& op_info(Op op) { return kOps[static_cast<int>(op)]; }
constexpr Arity arity(Op op) { return op_info(op).arity; }
constexpr bool is_reduction(Op op) { return op < Op::count_ && arity(op) == Arity::reduction; }
/// A matrix product: a library call with a step of its own, its result read by the fused code around it.
constexpr bool is_product(Op op) { return op < Op::count_ && arity(op) == Arity::product; }
/// fz::take's nodes: an index made valid, and the read through it.
constexpr bool is_indexing(Op op) { return op < Op::count_ && arity(op) == Arity::indexing; }
/// A scan: a running reduction along one axis, an output per element (a kernel of its own, schedule/partition).
/// A write through an index into the call's target (its graph's only output).
constexpr bool is_scatter(Op op) { return op == Op::scatter_add || op == Op::scatter_max || op == Op::scatter_min; }
constexpr bool is_scan(Op op) { return op < Op::count_ && arity(op) == Arity::scan; }
/// The result dtype of a scan of `in`: sums and products widen integers as sum does (NumPy's cumsum), cummax
/// and cummin keep the dtype, logcumsumexp is floating.
constexpr DType scan_result_dtype(Op op, DType in) {
  if (op == Op::cummax || op == Op::cummin) return in;
  if (op == Op::logcumsumexp) return float_for(in);
  if (in == DType::bool_ || is_signed_int(in)) return DType::int64;
  return is_unsigned_int(in) ? DType::uint64 : in;
}
/// Reductions and scans: nodes whose Node::slot is a run-time descriptor (ReduceArg) of the call.
constexpr bool takes_descriptor(Op op) { return is_reduction(op) || is_scan(op); }
/// How fz::take treats an index outside [-n, n): NumPy's modes.
enum class IndexMode : std::uint8_t {
  raise,  ///< an error (IndexError), reported after the kernel
  wrap,   ///< taken modulo n
  clip,   ///< clamped into [0, n - 1] (negative indices become 0, as NumPy's clip mode has it)
};
constexpr bool is_elementwise(Op op) {
  return arity(op) == Arity::unary || arity(op) == Arity::binary || arity(op) == Arity::ternary;
}
/// Most operands a user function call takes (Node has three operand fields).
inline constexpr int kMaxCallArgs = 3;
constexpr bool is_float_result(Op op) {
  return op_info(op).operands == Operands::floating || op_info(op).operands == Operands::division;
}
constexpr bool is_bool_result(Op op) { return op_info(op).bool_result; }
constexpr bool is_bitwise(Op op) { return op_info(op).accepts == Accepts::integers; }
constexpr bool is_commutative(Op op) { return op_info(op).commutative; }

/// The dtype an op's operands are converted to before it runs (the IR makes these casts explicit).
constexpr DType operand_dtype(Op op, DType a, DType b) {
  const DType p = promote_types(a, b);
  switch (op_info(op).operands) {
    case Operands::boolean: return DType::bool_;
    case Operands::division: return is_floating(p) ? p : DType::float64;
    case Operands::floating: return float_for(p);
    case Operands::promoted: break;
  }
  return p == DType::bool_ && op_info(op).bool_as_int8 ? DType::int8 : p;
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
  switch (op_info(op).accepts) {
    case Accepts::integers: return !is_floating(p);
    case Accepts::not_bool: return p != DType::bool_;  // NumPy forbids '-' on booleans
    case Accepts::any: break;
  }
  return true;
}
constexpr bool accepts(Op op, DType a) { return accepts(op, a, a); }

/// What a reduction's result dtype is, from its input dtype `in` (NumPy's rules).
enum class ReduceResult : std::uint8_t {
  same,       ///< `in` (min, max)
  widened,    ///< bool and signed integers to int64, unsigned to uint64, floats as they are (sum, prod)
  floating,   ///< `in` if floating, else float64 (mean, var)
  index,      ///< int64 (argmin, argmax)
  boolean,    ///< bool (any, all)
};
/// What a reduction accumulates in, from its result dtype.
enum class ReduceAccumulator : std::uint8_t {
  result,   ///< the result dtype itself (min, max: exact in any dtype)
  compute,  ///< the result's compute dtype: 16-bit floats add and multiply in float32
  boolean,  ///< bool
};
/// The value an empty reduction starts from (spelled per dtype by codegen/reduce_ops.cpp).
enum class ReduceIdentity : std::uint8_t { zero, one, false_, true_, highest, lowest, nan_or_highest, nan_or_lowest };

/// Everything fusion knows about a reduction, in one row: adding a reduction is a row here, an Op row
/// above, its combine step (src/codegen/reduce_ops.cpp), a front-end function and its host reference.
struct ReduceInfo {
  Op op;
  ReduceResult result;
  ReduceAccumulator accumulator;
  ReduceIdentity identity;
  bool needs_nonempty = false;  ///< no identity NumPy accepts: an empty extent is an error
  bool is_arg = false;          ///< the result is an index (the accumulator carries value and index)
  bool divides = false;         ///< the result divides by the count reduced (a kernel takes the divisor)
};

inline constexpr ReduceInfo kReductions[] = {
    {Op::sum, ReduceResult::widened, ReduceAccumulator::compute, ReduceIdentity::zero},
    {Op::prod, ReduceResult::widened, ReduceAccumulator::compute, ReduceIdentity::one},
    {Op::min, ReduceResult::same, ReduceAccumulator::result, ReduceIdentity::highest, true},
    {Op::max, ReduceResult::same, ReduceAccumulator::result, ReduceIdentity::lowest, true},
    {Op::nanmin, ReduceResult::same, ReduceAccumulator::result, ReduceIdentity::nan_or_highest, true},
    {Op::nanmax, ReduceResult::same, ReduceAccumulator::result, ReduceIdentity::nan_or_lowest, true},
    {Op::argmin, ReduceResult::index, ReduceAccumulator::result, ReduceIdentity::highest, true, true},
    {Op::argmax, ReduceResult::index, ReduceAccumulator::result, ReduceIdentity::lowest, true, true},
    {Op::any, ReduceResult::boolean, ReduceAccumulator::boolean, ReduceIdentity::false_},
    {Op::all, ReduceResult::boolean, ReduceAccumulator::boolean, ReduceIdentity::true_},
    {Op::mean, ReduceResult::floating, ReduceAccumulator::compute, ReduceIdentity::zero, false, false, true},
    {Op::var, ReduceResult::floating, ReduceAccumulator::compute, ReduceIdentity::zero, false, false, true},
};
constexpr bool reductions_in_enum_order() {
  int i = static_cast<int>(Op::sum);
  for (const ReduceInfo& r : kReductions)
    if (static_cast<int>(r.op) != i++ || !is_reduction(r.op)) return false;
  return i == static_cast<int>(Op::var) + 1;
}
static_assert(reductions_in_enum_order(),
              "kReductions has one row per reduction Op, in the enum's order, sum to var");

constexpr const ReduceInfo& reduce_info(Op op) { return kReductions[static_cast<int>(op) - static_cast<int>(Op::sum)]; }

/// NumPy's result dtype of a reduction: integer and bool sums and products widen to int64 (uint64 for
/// unsigned), the mean of integers is float64, arg-reductions give int64 indices, any/all give bool.
constexpr DType reduction_result_dtype(Op op, DType in) {
  switch (reduce_info(op).result) {
    case ReduceResult::widened:
      if (in == DType::bool_ || is_signed_int(in)) return DType::int64;
      return is_unsigned_int(in) ? DType::uint64 : in;
    case ReduceResult::floating: return is_floating(in) ? in : DType::float64;
    case ReduceResult::index: return DType::int64;
    case ReduceResult::boolean: return DType::bool_;
    case ReduceResult::same: break;
  }
  return in;
}
/// The dtype a reduction accumulates in for a given result dtype: 16-bit floats accumulate in float32.
constexpr DType reduction_accumulator_dtype(Op op, DType result) {
  switch (reduce_info(op).accumulator) {
    case ReduceAccumulator::compute: return dtype_info(result).compute;
    case ReduceAccumulator::boolean: return DType::bool_;
    case ReduceAccumulator::result: break;
  }
  return result;
}
/// Reductions that have no identity: an empty extent is an error.
constexpr bool needs_nonempty(Op op) { return reduce_info(op).needs_nonempty; }
/// mean and var: the result divides by the count reduced.
constexpr bool divides_by_count(Op op) { return is_reduction(op) && reduce_info(op).divides; }
/// argmin and argmax: an index result, an accumulator of value and index.
constexpr bool is_arg_reduction(Op op) { return is_reduction(op) && reduce_info(op).is_arg; }

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
  /// Compiled with approximate float32 math (fz::FastMath, fz::fast_math(e)): part of the hash and name.
  bool fast_math = false;

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
  /// The index `x` (converted to int64) made valid for an axis of extent `n` (an int64 node) by `mode`.
  std::uint32_t take_index(std::uint32_t x, std::uint32_t n, IndexMode mode);
  /// The element of source input `source` at its own position plus element offset `offset` (int64).
  /// `checked`: the take_index node of a checked index (its -1 marks a bad one: 0 is read instead).
  std::uint32_t gather(std::uint32_t offset, std::uint32_t source, std::uint32_t checked = kNone);
  /// Adds `value` (converted to `target`, the target's dtype) at element offset `offset` from the target's
  /// position: the graph's output node of an fz::index_add.
  /// `checked`: the take_index node of a checked index (its -1 marks a bad one: nothing is added).
  /// A write through an index (`op`: scatter_add, scatter_max or scatter_min).
  std::uint32_t scatter(Op op, std::uint32_t offset, std::uint32_t value, DType target, std::uint32_t checked = kNone);
  /// Whether the element's coordinate along the axis with `after` axes after it is below `bound`, for a join of
  /// extent `extent` along it (int64 scalar nodes, resolved at launch): Op::leading.
  std::uint32_t leading(std::uint32_t after, std::uint32_t bound, std::uint32_t extent);
  /// `cond ? x : y`, the nodes only `x` (`y`) needs computed in its branch alone (Op::concatenate); x and y
  /// converted to their promoted dtype.
  std::uint32_t join(std::uint32_t cond, std::uint32_t x, std::uint32_t y);
  /// The scan `op` of `x` (converted to its result dtype), along the axis of the next descriptor slot.
  std::uint32_t scan(Op op, std::uint32_t x);
  /// The matrix product of `x` and `y`, each converted to `result` (a floating dtype) first.
  std::uint32_t product(std::uint32_t x, std::uint32_t y, DType result);
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

/// The join of pieces `value[0..n)` given `below[k]`, whether an element lies before piece k's end: a balanced
/// tree of Op::concatenate choices, so an element passes about log2(n) tests, not up to n - 1.
std::uint32_t join_tree(Graph& g, const std::uint32_t* value, const std::uint32_t* below, int n);

/// Per node: whether it is computed only inside a concatenate's piece (reached from the outputs only through
/// an Op::concatenate's b or c): its arrays are read, and its value computed, only where that piece lies.
std::vector<bool> inside_pieces(const Graph& g);
/// Whether the graph joins pieces (has an Op::concatenate node).
bool has_pieces(const Graph& g);
/// A var (or std) over floating values: a layer kernel computes it as the mean of squared deviations.
inline bool is_floating_variance(const Node& n) { return n.op == Op::var && is_floating(n.dtype); }
/// Whether the graph has such a variance among its reductions.
bool has_floating_variance(const Graph& g);
/// Per input slot: whether the kernel reads it through a pointer at the element's position, never loading it
/// per element: fz::take's sources (read where the index says) and arrays inside a concatenate's pieces (read
/// only where their piece lies). Empty when there is none.
std::vector<bool> pointer_inputs(const Graph& g);

/// Stable 64-bit hash of a graph's structure (same on every machine and run).
std::uint64_t hash(const Graph& g);

/// The public name of an op ("add", "sin", "floor_divide"), used in kernel names and messages.
constexpr const char* op_name(Op op) { return op_info(op).name; }

}  // namespace fusion::ir
