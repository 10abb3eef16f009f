// SPDX-License-Identifier: Apache-2.0
// What the fuzzer calls inside its expressions besides fusion's own ops: a few fz::function bodies (each with a
// host twin the reference computes) and fz::random's generators (their host side from tests/philox.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fusion/dtype.hpp"
#include "reference.hpp"

namespace fuzz {

/// A user device function as a person writes it: fz::function<signature>(name, body).
struct UserFunction {
  const char* name;
  const char* signature;  // the C++ signature fz::function takes, e.g. "float(float)"
  const char* body;
  fusion::DType result;
  std::vector<fusion::DType> params;
  test::Scalar (*host)(const test::Scalar* args);  // on arguments already converted to `params`
};
const std::vector<UserFunction>& user_functions();
/// The function's id in this process (registered on first use, as fz::function does).
std::uint32_t user_function_id(int k);

/// fz::random's generators: uniform<float>, uniform<double>, normal<float>, normal<double>, bits.
struct RandomGenerator {
  const char* cpp;  // how the printed test writes it, before "(seed, fz::random::Offset{offset})"
  fusion::DType result;
  test::Scalar (*host)(std::uint64_t seed, std::uint64_t offset, std::int64_t index);
};
const std::vector<RandomGenerator>& random_generators();
std::uint32_t random_generator_id(int k);

}  // namespace fuzz
