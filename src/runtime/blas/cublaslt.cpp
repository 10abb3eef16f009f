// SPDX-License-Identifier: Apache-2.0
#include "runtime/blas/cublaslt.hpp"

#include <fmt/format.h>

#include "fusion/error.hpp"
#include "runtime/cuda/shared_library.hpp"

namespace fusion::detail::cublaslt {

std::vector<std::string> default_candidates() {
  // The soname carries cuBLAS's major version, which follows the toolkit's (13 with CUDA 13).
  return library_candidates("FUSION_CUBLASLT_LIBRARY", fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR), "cublas");
}

Loaded load(const std::vector<std::string>& candidates) {
  Loaded l;
  const OpenedLibrary opened = open_first(candidates);
  l.api.path = opened.path;
  if (!opened.handle) {
    l.error = fmt::format("cuBLASLt could not be loaded; matrix products need it (libcublasLt.so.{} from the CUDA "
                          "toolkit, Debian's libcublaslt{} or the nvidia-cublas wheel; FUSION_CUBLASLT_LIBRARY may "
                          "name the file). Tried:{}",
                          CUBLAS_VER_MAJOR, CUBLAS_VER_MAJOR, opened.tried);
    return l;
  }
  std::string missing;
#define FUSION_CUBLASLT_RESOLVE(name)                                                           \
  l.api.name = reinterpret_cast<decltype(&::name)>(find_symbol(opened.handle, #name)); \
  if (!l.api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
  FUSION_CUBLASLT_FUNCTIONS(FUSION_CUBLASLT_RESOLVE)
#undef FUSION_CUBLASLT_RESOLVE
  if (!missing.empty()) {
    l.error = fmt::format("{} is not a usable cuBLASLt: it lacks {}", l.api.path, missing);
    return l;
  }
  l.api.version = l.api.cublasLtGetVersion();
  if (l.api.version / 10000 != CUBLAS_VER_MAJOR)  // descriptor attributes and enums are those of cublasLt.h
    l.error = fmt::format("{} is cuBLASLt {}.{}; fusion was built against cuBLAS {}.x", l.api.path,
                          l.api.version / 10000, l.api.version / 100 % 100, CUBLAS_VER_MAJOR);
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load(default_candidates());
  return l;
}

const Api& api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw BlasError(l.error);
  return l.api;
}

void check(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const char* text = loaded().api.cublasLtGetStatusString ? loaded().api.cublasLtGetStatusString(s) : nullptr;
  throw BlasError(fmt::format("{} failed: {} (cublasStatus_t {})", call, text ? text : "?", static_cast<int>(s)));
}

}  // namespace fusion::detail::cublaslt
