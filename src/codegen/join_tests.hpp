// SPDX-License-Identifier: Apache-2.0
// A join's tests of where an element lies, as a rows kernel writes them. Each test (ir::Op::leading) asks
// whether the element's position along a joined axis, `i % period`, lies before a bound. In a rows kernel every
// period is a whole number of rows (layout.cpp), so along a row the position is the row's plus the column c, and
// the test is `c < limit` with the limit found once per row: clamp(bound - row's position, 0, row length). A
// conjunction of such tests and their negations (fz::pad's box: before the end and not before the start, per
// padded axis) is one interval of columns, `lo <= c < hi`, its ends the largest negated limit and the smallest
// plain one: two comparisons an element whatever the number of padded axes.
#pragma once
#include <cstdint>
#include <vector>

#include "fusion/ir.hpp"

namespace fusion::codegen {

struct ColumnInterval {
  std::uint32_t node;                           // the conjunction (a logical_and)
  std::vector<std::uint32_t> below, not_below;  // its tests (leading nodes), plain and negated
};

struct RowTests {
  std::vector<std::uint32_t> tests;         // every leading node, in graph order
  std::vector<ColumnInterval> intervals;    // the largest conjunctions of tests
  std::vector<bool> inside_interval;        // the nodes an interval stands for (its ands and nots), not written
};

/// The tests of `g` and the conjunctions of them that a rows kernel writes as column intervals.
RowTests row_tests(const ir::Graph& g);

}  // namespace fusion::codegen
