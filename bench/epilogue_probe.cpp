// SPDX-License-Identifier: Apache-2.0
// What a generated product's epilogue costs it (issue 36), and what cuBLASLt's own epilogue costs cuBLASLt.
// Epilogues: relu(a @ b + bias) * 0.5 + residual ("res"), relu(a @ b + bias) ("bias"), a @ b * 0.5 ("scale"),
// a @ b + residual ("add"). Each is timed three ways in alternating batches of 10 event-timed calls (medians of 15):
// through fz::GeneratedProducts ("generated"), through fusion's default path ("library": cuBLASLt with its own
// epilogue where it has one: RELU_BIAS, alpha, beta * C; "res" adds a kernel after it), and the bare cuBLASLt
// product. The operands' values vary; the bias and residual are constants.
// The SM clock and board power are sampled through NVML (loaded at run time) every 2 ms while each kind runs:
// a product this size runs at the board's power limit, where any extra work lowers the clock.
// --sustain S runs each kind alone afterwards: S / 2 seconds for the clock to settle, then S seconds timed.
// Built with the benchmarks:
//   fusion-epilogue-probe M N K [res|bias|scale|add] [--sustain S] [--tune name=value]...
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fusion/fusion.hpp"
#include "held_alone.hpp"
#include "schedule/tuning.hpp"

namespace fz = fusion;

namespace {

// operand values that vary along the rows and columns (i * factor % mod steps of 0.01 about zero)
std::vector<fz::bfloat16> varied(std::int64_t count, std::int64_t factor, std::int64_t mod, float offset) {
  std::vector<fz::bfloat16> v(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = fz::bfloat16(float(i * factor % mod) * 0.01f - offset);
  return v;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// SM clock (MHz) and board power (W) of device 0, polled every 2 ms and filed under the kind running then.
class Sampler {
 public:
  explicit Sampler(int kinds) : clocks_(static_cast<std::size_t>(kinds)), watts_(static_cast<std::size_t>(kinds)) {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) return;
    using Init = int (*)();
    using Handle = int (*)(unsigned, void**);
    init_ = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
    handle_ = reinterpret_cast<Handle>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    clock_ = reinterpret_cast<Clock>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    power_ = reinterpret_cast<Power>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    if (!init_ || !handle_ || !clock_ || !power_ || init_() != 0 || handle_(0, &device_) != 0) return;
    thread_ = std::thread([this] {
      while (!stop_) {
        const int k = kind_;
        unsigned mhz = 0, mw = 0;
        if (k >= 0 && clock_(device_, 1 /* NVML_CLOCK_SM */, &mhz) == 0 && power_(device_, &mw) == 0) {
          std::lock_guard<std::mutex> hold(mutex_);
          clocks_[static_cast<std::size_t>(k)].push_back(mhz);
          watts_[static_cast<std::size_t>(k)].push_back(mw * 1e-3);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  ~Sampler() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void running(int kind) { kind_ = kind; }
  /// "1,755 MHz 690 W" over the samples since the last clear, or "" without NVML
  std::string take(int kind) {
    std::lock_guard<std::mutex> hold(mutex_);
    auto& c = clocks_[static_cast<std::size_t>(kind)];
    auto& w = watts_[static_cast<std::size_t>(kind)];
    const std::string s = c.empty() ? "" : fmt::format(" {:.0f} MHz {:.0f} W", median(c), median(w));
    c.clear(), w.clear();
    return s;
  }

 private:
  using Clock = int (*)(void*, int, unsigned*);
  using Power = int (*)(void*, unsigned*);
  int (*init_)() = nullptr;
  int (*handle_)(unsigned, void**) = nullptr;
  Clock clock_ = nullptr;
  Power power_ = nullptr;
  void* device_ = nullptr;
  std::atomic<int> kind_{-1};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::vector<double>> clocks_, watts_;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fmt::print(stderr, "usage: fusion-epilogue-probe M N K [res|bias|scale|add] [--sustain S] [--tune name=value]...\n");
    return 2;
  }
  const std::int64_t m = std::atoll(argv[1]), n = std::atoll(argv[2]), k = std::atoll(argv[3]);
  const std::string epilogue = argc > 4 && argv[4][0] != '-' ? argv[4] : "res";
  std::string tuned;
  double sustain = 0;
  for (int i = 4; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tune") == 0 && i + 1 < argc) fz::detail::set_tuning(argv[i + 1]), tuned += fmt::format(" {}", argv[++i]);
    else if (std::strcmp(argv[i], "--sustain") == 0 && i + 1 < argc) sustain = std::atof(argv[++i]);
  }
  auto a = fz::asarray(varied(m * k, 7, 13, 0.06f), {m, k});
  auto b = fz::asarray(varied(k * n, 5, 11, 0.05f), {k, n});
  auto bias = fz::asarray(std::vector<fz::bfloat16>(static_cast<std::size_t>(n), fz::bfloat16(0.5f)), {n});
  auto residual = fz::asarray(std::vector<fz::bfloat16>(static_cast<std::size_t>(m * n), fz::bfloat16(1.0f)), {m, n});
  auto out = fz::empty<fz::bfloat16>({m, n});
  const auto full = fz::maximum(fz::matmul(a, b) + bias, 0.0f) * 0.5f + residual;
  const auto no_residual = fz::maximum(fz::matmul(a, b) + bias, 0.0f);
  const auto scale = fz::matmul(a, b) * 0.5f;
  const auto add = fz::matmul(a, b) + residual;
  const auto assign = [&] {
    if (epilogue == "bias") out = no_residual;
    else if (epilogue == "scale") out = scale;
    else if (epilogue == "add") out = add;
    else out = full;
  };
  const auto generated = [&] {
    fz::GeneratedProducts on;
    assign();
  };
  const auto bare = [&] { out = fz::matmul(a, b); };
  const char* names[] = {"generated", "library", "bare"};
  const auto run = [&](int kind) {
    if (kind == 0) generated();
    else if (kind == 1) assign();
    else bare();
  };
  for (int i = 0; i < 3; ++i) run(0), run(1), run(2);
  Sampler sampler(3);
  fz::Event start, stop;
  const auto batch = [&](int kind, int calls) {
    sampler.running(kind);
    start.record();
    for (int i = 0; i < calls; ++i) run(kind);
    stop.record();
    stop.synchronize();
    sampler.running(-1);
    return 1e3 * fz::elapsed_time(start, stop) / calls;
  };
  std::vector<double> times[3];
  for (int rep = 0; rep < 15; ++rep)
    for (int kind = 0; kind < 3; ++kind) times[kind].push_back(batch(kind, 10));
  const double flop = 2.0 * double(m) * double(n) * double(k);
  const double bare_us = median(times[2]);
  fmt::print("{}x{}x{} {}{} (alternating batches of 10, medians of 15):\n", m, n, k, epilogue, tuned);
  for (int kind = 0; kind < 3; ++kind) {
    const double t = median(times[kind]);
    fmt::print("  {:<9} {:8.1f} us {:5.0f} TFLOPS  {:.3f}x bare{}\n", names[kind], t, flop / t * 1e-6, t / bare_us, sampler.take(kind));
  }
  if (sustain > 0) {
    fmt::print("  each alone for {} s:\n", sustain);
    double alone[3] = {};
    for (int kind = 0; kind < 3; ++kind) {
      sampler.running(kind);
      alone[kind] = 1e3 * fusion_bench::held_alone_ms([&] { run(kind); }, sustain, 20, [&] { (void)sampler.take(kind); });
      sampler.running(-1);
      fmt::print("  {:<9} {:8.1f} us {:5.0f} TFLOPS{}\n", names[kind], alone[kind], flop / alone[kind] * 1e-6, sampler.take(kind));
    }
    fmt::print("  alone, against the bare product alone: generated {:.3f}x, library {:.3f}x\n", alone[0] / alone[2],
               alone[1] / alone[2]);
  }
  fz::GeneratedProducts on;
  const fz::KernelInfo info = epilogue == "bias"    ? fz::inspect(no_residual)
                              : epilogue == "scale" ? fz::inspect(scale)
                              : epilogue == "add"   ? fz::inspect(add)
                                                    : fz::inspect(full);
  fmt::print("  {}\n", info.variant);
}
