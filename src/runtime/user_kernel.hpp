// SPDX-License-Identifier: Apache-2.0
// What ElementwiseKernel and ReductionKernel share at run time: the parsed kernel with its compiled
// variants, the checking of a call's arguments, and scalar conversion.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "codegen/emit_user.hpp"
#include "fusion/user_kernels.hpp"
#include "runtime/kernel_cache.hpp"

namespace fusion::detail {

struct UserKernel {
  explicit UserKernel(codegen::UserKernelSpec s) : spec(std::move(s)) {}
  const codegen::UserKernelSpec spec;

  /// The loaded kernel for (variant, device): compiled on first use, then found under a short lock.
  const LoadedKernel& kernel_for(const codegen::UserVariant& v, int device,
                                 const std::function<codegen::GeneratedKernel()>& generate) const;

 private:
  struct Compiled {
    codegen::UserVariant v;
    int device;
    unsigned generation;  // of the device context: a reset makes the kernel load again
    const LoadedKernel* kernel;
  };
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Compiled>> compiled_;
};

/// A call's arguments checked against the parameters, with the placeholders bound.
struct BoundCall {
  codegen::TypeBinding types;
  std::vector<DType> dtypes;  ///< per parameter, inputs then outputs
  bool outputs_given = false;
  std::string what;           ///< "ElementwiseKernel 'name'" for messages
};
BoundCall bind_call(const UserKernel& k, const std::vector<UserArg>& args);

/// The broadcast shape of the non-raw array arguments; a ShapeError names the parameters that clash.
Shape broadcast_args(const UserKernel& k, const std::vector<UserArg>& args, const std::string& what, bool outputs);

/// Checks that every array has memory on `device` (placeholders only when `placeholders_ok`; any device when < 0).
void check_arrays(const std::vector<UserArg>& args, const UserKernel& k, int device, bool placeholders_ok);

/// A C++ scalar converted to parameter dtype `to` (in its compute type, as the kernel takes it);
/// a TypeError when the value does not fit (an integer out of range, a fraction for an integer).
std::uint64_t scalar_bits(const ScalarArg& s, DType to, const std::string& what);

/// The user parameter `p` of a kernel: inputs, then outputs.
inline const codegen::UserParam& param_at(const codegen::UserKernelSpec& s, std::size_t p) {
  return p < s.in.size() ? s.in[p] : s.out[p - s.in.size()];
}

}  // namespace fusion::detail
