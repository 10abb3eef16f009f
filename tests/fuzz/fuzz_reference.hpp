// SPDX-License-Identifier: Apache-2.0
// The fuzzer's oracle: a host interpreter of the whole IR over arrays (broadcasting, reductions, several
// outputs) in float64, built on the per-element interpreter in reference.cpp. Run with a perturbation
// seed, it also multiplies every rounded result by (1 + a few units of its dtype's rounding error):
// an element whose perturbed value moves by a sizeable part of the tolerance is ill-conditioned there,
// and a correct GPU result may legitimately differ from float64 — the comparison skips it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_case.hpp"

namespace fuzz {

struct Tensor {
  fusion::Shape shape;
  std::vector<test::Scalar> values;     // C order
  std::vector<std::uint8_t> undefined;  // per element: no defined value (float out of an integer's range)
};

struct Expected {
  std::vector<Tensor> outputs;  // at out_shape, one per output
  std::string error;            // non-empty: the expression has no value and the engine must refuse it
};

/// perturbation == 0: the exact float64 reference; else a perturbed run with that seed.
Expected reference(const Case& c, const Built& b, std::uint64_t perturbation = 0);

/// The exact reference and two perturbed runs, which tell checkable elements from ill-conditioned ones.
struct Oracle {
  Expected exact;
  std::vector<Expected> perturbed;
};
Oracle oracle(const Case& c, const Built& b);

enum class Status { check, unstable, undefined };
/// Whether element e of output k can be checked: it is defined, and every perturbed run stays within
/// half the dtype's tolerance of the exact reference.
Status status(const Oracle& o, std::size_t k, std::size_t e, DType d);
/// `got` matches `want` within the tolerance of dtype d (times `scale`); integers and bool exactly.
bool close(test::Scalar got, test::Scalar want, DType d, double scale = 1);

/// The case's run-time scalar as a host value.
test::Scalar scalar_value(const fusion::detail::ScalarArg& s);

}  // namespace fuzz
