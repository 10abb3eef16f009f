// SPDX-License-Identifier: Apache-2.0
// CUDA devices: enumeration, the per-thread current device, and the properties kernels are tuned by.
#pragma once
#include "fusion/cpp20.hpp"
#include <cstddef>
#include <string>

namespace fusion {

/// Number of CUDA devices; 0 (never an exception) where there is no driver or no device.
int device_count();
/// Why no device is usable here ("libcuda.so.1 not found ..."), or "" when one is.
std::string no_device_reason();

struct DeviceProperties {
  std::string name;
  int compute_capability_major = 0, compute_capability_minor = 0;
  int multiprocessor_count = 0;
  int max_threads_per_multiprocessor = 0;
  std::size_t total_memory = 0;
  std::size_t l2_cache_bytes = 0;
  std::size_t max_shared_bytes_per_block = 0;  ///< dynamic shared memory a kernel may opt in to (H100: 227 KB)
  std::size_t max_shared_bytes_per_sm = 0;     ///< shared memory of one multiprocessor (H100: 228 KB)
  int arch() const { return compute_capability_major * 10 + compute_capability_minor; }
};

/// A CUDA device. Its primary context is retained once per process and made current as needed.
class Device {
 public:
  explicit Device(int id = 0);
  static Device current();
  int id() const { return id_; }
  /// Make this the calling thread's current device.
  void use() const;
  void synchronize() const;
  const DeviceProperties& properties() const;
  bool operator==(const Device&) const = default;

 private:
  int id_;
};

/// RAII: switches the thread's current device and restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(Device d);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_;
};

}  // namespace fusion
