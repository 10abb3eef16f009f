// SPDX-License-Identifier: Apache-2.0
// A join's tests of where an element lies (ir::Op::leading), as an elementwise kernel writes them. Each test asks
// whether the element's position along a joined axis, `i % period`, lies before a bound.
// - Outside a rows kernel, fz_expr takes the element's position along each joined axis (one per period scalar,
//   the tests along that axis sharing it), its flat index modulo the period (fz_position).
// - In a rows kernel every period is a whole number of rows (layout.cpp), so along a row the position is the
//   row's plus the column c, and a test is `c < limit` with the limit found once per row: clamp(bound - the
//   row's position, 0, row length). A conjunction of tests and their negations (fz::pad's box: before the end and
//   not before the start, per padded axis) is one interval of columns, `lo <= c < hi`, its ends the largest
//   negated limit and the smallest plain one: two comparisons an element whatever the number of padded axes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/emit_common.hpp"
#include "codegen/source_writer.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

struct ColumnInterval {
  std::uint32_t node;                           // the conjunction (a logical_and)
  std::vector<std::uint32_t> below, not_below;  // its tests (leading nodes), plain and negated
};

struct RowTests {
  std::vector<std::uint32_t> tests;       // every leading node, in graph order
  std::vector<ColumnInterval> intervals;  // the largest conjunctions of tests
  std::vector<bool> inside_interval;      // the nodes an interval stands for (its ands and nots), not written
};

/// The tests of `g` and the conjunctions of them that a rows kernel writes as column intervals.
RowTests row_tests(const ir::Graph& g);

/// Whether a rows kernel of `g` may compute a vector's elements together (Variant::vector_joins): nothing in it
/// depends on the element's own position but its join's tests (no fz::arange, no gather, no scatter), and it has
/// one output.
bool lanes_alike(const ir::Graph& g);

/// A Variant::vector_joins kernel's Lanes: the nodes that vary along its rows (an input along them and what
/// depends on one), the join's tests not among them.
Lanes vector_lanes(const ir::Graph& g, const Variant& v);

/// How one kernel passes its join's tests to fz_expr and spells them there.
class JoinTests {
 public:
  /// For graph `g` in a rows kernel or not, its positions and limits of type `index_t` (int or long long).
  JoinTests(const ir::Graph& g, bool rows, std::string index_t);
  bool any() const { return !periods_.empty(); }
  /// fz_expr's parameters for them.
  std::vector<std::string> params() const;
  /// The tests' values inside fz_expr (a rows kernel's column comparisons) in `value`; the nodes an interval
  /// stands for left out of `wanted`.
  void preset(std::vector<std::string>& value, std::vector<bool>& wanted) const;
  /// fz_expr's arguments for the element at flat index `index` (an expression), in a rows kernel at `column`.
  std::vector<std::string> args(const std::string& index, const std::string& column) const;
  /// A rows kernel's lines after its row's first flat index `base` (named so) and length `cols`: the row's
  /// positions, limits and intervals, in `I`, the row index's type.
  void write_row(SourceWriter& w, const std::string& I) const;

 private:
  const ir::Graph& g_;
  bool rows_;
  std::string index_t_;
  std::vector<std::string> periods_;  // the period scalars ("s<slot>"), each once
  RowTests row_;
  std::vector<bool> limit_used_;  // per node: a test read other than through its interval
};

}  // namespace fusion::codegen
