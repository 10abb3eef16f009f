// SPDX-License-Identifier: Apache-2.0
// The error hierarchy: every failure fusion reports is an fz::Error whose message says what to fix.
#pragma once
#include "fusion/cpp20.hpp"
#include <stdexcept>
#include <string>

namespace fusion {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Shapes that do not broadcast, a bad axis, a reshape that changes the size.
class ShapeError : public Error { using Error::Error; };

/// A dtype that an operation does not accept, or a value that does not fit its dtype.
class TypeError : public Error { using Error::Error; };

/// An index outside the axis it indexes (fz::take in its default mode, as NumPy's IndexError).
class IndexError : public Error { using Error::Error; };

/// NVRTC rejected generated or user source; holds the compiler log and the line-numbered source.
class CompileError : public Error {
 public:
  CompileError(std::string kernel, std::string log, std::string numbered_source);
  const std::string& kernel() const { return kernel_; }
  const std::string& log() const { return log_; }
  const std::string& numbered_source() const { return source_; }
 private:
  std::string kernel_, log_, source_;
};

/// A CUDA Driver API call failed: the call, the numeric code and its name.
class CudaError : public Error {
 public:
  CudaError(std::string call, int code, std::string name, std::string description);
  const std::string& call() const { return call_; }
  int code() const { return code_; }
  const std::string& name() const { return name_; }
 private:
  std::string call_;
  int code_;
  std::string name_;
};

/// An allocation exceeded the pool limit or the device memory.
class OutOfMemoryError : public Error { using Error::Error; };

/// No CUDA driver or no device: raised the first time a GPU is needed, never at start-up.
class NoDeviceError : public Error { using Error::Error; };

/// An array, stream, event or graph made before its device was reset (cuDevicePrimaryCtxReset or
/// cudaDeviceReset, usually by another library) was used afterwards: its memory and handles are gone.
/// New ones work; fusion reloads its own kernels by itself.
class DeviceResetError : public Error { using Error::Error; };

/// NCCL (the collectives behind arrays over several GPUs) could not be loaded, is too old, or failed.
class NcclError : public Error { using Error::Error; };

/// cuBLASLt (the engine of matrix products) could not be loaded, is of another major version, or failed.
class BlasError : public Error { using Error::Error; };

}  // namespace fusion
