// SPDX-License-Identifier: Apache-2.0
// Running a fuzz case: on the GPU against the reference, or (no GPU) through codegen and NVRTC only;
// shrinking a failing case to a minimal one; writing it out as a Catch2 test a person can paste.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fuzz_reference.hpp"

namespace fuzz {

struct Verdict {
  enum Kind { pass, mismatch, engine_error, missing_error, corrupted_output, invalid } kind = pass;
  std::string detail;            // the first mismatches, or the error message
  std::int64_t compared = 0;     // elements checked against the reference
  std::int64_t unstable = 0;     // skipped: ill-conditioned (perturbed references disagree)
  std::int64_t undefined = 0;    // skipped: no defined value (a float converted to an integer it does not fit)
  int kernels = 0;               // kernels launched (or compiled, without a GPU)
  std::vector<std::string> strategies;  // each kernel's strategy ("linear +vectors", "tiles", "reduction: ...")
  bool failed() const { return kind != pass && kind != invalid; }
};
const char* kind_name(Verdict::Kind k);
/// The strategy of one fz::inspect plan entry, "name [hash] (strategy, details...)": its first words
/// (a reduction's or layer's thread layout too) and "+vectors" when it uses 16-byte accesses.
std::string strategy_of(const std::string& plan_entry);

/// Evaluates the case with the engine on the current device and compares every output element.
Verdict run_on_gpu(const Case& c);
/// Without a GPU: generates and compiles every kernel of the case (placeholders, fz::inspect's path) and
/// runs the host reference; fails on a compile error or an engine error the reference does not expect.
Verdict compile_only(const Case& c);

/// Greedy shrinking: drops outputs, replaces subtrees by their operands, simplifies layouts, values and
/// extents, as long as `run` still fails the same way. At most `budget` runs.
Case shrink(const Case& c, const std::function<Verdict(const Case&)>& run, int budget = 400);

/// The case as a Catch2 test (the arrays with their values, the expression in fusion's C++ API, and the
/// reference values it must produce).
std::string to_cpp(const Case& c, const std::string& title);

}  // namespace fuzz
