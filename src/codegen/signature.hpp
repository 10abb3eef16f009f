// SPDX-License-Identifier: Apache-2.0
// A kernel's parameter list, decided once by the emitter that writes the kernel: each parameter's C
// declaration and where its value comes from at launch. The one launcher (runtime/exec/launch.cpp)
// packs arguments by walking it, so the source and the packing can never disagree on the order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace fusion::codegen {

/// Where a kernel argument's value comes from at launch.
enum class ArgSource : std::uint8_t {
  pointer,    ///< the device pointer of the launch's array `index` (the emitter's own numbering)
  scalar,     ///< scalar `index` (a fused kernel's scalar slot; a user kernel's parameter), its 8 value bytes
  count,      ///< a 64-bit integer, Count(index)
  divisor,    ///< a double: the divisor of mean/var
  dims,       ///< a fixed-size struct of 64-bit extents or strides: the launch's dims entry `index`
  raw,        ///< a user kernel's raw-array struct of parameter `index`
  workspace,  ///< the split-reduction workspace: 0 the partials, 1 the counters
  tensor_map, ///< a bulk tensor copy's map (CUtensorMap, 128 bytes), by index: a generated product's 0 a, 1 b
};

/// The 64-bit integers a kernel may take.
/// Counts a launcher passes: elements, outputs and reduced extents, a split's chunk, threads per row.
enum class Count : std::uint16_t { n, n_out, n_red, chunk, lanes };

struct KernelParam {
  ArgSource source;
  std::uint16_t index;
  std::string declaration;  ///< "const float* __restrict__ in0"
  bool operator==(const KernelParam&) const = default;
};

class KernelSignature {
 public:
  void add(ArgSource source, std::uint32_t index, std::string declaration) {
    params_.push_back({source, static_cast<std::uint16_t>(index), std::move(declaration)});
  }
  void add(Count c, std::string declaration) {
    add(ArgSource::count, static_cast<std::uint32_t>(c), std::move(declaration));
  }
  const std::vector<KernelParam>& params() const { return params_; }
  /// The parameter list as written in the kernel's source: "a, b, c".
  std::string list() const {
    std::string s;
    for (const KernelParam& p : params_) s += (s.empty() ? "" : ", ") + p.declaration;
    return s;
  }
  bool operator==(const KernelSignature&) const = default;

 private:
  std::vector<KernelParam> params_;
};

}  // namespace fusion::codegen
