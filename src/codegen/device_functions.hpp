// SPDX-License-Identifier: Apache-2.0
// The process-wide table of device functions (fz::function definitions). Calls in the IR refer to them by id; hashes
// and kernels use their name and text, so the same definition gives the same kernel in every process.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fusion/dtype.hpp"

namespace fusion::codegen {

struct DeviceFunction {
  std::string name;
  std::string body;  ///< "(float x, float y) { return x * x + y * y; }"
  DType result;
  std::vector<DType> params;
};

/// The definition with this id (ids come from detail::register_function).
const DeviceFunction& device_function(std::uint32_t id);

}  // namespace fusion::codegen
