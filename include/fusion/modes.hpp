// SPDX-License-Identifier: Apache-2.0
// Modes: per-thread switches that change how expressions run while an object lives. One type for all of
// them (fz::ScopedMode), so a new mode is a name in detail::Mode and an alias here.
//
//   { fz::Unfused baseline; out = fz::sin(x) + y; }   // one kernel per operation, for comparisons
//   { fz::FastMath fast; out = fz::exp(x) / y; }       // NVRTC's -use_fast_math
#pragma once
#include <cstdint>

namespace fusion {

namespace detail {
enum class Mode : std::uint8_t { unfused, fast_math, separate_reductions, tf32_products, deterministic, generated_products,
                              all_generated_products, count_ };
/// This thread's switch for `m` (defined in the library, read on every assignment).
bool& mode_flag(Mode m);
}  // namespace detail

/// RAII, per thread: mode `M` is on while an instance lives; nested instances restore what they found.
template <detail::Mode M> class ScopedMode {
 public:
  ScopedMode() : previous_(detail::mode_flag(M)) { detail::mode_flag(M) = true; }
  ~ScopedMode() { detail::mode_flag(M) = previous_; }
  ScopedMode(const ScopedMode&) = delete;
  ScopedMode& operator=(const ScopedMode&) = delete;
  /// Whether the mode is on for this thread.
  static bool active() { return detail::mode_flag(M); }

 private:
  bool previous_;
};

/// While alive every operation runs as its own kernel into temporaries, through the same code generator
/// and caches. The honest baseline for measuring what fusion buys.
using Unfused = ScopedMode<detail::Mode::unfused>;

/// While alive, kernels compile with NVRTC's -use_fast_math: float32 (and the float math of half and
/// bfloat16) division, square root, exp, log, sin, cos, pow and their kin use the hardware's approximate
/// instructions, denormals flush to zero, multiply-adds fuse. Float64 math and integer math do not change.
/// The kernel's hash and name differ from the precise kernel's (both stay cached); `inspect(e).variant`
/// says "fast math". fz::fast_math(e) does the same for one expression.
using FastMath = ScopedMode<detail::Mode::fast_math>;

/// While alive every reduction that is not at the root of its kernel runs as a kernel of its own, one at a
/// time (no layer kernels, no sibling reductions in one pass): the plans fusion ran before it fused whole
/// layers, kept for comparisons (examples/layers.cpp).
using SeparateReductions = ScopedMode<detail::Mode::separate_reductions>;

/// While alive, float32 matrix products (fz::matmul) run on tensor cores in TF32: each input rounded to a
/// 10-bit mantissa, products accumulated in float32 (cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32). Several times
/// faster on Ampere and later, with about 1e-3 relative error instead of float32's 1e-6. Off by default.
using TF32Products = ScopedMode<detail::Mode::tf32_products>;

/// While alive, floating fz::index_add, fz::scatter_add and fz::bincount with weights give bit-identical
/// results run to run (PyTorch's use_deterministic_algorithms): the values add into exact fixed-point sums
/// (integer atomics, whose order cannot matter) and each target element is rounded once, to nearest, from its
/// old value plus the exact sum, so the result is also the correctly rounded one (subnormal results aside; a
/// 16-bit target rounds through float). It costs a second small kernel and temporary memory: 80 bytes per
/// target element (float32, float16, bfloat16) or 536 (float64). Everything else fusion runs is deterministic
/// already: reductions combine in a fixed order, integer sums and maxima are exact.
using Deterministic = ScopedMode<detail::Mode::deterministic>;

/// While alive, a matrix product of float16 or bfloat16 matrices and the elementwise math that reads its result
/// (`relu(a @ b + bias) * s + residual`, any activation, casts) run as one kernel fusion generates: tensor-core
/// tiles whose float32 accumulators go through the epilogue before the one write, instead of cuBLASLt's
/// product and a second kernel that reads it back; where the kernel's class (its tiles, on this device) was
/// measured faster than that (docs/performance.md), else as before. fz::inspect says which and why, with the
/// measurement. What the kernel does not cover (other dtypes, scaled operands, layouts that need a copy) runs as
/// before. Off by default (a new generated product compiles in about half a second).
using GeneratedProducts = ScopedMode<detail::Mode::generated_products>;

/// While alive, every product fz::GeneratedProducts could generate is generated, measured faster or not: for
/// benchmarks, tests, and trying a device it was not measured on.
using AllGeneratedProducts = ScopedMode<detail::Mode::all_generated_products>;

}  // namespace fusion
