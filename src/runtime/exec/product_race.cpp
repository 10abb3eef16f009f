// SPDX-License-Identifier: Apache-2.0
#include "runtime/exec/product_race.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <span>
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

/// Calls begun on an idle stream a race passes over before it times them all the same.
constexpr std::size_t kIdleSkips = 24;

/// FUSION_SHOW_RACES=1: each race's samples and verdict on stderr, as it settles.
bool show_races() {
  static const bool on = [] {
    const char* v = std::getenv("FUSION_SHOW_RACES");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

}  // namespace

struct Race {
  std::mutex mu;
  /// A candidate layout's kernel
  struct Entrant {
    codegen::ProductVariant variant;
    std::shared_ptr<const codegen::GeneratedKernel> source;  // (one per variant, every shape)
    const KernelSlot<codegen::ProductVariant>* kernel = nullptr;  // once loaded
    std::string failed;  // why it could not be built (it leaves the race)
  };
  std::vector<Entrant> entrants;
  CacheKey verdict_key;             // where the verdict is kept in the kernel cache
  std::string device_name;
  unsigned generation = 0;          // of the device context the events and the kernels belong to
  struct Pending {
    CUevent start, stop;
    int route;
    bool idle;  // the stream had nothing left to run when the sample began (past kIdleSkips; FUSION_SHOW_RACES marks it)
    double host_us;  // the host's time from the sample's start to its stop (FUSION_SHOW_RACES)
  };
  std::size_t idle_skips = 0;           // calls not timed: their stream was idle (RaceSample::begin)
  std::string shape;                    // "m x n x k" (FUSION_SHOW_RACES)
  std::vector<std::string> shown;        // per route, its samples in words (FUSION_SHOW_RACES)
  std::vector<Pending> pending;         // samples whose events may not have passed yet
  std::vector<std::vector<double>> times;  // microseconds per call, per route (0 the library, 1... the entrants)
  RaceResult result;
  bool from_cache = false;          // the verdict was read from the kernel cache

  std::unique_ptr<bool[]> cut;  // per route: left the race behind the others (race_cuts)
  bool out(int route) const {
    return route > 0 && (cut[static_cast<std::size_t>(route)] || !entrants[static_cast<std::size_t>(route - 1)].failed.empty());
  }
  /// Whether every entrant is loaded or out.
  bool ready() const {
    return std::all_of(entrants.begin(), entrants.end(), [](const Entrant& e) { return e.kernel || !e.failed.empty(); });
  }
  bool all_failed() const {
    return std::all_of(entrants.begin(), entrants.end(), [](const Entrant& e) { return !e.failed.empty(); });
  }

  std::vector<std::size_t> taken() const {
    std::vector<std::size_t> n(times.size());
    for (std::size_t r = 0; r < n.size(); ++r) n[r] = out(static_cast<int>(r)) ? kRaceSamples : times[r].size();
    for (const Pending& p : pending) ++n[static_cast<std::size_t>(p.route)];
    return n;
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
      if (q == CUDA_SUCCESS && driver().cuEventElapsedTime(&ms, p.start, p.stop) == CUDA_SUCCESS) {
        times[static_cast<std::size_t>(p.route)].push_back(1000.0 * ms);
        if (show_races())
          shown[static_cast<std::size_t>(p.route)] += fmt::format(" {:.1f}{} (h {:.0f})", 1000.0 * ms, p.idle ? "*" : "", p.host_us);
      }
      driver().cuEventDestroy(p.start);
      driver().cuEventDestroy(p.stop);
    }
    pending = std::move(left);
  }

  /// The verdict, once every route has its samples; kept in the kernel cache.
  void settle() {
    if (result.verdict != Verdict::none) return;
    const std::unique_ptr<bool[]> left(new bool[times.size()]);
    for (std::size_t r = 0; r < times.size(); ++r) left[r] = out(static_cast<int>(r));
    race_cuts(times, std::span<bool>(left.get(), times.size()));
    for (std::size_t r = 0; r < times.size(); ++r) cut[r] = cut[r] || left[r];
    result = race_verdict(times, std::span<const bool>(left.get(), times.size()));
    if (result.verdict == Verdict::none) return;
    const std::string words =
        fmt::format("{} {} {:.3f} {:.3f}", kVerdictWords[static_cast<int>(result.verdict)],
                    result.fastest > 0 ? entrants[static_cast<std::size_t>(result.fastest - 1)].source->name : "-",
                    result.library_us, result.generated_us);
    kernel_store().store(CacheEntry{verdict_key, words, false, -1, {}});
    if (show_races()) show(words);
  }

  /// FUSION_SHOW_RACES: the race's samples per route and its verdict (`words`, as stored), on stderr at once.
  void show(const std::string& words) const {
    std::string all = fmt::format("fusion: product race {} on {} (us a call, * the stream idle as it began, h the host's us "
                                  "between its events; {} calls begun idle not timed):\n  cuBLASLt + epilogue:{}\n",
                                  shape, device_name, idle_skips, shown[0]);
    for (std::size_t i = 0; i < entrants.size(); ++i) {
      const codegen::ProductTiles& t = entrants[i].variant.tiles;
      all += fmt::format("  {}x{}x{}, {} stages:{}\n", t.bm, t.bn, t.bk, t.stages,
                         entrants[i].failed.empty() ? shown[i + 1] + (cut[i + 1] ? " (left the race: behind)" : "")
                                                    : std::string(" (failed to build)"));
    }
    fmt::print(stderr, "{}  verdict: {}\n", all, words);
  }

  /// A verdict stored by an earlier process, if `e` holds one for these entrants.
  void read(const CacheEntry& e) {
    std::istringstream in(e.binary);
    std::string word, name;
    double lib = 0, gen = 0;
    if (!(in >> word >> name >> lib >> gen) || lib <= 0) return;  // (not one this writes: raced again)
    if (word != kVerdictWords[1] && word != kVerdictWords[2]) return;
    int fastest = 0;
    for (std::size_t i = 0; i < entrants.size(); ++i)
      if (entrants[i].source->name == name) fastest = static_cast<int>(i + 1);
    if (word == kVerdictWords[2] && (fastest == 0 || gen <= 0)) return;
    result = RaceResult{word == kVerdictWords[2] ? Verdict::generated : Verdict::library, fastest, lib, gen};
    from_cache = true;
  }

  std::string times_words() const {
    if (result.fastest == 0)
      return fmt::format("nothing (cuBLASLt + the epilogue kernel {:.1f} us a call on {})", result.library_us, device_name);
    const codegen::ProductTiles& t = entrants[static_cast<std::size_t>(result.fastest - 1)].variant.tiles;
    return fmt::format("{:.1f} us a call against cuBLASLt + the epilogue kernel's {:.1f} on {}, this shape; the "
                       "fastest of {} tile layouts {}x{}x{}, {} stages{}",
                       result.generated_us, result.library_us, device_name, entrants.size(), t.bm, t.bn, t.bk, t.stages,
                       from_cache ? " (a verdict from the kernel cache)" : "");
  }
};

namespace {

std::shared_ptr<Race> race_for(const RaceClass& c) {
  using Key = std::tuple<const Lowered*, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::string>;
  static std::mutex mu;
  static std::map<Key, std::vector<std::pair<std::vector<codegen::ProductVariant>, std::shared_ptr<Race>>>> races;
  std::lock_guard lock(mu);
  auto& list = races[Key{c.lowered, c.device, c.m, c.n, c.k, c.batch, c.name}];
  for (const auto& [v, r] : list)
    if (v == c.variants) return r;
  auto r = std::make_shared<Race>();
  // (shapes share the kernels' sources: a program whose rows vary keeps one copy of each)
  static std::map<std::tuple<const Lowered*, std::string>,
                  std::vector<std::pair<codegen::ProductVariant, std::shared_ptr<const codegen::GeneratedKernel>>>>
      sources;
  auto& kinds = sources[{c.lowered, c.name}];
  std::string names;
  for (const codegen::ProductVariant& v : c.variants) {
    Race::Entrant& e = r->entrants.emplace_back();
    e.variant = v;
    for (const auto& [kv, k] : kinds)
      if (kv == v) e.source = k;
    if (!e.source) {
      e.source = std::make_shared<const codegen::GeneratedKernel>(generate(*c.lowered, v, c.name));
      kinds.emplace_back(v, e.source);
    }
    names += e.source->name + '\n';
  }
  r->times.resize(c.variants.size() + 1);
  r->shown.resize(c.variants.size() + 1);
  r->cut.reset(new bool[c.variants.size() + 1]());
  r->shape = fmt::format("{}x{}x{}{}", c.m, c.n, c.k, c.batch > 1 ? fmt::format(" batch {}", c.batch) : "");
  r->generation = context_generation(c.device);
  const DeviceProperties& props = properties_of(c.device);
  r->device_name = props.name;
  const auto& blas = cublaslt::loaded();
  r->verdict_key = CacheKey{fmt::format("{}{}x{}x{} batch {}\n{}, {} SMs, sm_{}\ncuBLASLt {}\n", names, c.m, c.n, c.k,
                                        c.batch, props.name, props.multiprocessor_count, props.arch(),
                                        blas.error.empty() ? blas.api.version : 0),
                            "verdict " + r->entrants.front().source->name, nvrtc_version(), kVerdictOptions,
                            fmt::format("sm_{}", props.arch())};
  if (auto e = kernel_store().load(r->verdict_key)) r->read(*e);
  list.emplace_back(c.variants, r);
  return r;
}

}  // namespace

RaceSample& RaceSample::operator=(RaceSample&& o) noexcept {
  if (this != &o) {
    if (start_) driver().cuEventDestroy(start_);
    race_ = std::move(o.race_);
    route_ = o.route_;
    idle_ = o.idle_;
    began_ = o.began_;
    start_ = std::exchange(o.start_, nullptr);
  }
  return *this;
}

RaceSample::~RaceSample() {
  if (start_) driver().cuEventDestroy(start_);
}

void RaceSample::begin(CUstream stream) {
  if (!race_) return;
  // A sample begun on an idle stream times the host's launch too: the start event passes at once and the kernel
  // arrives later (H200, 512x4096x4096: 41-57 us against 32 behind other work; at 8192^3 1,485 against 1,325).
  // Such a call is not timed, and its route keeps its turn, until the race has passed over this many of them: a
  // program whose stream is always idle (each call waited on) is timed as it runs.
  idle_ = driver().cuStreamQuery(stream) == CUDA_SUCCESS;
  if (idle_) {
    std::lock_guard lock(race_->mu);
    if (race_->idle_skips < kIdleSkips) {
      ++race_->idle_skips;
      race_.reset();
      return;
    }
  }
  if (!start_) FUSION_CU(cuEventCreate, &start_, CU_EVENT_DEFAULT);
  FUSION_CU(cuEventRecord, start_, stream);
  began_ = std::chrono::steady_clock::now();
}

void RaceSample::end(CUstream stream) {
  if (!race_ || !start_) return;
  CUevent stop = nullptr;
  FUSION_CU(cuEventCreate, &stop, CU_EVENT_DEFAULT);
  FUSION_CU(cuEventRecord, stop, stream);
  std::lock_guard lock(race_->mu);
  const double host_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began_).count();
  race_->pending.push_back({std::exchange(start_, nullptr), stop, route_, idle_, host_us});
  race_.reset();
}

RaceCall race_call(const RaceClass& c, bool may_time) {
  const std::shared_ptr<Race> r = race_for(c);
  std::lock_guard lock(r->mu);
  if (const unsigned g = context_generation(c.device); g != r->generation) {  // a device reset: events and kernels gone
    r->pending.clear();
    for (Race::Entrant& e : r->entrants) e.kernel = nullptr;
    r->generation = g;
  }
  r->harvest();
  r->settle();
  const Verdict v = r->result.verdict;
  // the kernels to build: every entrant while the race runs, the kept one after a verdict that took it
  for (std::size_t i = 0; i < r->entrants.size() && v != Verdict::library; ++i) {
    Race::Entrant& e = r->entrants[i];
    if (e.kernel || !e.failed.empty() || (v == Verdict::generated && static_cast<int>(i) + 1 != r->result.fastest)) continue;
    e.kernel = kernel_if_ready(*c.lowered, e.variant, c.device, c.name, *e.source, &e.failed);
    if (!e.failed.empty() && v == Verdict::generated) r->result = RaceResult{Verdict::library};  // (this process only)
  }
  if (r->result.verdict == Verdict::none && r->all_failed()) r->result = RaceResult{Verdict::library};  // (this process only)
  RaceCall out;
  if (r->result.verdict == Verdict::generated) {  // (the kernel null until loaded: the library route meanwhile)
    out.kernel = r->entrants[static_cast<std::size_t>(r->result.fastest - 1)].kernel;
    out.candidate = out.kernel ? r->result.fastest - 1 : -1;
  }
  if (r->result.verdict != Verdict::none || !may_time || !r->ready()) return out;
  // Every route timed once the kernels are ready, in turn (schedule/product_route's order)
  const std::vector<std::size_t> taken = r->taken();
  const int route = route_to_time(taken);
  if (route > 0) {
    out.candidate = route - 1;
    out.kernel = r->entrants[static_cast<std::size_t>(route - 1)].kernel;
  }
  if (route >= 0) out.sample = RaceSample(r, route);
  return out;
}

std::string race_words(const RaceClass& c, int& kept) {
  const std::shared_ptr<Race> r = race_for(c);
  std::lock_guard lock(r->mu);
  kept = r->result.verdict == Verdict::generated ? r->result.fastest - 1 : -1;
  switch (r->result.verdict) {
    case Verdict::generated: return "measured faster: " + r->times_words();
    case Verdict::library:
      if (r->result.library_us <= 0)  // (nothing measured: the builds failed)
        for (const Race::Entrant& e : r->entrants)
          if (!e.failed.empty()) return "kept cuBLASLt: the generated kernel failed to build: " + e.failed;
      return "kept cuBLASLt: the generated kernel measured " + r->times_words();
    case Verdict::none: break;
  }
  std::size_t samples = 0;
  for (const auto& t : r->times) samples += t.size();
  return fmt::format("cuBLASLt until the generated kernel's {} tile layout{}, built on worker threads at the first call, "
                     "have been timed against it on {} calls each ({} so far)",
                     r->entrants.size(), r->entrants.size() == 1 ? "" : "s", kRaceSamples, samples);
}

}  // namespace fusion::detail
