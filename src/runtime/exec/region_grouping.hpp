// SPDX-License-Identifier: Apache-2.0
// fz::Lazy's decision: which recorded statements share one kernel, and the graph they make together. Pure
// functions of the statements (their graphs, arguments and outputs): nothing here launches or records.
// A statement joins the group before it when its results have the group's shape and each array it touches
// is either untouched by the group's writes or the very view written there (read as a value, written over).
#pragma once
#include <string>
#include <vector>

#include "fusion/array_base.hpp"
#include "runtime/exec/evaluate_internal.hpp"

namespace fusion::detail {

/// One recorded assignment: the expression as asked (functions resolved, fast math), its arguments by
/// value (handles keep the memory alive), and its outputs as prepared when recorded (shapes final,
/// fresh outputs allocated), so later statements see the arrays they will read.
struct Statement {
  const Lowered* lowered;
  std::vector<ArrayBase> args;  // by input slot
  std::vector<ScalarArg> scalars;
  std::vector<ArrayBase> outs;
  std::string name;
  Shape space;  // every output's shape
};

/// Where a statement's input comes from inside a group: memory, or the value of an earlier output.
constexpr int kFromMemory = -1;

struct Value {
  int statement, out;  // which output computed it
  bool superseded = false;  // written over by a later statement of the group (same view)
  bool stored = true;  // decided after grouping: false when nobody reads the memory afterwards
};

/// Statements [first, last) as one graph.
struct Group {
  int first = 0, last = 0;
  std::vector<std::vector<int>> source;  // [statement - first][slot]: kFromMemory or a value index
  std::vector<Value> values;             // every output of the group's statements, in order
  std::string reason;                    // why it did not join the group before
};

/// "float32 (4, 3)": an array as messages name it.
inline std::string describe(const ArrayBase& a) {
  return std::string(dtype_name(a.dtype())) + " " + to_string(a.shape());
}

/// The statements in groups, in order, each output marked stored or not. `strict`: every output counts
/// against a kernel's output limit (else only those the program still holds, which is exact unless a
/// later group reads a dropped temporary from memory: group() then groups again, strictly).
std::vector<Group> group(const std::vector<Statement>& all, const std::vector<ArrayBase>& scratch_arrays,
                         bool strict = false);

/// A group's statements as one graph: inputs in (statement, slot) order for those read from memory,
/// scalars concatenated, one output per stored value.
ir::Graph merge(const std::vector<Statement>& all, const Group& g);

}  // namespace fusion::detail
