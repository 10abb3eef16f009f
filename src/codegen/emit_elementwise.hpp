// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "codegen/variant.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

struct GeneratedKernel {
  std::string name;    ///< fz_<ops>_<dtype>_<hash> or <user name>_<hash>
  std::uint64_t hash;  ///< of the canonical IR and the variant
  std::string source;
};

/// The kernel symbol for a graph: readable op names (or the user's) and the hash.
std::string kernel_name(const ir::Graph& g, DType out, std::uint64_t hash, std::string_view user_name);

/// CUDA source of one elementwise kernel for a canonical graph with one output, in a layout variant.
/// Kernel parameters, in order: the variant's input arrays, the output, the graph's scalars (by slot,
/// in compute types), n, then for rank > 1 the collapsed shape and the strides of each strided operand.
GeneratedKernel emit_elementwise(const ir::Graph& g, const Variant& v, std::string_view user_name);

}  // namespace fusion::codegen
