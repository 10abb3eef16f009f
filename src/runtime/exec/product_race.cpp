// SPDX-License-Identifier: Apache-2.0
#include "runtime/exec/product_race.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "fusion/device.hpp"
#include "runtime/blas/cublaslt.hpp"
#include "runtime/compile/kernel_store.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/exec/kernel_for.hpp"
#include "schedule/product_route.hpp"

namespace fusion::detail {
namespace {

constexpr const char* kVerdictWords[] = {"none", "library", "generated"};

}  // namespace

struct Race {
  std::mutex mu;
  std::shared_ptr<const codegen::GeneratedKernel> source;  // the generated kernel's (one per variant, every shape)
  CacheKey verdict_key;             // where the verdict is kept in the kernel cache
  std::string device_name;
  unsigned generation = 0;          // of the device context the events and the kernel belong to
  const KernelSlot<codegen::ProductVariant>* kernel = nullptr;  // once loaded
  std::string failed;               // why the generated kernel could not be built
  struct Pending {
    CUevent start, stop;
    bool generated;
  };
  std::vector<Pending> pending;     // samples whose events may not have passed yet
  std::vector<double> times[2];     // microseconds per call: [0] the library route, [1] the generated kernel
  Verdict verdict = Verdict::none;
  double median[2] = {0, 0};
  bool from_cache = false;          // the verdict was read from the kernel cache

  std::size_t taken(bool generated) const {
    return times[generated].size() +
           static_cast<std::size_t>(std::count_if(pending.begin(), pending.end(),
                                                  [&](const Pending& p) { return p.generated == generated; }));
  }

  /// Reads the samples whose events have passed (the others stay for a later call).
  void harvest() {
    std::vector<Pending> left;
    for (const Pending& p : pending) {
      const CUresult q = driver().cuEventQuery(p.stop);
      if (q == CUDA_ERROR_NOT_READY) {
        left.push_back(p);
        continue;
      }
      float ms = 0;
      if (q == CUDA_SUCCESS && driver().cuEventElapsedTime(&ms, p.start, p.stop) == CUDA_SUCCESS)
        times[p.generated].push_back(1000.0 * ms);
      driver().cuEventDestroy(p.start);
      driver().cuEventDestroy(p.stop);
    }
    pending = std::move(left);
  }

  /// The verdict, once both routes have their samples; kept in the kernel cache.
  void settle() {
    if (verdict != Verdict::none) return;
    verdict = race_verdict(times[0], times[1], median);
    if (verdict == Verdict::none) return;
    const std::string words = fmt::format("{} {:.3f} {:.3f}", kVerdictWords[static_cast<int>(verdict)], median[0], median[1]);
    kernel_store().store(CacheEntry{verdict_key, words, false, -1, {}});
  }

  /// A verdict stored by an earlier process, if `e` holds one.
  void read(const CacheEntry& e) {
    std::istringstream in(e.binary);
    std::string word;
    double lib = 0, gen = 0;
    if (!(in >> word >> lib >> gen) || lib <= 0 || gen <= 0) return;  // (not one this writes: raced again)
    if (word != kVerdictWords[1] && word != kVerdictWords[2]) return;
    verdict = word == kVerdictWords[2] ? Verdict::generated : Verdict::library;
    median[0] = lib, median[1] = gen;
    from_cache = true;
  }

  std::string times_words() const {
    return fmt::format("{:.1f} us a call against cuBLASLt + the epilogue kernel's {:.1f} on {}, this shape{}", median[1],
                       median[0], device_name, from_cache ? " (a verdict from the kernel cache)" : "");
  }
};

namespace {

std::shared_ptr<Race> race_for(const RaceClass& c) {
  using Key = std::tuple<const Lowered*, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::string>;
  static std::mutex mu;
  static std::map<Key, std::vector<std::pair<codegen::ProductVariant, std::shared_ptr<Race>>>> races;
  std::lock_guard lock(mu);
  auto& list = races[Key{c.lowered, c.device, c.m, c.n, c.k, c.batch, c.name}];
  for (const auto& [v, r] : list)
    if (v == c.variant) return r;
  auto r = std::make_shared<Race>();
  // (shapes share the kernel's source: a program whose rows vary keeps one copy of it)
  static std::map<std::tuple<const Lowered*, std::string>,
                  std::vector<std::pair<codegen::ProductVariant, std::shared_ptr<const codegen::GeneratedKernel>>>>
      sources;
  auto& kinds = sources[{c.lowered, c.name}];
  for (const auto& [v, k] : kinds)
    if (v == c.variant) r->source = k;
  if (!r->source) {
    r->source = std::make_shared<const codegen::GeneratedKernel>(generate(*c.lowered, c.variant, c.name));
    kinds.emplace_back(c.variant, r->source);
  }
  r->generation = context_generation(c.device);
  const DeviceProperties& props = properties_of(c.device);
  r->device_name = props.name;
  const auto& blas = cublaslt::loaded();
  r->verdict_key = CacheKey{fmt::format("{} {}x{}x{} batch {}\n{}, {} SMs, sm_{}\ncuBLASLt {}\n", r->source->name, c.m, c.n,
                                        c.k, c.batch, props.name, props.multiprocessor_count, props.arch(),
                                        blas.error.empty() ? blas.api.version : 0),
                            "verdict " + r->source->name, nvrtc_version(), kVerdictOptions, fmt::format("sm_{}", props.arch())};
  if (auto e = kernel_store().load(r->verdict_key)) r->read(*e);
  list.emplace_back(c.variant, r);
  return r;
}

}  // namespace

RaceSample& RaceSample::operator=(RaceSample&& o) noexcept {
  if (this != &o) {
    if (start_) driver().cuEventDestroy(start_);
    race_ = std::move(o.race_);
    generated_ = o.generated_;
    start_ = std::exchange(o.start_, nullptr);
  }
  return *this;
}

RaceSample::~RaceSample() {
  if (start_) driver().cuEventDestroy(start_);
}

void RaceSample::begin(CUstream stream) {
  if (!race_) return;
  if (!start_) FUSION_CU(cuEventCreate, &start_, CU_EVENT_DEFAULT);
  FUSION_CU(cuEventRecord, start_, stream);
}

void RaceSample::end(CUstream stream) {
  if (!race_ || !start_) return;
  CUevent stop = nullptr;
  FUSION_CU(cuEventCreate, &stop, CU_EVENT_DEFAULT);
  FUSION_CU(cuEventRecord, stop, stream);
  std::lock_guard lock(race_->mu);
  race_->pending.push_back({std::exchange(start_, nullptr), stop, generated_});
  race_.reset();
}

RaceCall race_call(const RaceClass& c, bool may_time) {
  const std::shared_ptr<Race> r = race_for(c);
  std::lock_guard lock(r->mu);
  if (const unsigned g = context_generation(c.device); g != r->generation) {  // a device reset: events and kernel gone
    r->pending.clear();
    r->kernel = nullptr;
    r->generation = g;
  }
  r->harvest();
  r->settle();
  if (!r->kernel && r->verdict != Verdict::library && r->failed.empty()) {
    r->kernel = kernel_if_ready(*c.lowered, c.variant, c.device, c.name, *r->source, &r->failed);
    if (!r->failed.empty() && r->verdict == Verdict::none) r->verdict = Verdict::library;  // (this process only)
  }
  RaceCall out;
  if (r->verdict == Verdict::generated) out.kernel = r->kernel;  // (null until loaded: the library route meanwhile)
  if (r->verdict != Verdict::none || !may_time || !r->kernel) return out;
  // Both routes timed once the kernel is ready (schedule/product_route's order)
  switch (route_to_time(r->taken(false), r->taken(true))) {
    case Verdict::generated:
      out.kernel = r->kernel;
      out.sample = RaceSample(r, true);
      break;
    case Verdict::library: out.sample = RaceSample(r, false); break;
    case Verdict::none: break;
  }
  return out;
}

std::string race_words(const RaceClass& c, bool& generated) {
  const std::shared_ptr<Race> r = race_for(c);
  std::lock_guard lock(r->mu);
  generated = r->verdict == Verdict::generated;
  switch (r->verdict) {
    case Verdict::generated: return "measured faster: " + r->times_words();
    case Verdict::library:
      if (!r->failed.empty()) return "kept cuBLASLt: the generated kernel failed to build: " + r->failed;
      return "kept cuBLASLt: the generated kernel measured " + r->times_words();
    case Verdict::none: break;
  }
  return fmt::format("cuBLASLt until the generated kernel, built on a worker thread at the first call, has been timed "
                     "against it on {} calls each ({} so far)",
                     kRaceSamples, r->times[0].size() + r->times[1].size());
}

}  // namespace fusion::detail
