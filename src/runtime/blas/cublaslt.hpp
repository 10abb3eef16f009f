// SPDX-License-Identifier: Apache-2.0
// cuBLASLt's C API, resolved from libcublasLt at run time as NCCL is: a program that never multiplies
// matrices needs no cuBLAS, and fusion builds and tests without a GPU. The types come from the toolkit's
// cublasLt.h (a header only: nothing is linked).
#pragma once
#include <cublasLt.h>

#include <string>
#include <vector>

#include "runtime/cuda/shared_library.hpp"

namespace fusion::detail::cublaslt {

#define FUSION_CUBLASLT_FUNCTIONS(X)  \
  X(cublasLtGetVersion)               \
  X(cublasLtGetStatusString)          \
  X(cublasLtCreate)                   \
  X(cublasLtDestroy)                  \
  X(cublasLtMatmulDescCreate)         \
  X(cublasLtMatmulDescDestroy)        \
  X(cublasLtMatmulDescSetAttribute)   \
  X(cublasLtMatrixLayoutCreate)       \
  X(cublasLtMatrixLayoutDestroy)      \
  X(cublasLtMatrixLayoutSetAttribute) \
  X(cublasLtMatmulPreferenceCreate)   \
  X(cublasLtMatmulPreferenceDestroy)  \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)   \
  X(cublasLtMatmul)

struct Api {
#define FUSION_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  FUSION_CUBLASLT_FUNCTIONS(FUSION_CUBLASLT_MEMBER)
#undef FUSION_CUBLASLT_MEMBER
  std::size_t version = 0;  // cublasLtGetVersion: 130100 for 13.1.0
  std::string path;         // the library that was loaded
};

/// One attempt over `candidates` (paths or sonames, in order).
using Loaded = LoadedLibrary<Api>;
Loaded load(const std::vector<std::string>& candidates);

/// Where fusion looks, in order (FUSION_CUBLASLT_LIBRARY, libcublasLt.so.<major of the toolkit fusion
/// was built with>, the toolkit's lib64/ and lib/, the nvidia-cublas wheel).
std::vector<std::string> default_candidates();

/// The process's attempt, made once.
const Loaded& loaded();
/// The process's cuBLASLt; throws BlasError when it cannot be used.
const Api& api();

/// Throws BlasError naming `call` and cuBLASLt's message when `s` is not success.
void check(cublasStatus_t s, const char* call);

}  // namespace fusion::detail::cublaslt
