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
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/compile/kernel_cache.hpp"

namespace fusion::detail {

struct UserKernel {
  explicit UserKernel(codegen::UserKernelSpec s) : spec(std::move(s)) {}
  ~UserKernel() { delete_slots(slots_); }
  UserKernel(const UserKernel&) = delete;
  UserKernel& operator=(const UserKernel&) = delete;
  const codegen::UserKernelSpec spec;
  using Slot = KernelSlot<codegen::UserVariant>;

  /// The kernel for (variant, device): compiled on first use, then found without a lock.
  const Slot& kernel_for(const codegen::UserVariant& v, int device,
                         const std::function<codegen::GeneratedKernel()>& generate) const {
    return find_or_build(slots_, v, device, {}, [&] { return new_slot(v, device, {}, generate()); });
  }

 private:
  mutable std::atomic<Slot*> slots_{nullptr};
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
