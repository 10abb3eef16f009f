// SPDX-License-Identifier: Apache-2.0
// fusion-fuzz: differential fuzzing of the engine against the float64 reference.
//   fusion-fuzz [--count N] [--seconds S] [--seed S] [--threads T] [--compile-only] [--max-depth D] [--scans] [--gathers] [--scatters] [--joins] [--aliases] [--calls] [--products] [--long-rows] [--tall-columns] [--register-rows] [--regions [--kernels]] [--tune name=value] [--print] [--case SEED] [--trace]
// --print writes the cases as Catch2 tests instead of running them (what a failure's repro looks like).
// --seconds stops drawing new cases after that long (the summary counts the cases that ran): a campaign that fits
// a device call and still prints its table.
// --case runs the one case a repro names ("case seed N"); --trace prints every case and shrink candidate
// to stderr before it runs (the last one printed before a crash is the one that crashed).
// Each worker thread runs cases on its own stream. A failing case is shrunk and printed as a Catch2
// test; the exit status is 1 when any case failed. Without a GPU only --compile-only runs (else 77).
#include <fmt/format.h>

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <functional>
#include <thread>

#include "schedule/tuning.hpp"
#include "fuzz_region.hpp"
#include "fuzz_run.hpp"

namespace {

thread_local std::uint64_t current_seed = 0;

/// The cases k = 0, 1, ... a campaign hands out: `count` of them, or fewer when the time budget runs out first.
class CaseCounter {
 public:
  CaseCounter(std::int64_t count, double seconds)
      : count_(count),
        deadline_(std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds))) {}
  /// The next case's index, or nothing when the campaign is over.
  std::optional<std::int64_t> next() {
    if (std::chrono::steady_clock::now() >= deadline_) return std::nullopt;
    const std::int64_t k = next_++;
    if (k >= count_) return std::nullopt;
    ++handed_;
    return k;
  }
  std::int64_t handed_out() const { return handed_; }

 private:
  std::int64_t count_;
  std::chrono::steady_clock::time_point deadline_;
  std::atomic<std::int64_t> next_{0}, handed_{0};
};

/// A crash prints the case that caused it and a backtrace (the binary links with -rdynamic).
void on_crash(int sig) {
  char line[96];
  const int n = std::snprintf(line, sizeof line, "\nfusion-fuzz: signal %d while running case seed %llu\n", sig,
                              static_cast<unsigned long long>(current_seed));
  (void)!write(2, line, static_cast<std::size_t>(n));
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  std::_Exit(128 + sig);
}

struct Totals {
  std::mutex mu;
  std::map<std::string, std::int64_t> verdicts;
  std::int64_t compared = 0, unstable = 0, undefined = 0, kernels = 0, nodes = 0;
  std::map<std::string, std::int64_t> ops, dtypes, strategies;
  std::vector<std::string> repros;
};

void count_coverage(const fuzz::Case& c, Totals& t) {
  auto walk = [&](auto& self, const fuzz::Expr& e) -> void {
    if (e.kind == fuzz::Kind::pad) ++t.ops["pad"];  // (a pad lowers to a concatenation: its own row in the table)
    else if (e.kind != fuzz::Kind::input && e.kind != fuzz::Kind::scalar) ++t.ops[fusion::ir::op_name(e.op)];
    for (const fuzz::Expr& a : e.args) self(self, a);
  };
  for (const fuzz::Expr& e : c.outputs) walk(walk, e);
  for (const fuzz::Input& in : c.inputs) ++t.dtypes[std::string(fusion::dtype_name(in.dtype))];
}

}  // namespace

/// --regions: random multi-statement regions, each compared bit for bit with its statements run one by one (any NaN
/// matches any NaN).
int region_main(CaseCounter& cases, std::uint64_t seed, std::optional<std::uint64_t> one_case, int threads,
                const fuzz::RegionOptions& options) {
  std::mutex mu;
  std::map<std::string, std::int64_t> verdicts;
  std::int64_t compared = 0, kernels = 0, failures = 0;
  const auto start = std::chrono::steady_clock::now();
  auto worker = [&] {
    fusion::Stream stream;
    fusion::StreamScope scope(stream);
    while (const std::optional<std::int64_t> k = cases.next()) {
      const std::uint64_t s = one_case ? *one_case : seed * 1000003 + static_cast<std::uint64_t>(*k);
      current_seed = s;
      fuzz::Verdict v;
      try {
        v = fuzz::run_region_case(s, options);
      } catch (const std::exception& e) {
        v = {fuzz::Verdict::engine_error, std::string("uncaught: ") + e.what()};
      }
      std::lock_guard lock(mu);
      ++verdicts[fuzz::kind_name(v.kind)];
      compared += v.compared, kernels += v.kernels;
      if (v.failed()) {
        ++failures;
        fmt::print("// region case seed {}: {}: {}\n", s, fuzz::kind_name(v.kind), v.detail);
        std::fflush(stdout);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("fusion-fuzz --regions: {} regions (seed {}, {} threads) in {:.1f} s\n", cases.handed_out(),
             one_case ? *one_case : seed, threads, secs);
  for (const auto& [k, n] : verdicts) fmt::print("  {:<32} {}\n", k, n);
  fmt::print("  elements compared bit for bit {}, region kernels launched {}\n", compared, kernels);
  fmt::print("  failures: {}\n", failures);
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  std::int64_t count = 1000;
  double seconds = 1e9;
  std::uint64_t seed = 1;
  int threads = 1;
  bool compile = false, print = false, trace = false, regions = false, kernels = false;
  std::optional<std::uint64_t> one_case;
  fuzz::GenOptions gen;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (!std::strcmp(argv[i], "--count")) count = std::atoll(next());
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(next());
    else if (!std::strcmp(argv[i], "--seed")) seed = std::strtoull(next(), nullptr, 0);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::max(1, std::atoi(next()));
    else if (!std::strcmp(argv[i], "--compile-only")) compile = true;
    else if (!std::strcmp(argv[i], "--max-depth")) gen.max_depth = std::atoi(next());
    else if (!std::strcmp(argv[i], "--scans")) gen.scans = true;  // exact scans among the ops
    else if (!std::strcmp(argv[i], "--gathers")) gen.gathers = true;  // take_along_axis (wrap, clip) among the ops
    else if (!std::strcmp(argv[i], "--scatters")) gen.scatters = true;  // some cases scatter_add/max/min into a target
    else if (!std::strcmp(argv[i], "--joins")) gen.joins = true;  // fz::concatenate of 2 or 3 pieces among the ops
    else if (!std::strcmp(argv[i], "--aliases")) gen.aliases = true;  // some cases write outputs into inputs
    else if (!std::strcmp(argv[i], "--calls")) gen.calls = true;  // fz::function calls, fz::random leaves
    else if (!std::strcmp(argv[i], "--products")) gen.products = true;  // fz::matmul with math around and inside it
    else if (!std::strcmp(argv[i], "--generated-products")) gen.generated_products = true;  // ... as fusion's own kernel, every case
    else if (!std::strcmp(argv[i], "--long-rows")) gen.long_rows = true;  // layer expressions over long rows
    else if (!std::strcmp(argv[i], "--tall-columns")) gen.tall_columns = true;  // reductions over many rows, few columns
    else if (!std::strcmp(argv[i], "--register-rows")) gen.register_rows = true;  // ... over rows held in registers
    else if (!std::strcmp(argv[i], "--kernels")) kernels = true;  // (--regions) statements calling user kernels
    else if (!std::strcmp(argv[i], "--tune")) fusion::detail::set_tuning(next());  // e.g. scan_strips=2
    else if (!std::strcmp(argv[i], "--print")) print = true;
    else if (!std::strcmp(argv[i], "--case"))
      one_case = std::strtoull(next(), nullptr, 0), count = 1;  // one case seed, as a repro names it
    else if (!std::strcmp(argv[i], "--trace")) trace = true;  // each case and shrink candidate to stderr first
    else if (!std::strcmp(argv[i], "--regions")) regions = true;  // multi-statement regions against their statements
    else { fmt::print(stderr, "unknown argument {}\n", argv[i]); return 2; }
  }
  const fuzz::RegionOptions region_options{gen.gathers || gen.scatters, kernels, gen.joins};
  if (regions && print) {
    fmt::print("{}\n", fuzz::describe_region_case(one_case ? *one_case : seed, region_options));
    return 0;
  }
  if (print) {
    for (std::int64_t k = 0; k < count; ++k) {
      const fuzz::Case c = fuzz::generate(one_case ? *one_case : seed * 1000003 + static_cast<std::uint64_t>(k), gen);
      fmt::print("{}\n", fuzz::to_cpp(c, fmt::format("fuzz: case {}", c.seed)));
    }
    return 0;
  }
  if (regions && compile) {  // (a region's check is its results against its statements': only a GPU gives them)
    fmt::print(stderr, "fusion-fuzz: --regions runs regions on the GPU and compares their results; it has no "
                       "--compile-only form (leave one of the two out)\n");
    return 2;
  }
  if (!compile && fusion::device_count() == 0) {
    fmt::print("SKIPPED: no CUDA device ({}); use --compile-only\n", fusion::no_device_reason());
    return 77;
  }
  CaseCounter cases(count, seconds);
  if (regions) return region_main(cases, seed, one_case, threads, region_options);
  const auto run_one = compile ? fuzz::compile_only : fuzz::run_on_gpu;
  const std::function<fuzz::Verdict(const fuzz::Case&)> run = [&](const fuzz::Case& c) {
    if (trace) fmt::print(stderr, "{}\n", fuzz::to_cpp(c, fmt::format("fuzz: trace {}", c.seed)));
    return run_one(c);
  };
  const auto case_seed = [&](std::int64_t k) {
    return one_case ? *one_case : seed * 1000003 + static_cast<std::uint64_t>(k);
  };
  std::signal(SIGSEGV, on_crash);
  std::signal(SIGFPE, on_crash);
  std::signal(SIGABRT, on_crash);
  Totals t;
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t launches = fusion::stats().launches;
  auto worker = [&] {
    std::optional<fusion::Stream> stream;
    std::optional<fusion::StreamScope> scope;
    if (!compile) stream.emplace(), scope.emplace(*stream);
    while (const std::optional<std::int64_t> k = cases.next()) {
      const fuzz::Case c = fuzz::generate(case_seed(*k), gen);
      current_seed = c.seed;
      fuzz::Verdict v;
      try {
        v = run(c);
      } catch (const std::exception& e) {  // a harness bug or an exception that is not an fz::Error
        v = {fuzz::Verdict::engine_error, std::string("uncaught: ") + e.what()};
      }
      std::string repro;
      if (v.failed()) {
        const fuzz::Case small = fuzz::shrink(c, run);
        const fuzz::Verdict sv = run(small);
        repro = fmt::format("// case seed {} ({} nodes, shrunk to {}): {}\n// {}\n{}", c.seed, fuzz::size(c),
                            fuzz::size(small), fuzz::kind_name(v.kind), sv.detail.substr(0, sv.detail.find('\n')),
                            fuzz::to_cpp(small, fmt::format("fuzz: case {}", c.seed)));
      }
      std::lock_guard lock(t.mu);
      ++t.verdicts[fuzz::kind_name(v.kind)];
      t.compared += v.compared, t.unstable += v.unstable, t.undefined += v.undefined, t.kernels += v.kernels;
      t.nodes += fuzz::size(c);
      count_coverage(c, t);
      for (const std::string& k : v.strategies) ++t.strategies[k];
      if (!repro.empty()) {
        fmt::print("{}\n", repro);
        std::fflush(stdout);
        t.repros.push_back(repro);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  fmt::print("fusion-fuzz: {} cases ({} {}, {} threads, {}) in {:.1f} s\n", cases.handed_out(), one_case ? "case" : "seed",
             one_case ? *one_case : seed, threads, compile ? "codegen + NVRTC only" : "on the GPU", secs);
  for (const auto& [k, n] : t.verdicts) fmt::print("  {:<32} {}\n", k, n);
  fmt::print("  expression nodes {}, kernels {} {}\n", t.nodes, compile ? "compiled" : "launched",
             compile ? t.kernels : static_cast<std::int64_t>(fusion::stats().launches - launches));
  fmt::print("  elements compared {}, skipped as ill-conditioned {}, undefined {}\n", t.compared, t.unstable,
             t.undefined);
  std::string ops;
  for (const auto& [k, n] : t.ops) ops += fmt::format(" {}:{}", k, n);
  fmt::print("  ops ({}):{}\n", t.ops.size(), ops);
  std::string dts;
  for (const auto& [k, n] : t.dtypes) dts += fmt::format(" {}:{}", k, n);
  fmt::print("  input dtypes ({}):{}\n", t.dtypes.size(), dts);
  std::string strategies;
  for (const auto& [k, n] : t.strategies) strategies += fmt::format("\n    {:<80} {}", k, n);
  fmt::print("  kernel strategies ({}):{}\n", t.strategies.size(), strategies);
  fmt::print("  failures: {}\n", t.repros.size());
  return t.repros.empty() ? 0 : 1;
}
