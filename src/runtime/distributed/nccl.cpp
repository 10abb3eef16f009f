// SPDX-License-Identifier: Apache-2.0
#include "runtime/distributed/nccl.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <thread>

#include "fusion/error.hpp"
#include "runtime/cuda/shared_library.hpp"

namespace fusion::detail::nccl {

namespace {

constexpr Version kOldest{2, 10, 0};  // bfloat16 reductions

/// NCCL's version code: 2.28.9 is 22809 (codes before 2.9 were 1000 * major + 100 * minor + patch).
Version decode(int code) {
  if (code >= 10000) return {code / 10000, code / 100 % 100, code % 100};
  return {code / 1000, code / 100 % 10, code % 100};
}

}  // namespace

std::vector<std::string> default_candidates() {
  return library_candidates("FUSION_NCCL_LIBRARY", "libnccl.so.2", "nccl");
}

Loaded load(const std::vector<std::string>& candidates) {
  Loaded l;
  const OpenedLibrary opened = open_first(candidates);
  void* lib = opened.handle;
  l.api.path = opened.path;
  if (!lib) {
    l.error = fmt::format("NCCL could not be loaded; arrays over several GPUs need it (libnccl.so.2 from the "
                          "CUDA toolkit, Debian's libnccl2 or the nvidia-nccl wheel; FUSION_NCCL_LIBRARY may "
                          "name the file). Tried:{}", opened.tried);
    return l;
  }
  std::string missing;
#define FUSION_NCCL_RESOLVE(name, type)                                  \
  l.api.name = reinterpret_cast<std::add_pointer_t<type>>(find_symbol(lib, #name));                \
  if (!l.api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  FUSION_NCCL_FUNCTIONS(FUSION_NCCL_RESOLVE)
#undef FUSION_NCCL_RESOLVE
  if (!missing.empty()) {
    l.error = fmt::format("{} is not a usable NCCL: it lacks {}", l.api.path, missing);
    return l;
  }
  int code = 0;
  if (l.api.ncclGetVersion(&code) != 0) {
    l.error = fmt::format("{}: ncclGetVersion failed", l.api.path);
    return l;
  }
  l.api.version = decode(code);
  l.api.ncclCommInitRankConfig =
      reinterpret_cast<decltype(l.api.ncclCommInitRankConfig)>(find_symbol(lib, "ncclCommInitRankConfig"));
  if (l.api.version < kOldest)
    l.error = fmt::format("{} is NCCL {}.{}.{}; fusion needs {}.{} or later", l.api.path, l.api.version.major,
                          l.api.version.minor, l.api.version.patch, kOldest.major, kOldest.minor);
  return l;
}

const Loaded& loaded() {
  static const Loaded l = [] {
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);  // before NCCL reads its environment
    return load(default_candidates());
  }();
  return l;
}

const Api& api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw NcclError(l.error);
  return l.api;
}

void check(Result r, const char* call) {
  if (r == 0) return;
  const char* text = loaded().api.ncclGetErrorString ? loaded().api.ncclGetErrorString(r) : "?";
  throw NcclError(fmt::format("{} failed: {} (ncclResult_t {})", call, text ? text : "?", r));
}

void finish(Comm comm, Result r, const char* call) {
  while (r == kInProgress) {
    std::this_thread::yield();
    if (loaded().api.ncclCommGetAsyncError(comm, &r) != 0) break;
  }
  check(r, call);
}

DataType data_type(DType d) {
  if (dtype_info(d).nccl >= 0) return static_cast<DataType>(dtype_info(d).nccl);
  throw TypeError(fmt::format("all_reduce: NCCL has no {} (use int8, uint8, 32- or 64-bit integers, or a float type)",
                              dtype_name(d)));
}

RedOp red_op(Combine how) {
  switch (how) {
    case Combine::sum: return RedOp::sum;
    case Combine::prod: return RedOp::prod;
    case Combine::max: return RedOp::max;
    case Combine::min: return RedOp::min;
  }
  return RedOp::sum;
}

}  // namespace fusion::detail::nccl

namespace fusion {

Version nccl_version() { return detail::nccl::api().version; }

bool nccl_available() { return detail::nccl::loaded().error.empty(); }

std::string nccl_unavailable_reason() { return detail::nccl::loaded().error; }

}  // namespace fusion
