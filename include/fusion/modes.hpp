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
                              cublas_products, count_ };
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
/// already: reductions combine in a fixed order, integer sums and maxima are exact; matrix products stay on
/// cuBLASLt (the default route may move a product to a generated kernel once it has measured faster).
using Deterministic = ScopedMode<detail::Mode::deterministic>;

/// How a matrix product and the elementwise math that reads its result (`relu(a @ b + bias) * s + residual`, any
/// activation, casts) run. Two routes: cuBLASLt's product followed by fusion's kernel for the rest (or one
/// cuBLASLt call where its own epilogues express it), or one kernel fusion generates, whose tensor-core tiles put
/// their float32 accumulators through the epilogue before the one write (float16 and bfloat16 operands).
///
/// By default fusion measures, per product shape on the device at hand, which route is faster and takes it: the
/// first calls run cuBLASLt while the generated kernel compiles on a worker thread, then the two routes alternate
/// for a few calls timed with events, and the faster one stays. The verdict is kept in the kernel cache, so a
/// later process takes it from its first call. Only classes that can win are raced (the Hopper path, sm_90);
/// fz::inspect says which route runs and the times behind it. The two routes' results differ in the last bits
/// (summation order), as two cuBLASLt algorithms' do, so a product's results may change once its verdict is in:
/// fz::Deterministic keeps products on cuBLASLt; while a step records or a graph captures nothing is timed (a
/// settled verdict whose kernel is loaded is taken, else cuBLASLt).
///
/// While alive: every product the generated kernel covers runs as that kernel (compiled on the calling thread,
/// about half a second when new), measured faster or not: for benchmarks, tests, and devices not measured.
/// FUSION_GENERATED_PRODUCTS=1 does the same for the whole process.
using GeneratedProducts = ScopedMode<detail::Mode::generated_products>;

/// While alive, products run on cuBLASLt (and the epilogue kernel) only, as FUSION_GENERATED_PRODUCTS=0 does for the
/// whole process: for comparisons, and for results that must not change once the generated kernel is ready.
using CublasProducts = ScopedMode<detail::Mode::cublas_products>;

}  // namespace fusion
