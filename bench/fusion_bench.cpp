// SPDX-License-Identifier: Apache-2.0
// The benchmark suite: every expression through fz::compare_fusion (fused vs unfused GPU time, bytes
// moved, % of the device-to-device copy bandwidth measured in the same run, results checked to agree),
// host dispatch cost against a raw cuLaunchKernel of the same kernel, and compile latency.
//
//   fusion-bench [--json out.json] [--log2n 26]   the suite (a CSV is written beside the JSON)
//   fusion-bench --first-call                     one fused call in this (new) process, timed
//   fusion-bench --steps                          multi-statement steps: eager, fz::Lazy, fz::Step (issue 16)
//   fusion-bench --host-loop MODE N               the 10-statement step only (eager|region|step|replay), N per batch
//   fusion-bench --layouts [--only TEXT]          broadcasts, transposes, slices, column sums (issue 15)
//   fusion-bench --fast-math                      each float32 op's error in ulps, precise and fz::FastMath, then
//                                                 the bfloat16 suite precise and fast at 2^26
//   fusion-bench --random [--only TEXT]            dropout and the generators alone at 2^26 (issue 35)
//   fusion-bench --layers [--only TEXT] [--tune name=value ...]
//                                                 the layers suite (the cases whose name contains TEXT), with
//                                                 layout thresholds changed (schedule/tuning.hpp)
//   --calls-per-sample N (any suite)              calls between one pair of events (10, as bench/peers times)
//   --cold-l2 (any suite)                         each sample after a read of twice L2 (outside its events): inputs
//                                                 smaller than L2 read from memory, not from the last sample's L2
#include <cuda.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <malloc.h>
#include <sys/resource.h>

#include "bench_main.hpp"
#include "fast_math_errors.hpp"
#include "fusion/fusion.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/compile/kernel_cache.hpp"
#include "schedule/tuning.hpp"

namespace fz = fusion;
using Clock = std::chrono::steady_clock;

namespace {

std::string only;  ///< --only: run the layers cases whose name contains it
/// Calls between one pair of events, as bench/peers times PyTorch and JAX: the host's time to a call's
/// first launch hides behind queued work, as in a loop (one call alone adds a launch, 3-4 us on the H100 machine).
/// --calls-per-sample N changes it: where a kernel takes about as long as the host's enqueue (a column sum of 2,048^2,
/// 5-6 us against 3-4), the first call's launch is a tenth of each sample; more calls tell the kernel from that.
int calls_per_sample = 10;
bool cold_l2 = false;  // --cold-l2: each sample starts with L2 holding none of its inputs (BenchmarkOptions::flush_l2)
fz::BenchmarkOptions timing(int n_repeat) {
  return {.n_repeat = n_repeat, .n_warmup = 3, .calls_per_sample = calls_per_sample, .flush_l2 = cold_l2};
}
bool wanted(const std::string& name) { return only.empty() || name.find(only) != std::string::npos; }

template <class T> fz::Array<T> random_array(std::int64_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> h(static_cast<std::size_t>(n));
  for (auto& x : h) x = T(d(rng));
  return fz::asarray(h);
}

struct Row {
  std::string expression, dtype;
  std::int64_t n;
  fz::FusionComparison c;
};

/// The fusion-engine issue's suite, in one dtype at one size.
template <class T> void suite(std::int64_t n, std::vector<Row>& rows) {
  auto x = random_array<T>(n, -2, 2, 1), y = random_array<T>(n, -2, 2, 2), z = random_array<T>(n, 0.5f, 2, 3);
  const std::string dt(fz::dtype_name(fz::dtype_of<T>));
  const fz::BenchmarkOptions opts = timing(n >= (1 << 24) ? 20 : 100);
  auto run = [&](const std::string& name, auto&& fn) {
    if (wanted(name)) rows.push_back({name, dt, n, fz::compare_fusion(name, [&] { return fz::Array<T>(fn()); }, opts)});
  };
  run("sin(x)+cos(y)/sqrt(z)", [&] { return fz::sin(x) + fz::cos(y) / fz::sqrt(z); });
  run("(x-y)*(x-y)", [&] { return (x - y) * (x - y); });
  run("softplus", [&] { return fz::maximum(x, 0.f) + fz::log1p(fz::exp(-fz::abs(x))); });
  run("2.5*x+y", [&] { return 2.5f * x + y; });
  run("gelu_tanh", [&] { return 0.5f * x * (1.f + fz::tanh(0.7978845608f * (x + 0.044715f * x * x * x))); });
  run("horner10", [&] {
    return ((((((((((0.1f * x + 0.2f) * x + 0.3f) * x + 0.4f) * x + 0.5f) * x + 0.6f) * x + 0.7f) * x + 0.8f) * x +
              0.9f) * x + 1.0f) * x + 1.1f);
  });
}

/// The reductions issue's targets: full reductions of 2^26 float32, row and column sums of an 8192 x 8192
/// matrix, and two outputs from two inputs in one kernel (fz::tie).
void reduction_suite(std::vector<Row>& rows) {
  const std::int64_t n = std::int64_t{1} << 26;
  auto x = random_array<float>(n, -2, 2, 1), y = random_array<float>(n, -2, 2, 2);
  auto m = x.reshape({8192, 8192});
  const fz::BenchmarkOptions opts = timing(20);
  auto run = [&](const std::string& name, auto&& fn) {
    if (wanted(name)) rows.push_back({name, "float32", n, fz::compare_fusion(name, fn, opts)});
  };
  run("sum(x*y)", [&] { return fz::Array<float>(fz::sum(x * y)); });
  run("sum((x-y)*(x-y))", [&] { return fz::Array<float>(fz::sum((x - y) * (x - y))); });
  run("sum(m,-1) 8192^2", [&] { return fz::Array<float>(fz::sum(m, -1)); });
  run("sum(m,0) 8192^2", [&] { return fz::Array<float>(fz::sum(m, 0)); });
  run("tie(x+y,x*y)", [&] {
    fz::Array<float> a, b;
    fz::tie(a, b) = std::forward_as_tuple(x + y, x * y);
    return a;
  });
}

/// User kernels at 2^26 float32: ElementwiseKernel and fz::function against the same fused expression,
/// ReductionKernel against fz::sqrt(fz::sum(x * x)). (One kernel either way; "unfused" runs the same.)
void user_suite(std::vector<Row>& rows) {
  const std::int64_t n = std::int64_t{1} << 26;
  auto x = random_array<float>(n, -2, 2, 1), y = random_array<float>(n, -2, 2, 2);
  auto m = x.reshape({8192, 8192});
  fz::Array<float> out = fz::empty<float>({n});
  static const fz::ElementwiseKernel squared_diff("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)",
                                                  "squared_diff");
  static const fz::ReductionKernel l2norm("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm");
  static const auto sq_r = fz::function<float(float, float)>("sq_r", "(float x, float y) { return x * x + y * y; }");
  const fz::BenchmarkOptions opts = timing(20);
  auto run = [&](const std::string& name, auto&& fn) {
    if (wanted(name)) rows.push_back({name, "float32", n, fz::compare_fusion(name, fn, opts)});
  };
  static const fz::ElementwiseKernel saxpy("float32 x, float32 y, float32 a", "float32 z", "z = a * x + y", "saxpy");
  run("EK squared_diff", [&] { return fz::Array<float>(squared_diff(x, y, out)); });  // a view of `out`, no copy
  run("EK saxpy", [&] { return fz::Array<float>(saxpy(x, y, 2.5f, out)); });
  run("2.5*x+y", [&] { return fz::Array<float>(2.5f * x + y); });
  run("(x-y)*(x-y)", [&] { return fz::Array<float>((x - y) * (x - y)); });
  run("fn sqrt(sq_r(x,y))+1", [&] { return fz::Array<float>(fz::sqrt(sq_r(x, y)) + 1.f); });
  run("RK l2norm(x)", [&] { return fz::Array<float>(l2norm(x)); });
  run("sqrt(sum(x*x))", [&] { return fz::Array<float>(fz::sqrt(fz::sum(x * x))); });
  run("RK l2norm(m,1) 8192^2", [&] { return fz::Array<float>(l2norm(m, fz::Axes(1))); });
}

/// Whole layers as users write them, 2^26 elements at row lengths 128 to 65,536 (the layers issue's suite),
/// plus statistics over the whole array and a training-mode batch norm.
void layers_suite(std::vector<Row>& rows) {
  const std::int64_t n = std::int64_t{1} << 26;
  auto flat = random_array<float>(n, -3, 3, 5);
  auto flat_bf = random_array<fz::bfloat16>(n, -3, 3, 6);
  const fz::BenchmarkOptions opts = timing(20);
  auto run = [&](const std::string& name, const char* dtype, auto&& fn) {
    if (wanted(name)) rows.push_back({name, dtype, n, fz::compare_fusion(name, fn, opts)});
  };
  for (std::int64_t D : {128, 1024, 4096, 8192, 16384, 65536}) {  // (8,192: a long row held in registers by 256 threads)
    const auto x = flat.reshape({n / D, D});
    const auto xb = flat_bf.reshape({n / D, D});
    const auto w = random_array<float>(D, 0.5f, 1.5f, 7), b = random_array<float>(D, -1, 1, 8);
    const auto wb = random_array<fz::bfloat16>(D, 0.5f, 1.5f, 9);
    const std::string at = fmt::format(" D={}", D);
    run("softmax" + at, "float32", [&] {
      return fz::Array<float>(fz::exp(x - fz::max(x, -1, true)) / fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true));
    });
    run("log_softmax" + at, "float32", [&] {
      return fz::Array<float>(x - fz::max(x, -1, true) - fz::log(fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true)));
    });
    run("layer_norm" + at, "float32", [&] {
      return fz::Array<float>((x - fz::mean(x, -1, true)) * fz::rsqrt(fz::var(x, -1, true) + 1e-5f) * w + b);
    });
    // The same layer with the variance written as the mean of squared deviations: two float reductions one
    // after the other (as softmax's max, then sum), instead of var's one pass of Welford accumulators.
    run("layer_norm centered" + at, "float32", [&] {
      const auto d = x - fz::mean(x, -1, true);
      return fz::Array<float>(d * fz::rsqrt(fz::mean(d * d, -1, true) + 1e-5f) * w + b);
    });
    run("rms_norm" + at, "float32",
        [&] { return fz::Array<float>(x * fz::rsqrt(fz::mean(x * x, -1, true) + 1e-6f) * w); });
    run("rms_norm" + at, "bfloat16", [&] {
      auto xf = fz::cast<float>(xb);
      return fz::Array<fz::bfloat16>(
          fz::cast<fz::bfloat16>(xf * fz::rsqrt(fz::mean(xf * xf, -1, true) + 1e-6f) * fz::cast<float>(wb)));
    });
    // 16-bit layers: bfloat16 in and out, computed in float32 (issue 35's 16-bit layer kernels)
    run("softmax" + at, "bfloat16", [&] {
      auto xf = fz::cast<float>(xb);
      return fz::Array<fz::bfloat16>(
          fz::cast<fz::bfloat16>(fz::exp(xf - fz::max(xf, -1, true)) / fz::sum(fz::exp(xf - fz::max(xf, -1, true)), -1, true)));
    });
    run("layer_norm" + at, "bfloat16", [&] {
      auto xf = fz::cast<float>(xb);
      return fz::Array<fz::bfloat16>(fz::cast<fz::bfloat16>((xf - fz::mean(xf, -1, true)) *
                                                            fz::rsqrt(fz::var(xf, -1, true) + 1e-5f) * fz::cast<float>(wb)));
    });
    run("var" + at, "float32", [&] { return fz::Array<float>(fz::var(x, -1)); });
    run("tie(sum,sum sq)" + at, "float32", [&] {
      fz::Array<float> s, q;
      fz::tie(s, q) = std::make_tuple(fz::sum(x, -1), fz::sum(x * x, -1));
      return q;
    });
    run("tie(mean,var)" + at, "float32", [&] {  // (torch.var_mean)
      fz::Array<float> m, v;
      fz::tie(m, v) = std::make_tuple(fz::mean(x, -1), fz::var(x, -1));
      return v;
    });
  }
  {  // rows that are not whole vectors (1,000 floats: 4,000 bytes apart)
    const std::int64_t D = 1000;
    const auto x = flat.slice({fz::to(n / D * D)}).reshape({n / D, D});
    run("var D=1000", "float32", [&] { return fz::Array<float>(fz::var(x, -1)); });
    run("tie(mean,var) D=1000", "float32", [&] {
      fz::Array<float> m, v;
      fz::tie(m, v) = std::make_tuple(fz::mean(x, -1), fz::var(x, -1));
      return v;
    });
  }
  run("var(x)", "float32", [&] { return fz::Array<float>(fz::var(flat)); });
  run("tie(sum,sum sq)(x)", "float32", [&] {
    fz::Array<float> s, q;
    fz::tie(s, q) = std::make_tuple(fz::sum(flat), fz::sum(flat * flat));
    return q;
  });
  // Batch norm, training forward: statistics over N, H, W of (8, 64, 112, 112), then normalize.
  auto bn = random_array<float>(8 * 64 * 112 * 112, -2, 2, 10).reshape({8, 64, 112, 112});
  auto gamma = random_array<float>(64, 0.5f, 1.5f, 11).reshape({1, 64, 1, 1}),
       beta = random_array<float>(64, -1, 1, 12).reshape({1, 64, 1, 1});
  if (wanted("batch_norm stats (8,64,112,112)"))  // the statistics alone (torch.var_mean over N, H, W)
    rows.push_back({"batch_norm stats (8,64,112,112)", "float32", bn.size(), fz::compare_fusion(
                                                                                "batch_norm stats",
                                                                                [&] {
                                                                                  fz::Array<float> m, v;
                                                                                  fz::tie(m, v) = std::make_tuple(
                                                                                      fz::mean(bn, {0, 2, 3}, true),
                                                                                      fz::var(bn, {0, 2, 3}, true));
                                                                                  return v;
                                                                                },
                                                                                opts)});
  if (wanted("batch_norm (8,64,112,112)"))
    rows.push_back({"batch_norm (8,64,112,112)", "float32", bn.size(),
                    fz::compare_fusion(
                        "batch_norm",
                        [&] {
                          return fz::Array<float>((bn - fz::mean(bn, {0, 2, 3}, true)) *
                                                      fz::rsqrt(fz::var(bn, {0, 2, 3}, true) + 1e-5f) * gamma +
                                                  beta);
                        },
                        opts)});
}

/// Every layout a little off the contiguous path (issue 15's suite): row, column and scalar broadcasts, an
/// outer product, transposed operands, strided slices, column and middle-axis sums; float32 at 2^24 and
/// 2^26 elements, and the broadcasts in bfloat16 and float16.
template <class T> void layouts_at(std::int64_t n, const char* dt, std::vector<Row>& rows) {
  const std::int64_t side = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  const fz::BenchmarkOptions opts = timing(20);
  auto run = [&](const std::string& name, auto&& fn) {
    const std::string full = fmt::format("{} {}^2", name, side);
    if (wanted(full))
      rows.push_back({full, dt, side * side,
                      fz::compare_fusion(
                          full, [&] { return fz::Array<T>(fn()); }, opts)});
  };
  auto m = random_array<T>(side * side, -2, 2, 21).reshape({side, side});
  auto m2 = random_array<T>(side * side, -2, 2, 22).reshape({side, side});
  auto row = random_array<T>(side, -1, 1, 23), col = random_array<T>(side, -1, 1, 24).reshape({side, 1});
  run("m+row", [&] { return m + row; });
  run("m*col", [&] { return m * col; });
  run("max(m+row*col,0)", [&] { return fz::maximum(m + row * col, 0.f); });
  run("m*2.5+1", [&] { return m * 2.5f + 1.f; });
  run("outer(col,row)", [&] { return col * row; });
  if constexpr (std::is_same_v<T, float>) {
    run("m+m2.T", [&] { return m + m2.transpose(); });
    run("m.T*m2", [&] { return m.transpose() * m2; });
    run("m[:, ::2]+1", [&] { return m.slice({{}, fz::Slice{{}, {}, 2}}) + 1.f; });
    // rotary embeddings' interleaved pairs: both halves of m read at a step of 2, one from an odd start
    auto cs = random_array<T>(side * side / 2, -1, 1, 25).reshape({side, side / 2}),
         sn = random_array<T>(side * side / 2, -1, 1, 26).reshape({side, side / 2});
    run("rotary m[:, ::2]*c-m[:, 1::2]*s", [&] {
      return m.slice({{}, fz::Slice{0, {}, 2}}) * cs - m.slice({{}, fz::Slice{1, {}, 2}}) * sn;
    });
    // the same of the middle third of wider rows (the key of a fused qkv projection: rows that do not collapse)
    auto qkv = random_array<T>(side * side * 3, -2, 2, 27).reshape({side, 3 * side});
    const auto key = qkv.slice({{}, fz::Slice{side, 2 * side}});
    run("rotary qkv[:, n:2n] pairs", [&] {
      return key.slice({{}, fz::Slice{0, {}, 2}}) * cs - key.slice({{}, fz::Slice{1, {}, 2}}) * sn;
    });
    run("sum(m,0)", [&] { return fz::sum(m, 0); });
    auto t = m.reshape({side / 16, 16, side});
    run("sum(t,1) middle axis", [&] { return fz::sum(t, 1); });
    // The same column sum over copies of m, one after another, as many as fill three times L2: each call reads its
    // input from memory, as the sums above do only once m is larger than L2 (a 2,048^2 m stays in a 50-60 MB L2
    // between calls, and reads up to 30 points faster there by a margin that changes between processes).
    const double l2 = static_cast<double>(fz::Device::current().properties().l2_cache_bytes);
    const auto copies = static_cast<std::size_t>(std::ceil(3 * l2 / static_cast<double>(m.nbytes())));
    if (copies > 1) {
      std::vector<fz::Array<T>> ms;  // equal values (one seed), so that fused and unfused results still compare
      for (std::size_t i = 0; i < copies; ++i) ms.push_back(random_array<T>(side * side, -2, 2, 21).reshape({side, side}));
      std::size_t next = 0;
      run(fmt::format("sum(m,0) over {} copies", copies), [&] { return fz::sum(ms[next++ % copies], 0); });
      // the same bytes read by a full sum (a plain read, at the limit for large inputs): this size's ceiling
      run(fmt::format("sum(m) over {} copies", copies), [&] { return fz::sum(ms[next++ % copies]); });
    }
  }
}

/// A plain device-to-device copy of `bytes` each way, timed as the suites are (10 calls between events,
/// medians): the ceiling a kernel of that size can reach. The limit is the copy of 256 MiB each way, where
/// the start and end of one call no longer count; at 64 MiB they do.
double copy_pct_of_limit(std::int64_t bytes, double limit_gbs) {
  auto a = fz::full<std::uint8_t>({bytes}, 1), b = fz::empty<std::uint8_t>({bytes});
  const CUstream s = fusion::detail::current_stream_state()->handle;
  const auto r = fz::benchmark("copy", [&] { FUSION_CU(cuMemcpyDtoDAsync, b.data_ptr(), a.data_ptr(), bytes, s); },
                               timing(20));
  return 100.0 * 2.0 * static_cast<double>(bytes) / (r.gpu.median * 1e3) / limit_gbs;
}

std::vector<std::string> notes;  // lines printed under the table

void layouts_suite(std::vector<Row>& rows) {
  for (int e : {22, 24, 26}) layouts_at<float>(std::int64_t{1} << e, "float32", rows);
  layouts_at<fz::bfloat16>(std::int64_t{1} << 26, "bfloat16", rows);
  layouts_at<fz::half>(std::int64_t{1} << 26, "float16", rows);
  // (2^21 and 2^23: the bytes a column sum of 2,048^2 / 4,096^2 moves, read and written, in a copy: the ceiling of a
  // kernel that size)
  for (int e : {21, 23, 24, 26}) {
    const std::int64_t bytes = std::int64_t{4} << e;
    notes.push_back(
        fmt::format("cuMemcpyDtoD of {} MiB each way (2^{} float32), 10 calls per sample: {:.1f}% of the limit",
                    bytes >> 20, e, copy_pct_of_limit(bytes, fz::copy_bandwidth_gbs())));
  }
}

/// Random numbers at bandwidth (issue 35): dropout with its mask drawn in the kernel, and the generators alone
/// (an array of 2^26 values: only the writes count).
void random_suite(std::vector<Row>& rows) {
  const std::int64_t n = std::int64_t{1} << 26;
  const fz::BenchmarkOptions opts = timing(20);
  auto run = [&](const std::string& name, const char* dtype, auto&& fn) {
    if (wanted(name)) rows.push_back({name, dtype, n, fz::compare_fusion(name, fn, opts)});
  };
  const auto x = random_array<float>(n, -2, 2, 11);
  const auto xd = fz::eval(fz::cast<double>(x));
  run("dropout p=0.5", "float32", [&] { return fz::Array<float>(fz::dropout(x, 0.5, 7)); });
  run("dropout p=0.5", "float64", [&] { return fz::Array<double>(fz::dropout(xd, 0.5, 7)); });
  run("uniform", "float32", [&] { return fz::random::uniform<float>({n}, 7); });
  run("normal", "float32", [&] { return fz::random::normal<float>({n}, 7); });
  run("uniform", "float64", [&] { return fz::random::uniform<double>({n}, 7); });
  run("normal", "float64", [&] { return fz::random::normal<double>({n}, 7); });
}

/// Host time per call of a repeated fused assignment vs a raw cuLaunchKernel of the same kernel, each
/// issued `calls` times without waiting (so the launch queue never fills).
std::pair<double, double> dispatch_us(int calls = 300) {
  const std::int64_t n = 1024;
  fz::Array<float> x = fz::full<float>({n}, 1.f), y = fz::full<float>({n}, 2.f), out = fz::empty<float>({n});
  auto fused = [&] { out = 2.5f * x + y; };
  fused();
  fz::current_stream().synchronize();
  // The raw launch: the same kernel, from the same cache, with hand-packed arguments.
  const fz::KernelInfo info = fz::inspect(2.5f * x + y);
  const auto& k = fz::detail::load_kernel(fusion::codegen::GeneratedKernel{info.name, info.hash, info.source}, 0);
  std::uint64_t px = x.data_ptr(), py = y.data_ptr(), po = out.data_ptr();
  float s = 2.5f;
  long long nn = n;
  void* args[] = {&px, &py, &po, &s, &nn};
  const CUstream stream = fz::current_stream().handle();
  std::vector<double> f_t, r_t;
  for (int rep = 0; rep < 7; ++rep) {
    auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) fused();
    auto t1 = Clock::now();
    fz::current_stream().synchronize();
    auto t2 = Clock::now();
    for (int i = 0; i < calls; ++i) FUSION_CU(cuLaunchKernel, k.function, 1, 1, 1, 256, 1, 1, 0, stream, args, nullptr);
    auto t3 = Clock::now();
    fz::current_stream().synchronize();
    f_t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
    r_t.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count() / calls);
  }
  return {fz::summarize(f_t).median, fz::summarize(r_t).median};
}

/// Host time per call of an ElementwiseKernel and of a fused expression with an fz::function, 1024 elements.
std::pair<double, double> user_dispatch_us(int calls = 300) {
  const std::int64_t n = 1024;
  fz::Array<float> x = fz::full<float>({n}, 1.f), y = fz::full<float>({n}, 2.f), out = fz::empty<float>({n});
  const fz::ElementwiseKernel k("float32 x, float32 y", "float32 z", "z = 2.5f * x + y", "dispatch_user");
  const auto f = fz::function<float(float, float)>("dispatch_fn", "(float x, float y) { return 2.5f * x + y; }");
  auto time = [&](auto&& fn) {
    fn();
    fz::current_stream().synchronize();
    std::vector<double> t;
    for (int rep = 0; rep < 7; ++rep) {
      auto t0 = Clock::now();
      for (int i = 0; i < calls; ++i) fn();
      auto t1 = Clock::now();
      fz::current_stream().synchronize();
      t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
    }
    return fz::summarize(t).median;
  };
  return {time([&] { k(x, y, out); }), time([&] { out = f(x, y); })};
}

/// A kernel nobody compiled before, from expression to result, in this (warm) process; the median of
/// five, with the part NVRTC took.
struct CompileCost {
  double ms = 0, nvrtc_ms = 0, page_faults = 0;  // medians over 5 new kernels
};

long minor_page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

/// A new simple kernel, compiled and launched late in the process. The page faults are counted because
/// a compile touches 4-8 MB of fresh pages (glibc hands NVRTC's large blocks back to the OS after each
/// compile: about 1,000-2,000 faults per compile measured on a CPU machine), and faults are slow on a
/// machine whose memory is populated lazily: the lead for issue 16's compile latency late in a process.
CompileCost compile_cost() {
  fz::Array<float> x = fz::full<float>({1024}, 1.f);
  std::vector<double> total, nvrtc, faults;
  for (int i = 0; i < 5; ++i) {
    const std::string unique = fmt::format("bench_compile_{:x}", std::random_device{}());
    fz::Recorder rec;
    const long f0 = minor_page_faults();
    auto t0 = Clock::now();
    fz::Array<float> r = fz::named(unique, x * 3.f + 1.f);
    fz::current_stream().synchronize();
    total.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    faults.push_back(static_cast<double>(minor_page_faults() - f0));
    nvrtc.push_back(rec.stats().compile_ms);
  }
  return {fz::summarize(total).median, fz::summarize(nvrtc).median, fz::summarize(faults).median};
}

/// A 10-statement step the way a user writes it: eight temporaries, two arrays of state updated.
void ten_statements(fz::Array<float>& x, fz::Array<float>& y, fz::Array<float>& z) {
  fz::Array<float> a = x * 1.1f + y;
  fz::Array<float> b = a * a - z;
  fz::Array<float> c = fz::sin(b) + x;
  fz::Array<float> d = c * 0.5f + a;
  fz::Array<float> e = d - b * 0.25f;
  fz::Array<float> f = e * e + 1.0f;
  fz::Array<float> g = fz::sqrt(f) * c;
  fz::Array<float> h = g + d;
  y = h * 0.9f + y * 0.1f;
  z = z * 0.99f + g * 0.01f;
}

/// Host time per step (each batch of `steps` steps issued without waiting, then synchronized untimed) and
/// GPU time per step (events around a batch), medians over 9 batches.
template <class F> std::pair<double, double> step_times(F&& step, int steps = 50) {
  step();
  fz::current_stream().synchronize();
  std::vector<double> host, gpu;
  for (int rep = 0; rep < 9; ++rep) {
    fz::Event start, stop;
    start.record();
    auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) step();
    auto t1 = Clock::now();
    stop.record();
    stop.synchronize();
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / steps);
    gpu.push_back(static_cast<double>(fz::elapsed_time(start, stop)) * 1000.0 / steps);
  }
  return {fz::summarize(host).median, fz::summarize(gpu).median};
}

/// Issue 16's figures: host and GPU time of a small 10-statement step eager, in a region, as a step and
/// replayed; an Adam update written as statements at 2^24; compile latency of 50 new kernels late in the process.
/// Median compile time of `count` new simple kernels, one at a time (each a new fz::named kernel), with
/// the thread's CPU time and page faults per kernel: wall time well above CPU time means the compile waited.
double new_kernels_ms(int count, std::vector<double>* all = nullptr, double* nvrtc_ms = nullptr,
                      std::string* detail = nullptr) {
  fz::Array<float> x = fz::full<float>({1024}, 1.f);
  std::vector<double> total, nvrtc, cpu, minor, major, sys;
  auto thread_cpu_ms = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
  };
  for (int i = 0; i < count; ++i) {
    const std::string unique = fmt::format("bench_new_{:x}_{}", std::random_device{}(), i);
    fz::Recorder rec;
    rusage u0{}, u1{};
    getrusage(RUSAGE_SELF, &u0);
    const double c0 = thread_cpu_ms();
    auto t0 = Clock::now();
    fz::Array<float> r = fz::named(unique, x * 3.f + 1.f);
    fz::current_stream().synchronize();
    total.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    cpu.push_back(thread_cpu_ms() - c0);
    getrusage(RUSAGE_SELF, &u1);
    minor.push_back(static_cast<double>(u1.ru_minflt - u0.ru_minflt));
    major.push_back(static_cast<double>(u1.ru_majflt - u0.ru_majflt));
    sys.push_back(static_cast<double>(u1.ru_stime.tv_sec - u0.ru_stime.tv_sec) * 1e3 +
                  static_cast<double>(u1.ru_stime.tv_usec - u0.ru_stime.tv_usec) * 1e-3);
    nvrtc.push_back(rec.stats().compile_ms);
  }
  if (all) *all = total;
  if (nvrtc_ms) *nvrtc_ms = fz::summarize(nvrtc).median;
  if (detail)
    *detail = fmt::format(
        "thread CPU {:.1f} ms of which the kernel's (system) {:.1f} ms, {:.0f} minor and {:.0f} major page faults per "
        "kernel (medians)",
        fz::summarize(cpu).median, fz::summarize(sys).median, fz::summarize(minor).median, fz::summarize(major).median);
  return fz::summarize(total).median;
}

/// For a profiler (or the null driver, bench/null_driver.cpp): the 10-statement step in one mode
/// (eager, region, step, replay), `n` steps per batch; prints the host time per step.
int host_loop(std::string_view mode, int n) {
  fz::Array<float> x = random_array<float>(1024, -1, 1, 1), y = random_array<float>(1024, -1, 1, 2),
                   z = random_array<float>(1024, 0, 1, 3);
  fz::Step step([&] { ten_statements(x, y, z); });
  const fz::Array<float> m = x.reshape({32, 32});
  std::pair<double, double> t;
  if (mode == "eager") t = step_times([&] { ten_statements(x, y, z); }, n);
  else if (mode == "reduce") t = step_times([&] { fz::Array<float> s = fz::sum(m * 2, {1}); }, n);  // one statement
  else if (mode == "layer") t = step_times([&] { fz::Array<float> p = fz::softmax(m); }, n);       // one statement
  else if (mode == "region") t = step_times([&] { fz::Lazy r; ten_statements(x, y, z); }, n);
  else if (mode == "step") t = step_times([&] { step(); }, n);
  else if (mode == "replay") t = (step(), step_times([&] { step.replay(); }, n));
  else return fmt::print(stderr, "--host-loop MODE N: MODE is eager, region, step, replay, reduce or layer\n"), 2;
  fmt::print("{}: {:.2f} us/{} host\n", mode, t.first, mode == "reduce" || mode == "layer" ? "statement" : "step");
  return 0;
}

/// The driver's own floor for one launch: host time of cuLaunchKernel for an empty kernel with one
/// parameter, straight through the driver (no fusion in between), batches of 100 then a synchronize.
double launch_floor_us() {
  using fusion::detail::driver;
  const std::string src = "extern \"C\" __global__ void fz_launch_floor(float* p) { if (p == nullptr) return; }";
  const auto out = fusion::detail::compile(src, "fz_launch_floor",
                                           fusion::detail::target_for_arch(fz::Device(0).properties().arch()));
  CUmodule m;
  CUfunction f;
  FUSION_CU(cuModuleLoadData, &m, out.binary.c_str());
  FUSION_CU(cuModuleGetFunction, &f, m, "fz_launch_floor");
  fz::Array<float> buf = fz::full<float>({256}, 0.f);
  CUdeviceptr ptr = buf.data_ptr();
  void* args[] = {&ptr};
  CUstream stream = fz::current_stream().handle();
  std::vector<double> per;
  for (int rep = 0; rep < 20; ++rep) {
    const auto t0 = Clock::now();
    for (int i = 0; i < 100; ++i) FUSION_CU(cuLaunchKernel, f, 1, 1, 1, 32, 1, 1, 0, stream, args, nullptr);
    per.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 100);
    fz::current_stream().synchronize();
  }
  FUSION_CU(cuModuleUnload, m);
  return fz::summarize(per).median;
}

int steps_suite() {
  std::string start_detail;
  const double at_start = new_kernels_ms(10, nullptr, nullptr, &start_detail);
  const double copy = fz::copy_bandwidth_gbs();
  const double after_copy = new_kernels_ms(10);
  fmt::print("fusion-bench --steps on {}; device-to-device copy {:.0f} GB/s\n", fz::Device(0).properties().name, copy);
  {
    const std::int64_t n = 1024;
    fz::Array<float> x = random_array<float>(n, -1, 1, 1), y = random_array<float>(n, -1, 1, 2),
                     z = random_array<float>(n, 0, 1, 3);
    fz::Step step([&] { ten_statements(x, y, z); });
    fz::reset_stats();
    { fz::Lazy r; ten_statements(x, y, z); }
    const int region_kernels = static_cast<int>(fz::stats().launches);
    const auto eager = step_times([&] { ten_statements(x, y, z); });
    const auto region = step_times([&] { fz::Lazy r; ten_statements(x, y, z); });
    const auto recorded = step_times([&] { fz::Lazy r; ten_statements(x, y, z); r.discard(); });
    const auto stepped = step_times([&] { step(); });
    const auto replayed = step_times([&] { step.replay(); });
    fmt::print("10-statement step, 1024 float32 elements ({} kernel(s) in a region, {} in the step's graph):\n",
               region_kernels, step.kernels());
    fmt::print("  {:<28} {:>12} {:>12}\n", "mode", "host us/step", "GPU us/step");
    fmt::print("  {:<28} {:>12.2f} {:>12.2f}\n", "eager (10 kernels)", eager.first, eager.second);
    fmt::print("  {:<28} {:>12.2f} {:>12.2f}\n", "fz::Lazy region", region.first, region.second);
    fmt::print("  {:<28} {:>12.2f} {:>12}\n", "  of which recording", recorded.first, "-");
    fmt::print("  {:<28} {:>12.2f} {:>12.2f}\n", "fz::Step step()", stepped.first, stepped.second);
    fmt::print("  {:<28} {:>12.2f} {:>12.2f}\n", "fz::Step replay()", replayed.first, replayed.second);
    fmt::print("  {:<28} {:>12.2f} {:>12}\n", "(cuLaunchKernel alone)", launch_floor_us(), "-");
  }
  {
    const std::int64_t n = std::int64_t{1} << 24;
    fz::Array<float> p = random_array<float>(n, -1, 1, 4), m = random_array<float>(n, -0.1f, 0.1f, 5),
                     v = random_array<float>(n, 0, 0.01f, 6), g = random_array<float>(n, -1, 1, 7);
    const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f, eps = 1e-8f;
    auto adam = [&] {
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      fz::Array<float> update = m / (fz::sqrt(v) + eps);
      p -= lr * update;
    };
    auto tied = [&] {
      fz::tie(p, m, v) = std::forward_as_tuple(
          p - lr * ((b1 * m + (1 - b1) * g) / (fz::sqrt(b2 * v + (1 - b2) * g * g) + eps)), b1 * m + (1 - b1) * g,
          b2 * v + (1 - b2) * g * g);
    };
    fz::Step step(adam);
    const double least = 7.0 * 4.0 * static_cast<double>(n);  // p, m, v, g read; p, m, v written
    auto pct = [&](double us) { return least / (us * 1e-6) / (copy * 1e9) * 100.0; };
    const auto eager = step_times(adam, 10);
    const auto region = step_times([&] { fz::Lazy r; adam(); }, 10);
    const auto stepped = step_times([&] { step(); }, 10);
    const auto tie = step_times(tied, 10);
    fmt::print("Adam update as 4 statements, 2^24 float32 (least bytes {:.0f} MB):\n", least / 1e6);
    fmt::print("  {:<28} {:>12} {:>9}\n", "mode", "GPU us/step", "% limit");
    fmt::print("  {:<28} {:>12.1f} {:>8.1f}%\n", "eager (4 kernels)", eager.second, pct(eager.second));
    fmt::print("  {:<28} {:>12.1f} {:>8.1f}%\n", "fz::Lazy region", region.second, pct(region.second));
    fmt::print("  {:<28} {:>12.1f} {:>8.1f}%\n", "fz::Step", stepped.second, pct(stepped.second));
    fmt::print("  {:<28} {:>12.1f} {:>8.1f}%\n", "fz::tie (one expression)", tie.second, pct(tie.second));
  }
  std::vector<double> total;
  double nvrtc = 0;
  std::string late_detail;
  const double late = new_kernels_ms(50, &total, &nvrtc, &late_detail);
  std::sort(total.begin(), total.end());
  fmt::print("new simple kernels: 10 at the start {:.1f} ms ({}), 10 after the copy-bandwidth probe {:.1f} ms\n",
             at_start, start_detail, after_copy);
  fmt::print(
      "50 new simple kernels late in the process: median {:.1f} ms (NVRTC {:.1f} ms), min {:.1f}, max {:.1f} ms\n",
      late, nvrtc, total.front(), total.back());
  fmt::print("  {}\n", late_detail);
  return 0;
}

int first_call() {
  fz::Array<float> x = fz::full<float>({1 << 20}, 1.f), y = fz::full<float>({1 << 20}, 2.f);
  fz::current_stream().synchronize();  // context and memory are up; what follows is the engine
  auto t0 = Clock::now();
  fz::Array<float> r = fz::sin(x) * fz::cos(y) + 0.25f;
  fz::current_stream().synchronize();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const auto s = fz::stats();
  fmt::print("first_call_ms {:.3f} compiles {} disk_hits {}\n", ms, s.compiles, s.disk_hits);
  return 0;
}

void write_json_and_csv(const std::string& json, const std::vector<Row>& rows, const std::string& device, int driver,
                        const char* date, double copy, std::pair<double, double> dispatch, double compile) {
  std::ofstream o(json);
  o << fmt::format("{{\n  \"device\": \"{}\", \"driver\": {}, \"date\": \"{}\",\n  \"copy_gbs\": {:.1f},\n", device,
                   driver, date, copy);
  o << fmt::format("  \"dispatch_us\": {{\"fused\": {:.3f}, \"raw_launch\": {:.3f}}},\n  \"compile_ms\": {:.2f},\n",
                   dispatch.first, dispatch.second, compile);
  o << "  \"rows\": [\n";
  std::ofstream csv(json.substr(0, json.rfind('.')) + ".csv");
  csv << "device,driver,date,expression,dtype,n,bytes,fused_us,unfused_us,unfused_bytes,gbs,pct_copy,min_bytes,pct_"
         "limit,"
         "fused_kernels,unfused_kernels,speedup,agree\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const auto& c = r.c;
    o << fmt::format(
        "    {{\"expression\": \"{}\", \"dtype\": \"{}\", \"n\": {}, \"bytes\": {:.0f}, \"fused_us\": {:.3f}, "
        "\"unfused_us\": {:.3f}, \"unfused_bytes\": {:.0f}, \"gbs\": {:.1f}, \"pct_copy\": {:.2f}, "
        "\"min_bytes\": {:.0f}, \"pct_limit\": {:.2f}, "
        "\"fused_kernels\": {}, \"unfused_kernels\": {}, \"speedup\": {:.3f}, \"agree\": {}}}{}\n",
        r.expression, r.dtype, r.n, c.fused.bytes, c.fused.gpu_us, c.unfused.gpu_us, c.unfused.bytes, c.fused.gbs,
        c.fused.pct_of_copy, c.fused.min_bytes, c.fused.pct_of_limit, c.fused.kernels, c.unfused.kernels, c.speedup,
        c.agree, i + 1 < rows.size() ? "," : "");
    csv << fmt::format(
        "\"{}\",{},{},\"{}\",{},{},{:.0f},{:.3f},{:.3f},{:.0f},{:.1f},{:.2f},{:.0f},{:.2f},{},{},{:.3f},{}\n", device,
        driver, date, r.expression, r.dtype, r.n, c.fused.bytes, c.fused.gpu_us, c.unfused.gpu_us, c.unfused.bytes,
        c.fused.gbs, c.fused.pct_of_copy, c.fused.min_bytes, c.fused.pct_of_limit, c.fused.kernels, c.unfused.kernels,
        c.speedup, c.agree);
  }
  o << "  ]\n}\n";
}

}  // namespace

static int run(int argc, char** argv) {
  std::string json;
  std::vector<int> sizes = {10, 20, 26};
  bool only_layers = false, only_layouts = false, only_random = false, fast_math = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--first-call")) return first_call();
    if (!std::strcmp(argv[i], "--host-loop") && i + 2 < argc) return host_loop(argv[i + 1], std::atoi(argv[i + 2]));
    if (!std::strcmp(argv[i], "--steps")) return steps_suite();
    if (!std::strcmp(argv[i], "--layers")) only_layers = true;
    if (!std::strcmp(argv[i], "--layouts")) only_layouts = true;
    if (!std::strcmp(argv[i], "--random")) only_random = true;
    if (!std::strcmp(argv[i], "--fast-math")) fast_math = true;
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    if (!std::strcmp(argv[i], "--log2n") && i + 1 < argc) sizes = {std::atoi(argv[++i])};
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    if (!std::strcmp(argv[i], "--cold-l2")) cold_l2 = true;
    if (!std::strcmp(argv[i], "--calls-per-sample") && i + 1 < argc) calls_per_sample = std::max(1, std::atoi(argv[++i]));
    if (!std::strcmp(argv[i], "--tune") && i + 1 < argc) fz::detail::set_tuning(argv[++i]);
  }
  const auto& props = fz::Device(0).properties();
  const double copy = fz::copy_bandwidth_gbs();
  // The same compile measured first (a young process) and last (after the suite): issue 16 saw new kernels
  // compile in 7-14 ms early in a process and 40-90 ms late; the pair tells whether the process's age matters.
  const CompileCost early_compile = compile_cost();
  std::vector<Row> rows;
  if (only_layouts) layouts_suite(rows), sizes.clear();
  if (only_random) random_suite(rows), sizes.clear();
  if (fast_math) {  // the error table, then the bfloat16 suite precise and fast
    bench::print_fast_math_errors();
    suite<fz::bfloat16>(std::int64_t{1} << 26, rows);
    const std::size_t precise = rows.size();
    {
      fz::FastMath scope;
      suite<fz::bfloat16>(std::int64_t{1} << 26, rows);
    }
    for (std::size_t i = precise; i < rows.size(); ++i) rows[i].expression += " [fast]";
    sizes.clear();
  }
  for (int e : sizes) {
    if (only_layers) break;
    suite<float>(std::int64_t{1} << e, rows);
    suite<fz::bfloat16>(std::int64_t{1} << e, rows);
  }
  if (std::find(sizes.begin(), sizes.end(), 26) != sizes.end()) {
    if (!only_layers) reduction_suite(rows), user_suite(rows);
    layers_suite(rows);
  }
  const auto dispatch = dispatch_us();
  const auto user_dispatch = user_dispatch_us();
  const CompileCost compile = compile_cost();
  // ... and once more with the process's pinned staging blocks returned and the heap trimmed: if this one
  // is fast again, the late slowness is the process's memory, not NVRTC's state
  fz::default_pinned_memory_pool().free_all_blocks();
  malloc_trim(0);
  const CompileCost trimmed_compile = compile_cost();
  int driver = 0;
  fz::detail::driver().cuDriverGetVersion(&driver);
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));

  fmt::print("fusion-bench on {} (sm_{}), driver {}, {}; device-to-device copy: {:.0f} GB/s (read + write)\n",
             props.name, props.arch(), driver, date, copy);
  fmt::print(
      "(% limit: the least bytes, each input read and each output written once, over the fused time, against the copy\n"
      " bandwidth; % moved: the bytes the fused plan really moved, which a plan that re-reads its input inflates;\n"
      " GPU time per call: {} calls between one pair of events, medians, as bench/peers times PyTorch and JAX{})\n",
      calls_per_sample, cold_l2 ? "; each sample after a read of twice L2, so no input starts there" : "");
  fmt::print("{:<28} {:>9} {:>5} {:>10} {:>8} {:>8} {:>11} {:>8} {:>8}  {}\n", "expression", "dtype", "log2n",
             "fused us", "% limit", "% moved", "unfused us", "kernels", "speedup", "agree");
  bool all_agree = true;
  for (const auto& r : rows) {
    const auto& c = r.c;
    all_agree = all_agree && c.agree;
    fmt::print("{:<28} {:>9} {:>5} {:>10.1f} {:>7.1f}% {:>7.1f}% {:>11.1f} {:>4}/{:<3} {:>7.2f}x  {}\n", r.expression,
               r.dtype, static_cast<int>(std::log2(static_cast<double>(r.n))), c.fused.gpu_us, c.fused.pct_of_limit,
               c.fused.pct_of_copy, c.unfused.gpu_us, c.fused.kernels, c.unfused.kernels, c.speedup,
               c.agree ? "yes" : "NO: " + c.mismatch);
  }
  for (const auto& line : notes) fmt::print("{}\n", line);
  fmt::print(
      "dispatch at 1024 elements: fused assignment {:.2f} us/call, raw cuLaunchKernel {:.2f} us/call (+{:.2f} us)\n",
      dispatch.first, dispatch.second, dispatch.first - dispatch.second);
  fmt::print("dispatch at 1024 elements: ElementwiseKernel call {:.2f} us/call, fused expression with an fz::function "
             "{:.2f} us/call\n", user_dispatch.first, user_dispatch.second);
  fmt::print(
      "compile of a new simple kernel in a warm process: {:.1f} ms (NVRTC {:.1f} ms, {:.0f} page faults), median of "
      "5\n",
      compile.ms, compile.nvrtc_ms, compile.page_faults);
  fmt::print("the same compile before the suite ran: {:.1f} ms (NVRTC {:.1f} ms, {:.0f} page faults), median of 5\n",
             early_compile.ms, early_compile.nvrtc_ms, early_compile.page_faults);
  fmt::print(
      "the same compile after freeing pinned blocks and trimming the heap: {:.1f} ms (NVRTC {:.1f} ms, {:.0f} page "
      "faults)\n",
      trimmed_compile.ms, trimmed_compile.nvrtc_ms, trimmed_compile.page_faults);
  if (!json.empty()) write_json_and_csv(json, rows, props.name, driver, date, copy, dispatch, compile.ms);
  return all_agree ? 0 : 1;
}

int main(int argc, char** argv) {
  static const bench::Flag flags[] = {
      {"--first-call"}, {"--host-loop", 2}, {"--steps"}, {"--layers"}, {"--layouts"}, {"--random"}, {"--fast-math"},
      {"--cold-l2"}, {"--json", 1}, {"--log2n", 1}, {"--only", 1}, {"--calls-per-sample", 1}, {"--tune", 1}};
  if (const char* bad = bench::unknown_flag(argc, argv, flags)) {
    fmt::print(stderr, "fusion-bench: unknown flag, or one without its value: '{}' (the flags: bench/fusion_bench.cpp)\n",
               bad);
    return 2;
  }
  return bench::guarded_main("fusion-bench", [&] { return run(argc, argv); });
}
