// SPDX-License-Identifier: Apache-2.0
// Random multi-statement regions (fz::Lazy) against the same statements run one by one.
#pragma once
#include <cstdint>
#include <string>

#include "fuzz_run.hpp"

namespace fuzz {

/// What region statements may do besides elementwise math; each off, a seed's case stays what it was.
struct RegionOptions {
  bool indexing = false;  // gather (take_along_axis) and scatter (scatter_add/max/min into a pool array)
  bool kernels = false;   // call user ElementwiseKernels
  bool joins = false;     // concatenate pieces cut from arrays at other positions than they land (rolls, swaps)
};

/// Generates region case `seed`, runs it statement by statement and as a region on two copies of its
/// arrays, and compares every array bit for bit (a GPU is needed).
Verdict run_region_case(std::uint64_t seed, const RegionOptions& options = {});
/// Region case `seed` in words (its arrays and each statement's graph), for a repro.
std::string describe_region_case(std::uint64_t seed, const RegionOptions& options = {});

}  // namespace fuzz
