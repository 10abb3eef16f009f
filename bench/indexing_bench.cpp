// SPDX-License-Identifier: Apache-2.0
// Reads through an index (issue 38): row gathers, an embedding lookup with RMSNorm, scalar random gathers,
// each as % of the copy limit measured in the same run.
//   fusion-bench-indexing [--quick] [--scans | --joins | --embedding] [--tune name=value]   (bench/peers/indexing.py: PyTorch, torch.compile)
//
// Limits: a row gather moves its rows once (ids x row bytes, duplicates counted: each is read), the ids and
// the result; a scalar gather from a table far larger than L2 touches a 32-byte sector per element (the
// strided-slice rule), plus the index and the result. GPU time per call: events around 10 calls, median of 9.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "bench_main.hpp"
#include "fusion/fusion.hpp"
#include "schedule/tuning.hpp"

namespace fz = fusion;

namespace {

template <class F> double median_ms(F&& run, int calls = 10) {
  fz::Event start, stop;
  for (int w = 0; w < 3; ++w) run();
  std::vector<double> t;
  for (int rep = 0; rep < 9; ++rep) {
    start.record();
    for (int i = 0; i < calls; ++i) run();
    stop.record();
    stop.synchronize();
    t.push_back(fz::elapsed_time(start, stop) / calls);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class I> fz::Array<I> random_ids(std::int64_t n, std::int64_t below, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<I> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<I>(rng() % static_cast<std::uint64_t>(below));
  return fz::asarray(v, {n});
}

void report(const char* name, double bytes, double ms, double copy_gbs, std::uint64_t kernels) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  fmt::print("{:<58} {:>9.1f} us {:>8.1f} GB/s {:>6.1f}% of limit  {} kernel(s)\n", name, ms * 1e3, gbs,
             100 * gbs / copy_gbs, kernels);
}

template <class F> std::uint64_t kernels_of(F&& run) {
  fz::reset_stats();
  run();
  return fz::stats().launches;
}

}  // namespace

static int run(int argc, char** argv) {
  bool quick = false, scans_only = false, joins_only = false, embedding_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--scans")) scans_only = true;
    else if (!std::strcmp(argv[i], "--joins")) joins_only = true;
    else if (!std::strcmp(argv[i], "--embedding")) embedding_only = true;
    else if (!std::strcmp(argv[i], "--tune") && i + 1 < argc) fz::detail::set_tuning(argv[++i]);
  }
  const double copy = fz::copy_bandwidth_gbs();
  fmt::print("device copy bandwidth {:.1f} GB/s\n", copy);
  const std::int64_t V = quick ? 4096 : 32768, D = 4096, B = quick ? 2048 : 16384;
  if (joins_only) scans_only = true;  // (the joins alone: the sections before the scans are skipped with them)

  if (!scans_only && !embedding_only) {  // row gather, f32 rows of 4096
    const auto table = fz::full<float>({V, D}, 1.5f);
    const auto ids = random_ids<std::int32_t>(B, V, 1);
    fz::Array<float> out = fz::zeros<float>({B, D});
    auto run = [&] { out = fz::take<fz::IndexMode::clip>(table, ids, 0); };
    const double bytes = 2.0 * B * D * 4 + B * 4;
    report(fmt::format("row gather f32 x[idx] ({}x{} table, {} ids, clip)", V, D, B).c_str(), bytes, median_ms(run),
           copy, kernels_of(run));
    auto checked = [&] { out = fz::take(table, ids, 0); };
    report("  the same, indices checked (raise: waits for the kernel)", bytes, median_ms(checked), copy,
           kernels_of(checked));
  }
  if (!scans_only && !embedding_only) {  // row gather, bf16
    const auto table = fz::full<fz::bfloat16>({V, D}, fz::bfloat16(1.5f));
    const auto ids = random_ids<std::int64_t>(B, V, 2);
    fz::Array<fz::bfloat16> out = fz::zeros<fz::bfloat16>({B, D});
    auto run = [&] { out = fz::take<fz::IndexMode::clip>(table, ids, 0); };
    report("row gather bf16 x[idx] (int64 ids, clip)", 2.0 * B * D * 2 + B * 8, median_ms(run), copy,
           kernels_of(run));
  }
  if (!scans_only) {  // embedding + RMSNorm in bf16
    const auto table = fz::full<fz::bfloat16>({V, D}, fz::bfloat16(0.5f));
    const auto pos = fz::full<fz::bfloat16>({B, D}, fz::bfloat16(0.25f));
    const auto weight = fz::full<fz::bfloat16>({D}, fz::bfloat16(1.f));
    const auto ids = random_ids<std::int32_t>(B, V, 3);
    fz::Array<fz::bfloat16> out = fz::zeros<fz::bfloat16>({B, D});
    auto run = [&] { out = fz::rms_norm(fz::take<fz::IndexMode::clip>(table, ids, 0) + pos, weight, 1e-6f); };
    report("embedding + RMSNorm bf16 rms_norm(table[ids] + pos)", 3.0 * B * D * 2 + B * 4 + D * 2, median_ms(run),
           copy, kernels_of(run));
  }
  if (embedding_only) return 0;
  if (!scans_only) {  // scalar random gather from a table far larger than L2
    const std::int64_t N = quick ? (1 << 22) : (1 << 26), T = quick ? (1 << 22) : (1 << 26);
    const auto lut = fz::full<float>({T}, 2.f);
    const auto idx = random_ids<std::int32_t>(N, T, 4);
    fz::Array<float> out = fz::zeros<float>({N});
    auto run = [&] { out = fz::take<fz::IndexMode::wrap>(lut, idx, 0) * 3.f; };
    report(fmt::format("scalar gather lut[idx] * 3 ({} from {}, 32-byte sectors)", N, T).c_str(),
           32.0 * N + 4.0 * N + 4.0 * N, median_ms(run), copy, kernels_of(run));
  }
  if (!scans_only) {  // scatter-add of 2^26 values into 2^20 bins (uniform) and into 1024 bins (contended)
    const std::int64_t N = quick ? (1 << 22) : (1 << 26);
    const auto values = fz::full<float>({N}, 1.f);
    for (const std::int64_t bins : {std::int64_t{1} << 20, std::int64_t{1024}}) {
      const auto idx = random_ids<std::int64_t>(N, bins, 5);
      fz::Array<float> hist = fz::zeros<float>({bins});
      auto run = [&] { fz::index_add<fz::IndexMode::wrap>(hist, 0, idx, values); };
      report(fmt::format("index_add of {} f32 into {} bins (int64 ids)", N, bins).c_str(),
             12.0 * N + 8.0 * bins, median_ms(run), copy, kernels_of(run));
    }
    // index_max of uniform random values (a constant would never replace a bin's value after the first)
    const auto noise = fz::random::uniform<float>({N}, 6);
    // the deterministic mode beside the fast one, on random values (their exponents vary, as real data's do)
    for (const std::int64_t bins : {std::int64_t{1} << 20, std::int64_t{1024}}) {
      const auto idx = random_ids<std::int64_t>(N, bins, 5);
      fz::Array<float> hist = fz::zeros<float>({bins});
      auto fast = [&] { fz::index_add<fz::IndexMode::wrap>(hist, 0, idx, noise); };
      report(fmt::format("index_add of {} random f32 into {} bins, fast (atomics)", N, bins).c_str(),
             12.0 * N + 8.0 * bins, median_ms(fast), copy, kernels_of(fast));
      auto exact = [&] {
        fz::Deterministic deterministic;
        fz::index_add<fz::IndexMode::wrap>(hist, 0, idx, noise);
      };
      report("  the same, fz::Deterministic (exact sums, bit-identical)", 12.0 * N + 8.0 * bins, median_ms(exact),
             copy, kernels_of(exact));
    }
    for (const std::int64_t bins : {std::int64_t{1} << 20, std::int64_t{1024}}) {
      const auto idx = random_ids<std::int64_t>(N, bins, 5);
      fz::Array<float> top = fz::zeros<float>({bins});
      auto run = [&] { fz::index_max<fz::IndexMode::wrap>(top, 0, idx, noise); };
      report(fmt::format("index_max of {} f32 into {} bins (int64 ids)", N, bins).c_str(),
             12.0 * N + 8.0 * bins, median_ms(run), copy, kernels_of(run));
    }
  }
  {  // joins: fz::concatenate and fz::stack as one kernel, the math around them fused
    const std::int64_t N = quick ? (1 << 22) : (1 << 26), R = quick ? 2048 : 8192, C = 4096;
    const auto a = fz::full<float>({N}, 1.f), b = fz::full<float>({N}, 2.f);
    fz::Array<float> flat = fz::zeros<float>({2 * N}), stacked = fz::zeros<float>({2, N});
    auto cat0 = [&] { flat = fz::concatenate(0, a, b); };
    report(fmt::format("concatenate(0, a, b) of 2 x {} f32", N).c_str(), 16.0 * N, median_ms(cat0), copy,
           kernels_of(cat0));
    auto st = [&] { stacked = fz::stack(0, a, b); };
    report(fmt::format("stack(0, a, b) of 2 x {} f32", N).c_str(), 16.0 * N, median_ms(st), copy, kernels_of(st));
    const auto x = fz::full<float>({R, C}, 0.5f), y = fz::full<float>({R, C}, 0.25f);
    const auto bias = fz::full<float>({2 * C}, 1.f);
    fz::Array<float> wide = fz::zeros<float>({R, 2 * C});
    auto cat1 = [&] { wide = fz::concatenate(1, x, y); };
    report(fmt::format("concatenate(1, x, y) of 2 x {}x{} f32 (last axis)", R, C).c_str(), 16.0 * R * C,
           median_ms(cat1), copy, kernels_of(cat1));
    auto math = [&] { wide = fz::concatenate(1, x * 2.f, fz::exp(y)) + bias; };
    const double math_bytes = 16.0 * R * C + 8.0 * C;
    report("concatenate(1, x * 2, exp(y)) + bias (one kernel)", math_bytes, median_ms(math), copy, kernels_of(math));
    auto unfused = [&] {
      fz::Unfused u;
      wide = fz::concatenate(1, x * 2.f, fz::exp(y)) + bias;
    };
    report("  the same, fz::Unfused (an op a kernel)", math_bytes, median_ms(unfused), copy, kernels_of(unfused));
    std::vector<fz::Array<float>> eight;
    for (int k = 0; k < 8; ++k) eight.push_back(fz::full<float>({R, C / 8}, static_cast<float>(k)));
    fz::Array<float> joined = fz::zeros<float>({R, C});
    auto cat8 = [&] { joined = fz::concatenate(eight, 1); };
    report(fmt::format("concatenate of 8 arrays {}x{} f32 along axis 1", R, C / 8).c_str(), 8.0 * R * C,
           median_ms(cat8), copy, kernels_of(cat8));
    // a constant pad of both axes, alone and with math around it (each input element read once, each output written once)
    fz::Array<float> padded = fz::zeros<float>({R + 2, C + 4});
    const double pad_bytes = 4.0 * R * C + 4.0 * (R + 2) * (C + 4);
    auto pad = [&] { padded = fz::pad(x, {{1, 1}, {2, 2}}); };
    report(fmt::format("pad of {}x{} f32 by (1, 1), (2, 2)", R, C).c_str(), pad_bytes, median_ms(pad), copy, kernels_of(pad));
    auto pad_math = [&] { padded = fz::pad(x * 2.f, {{1, 1}, {2, 2}}) + 1.f; };
    report("pad(x * 2) + 1 (one kernel)", pad_bytes, median_ms(pad_math), copy, kernels_of(pad_math));
  }
  if (!joins_only) {  // scans: one long row with a fused prologue, rows, logcumsumexp rows
    const std::int64_t N = quick ? (1 << 24) : (1 << 28);
    const auto x = fz::full<float>({N}, 0.5f);
    fz::Array<float> out = fz::zeros<float>({N});
    auto run = [&] { out = fz::cumsum(x * 2.f, 0); };
    report(fmt::format("cumsum(x * 2) of {} f32 (one row, one pass)", N).c_str(), 8.0 * N,
           median_ms(run), copy, kernels_of(run));
    auto lse_one = [&] { out = fz::logcumsumexp(x, 0); };  // (--tune scan_pipelined=0: warp 0 looks back)
    report(fmt::format("logcumsumexp of {} f32 (one row, one pass)", N).c_str(), 8.0 * N, median_ms(lse_one), copy,
           kernels_of(lse_one));
    {  // 8-byte accumulators: tiles a quarter as long, as many blocks an SM as their registers fit
      const std::int64_t N8 = N / 2;
      const auto x8 = fz::full<double>({N8}, 0.5);
      fz::Array<double> out8 = fz::zeros<double>({N8});
      auto run8 = [&] { out8 = fz::cumsum(x8, 0); };
      report(fmt::format("cumsum of {} f64 (one row, one pass)", N8).c_str(), 16.0 * N8, median_ms(run8), copy,
             kernels_of(run8));
    }
    const std::int64_t R = quick ? 2048 : 8192;
    const auto m = fz::full<float>({R, R}, 0.25f);
    fz::Array<float> rows = fz::zeros<float>({R, R});
    auto row_run = [&] { rows = fz::cumsum(m, 1); };
    report(fmt::format("row-wise cumsum of {}x{} f32", R, R).c_str(), 8.0 * R * R, median_ms(row_run), copy,
           kernels_of(row_run));
    auto col_run = [&] { rows = fz::cumsum(m, 0); };
    report(fmt::format("column-wise cumsum of {}x{} f32 (axis 0)", R, R).c_str(), 8.0 * R * R, median_ms(col_run),
           copy, kernels_of(col_run));
    {  // 8-byte accumulators in strips: runs of 16 loaded after the stores (--tune scan_items=8: runs of 8 ahead)
      const auto m8 = fz::full<double>({R, R}, 0.25);
      fz::Array<double> cols8 = fz::zeros<double>({R, R});
      auto col8_run = [&] { cols8 = fz::cumsum(m8, 0); };
      report(fmt::format("column-wise cumsum of {}x{} f64 (axis 0)", R, R).c_str(), 16.0 * R * R, median_ms(col8_run),
             copy, kernels_of(col8_run));
    }
    auto lse_run = [&] { rows = fz::logcumsumexp(m, 1); };
    report(fmt::format("row-wise logcumsumexp of {}x{} f32", R, R).c_str(), 8.0 * R * R, median_ms(lse_run), copy,
           kernels_of(lse_run));
  }
  return 0;
}

int main(int argc, char** argv) {
  static const bench::Flag flags[] = {{"--quick"}, {"--scans"}, {"--joins"}, {"--embedding"}, {"--tune", 1}};
  if (const char* bad = bench::unknown_flag(argc, argv, flags)) {
    fmt::print(stderr, "fusion-bench-indexing: unknown flag, or one without its value: '{}'\n"
               "usage: fusion-bench-indexing [--quick] [--scans | --joins | --embedding] [--tune name=value]...\n", bad);
    return 2;
  }
  return bench::guarded_main("fusion-bench-indexing", [&] { return run(argc, argv); });
}
