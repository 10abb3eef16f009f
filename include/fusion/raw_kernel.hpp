// SPDX-License-Identifier: Apache-2.0
// Hand-written CUDA kernels, as CuPy's RawKernel and RawModule: fusion compiles the source with NVRTC
// through its caches, and launches with Arrays passed as device pointers and C++ values as they are.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "fusion/array.hpp"
#include "fusion/inspect.hpp"
#include "fusion/stream.hpp"

namespace fusion {

/// Grid or block extents: `{128}`, `{32, 8}`, `{8, 8, 4}`.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  Dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct LaunchOptions {
  std::size_t shared_mem = 0;   ///< dynamic shared memory in bytes
  std::optional<Stream> stream; ///< default: the current stream
};

/// What the driver reports about a compiled kernel.
struct KernelAttributes {
  int registers = 0;             ///< per thread
  int max_threads_per_block = 0; ///< the most this kernel can launch with (registers permitting)
  int local_bytes = 0;           ///< local memory per thread (spills, stack arrays)
  int shared_bytes = 0;          ///< static shared memory per block
  int const_bytes = 0;
  int max_dynamic_shared_bytes = 0;
  int ptx_version = 0, binary_version = 0;  ///< as major*10+minor
};

namespace detail {
struct RawModuleImpl;

/// The value a launch passes for one argument: an Array's device pointer, anything else by value.
template <class A> auto raw_value(const A& a) {
  if constexpr (ArrayLike<A>) {
    return static_cast<std::uint64_t>(a.data_ptr());
  } else {
    static_assert(std::is_trivially_copyable_v<A>,
                  "fusion: RawKernel arguments are Arrays or trivially copyable values (numbers, pointers, PODs)");
    return a;
  }
}
template <class A> const ArrayBase* raw_array(const A& a) {
  if constexpr (ArrayLike<A>) return &a;
  else return nullptr;
}
}  // namespace detail

class RawKernel;

/// A CUDA source with several kernels (declare them `extern "C"`); compiled once per device, on first use.
class RawModule {
 public:
  explicit RawModule(std::string source, std::vector<std::string> options = {});
  /// The kernel `name` of this module (checked when it is first launched or queried).
  RawKernel get_function(const std::string& name) const;
  /// Compiles (through the caches, no GPU needed) and describes the module.
  KernelInfo inspect() const;
  const std::string& source() const;

 private:
  friend class RawKernel;
  std::shared_ptr<detail::RawModuleImpl> impl_;
};

/// One kernel of a RawModule, or a module of its own: `RawKernel k(source, "name"); k({blocks}, {threads}, x, y, n);`
class RawKernel {
 public:
  RawKernel(std::string source, std::string name, std::vector<std::string> options = {});

  /// Launches on the current stream.
  template <class... A> void operator()(Dim3 grid, Dim3 block, const A&... args) const {
    launch(grid, block, LaunchOptions{}, args...);
  }
  /// Launches with dynamic shared memory and/or an explicit stream.
  template <class... A> void launch(Dim3 grid, Dim3 block, const LaunchOptions& o, const A&... args) const {
    auto values = std::make_tuple(detail::raw_value(args)...);
    void* ptrs[sizeof...(A) + 1];
    std::apply([&](auto&... v) {
      int i = 0;
      ((ptrs[i++] = &v), ...);
    }, values);
    const ArrayBase* arrays[sizeof...(A) + 1] = {detail::raw_array(args)..., nullptr};
    launch_packed(grid, block, o, ptrs, arrays, static_cast<int>(sizeof...(A)));
  }
  /// Registers, limits and memory of the compiled kernel on the current device.
  KernelAttributes attributes() const;
  /// Allows launches with more than 48 KiB of dynamic shared memory.
  void set_max_dynamic_shared_memory(int bytes) const;
  const std::string& name() const { return name_; }
  KernelInfo inspect() const;

 private:
  friend class RawModule;
  RawKernel(std::shared_ptr<detail::RawModuleImpl> m, std::string name)
      : module_(std::move(m)), name_(std::move(name)) {}
  void launch_packed(Dim3 grid, Dim3 block, const LaunchOptions& o, void** args, const ArrayBase* const* arrays,
                     int n) const;
  std::shared_ptr<detail::RawModuleImpl> module_;
  std::string name_;
};

}  // namespace fusion
