// SPDX-License-Identifier: Apache-2.0
// Partition: how an expression's graph splits into kernels when one kernel cannot do it all. Each step is
// a kernel over its own small graph; a step writes a temporary that later steps read, the last ones
// write the outputs. A pure function of the graph (no shapes, no device): exec compiles and runs it.
//   fused:    every reduction that cannot sit at the root of the last kernel gets its own kernel
//             (`x / sum(x)` over one long row: the sum, then the division); neighbouring reductions with
//             equal axes that do not read each other share one (a batch norm's mean and variance);
//   separate: every reduction its own kernel, no layer kernel (fz::SeparateReductions);
//   unfused:  every operation its own kernel (fz::Unfused, the honest baseline).
// A matrix product is a library call: in the fused and separate modes the expressions it reads and the
// one that reads it become `whole` steps around it, partitioned again when they run (a softmax of a
// product is the product, then one layer kernel).
#pragma once
#include <cstdint>
#include <vector>

#include "fusion/dtype.hpp"
#include "fusion/ir.hpp"
#include "schedule/product_epilogue.hpp"

namespace fusion::detail {

struct KernelStep {
  ir::Graph graph;                        // what the step's kernel computes: an output per target
  int kernel = 0;                         // the step's number in its partition (0 .. kernels - 1)
  std::vector<int> arrays;                // per input slot: >= 0 the call's array slot, < 0: temporary ~t
  std::vector<std::uint32_t> scalars;     // per scalar slot: the call's scalar slot
  std::vector<std::uint32_t> reductions;  // per reduction slot: the call's reduction slot
  std::vector<int> targets;               // per output of the step: >= 0 temporary; < 0 the call's output ~k
  std::vector<KernelStep> alone;          // several targets: a step per target, when they cannot run together
  // The step's graph is an expression of its own, run as a call is (its own partition: one kernel, a
  // layer kernel, or a plan of several): around a matrix product, the math reading it or feeding it.
  bool whole = false;
  // A product step into a temporary that only the next step reads, where that step is an epilogue
  // cuBLASLt can run inside the call (found false otherwise); the run time checks its arrays.
  EpilogueMatch epilogue;
  // A product step into a temporary that only the next step reads, where that step is elementwise with one
  // output (codegen::is_product_epilogue): under fz::GeneratedProducts the two may run as one generated kernel.
  bool generated_epilogue = false;
  // An elementwise temporary that reads the flat index (fz::random) spans the index space the fused kernel
  // numbers: that of its region (the elementwise part of the graph around it, up to reductions), given
  // by the call's arrays the region reads and, for an output's region, the output.
  bool whole_index = false;
  std::vector<int> index_arrays;  // the call's array slots
  int index_output = -1;          // the call's output k, or -1
};

struct Partition {
  bool direct = false;  // one kernel over the expression's own graph: no steps
  bool layer = false;   // try one layer kernel first (schedule/layer_layout.hpp decides per call)
  std::vector<KernelStep> steps;
  std::vector<DType> temp_dtypes;
  int kernels = 0;  // steps counted with their `alone` steps
};

enum class PartitionMode { fused, separate, unfused };

/// The kernels computing canonical graph `g` in `mode`.
Partition partition(const ir::Graph& g, PartitionMode mode);

}  // namespace fusion::detail
