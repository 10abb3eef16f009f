// SPDX-License-Identifier: Apache-2.0
// The one place an array is handed to NCCL (fz::all_reduce and fz::reduce_to over devices, fz::ProcessGroup over
// processes).
#pragma once
#include "fusion/array_base.hpp"
#include "fusion/distributed.hpp"
#include "runtime/distributed/nccl.hpp"

namespace fusion::detail {

/// Enqueues NCCL's in-place all-reduce (`root` -1) or reduce into rank `root` of `a` on `comm`, on the current
/// stream of `a`'s device. `who` names the caller in errors (a view is refused: NCCL needs contiguous
/// memory). Returns NCCL's result unchecked, so that a caller inside a group can end it before throwing.
nccl::Result enqueue_collective(ArrayBase& a, nccl::Comm comm, Combine how, int root, const char* who);

}  // namespace fusion::detail
