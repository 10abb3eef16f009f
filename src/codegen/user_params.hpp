// SPDX-License-Identifier: Apache-2.0
// The parameter lists of user kernels in CuPy's syntax ("float32 x, raw T y") and the binding of type
// placeholders (T, U, ...) to the dtypes of a call's arguments. Pure logic: no GPU, no strings of CUDA.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusion/dtype.hpp"

namespace fusion::codegen {

struct UserParam {
  std::string name;
  std::string type;             ///< as written: a dtype name or a placeholder
  std::optional<DType> dtype;   ///< the fixed dtype; empty for a placeholder
  bool raw = false;             ///< indexed by the user (`y[i]`), not elementwise, not broadcast
};

/// The dtype a type name stands for (NumPy names, plus `double` and `half`); empty for a placeholder.
/// `float`, `int` and other names that mean different widths in NumPy and C++ are a TypeError.
std::optional<DType> dtype_from_name(std::string_view name);

/// Parses "float32 x, raw T y"; `what` names the list in errors ("ElementwiseKernel 'f' in_params").
std::vector<UserParam> parse_params(std::string_view spec, std::string_view what);

/// What a call passes for one parameter: an array of some dtype, or a C++ scalar of some dtype.
struct ArgKind {
  bool array = true;
  DType dtype = DType::float32;
};

/// Placeholder -> dtype, as bound for one call.
class TypeBinding {
 public:
  std::optional<DType> find(std::string_view placeholder) const;
  void set(std::string placeholder, DType d) { types_.emplace_back(std::move(placeholder), d); }
  /// The dtype of a parameter (its fixed dtype or its bound placeholder); Error when unbound.
  DType of(const UserParam& p) const;
  /// A type name (a dtype name or a bound placeholder) as a dtype; TypeError naming `what` when unbound.
  DType resolve(std::string_view type, std::string_view what) const;
  const std::vector<std::pair<std::string, DType>>& types() const { return types_; }

 private:
  std::vector<std::pair<std::string, DType>> types_;
};

/// Checks a call's arguments against the parameters and binds the placeholders. `args` holds the inputs,
/// then optionally every output. Arrays bind placeholders first, then scalars bind those still free;
/// an array whose dtype differs from its parameter's, a scalar for a raw or output parameter, a wrong
/// argument count and an output placeholder nothing binds are TypeErrors that name the parameter.
TypeBinding bind_types(const std::vector<UserParam>& in, const std::vector<UserParam>& out,
                       std::span<const ArgKind> args, std::string_view kernel);

/// "x, y" for messages.
std::string param_names(const std::vector<UserParam>& ps);

}  // namespace fusion::codegen
