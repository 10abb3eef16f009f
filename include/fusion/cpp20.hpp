// SPDX-License-Identifier: Apache-2.0
// fusion's public headers are C++20. Below it, one clear message (and a stop) instead of a hundred
// errors from concepts and requires-clauses.
#pragma once
#if defined(__cplusplus) && __cplusplus < 202002L
#error \
    "fusion needs C++20: compile with -std=c++20 (nvcc too: -std=c++20); with CMake, linking fusion::fusion sets it for C++ and CUDA sources"
#include "fusion: stopped here, the rest needs C++20"  // a missing file ends the compilation at once
#endif
