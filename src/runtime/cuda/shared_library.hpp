// SPDX-License-Identifier: Apache-2.0
// Opening a CUDA library at run time (NCCL, cuBLASLt): where to look and the first that opens. A program
// that never uses the library needs none installed; one that does gets an error naming every place tried.
#pragma once
#include <string>
#include <vector>

namespace fusion::detail {

/// Where to look for `soname` (e.g. "libnccl.so.2"), in order: exactly the file `override_env` names when
/// set; else the soname itself (the loader's search path), the CUDA toolkit's lib64/ and lib/ (CUDA_HOME,
/// CUDA_PATH, the toolkit fusion was built with, /usr/local/cuda), then the pip wheel PyTorch and JAX
/// install (site-packages/nvidia/<wheel>/lib).
std::vector<std::string> library_candidates(const char* override_env, const std::string& soname, const char* wheel);

struct OpenedLibrary {
  void* handle = nullptr;  // dlopen's, kept for the process
  std::string path;        // the candidate that opened
  std::string tried;       // one line per candidate that did not, with the loader's reason
};

/// The first candidate that opens (RTLD_LOCAL: its symbols stay out of the process's namespace).
OpenedLibrary open_first(const std::vector<std::string>& candidates);

/// A library's functions after one attempt to load it: `api`, or a non-empty `error` saying why not.
template <class Api> struct LoadedLibrary {
  Api api;
  std::string error;
};

/// The address of `name` in `lib`, or null.
void* find_symbol(void* lib, const char* name);

}  // namespace fusion::detail
