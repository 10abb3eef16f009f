// SPDX-License-Identifier: Apache-2.0
// The default route of a matrix product with an elementwise epilogue (fz::GeneratedProducts in fusion/modes.hpp):
// per product shape on the device at hand, cuBLASLt + the epilogue kernel against the generated kernel in each of
// its candidate tile layouts (schedule/product_layout), each timed with events on a few of the program's own
// calls, the fastest kept: the tuner of tile shapes and stages. While the generated kernels compile (on worker
// threads) the calls run on cuBLASLt; the verdict is stored in the kernel cache beside the kernels.
#pragma once
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/product_variant.hpp"
#include "runtime/exec/evaluate_internal.hpp"

namespace fusion::detail {

/// How products with an epilogue choose their route (fusion/modes.hpp): timed against each other (the default),
/// always the generated kernel (fz::GeneratedProducts), or always cuBLASLt (fz::CublasProducts, fz::Deterministic).
enum class ProductsMode { race, generated, library };
/// FUSION_GENERATED_PRODUCTS: auto (or unset) races, 1/on/yes/true generates, 0/off/no/false keeps cuBLASLt (any
/// case); an Error naming the choices for anything else. (Read once per process by the products' planner.)
ProductsMode products_mode_by_environment();

struct Race;  // one product class's race (product_race.cpp)

/// One call of a route timed for its race: events recorded around the route's kernels on the caller's stream.
class RaceSample {
 public:
  RaceSample() = default;
  RaceSample(std::shared_ptr<Race> race, int route) : race_(std::move(race)), route_(route) {}
  RaceSample(RaceSample&& o) noexcept { *this = std::move(o); }
  RaceSample& operator=(RaceSample&& o) noexcept;
  ~RaceSample();  // (events of a sample never ended are dropped)
  /// Whether this call is to be timed.
  explicit operator bool() const { return race_ != nullptr; }
  /// Starts the timing (on an idle stream, while the race passes over such calls: none; the sample is dropped).
  void begin(CUstream stream);
  /// The route's last kernel is enqueued: the sample goes to its race, read once its events have passed.
  void end(CUstream stream);

 private:
  std::shared_ptr<Race> race_;
  int route_ = 0;  // (schedule/product_route's numbering: 0 the library, 1... the candidates)
  CUevent start_ = nullptr;
  bool idle_ = false;  // the stream was idle at begin (timed only once the race has passed over enough such calls)
  std::chrono::steady_clock::time_point began_;  // (FUSION_SHOW_RACES: the host's time inside the sample)
};

/// The product class a race is run for: the kernels it may generate (the candidate layouts' variants, the
/// planned one first) and the product's extents.
struct RaceClass {
  const Lowered* lowered;
  std::vector<codegen::ProductVariant> variants;
  std::string name;       // the epilogue call's name
  int device;
  std::int64_t m, n, k, batch;
};

/// What the race says for one call.
struct RaceCall {
  int candidate = -1;  ///< the index in RaceClass::variants of the kernel to run, -1 the library route
  const KernelSlot<codegen::ProductVariant>* kernel = nullptr;  ///< ... that kernel (null: the library route)
  RaceSample sample;  ///< where it holds a race, the call's route is timed into it
};

/// The route of one call of `c` (`may_time`: events may be recorded on the caller's stream: not while a step
/// records or a graph captures). Starts the candidates' builds on the first call.
RaceCall race_call(const RaceClass& c, bool may_time);

/// The state of `c`'s race in words for fz::inspect, starting nothing: whether a verdict took a generated kernel
/// (then `kept` is its index in c.variants, else -1) and the times behind it, or why the library route runs.
std::string race_words(const RaceClass& c, int& kept);

}  // namespace fusion::detail
