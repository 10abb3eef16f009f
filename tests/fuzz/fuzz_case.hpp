// SPDX-License-Identifier: Apache-2.0
// The differential fuzzer's test case: random input arrays (dtype, broadcast shape, layout, values) and
// one to three expression trees over them. A case is plain data, so that the shrinker can edit it and
// the printer can write it out as C++. `build` lowers it to the IR the engine and the reference share.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fusion/fusion.hpp"
#include "reference.hpp"

namespace fuzz {

using fusion::DType;
using fusion::ir::Op;

/// How an input array is laid out in memory: its view over a base allocation.
enum class Layout : std::uint8_t { contiguous, transposed, reversed, strided };
/// Which values an input holds: `rich` mixes ordinary values with 0, -0, +-inf, NaN, huge, tiny and
/// integer extremes; `simple` holds small, exact values (the shrinker tries it to get a readable repro).
enum class Values : std::uint8_t { rich, simple };

struct Input {
  DType dtype = DType::float32;
  std::vector<int> dims;  // per axis: a dimension variable of the case, or -1 for a broadcast axis of 1
  Layout layout = Layout::contiguous;
  std::uint64_t seed = 0;
  Values values = Values::rich;
};

enum class Kind : std::uint8_t { input, scalar, cast, unary, binary, where, reduce, scan, gather, scatter, join, call, random, pad,
                                 product };

/// A node of an expression tree, as a person would write it with fusion's operators.
struct Expr {
  Kind kind = Kind::input;
  Op op = Op::input;                 // unary, binary and reduce: which op
  DType dtype = DType::float32;      // cast: the target
  int input = -1;                    // input: which of the case's inputs
  double value = 0;                  // scalar: a C++ literal of kind `scalar_kind`
  fusion::ScalarKind scalar_kind = fusion::ScalarKind::floating;
  unsigned axes = 0;                 // reduce: bit d set = reduce axis d of the operand
  bool all_axes = false, keepdims = false, negative_axes = false;  // negative: written as -1, -2, ...
  int axis = 0;                      // scan: along which axis of the operand; gather: of the source
  bool exclusive = false, reverse = false;  // scan: its options
  fusion::ir::IndexMode mode = fusion::ir::IndexMode::wrap;  // gather: what makes an index valid
  // gather: fz::take_along_axis(args[0], args[1], axis): args[0] an input leaf (the source), args[1] an
  // integer expression of the source's rank (the index), broadcasting with it off the axis
  // scatter (a case's only tree): fz::scatter_add / scatter_max / scatter_min (`op`) of the values args[1] into
  // input `input` (the target, written in place: no tree reads it) at the integer index args[0] along `axis`
  // join: fz::concatenate(axis, args...), the pieces of one shape off the axis (no reduction, scan or join inside:
  // the front end computes such pieces first, into arrays)
  // pad: fz::pad(args[0], widths, value): `widths[d]` elements of the integer literal `value` before and after
  // axis d (no reduction, scan or join inside, as for a join's piece)
  // product: fz::matmul(args[0], args[1]) (NumPy's matmul: batch axes broadcast; both operands converted to their
  // promoted dtype, a floating one)
  // call: user_functions()[function] of args (converted to its parameters); random: random_generators()[function]
  // at (seed, offset), a leaf whose element i is the generator's value at the flat index i of the outputs (only
  // an operand of output 0's root, outside fz::Unfused: elsewhere the index space is a temporary's)
  int function = 0;
  std::uint64_t seed = 0, offset = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> widths;  // pad: (before, after) per axis
  std::vector<Expr> args;
};

struct Case {
  std::uint64_t seed = 0;
  std::vector<std::int64_t> dim_sizes;  // the dimension variables' extents
  std::vector<int> out_dims;            // the outputs' shape, in dimension variables
  std::vector<Input> inputs;
  std::vector<Expr> outputs;            // several: one fz::tie kernel
  bool into = false;                    // write into preallocated outputs (else the engine allocates)
  Layout out_layout = Layout::contiguous;  // into: each output is this view of a larger, poisoned allocation
  bool unfused = false;                 // evaluate under fz::Unfused
  bool deterministic = false;           // a scatter: run under fz::Deterministic (exact floating sums)
  bool generated = false;               // products run as fusion's generated kernels (fz::GeneratedProducts)
  /// into: per output, the input whose own view it is written into (x = f(x.T, y); a tie may swap two:
  /// fz::tie(x, y) = (g(y), h(x))), or -1; empty when no output is
  std::vector<int> alias;
};

/// The input output k is written into, or -1.
inline int alias_of(const Case& c, std::size_t k) { return k < c.alias.size() ? c.alias[k] : -1; }
/// Whether some output is written into an input.
inline bool aliased(const Case& c) {
  for (int a : c.alias)
    if (a >= 0) return true;
  return false;
}

/// A case lowered to the IR, with the run-time arguments in the order the graph numbered them.
struct Built {
  fusion::ir::Graph graph;
  std::vector<int> slot_input;  // per input slot: the case's input
  std::vector<int> slot_gather_axis;  // per input slot: -1, or a gather's source passed as its view along this axis
  /// Where a join's piece places a slot's view (fz::concatenate's ArrayBase::placed): the piece's shape, the
  /// join's, and the piece's start along each axis; an empty `join` for a slot outside every piece.
  struct Placement {
    fusion::Shape piece, join;
    std::vector<std::int64_t> at;
  };
  std::vector<Placement> slot_place;  // per input slot
  std::vector<fusion::detail::ScalarArg> scalars;
  std::vector<fusion::detail::ReduceArg> reductions;
  std::vector<std::uint32_t> functions;  // per call slot: the function's id (fz::function's or a generator's)
  /// per call slot: user_functions()[k] for k >= 0, random_generators()[-1 - k] for k < 0
  std::vector<int> call_table;
  std::vector<fusion::Shape> result_shapes;  // each output expression's own shape
  fusion::Shape out_shape;                   // the shape outputs are written at
  int scatter_target = -1;                   // a scatter case: the input it writes into (out_shape its shape)
};

/// Lowers a case, or says why it is not a well-formed expression (ill-typed, shapes that do not
/// broadcast, a scalar that does not fit its dtype...): the shrinker's edits can produce those.
std::optional<Built> build(const Case& c, std::string* why = nullptr);

/// The dtype a tree computes; none for a literal on its own (it takes its partner's).
std::optional<DType> result_dtype(const Case& c, const Expr& e);

const char* layout_name(Layout l);
fusion::Shape shape_of(const Case& c, const std::vector<int>& dims);
fusion::Shape base_shape(const Case& c, const Input& in);  // the allocation a view is taken of
/// The view of an input's base allocation: offset and strides (elements) over its logical shape.
void view_of(const Case& c, const Input& in, std::int64_t& offset, fusion::Strides& strides);
/// An output of dtype `d` described as an input (its dims and layout), so that base_shape and view_of
/// describe the view it is written through.
Input output_view(const Case& c, DType d);
/// Host values of an input's base allocation (C order), made from its seed.
std::vector<test::Scalar> base_values(const Case& c, const Input& in);
/// The input as the expression sees it: its view's values in C order over its logical shape.
std::vector<test::Scalar> logical_values(const Case& c, const Input& in);

struct GenOptions {
  int max_depth = 8;
  std::int64_t max_elements = 3000;  // per array
  /// Draw scans too (exact ones: running maxima, minima, integer sums). Off by default: drawing them
  /// changes the cases of every fixed seed the regression tests name.
  bool scans = false;
  /// Draw gathers too (take_along_axis in the wrap and clip modes), off by default for the same reason.
  bool gathers = false;
  /// Make some cases scatters (scatter_add, scatter_max, scatter_min into a target input), likewise.
  bool scatters = false;
  /// Draw joins too (fz::concatenate of 2 or 3 pieces along a random axis), likewise.
  bool joins = false;
  /// Write some cases' outputs into their inputs (x = f(x.transpose(), y), or a tie's two outputs into two inputs
  /// both read: NumPy's answer is every input read before anything is written), likewise.
  bool aliases = false;
  /// Draw fz::function calls (user_functions()) inside expressions and fz::random leaves beside output 0, likewise.
  bool calls = false;
  /// Make some cases layer expressions over long rows (4,097 to 300,000 elements, 1 to 16 rows: the cluster and
  /// block-per-row layer kernels), likewise.
  bool long_rows = false;
  /// Make half the cases a reduction over the rows of a tall matrix (1,024 to 4,097 rows, 1 to 257 columns: the
  /// grouped column kernels, over a cluster or split over blocks), likewise.
  bool tall_columns = false;
  /// Make every case a layer expression over 16 to 63 rows of the lengths a block holds in registers (1,024, 4,096 and
  /// 8,192 elements, filling every thread's vectors, and 4,000, not: LayerVariant::registers and full_parts; rows of
  /// 8,192 only where values are kept), as the long rows' cases are otherwise built.
  bool register_rows = false;
  /// Draw matrix products (fz::matmul of two floating expressions, batched or not) with math around them and in
  /// their operands, likewise.
  bool products = false;
  /// Make every case a product fusion generates itself (Case::generated): two 16-bit operand expressions, an
  /// elementwise epilogue, results at and around tile edges (`--tune product_large_fill=1` sends them to the Hopper
  /// path's tiles, `product_hopper=2|3` to its other rows).
  bool generated_products = false;
};
Case generate(std::uint64_t seed, const GenOptions& o = {});

/// Number of nodes in a case's trees (the shrinker's measure of size).
int size(const Case& c);

}  // namespace fuzz
