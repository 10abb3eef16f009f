// SPDX-License-Identifier: Apache-2.0
// Random multi-statement regions (fz::Lazy) against the same statements run one by one.
#pragma once
#include <cstdint>
#include <string>

#include "fuzz_run.hpp"

namespace fuzz {

/// Generates region case `seed`, runs it statement by statement and as a region on two copies of its
/// arrays, and compares every array bit for bit (a GPU is needed). With `indexing`, statements also gather
/// (take_along_axis) and scatter (scatter_add/max/min into a pool array); with `kernels`, some statements call
/// user ElementwiseKernels; off, a seed's case stays what it was.
Verdict run_region_case(std::uint64_t seed, bool indexing = false, bool kernels = false);
/// Region case `seed` in words (its arrays and each statement's graph), for a repro.
std::string describe_region_case(std::uint64_t seed, bool indexing = false, bool kernels = false);

}  // namespace fuzz
