// SPDX-License-Identifier: Apache-2.0
// Seeing what fusion does: the generated kernel of an expression, the unfused baseline, counters.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <initializer_list>
#include <string>
#include <vector>

#include "fusion/modes.hpp"  // Unfused, FastMath, SeparateReductions (declared here before)
#include "fusion/evaluate.hpp"

namespace fusion {

/// What an expression compiles to. Works on placeholder arrays on a machine without a GPU.
struct KernelInfo {
  std::string name;        ///< the kernel symbol: `fz_<ops>_<dtype>_<hash>` or `<given name>_<hash>`
  std::uint64_t hash = 0;  ///< stable hash of the canonical IR and layout variant
  std::string source;      ///< the generated CUDA source
  std::string variant;     ///< the layout variant in words ("contiguous, 16-byte vectors, 32-bit index")
  std::string arch;        ///< the architecture it was compiled for (sm_90, ...)
  std::string cache_path;  ///< the disk-cache entry ("" when the disk cache is off)
  int registers = -1;      ///< registers per thread (ptxas's count, read from the compiled cubin; -1 for PTX)
  int kernels = 1;         ///< kernels the expression runs as (1 when fully fused)
  /// Every kernel it runs as, in launch order: "name [hash] (strategy)" (`source` then holds every
  /// kernel's source; the other fields describe the last kernel). Printing a KernelInfo lists them all.
  std::vector<std::string> plan;
};
std::ostream& operator<<(std::ostream& os, const KernelInfo& k);

namespace detail {
KernelInfo inspect(const Call& call);
KernelInfo inspect_into(const Call& call, const ArrayBase& out);
}

/// The kernel `e` would run as, compiled (through the caches) but not launched.
template <Expression E> KernelInfo inspect(const E& e) {
  return detail::with_call(e, [](const detail::Call& c) { return detail::inspect(c); });
}
/// What `out = e` runs as for this `out` (an array or a placeholder view): inspect(e), plus the step that
/// copies the result in when `out` overlaps an input in another layout (`x = x.transpose() + 1`).
template <Expression E> KernelInfo inspect_into(const ArrayBase& out, const E& e) {
  return detail::with_call(e, [&](const detail::Call& c) { return detail::inspect_into(c, out); });
}
/// What `fz::tie(a, b, ...) = std::make_tuple(e1, e2, ...)` runs as: `fz::inspect(e1, e2, ...)`.
/// (As in the tie, an Array may stand for itself: `fz::inspect(sum(x), y)`.)
template <Operand E1, Operand E2, Operand... Es> KernelInfo inspect(const E1& e1, const E2& e2, const Es&... es) {
  return detail::with_call_multi([](const detail::Call& c) { return detail::inspect(c); }, detail::to_node(e1),
                                 detail::to_node(e2), detail::to_node(es)...);
}

namespace detail {
/// Sets fz::precompile's target architecture on this thread for its lifetime.
class PrecompileScope {
 public:
  explicit PrecompileScope(int arch);
  ~PrecompileScope();
  PrecompileScope(const PrecompileScope&) = delete;
  PrecompileScope& operator=(const PrecompileScope&) = delete;

 private:
  int previous_;
};
}  // namespace detail

/// Compiles every kernel of each expression for each architecture of `archs` (compute capabilities:
/// 80, 90, 100, ...) into the disk cache, launching nothing and needing no GPU. Ship the cache directory
/// with an application (read through FUSION_CACHE_READONLY_DIR) and its first calls load kernels instead
/// of compiling them. Expressions over fz::placeholder arrays of the shapes the program will use give
/// the same kernels, as sizes are kernel arguments; layouts are chosen for the current GPU (without one,
/// for an H100), so precompile on a machine like the target or on one without a GPU for H100-class targets.
template <Expression E, Expression... Es>
std::vector<KernelInfo> precompile(std::initializer_list<int> archs, const E& e, const Es&... es) {
  std::vector<KernelInfo> compiled;
  for (int arch : archs) {
    detail::PrecompileScope scope(arch);
    compiled.push_back(inspect(e));
    (compiled.push_back(inspect(es)), ...);
  }
  return compiled;
}

/// Process-wide counters.
struct Stats {
  std::uint64_t compiles = 0;      ///< NVRTC compilations
  std::uint64_t memory_hits = 0;   ///< kernels found in the in-memory cache (first lookup of a new variant)
  std::uint64_t disk_hits = 0;     ///< kernels loaded from the disk cache
  std::uint64_t launches = 0;      ///< kernels launched
  std::uint64_t bytes_read = 0;    ///< bytes the launched kernels read (each input once)
  std::uint64_t bytes_written = 0; ///< bytes they wrote
  double compile_ms = 0;           ///< time spent in NVRTC
  /// The least the evaluations had to move: each distinct input read once, each output written once.
  /// bytes_read + bytes_written over this is what a plan of several kernels moved beyond the minimum.
  std::uint64_t min_bytes = 0;
};
Stats stats();
void reset_stats();
std::ostream& operator<<(std::ostream& os, const Stats& s);

}  // namespace fusion
