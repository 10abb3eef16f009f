// SPDX-License-Identifier: Apache-2.0
// fz::Lazy, fusion across statements: inside a region (while a Lazy object lives), assignments are
// recorded and run together as few kernels as their shapes allow, when the region ends or as soon as a
// result is needed. (Its header was fusion/region.hpp, which still includes this one.)
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "fusion/inspect.hpp"

namespace fusion {

/// RAII, per thread: while alive, elementwise assignments on this thread are recorded, not run.
///
///     {
///       fz::Lazy step;                       // or fz::Lazy step("adam");
///       m = b1 * m + (1 - b1) * g;
///       v = b2 * v + (1 - b2) * g * g;
///       p -= lr * m / (sqrt(v) + eps);
///     }                                      // one kernel runs here
///
/// At the end of the scope (or at run(), or as soon as a result is needed: a host read, a raw pointer,
/// a user or raw kernel, a stream, event or graph operation, a reduction, another stream or device),
/// consecutive statements whose results have one shape become one kernel with several outputs. A
/// statement reading an array written earlier in the same kernel takes the value, not the memory; an
/// array written there and not used after the region (a temporary of the scope, or one marked with
/// scratch()) is never written to memory. Every statement keeps NumPy's meaning: results are bit-identical
/// to running the statements one by one. Statements split where that cannot hold in one kernel (another
/// shape, a statement reading or writing a different view of memory written earlier); fz::inspect(region)
/// shows the kernels and why they split.
///
/// An exception leaving the scope discards what was recorded: nothing is written. Statements with a
/// reduction run as they are met (after what was recorded before them). Regions nest: an inner region
/// is part of the outer one.
class Lazy {
 public:
  Lazy();
  /// `name` names the region's kernels (as fz::named names one expression's).
  explicit Lazy(std::string_view name);
  ~Lazy() noexcept(false);
  Lazy(const Lazy&) = delete;
  Lazy& operator=(const Lazy&) = delete;

  /// Runs what is recorded now; recording goes on.
  void run();
  /// Drops what is recorded without running it (arrays assigned fresh in the region stay allocated,
  /// unwritten; existing arrays keep their contents).
  void discard();
  /// Declares that `a`'s contents after the region do not matter: the region need not write it.
  void scratch(const ArrayBase& a);
  /// Statements recorded and not yet run.
  int pending() const;
  /// Whether a region records on this thread.
  static bool active();

  struct State;

 private:
  friend KernelInfo inspect(const Lazy& region);
  State* state_;
  State* previous_;
  int uncaught_;
};

KernelInfo inspect(const Lazy& region);

/// Runs `f` as a region: `fz::fuse([&] { a = x + y; b = a * 2; });`. Temporaries declared inside `f`
/// are scratch by construction (they die before the region runs).
template <class F> void fuse(F&& f) {
  Lazy region;
  std::forward<F>(f)();
  region.run();
}
/// The same with a name for the region's kernels.
template <class F> void fuse(std::string_view name, F&& f) {
  Lazy region(name);
  std::forward<F>(f)();
  region.run();
}

/// What `region` would run now, compiled (through the caches) but not launched: every kernel with the
/// statements it covers, the arrays it does not write, and why it split from the one before.
KernelInfo inspect(const Lazy& region);

}  // namespace fusion
