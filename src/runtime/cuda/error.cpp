// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include "fusion/error.hpp"

namespace fusion {

CompileError::CompileError(std::string kernel, std::string log, std::string numbered_source)
    : Error(fmt::format("NVRTC could not compile kernel '{}':\n{}\n--- source ---\n{}", kernel, log,
                        numbered_source)),
      kernel_(std::move(kernel)), log_(std::move(log)), source_(std::move(numbered_source)) {}

CudaError::CudaError(std::string call, int code, std::string name, std::string description)
    : Error(fmt::format("{} failed: {} ({}): {}", call, name, code, description)),
      call_(std::move(call)), code_(code), name_(std::move(name)) {}

}  // namespace fusion
