// SPDX-License-Identifier: Apache-2.0
// CUDA source for user kernels (ElementwiseKernel, ReductionKernel): fusion's loop and addressing
// around the user's code, with the placeholders bound for one call.
#pragma once
#include <string>
#include <vector>

#include "codegen/emit_common.hpp"
#include "codegen/reduce_variant.hpp"
#include "codegen/user_params.hpp"
#include "codegen/variant.hpp"

namespace fusion::codegen {

/// What the user wrote, parsed.
struct UserKernelSpec {
  bool reduction = false;
  std::string name;
  std::vector<UserParam> in, out;
  std::string operation;                                    // ElementwiseKernel
  std::string map_expr, reduce_expr, post_map_expr, identity;  // ReductionKernel
  std::string preamble, reduce_type, loop_prep, after_loop;
  std::vector<std::string> options;
};

/// Parses and checks everything that does not depend on a call (names, parameter lists, options).
UserKernelSpec make_elementwise_spec(std::string in, std::string out, std::string operation, std::string name,
                                     std::string preamble, std::vector<std::string> options);
UserKernelSpec make_reduction_spec(std::string in, std::string out, std::string map, std::string reduce,
                                   std::string post_map, std::string identity, std::string name, std::string preamble,
                                   std::vector<std::string> options, std::string reduce_type, std::string loop_prep,
                                   std::string after_loop);

/// How one parameter of a user elementwise kernel is read or written in one call.
enum class UserAccess : std::uint8_t { scalar, contiguous, broadcast, strided, raw_contiguous, raw_strided };

/// The structural facts of one call of a user kernel: bound types and addressing.
struct UserVariant {
  std::vector<DType> dtypes;          ///< per parameter, inputs then outputs
  std::vector<UserAccess> access;     ///< per parameter
  std::vector<std::uint8_t> raw_rank; ///< per parameter: the rank of a strided raw array
  std::vector<std::pair<std::string, DType>> types;  ///< placeholder bindings, in binding order
  std::uint8_t rank = 1;              ///< of the collapsed index space (elementwise)
  bool index64 = false;
  std::uint8_t vector_width = 1;      ///< elements per 16-byte access (linear, every array contiguous or broadcast,
                                      ///< the code reads neither `i` nor `_ind`): as fused kernels stream
  std::vector<bool> fresh;            ///< per output: allocated for this call (16-bit outputs start at 0)
  ReduceVariant reduce;               ///< layout of a ReductionKernel call
  bool operator==(const UserVariant&) const = default;
  std::string describe() const;
};

/// Whether an ElementwiseKernel's code names the element index (`i`) or the index size (`_ind`): such
/// code runs one element per loop step; other code may run on 16-byte vectors.
bool reads_index(const UserKernelSpec& s);

/// Kernel parameters, in order: per parameter its pointer (non-raw arrays), raw struct (raw arrays:
/// pointer, size, then shape and strides when strided) or value (scalars, in the compute type); then
/// `n`, and when rank > 1 or some operand is strided: the shape and each strided operand's strides.
GeneratedKernel emit_user_elementwise(const UserKernelSpec& s, const UserVariant& v);

/// A ReductionKernel: the reduction skeleton's parameters (see emit_reduction.hpp), with the inputs
/// in parameter order (scalars among them as values).
GeneratedKernel emit_user_reduction(const UserKernelSpec& s, const UserVariant& v);

}  // namespace fusion::codegen
