// SPDX-License-Identifier: Apache-2.0
// fusion-soak: the engine run for minutes, to show that nothing grows or gets lost.
//   fusion-soak [--seconds S] [--threads T] [--every E] [--limit BYTES] [--seeds N] [--name NAME]
// Each worker thread has its own stream and loops over four kinds of work, each checked:
//   a random multi-statement region (one of N fixed fuzz seeds, so its kernels are cached after warm-up),
//   compared bit for bit with its statements one by one (fz::Lazy against eager);
//   a recorded fz::Step replayed (p += g: after k replays p is exactly k * g);
//   eager statements over arrays of changing sizes (fz::sum(a * a) of twos: exactly 4n);
//   an allocation past the memory limit (an OutOfMemoryError, after which work goes on).
// Every E seconds the main thread returns the pool's cached blocks to the driver (free_all_blocks, racing the
// workers) and prints one row: pool bytes in use and held, kernel-cache entries in memory and on disk, host
// RSS. Several processes may share one FUSION_CACHE_DIR (scripts/gpu-check's soak stage runs four).
// The exit status is 1 when any check failed or the figures grew after warm-up (the first third of the run).
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "fusion/fusion.hpp"
#include "fuzz_region.hpp"
#include "fuzz_run.hpp"
#include "runtime/compile/disk_cache.hpp"

namespace fz = fusion;

namespace {

struct Counts {
  std::atomic<std::int64_t> regions{0}, replays{0}, eager{0}, oom{0}, errors{0};
  std::mutex mu;
  std::vector<std::string> first_errors;
  void error(const std::string& what) {
    ++errors;
    std::lock_guard<std::mutex> lock(mu);
    if (first_errors.size() < 5) first_errors.push_back(what);
  }
};

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

void worker(int id, std::chrono::steady_clock::time_point until, int seeds, std::size_t limit, Counts& n) {
  fz::Stream stream;
  fz::StreamScope scope(stream);
  std::uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(id + 1);
  auto next = [&] {
    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
    return state * 0x2545f4914f6cdd1dull;
  };
  fz::Array<float> p = fz::zeros<float>({4099}), g = fz::full<float>({4099}, 1.f);
  fz::Step step([&] { p += g; });
  std::int64_t steps = 0;
  static const std::int64_t sizes[] = {1, 1000, 4097, 65536, 1 << 20};
  for (std::int64_t i = 0; std::chrono::steady_clock::now() < until; ++i) {
    try {
      switch (i % 4) {
        case 0: {
          const std::uint64_t seed = 0x50a'0000 + next() % static_cast<std::uint64_t>(seeds);
          const fuzz::Verdict v = fuzz::run_region_case(seed, {.indexing = seed % 2 == 0, .joins = seed % 3 == 0});
          if (v.failed()) n.error(fmt::format("region seed {}: {}: {}", seed, fuzz::kind_name(v.kind), v.detail));
          ++n.regions;
          break;
        }
        case 1: {
          if (steps == 0) step();  // the first call records
          else step.replay();
          ++steps;
          if (steps % 64 == 0) {
            const std::vector<float> h = p.to_host();
            if (h.front() != static_cast<float>(steps) || h.back() != static_cast<float>(steps))
              n.error(fmt::format("worker {}: after {} steps p is {}", id, steps, h.front()));
          }
          ++n.replays;
          break;
        }
        case 2: {
          const std::int64_t size = sizes[next() % std::size(sizes)];
          const fz::Array<float> a = fz::full<float>({size}, 2.f);
          const fz::Array<float> total = fz::sum(a * a);
          if (total.item() != 4.f * static_cast<float>(size))
            n.error(fmt::format("worker {}: sum of {} fours is {}", id, size, total.item()));
          ++n.eager;
          break;
        }
        default: {
          if (limit == 0 || i % 64 != 3) break;
          try {
            const fz::Array<std::uint8_t> big = fz::empty<std::uint8_t>({static_cast<std::int64_t>(limit) + 1});
            n.error(fmt::format("worker {}: {} bytes allocated past the limit of {}", id, big.size(), limit));
          } catch (const fz::OutOfMemoryError&) {
            ++n.oom;
          }
        }
      }
    } catch (const std::exception& e) {
      n.error(fmt::format("worker {}: {}", id, e.what()));
    }
  }
  stream.synchronize();
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 60, every = 10;
  int threads = 4, seeds = 48;
  std::size_t limit = 0;
  std::string name = "soak";
  for (int i = 1; i < argc; ++i) {
    auto value = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(value());
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(value());
    else if (!std::strcmp(argv[i], "--every")) every = std::atof(value());
    else if (!std::strcmp(argv[i], "--limit")) limit = static_cast<std::size_t>(std::atoll(value()));
    else if (!std::strcmp(argv[i], "--seeds")) seeds = std::atoi(value());
    else if (!std::strcmp(argv[i], "--name")) name = value();
    else return std::fprintf(stderr, "fusion-soak: unknown argument %s\n", argv[i]), 2;
  }
  if (fz::device_count() == 0) return std::fprintf(stderr, "fusion-soak: no GPU\n"), 77;
  fz::MemoryPool& pool = fz::default_memory_pool();
  if (limit) pool.set_limit(limit);
  Counts n;
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(seconds));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(worker, t, until, seeds, limit, std::ref(n));
  struct Row {
    double t, used_mib, held_mib, rss_mib;
    std::uint64_t compiles, disk_entries;
  };
  std::vector<Row> rows;
  fmt::print("{}: {} threads, {} s, {} region seeds, memory limit {}\n", name, threads, seconds, seeds,
             limit ? fmt::format("{} bytes", limit) : std::string("none"));
  fmt::print("{:>6} {:>9} {:>8} {:>7} {:>5} {:>6} {:>9} {:>9} {:>8} {:>9} {:>8}\n", "t (s)", "regions", "replays",
             "eager", "oom", "errors", "used MiB", "held MiB", "compiles", "disk ent.", "RSS MiB");
  for (;;) {
    std::this_thread::sleep_for(std::chrono::duration<double>(every));
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double held_before = static_cast<double>(pool.total_bytes()) / (1 << 20);
    pool.free_all_blocks();  // the trim, racing the workers' streams
    const Row r{t, static_cast<double>(pool.used_bytes()) / (1 << 20), held_before, rss_mib(), fz::stats().compiles,
                fz::detail::DiskCache::instance().entries().size()};
    rows.push_back(r);
    fmt::print("{:6.0f} {:9} {:8} {:7} {:5} {:6} {:9.1f} {:9.1f} {:8} {:9} {:8.1f}\n", r.t, n.regions.load(),
               n.replays.load(), n.eager.load(), n.oom.load(), n.errors.load(), r.used_mib, r.held_mib, r.compiles,
               r.disk_entries, r.rss_mib);
    std::fflush(stdout);
    if (t >= seconds) break;
  }
  for (auto& w : workers) w.join();
  for (const std::string& e : n.first_errors) fmt::print("error: {}\n", e);
  // Flat after warm-up: from the first row past a third of the run to the last, RSS grows by less than 5% (and
  // 64 MiB), the pool holds no more than it did, and no kernel is compiled again.
  const Row* warm = &rows.back();
  for (const Row& r : rows)
    if (r.t >= seconds / 3) {
      warm = &r;
      break;
    }
  const Row& last = rows.back();
  const bool rss_flat = last.rss_mib <= warm->rss_mib * 1.05 + 64;
  const bool compiles_flat = last.compiles == warm->compiles;
  fmt::print("{}: {} checks failed; after warm-up (t = {:.0f} s to {:.0f} s): RSS {:.1f} -> {:.1f} MiB ({}), compiles "
             "{} -> {} ({}), disk entries {} -> {}, pool in use {:.1f} -> {:.1f} MiB\n",
             name, n.errors.load(), warm->t, last.t, warm->rss_mib, last.rss_mib, rss_flat ? "flat" : "GROWS",
             warm->compiles, last.compiles, compiles_flat ? "flat" : "GROWS", warm->disk_entries, last.disk_entries,
             warm->used_mib, last.used_mib);
  return n.errors == 0 && rss_flat && compiles_flat ? 0 : 1;
}
