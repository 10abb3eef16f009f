// SPDX-License-Identifier: Apache-2.0
// The benchmark suite: fused vs unfused GPU time, bytes moved and % of the device-to-device copy
// bandwidth measured in the same run; host dispatch cost against a raw cuLaunchKernel of the same
// kernel; compile and first-call latency. Prints a table; `--json PATH` writes every figure.
//
//   fusion-bench [--json out.json] [--log2n 26]        the suite
//   fusion-bench --first-call                          one fused call in this (new) process, timed
#include <cuda.h>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "fusion/fusion.hpp"
#include "runtime/driver.hpp"
#include "runtime/kernel_cache.hpp"

namespace fz = fusion;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Median GPU time of `fn` in microseconds: events around each repeat, after warm-up.
double gpu_us(const std::function<void()>& fn, int repeats = 30, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    fz::Event a, b;
    a.record();
    fn();
    b.record();
    b.synchronize();
    t.push_back(1000.0 * fz::elapsed_time(a, b));
  }
  return median(t);
}

template <class T> fz::Array<T> random_array(std::int64_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> h(static_cast<std::size_t>(n));
  for (auto& x : h) x = T(d(rng));
  return fz::asarray(h);
}

struct Row {
  std::string name, dtype;
  std::int64_t n;
  double bytes, fused_us, unfused_us;
  std::uint64_t fused_kernels, unfused_kernels;
};

double copy_bandwidth_gbs(std::int64_t n) {
  fz::Array<float> a = fz::full<float>({n}, 1.f), b = fz::empty<float>({n});
  const auto s = fz::current_stream().handle();
  const double us = gpu_us([&] { FUSION_CU(cuMemcpyDtoDAsync, b.data_ptr(), a.data_ptr(), a.nbytes(), s); }, 30, 3);
  return 2.0 * static_cast<double>(a.nbytes()) / (us * 1e3);  // read + write
}

bool g_fused_only = false;

template <class T> std::vector<Row> suite(std::int64_t n, bool all) {
  auto x = random_array<T>(n, -2, 2, 1), y = random_array<T>(n, -2, 2, 2), z = random_array<T>(n, 0.5f, 2, 3);
  fz::Array<T> out = fz::empty<T>({n});
  const double w = sizeof(T);
  const std::string dt(fz::dtype_name(fz::dtype_of<T>));
  std::vector<Row> rows;
  auto run = [&](const std::string& name, double arrays_moved, const std::function<void()>& fn) {
    fz::reset_stats();
    fn();
    const std::uint64_t fused_k = fz::stats().launches;
    const double f = gpu_us(fn);
    std::uint64_t unfused_k = 0;
    double u = 0;
    if (!g_fused_only) {
      fz::Unfused eager;
      fz::reset_stats();
      fn();
      unfused_k = fz::stats().launches;
      u = gpu_us(fn, 10, 2);
    }
    rows.push_back({name, dt, n, arrays_moved * w * static_cast<double>(n), f, u, fused_k, unfused_k});
  };
  run("sin(x)+cos(y)/sqrt(z)", 4, [&] { out = fz::sin(x) + fz::cos(y) / fz::sqrt(z); });
  run("(x-y)*(x-y)", 3, [&] { out = (x - y) * (x - y); });
  if (!all) return rows;
  run("softplus", 2, [&] { out = fz::maximum(x, 0.f) + fz::log1p(fz::exp(-fz::abs(x))); });
  run("2.5*x+y", 3, [&] { out = 2.5f * x + y; });
  run("gelu_tanh", 2, [&] { out = 0.5f * x * (1.f + fz::tanh(0.7978845608f * (x + 0.044715f * x * x * x))); });
  run("horner10", 2, [&] {
    out = ((((((((((0.1f * x + 0.2f) * x + 0.3f) * x + 0.4f) * x + 0.5f) * x + 0.6f) * x + 0.7f) * x + 0.8f) * x + 0.9f) * x + 1.0f) * x + 1.1f);
  });
  return rows;
}

/// Host time per call of a repeated fused assignment vs a raw cuLaunchKernel of the same kernel, each
/// issued `calls` times without waiting (so the launch queue never fills).
std::pair<double, double> dispatch_us(int calls = 300) {
  const std::int64_t n = 1024;
  fz::Array<float> x = fz::full<float>({n}, 1.f), y = fz::full<float>({n}, 2.f), out = fz::empty<float>({n});
  auto fused = [&] { out = 2.5f * x + y; };
  fused();
  fz::current_stream().synchronize();
  std::vector<double> f_t, r_t;
  // The raw launch: the same kernel, fetched from the same cache, with hand-packed arguments.
  const fz::KernelInfo info = fz::inspect(2.5f * x + y);
  const auto& k = fz::detail::load_kernel(fusion::codegen::GeneratedKernel{info.name, info.hash, info.source}, 0);
  std::uint64_t px = x.data_ptr(), py = y.data_ptr(), po = out.data_ptr();
  float s = 2.5f;
  long long nn = n;
  void* args[] = {&px, &py, &po, &s, &nn};
  const CUstream stream = fz::current_stream().handle();
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
  return {median(f_t), median(r_t)};
}

/// A kernel nobody compiled before, from expression to result, in this (warm) process.
double compile_ms() {
  fz::Array<float> x = fz::full<float>({1024}, 1.f);
  const std::string unique = fmt::format("bench_compile_{:x}", std::random_device{}());
  auto t0 = Clock::now();
  fz::Array<float> r = fz::named(unique, x * 3.f + 1.f);
  fz::current_stream().synchronize();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
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

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  int log2n = 26;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--first-call")) return first_call();
    if (!std::strcmp(argv[i], "--fused-only")) g_fused_only = true;
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    if (!std::strcmp(argv[i], "--log2n") && i + 1 < argc) log2n = std::atoi(argv[++i]);
  }
  if (fz::device_count() == 0) {
    fmt::print("fusion-bench needs a GPU: {}\n", fz::no_device_reason());
    return 0;
  }
  const std::int64_t n = std::int64_t{1} << log2n;
  const auto& props = fz::Device(0).properties();
  const double copy = copy_bandwidth_gbs(n);
  std::vector<Row> rows = suite<float>(n, true);
  for (auto& r : suite<fz::bfloat16>(n, false)) rows.push_back(r);
  const auto [fused_dispatch, raw_dispatch] = g_fused_only ? std::pair{0.0, 0.0} : dispatch_us();
  const double compile = g_fused_only ? 0.0 : compile_ms();

  fmt::print("fusion-bench on {} (sm_{}), n = 2^{}; device-to-device copy: {:.0f} GB/s (read + write)\n", props.name,
             props.arch(), log2n, copy);
  fmt::print("{:<24} {:>9} {:>11} {:>9} {:>8} {:>12} {:>8} {:>8}\n", "expression", "dtype", "fused us", "GB/s",
             "% copy", "unfused us", "kernels", "speedup");
  for (const auto& r : rows) {
    const double gbs = r.bytes / (r.fused_us * 1e3);
    fmt::print("{:<24} {:>9} {:>11.1f} {:>9.0f} {:>7.1f}% {:>12.1f} {:>4}/{:<3} {:>7.2f}x\n", r.name, r.dtype, r.fused_us,
               gbs, 100 * gbs / copy, r.unfused_us, r.fused_kernels, r.unfused_kernels, r.unfused_us / r.fused_us);
  }
  fmt::print("dispatch at 1024 elements: fused assignment {:.2f} us/call, raw cuLaunchKernel {:.2f} us/call (+{:.2f} us)\n",
             fused_dispatch, raw_dispatch, fused_dispatch - raw_dispatch);
  fmt::print("compile of a new simple kernel in a warm process: {:.1f} ms\n", compile);

  if (!json.empty()) {
    std::ofstream o(json);
    const std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    int driver = 0;
    fz::detail::driver().cuDriverGetVersion(&driver);
    o << fmt::format("{{\n  \"device\": \"{}\", \"driver\": {}, \"date\": \"{}\", \"n\": {},\n  \"copy_gbs\": {:.1f},\n",
                     props.name, driver, date, n, copy);
    o << fmt::format("  \"dispatch_us\": {{\"fused\": {:.3f}, \"raw_launch\": {:.3f}}},\n  \"compile_ms\": {:.2f},\n",
                     fused_dispatch, raw_dispatch, compile);
    o << "  \"rows\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      const double gbs = r.bytes / (r.fused_us * 1e3);
      o << fmt::format("    {{\"expression\": \"{}\", \"dtype\": \"{}\", \"bytes\": {:.0f}, \"fused_us\": {:.2f}, "
                       "\"unfused_us\": {:.2f}, \"gbs\": {:.1f}, \"pct_copy\": {:.2f}, \"fused_kernels\": {}, "
                       "\"unfused_kernels\": {}}}{}\n",
                       r.name, r.dtype, r.bytes, r.fused_us, r.unfused_us, gbs, 100 * gbs / copy, r.fused_kernels,
                       r.unfused_kernels, i + 1 < rows.size() ? "," : "");
    }
    o << "  ]\n}\n";
  }
  return 0;
}
