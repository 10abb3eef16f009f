// SPDX-License-Identifier: Apache-2.0
// Scaling over the GPUs of one machine (issue 18): the same fused work on GPU 0 alone and split over every
// GPU (fz::Sharded), and an all-reduce through fusion against NCCL's own call on the same devices.
//
//   fusion-bench-sharded [--log2n 30] [--devices 0,1] [--json out.json]
//
// Times are wall clock, launch to the last device's synchronize, medians of 15 after 3 warm-up runs: what
// a program sees (at 2^30 elements a kernel runs for milliseconds; the host's part is microseconds).
// % limit: each input read and each output written once, over the time, against the device-to-device
// copy bandwidth of GPU 0 times the GPUs used.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "bench_main.hpp"
#include "fusion/fusion.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/distributed/nccl.hpp"
#include "runtime/cuda/stream_state.hpp"

namespace fz = fusion;

namespace {

template <class F> double median_ms(F&& f, const std::vector<int>& devices, int repeats = 15) {
  auto sync = [&] {
    for (int d : devices) fz::Device(d).synchronize();
  };
  for (int w = 0; w < 3; ++w) f(), sync();  // compile, allocate, warm
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    sync();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Result {
  std::string name;
  double bytes, one_ms, all_ms;
};

/// NCCL's own all-reduce on `devices`: its communicators, its group call, each device's current stream.
class NcclBaseline {
 public:
  explicit NcclBaseline(const std::vector<int>& devices) : devices_(devices), comms_(devices.size()) {
    namespace nccl = fz::detail::nccl;
    nccl::check(nccl::api().ncclCommInitAll(comms_.data(), static_cast<int>(devices.size()), devices.data()),
                "ncclCommInitAll");
  }
  ~NcclBaseline() {
    for (auto c : comms_) fz::detail::nccl::api().ncclCommDestroy(c);
  }
  void all_reduce(fz::Sharded<float>& s) {
    namespace nccl = fz::detail::nccl;
    const nccl::Api& api = nccl::api();
    nccl::check(api.ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      fz::DeviceScope on{fz::Device(devices_[i])};
      float* p = s[static_cast<int>(i)].data_ptr<float>();
      nccl::check(api.ncclAllReduce(p, p, static_cast<std::size_t>(s[0].size()), nccl::DataType::float32,
                                    nccl::RedOp::sum, comms_[i], fz::detail::current_stream_state()->handle),
                  "ncclAllReduce");
    }
    nccl::check(api.ncclGroupEnd(), "ncclGroupEnd");
  }

 private:
  std::vector<int> devices_;
  std::vector<fz::detail::nccl::Comm> comms_;
};

/// The driver's own peer copy of `bytes` from device `from` to `to`: cuMemAlloc'd buffers (which the
/// contexts' peer access covers), cuMemcpyPeerAsync on a stream of the target, timed as fusion's copies are.
double driver_peer_copy_ms(int from, int to, std::size_t bytes) {
  namespace d = fz::detail;
  const CUcontext source = d::primary_context(from), target = d::primary_context(to);
  CUdeviceptr src = 0, dst = 0;
  d::make_context_current(from);
  FUSION_CU(cuMemAlloc, &src, bytes);
  FUSION_CU(cuMemsetD8Async, src, 1, bytes, nullptr);
  d::make_context_current(to);
  FUSION_CU(cuMemAlloc, &dst, bytes);
  if (const CUresult r = d::driver().cuCtxEnablePeerAccess(source, 0); r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
    d::check(r, "cuCtxEnablePeerAccess");
  CUstream stream = nullptr;
  FUSION_CU(cuStreamCreateWithPriority, &stream, CU_STREAM_NON_BLOCKING, 0);
  const double ms = median_ms([&] {
    d::make_context_current(to);
    FUSION_CU(cuMemcpyPeerAsync, dst, target, src, source, bytes, stream);
  }, {from, to}, 9);
  d::make_context_current(to);
  FUSION_CU(cuStreamDestroy, stream);
  FUSION_CU(cuMemFree, dst);
  d::make_context_current(from);
  FUSION_CU(cuMemFree, src);
  return ms;
}

}  // namespace

int run(int argc, char** argv) {
  int log2n = 30;
  std::string json;
  std::vector<int> devices;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--log2n") && i + 1 < argc) log2n = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    if (!std::strcmp(argv[i], "--devices") && i + 1 < argc)
      for (char* t = std::strtok(argv[++i], ","); t; t = std::strtok(nullptr, ",")) devices.push_back(std::atoi(t));
  }
  if (devices.empty()) {
    devices.resize(static_cast<std::size_t>(fz::device_count()));
    std::iota(devices.begin(), devices.end(), 0);
  }
  const auto n_gpus = static_cast<double>(devices.size());
  const std::int64_t n = std::int64_t{1} << log2n;
  const double copy = fz::copy_bandwidth_gbs();
  fmt::print(
      "fusion-bench-sharded: 2^{} float32 elements, GPU {} alone against devices ({}): {}; copy bandwidth of GPU 0 "
      "{:.0f} GB/s\n",
      log2n, devices[0], fmt::join(devices, ", "), fz::Device(devices[0]).properties().name, copy);
  for (int a = 0; a < static_cast<int>(devices.size()); ++a)
    for (int b = 0; b < static_cast<int>(devices.size()); ++b)
      if (a != b)
        fmt::print("  {} -> {}: {}\n", devices[a], devices[b], fz::describe_copy_route(devices[a], devices[b]));

  // The whole arrays on the first device, the pieces copied from them (fz::Sharded::scatter): both runs
  // read the same numbers, so the sums can be compared.
  fz::Array<float> x, y, z;
  {
    fz::DeviceScope on{fz::Device(devices[0])};
    x = fz::random::uniform<float>({n}, 1) * 2.f - 1.f;
    y = fz::random::uniform<float>({n}, 2) * 2.f - 1.f;
    z = fz::random::uniform<float>({n}, 3) + 0.5f;
  }
  const auto xs = fz::Sharded<float>::scatter(x, devices), ys = fz::Sharded<float>::scatter(y, devices),
             zs = fz::Sharded<float>::scatter(z, devices);
  const double f = 4.0;  // bytes per element
  auto axpy = [](const auto& x, const auto& y) { return 2.5f * x + y; };
  auto seed = [](const auto& x, const auto& y, const auto& z) { return fz::sin(x) + fz::cos(y) / fz::sqrt(z); };
  auto dot = [](const auto& x, const auto& y) { return fz::sum(x * y); };
  const std::vector<int> first = {devices[0]};
  std::vector<Result> rows;
  auto on_first = [&](auto&& g) {
    fz::DeviceScope on{fz::Device(devices[0])};
    g();
  };
  rows.push_back({"2.5*x+y", 3 * f * n, median_ms([&] { on_first([&] { fz::Array<float> r = axpy(x, y); }); }, first),
                  median_ms([&] { auto r = fz::map_shards(axpy, xs, ys); }, devices)});
  rows.push_back({"sin(x)+cos(y)/sqrt(z)", 4 * f * n,
                  median_ms([&] { on_first([&] { fz::Array<float> r = seed(x, y, z); }); }, first),
                  median_ms([&] { auto r = fz::map_shards(seed, xs, ys, zs); }, devices)});
  const bool nccl = fz::nccl_available();
  rows.push_back({"sum(x*y)", 2 * f * n, median_ms([&] { on_first([&] { fz::Array<float> r = dot(x, y); }); }, first),
                  median_ms([&] {
                    auto r = fz::map_shards(dot, xs, ys);
                    if (nccl) fz::all_reduce(r);
                  }, devices)});

  fmt::print("{:<24} {:>10} {:>8} {:>12} {:>8} {:>8}\n", "expression", "1 GPU ms", "% limit",
             fmt::format("{} GPU(s) ms", devices.size()), "% limit", "scaling");
  for (const Result& r : rows)
    fmt::print("{:<24} {:>10.3f} {:>7.1f}% {:>12.3f} {:>7.1f}% {:>7.2f}x\n", r.name, r.one_ms,
               100 * r.bytes / (r.one_ms * 1e6) / copy, r.all_ms, 100 * r.bytes / (r.all_ms * 1e6) / (copy * n_gpus),
               r.one_ms / r.all_ms);

  // sum(x*y): one GPU against the split, and the split twice (bit for bit)
  double magnitude = 0;
  float one = 0;
  on_first([&] {
    one = fz::Array<float>(dot(x, y)).item();
    magnitude = fz::Array<double>(fz::sum(fz::abs(fz::cast<double>(x) * fz::cast<double>(y)))).item();
  });
  std::string check = "NCCL unavailable: " + (nccl ? std::string() : fz::nccl_unavailable_reason());
  if (nccl) {
    auto a = fz::map_shards(dot, xs, ys), b = fz::map_shards(dot, xs, ys);
    fz::all_reduce(a);
    fz::all_reduce(b);
    const float split = a[0].item(), again = b[0].item();
    const double bound = log2n * std::ldexp(1.0, -24) * magnitude;  // a tree sum's: log2(n) roundings of eps/2 ... eps
    check = fmt::format(
        "sum(x*y): one GPU {:.6f}, split {:.6f} (|diff| {:.3g}, float32 bound log2(n)·eps·sum|x·y| = {:.3g}: {}), "
        "split again {} ({})",
        one, split, std::abs(double(one) - split), bound, std::abs(double(one) - split) <= bound ? "within" : "OUTSIDE",
        again, split == again ? "bit-identical" : "DIFFERENT");
  }
  fmt::print("{}\n", check);

  // all-reduce of 256 MiB of float32 per device: fusion's call against NCCL's own on the same devices
  double fusion_ms = 0, nccl_ms = 0;
  const std::int64_t m = std::int64_t{64} << 20;
  if (nccl) {
    fz::Array<float> ones;
    on_first([&] { ones = fz::full<float>({m}, 1.f); });
    auto s = fz::Sharded<float>::replicate(ones, devices);
    NcclBaseline baseline(devices);
    fusion_ms = median_ms([&] { fz::all_reduce(s); }, devices, 25);
    nccl_ms = median_ms([&] { baseline.all_reduce(s); }, devices, 25);
    const double bytes = f * m, bus = 2 * (n_gpus - 1) / n_gpus;
    fmt::print(
        "all_reduce 256 MiB float32: fusion {:.3f} ms ({:.0f} GB/s bus), NCCL's own call {:.3f} ms ({:.0f} GB/s bus): "
        "fusion at "
        "{:.1f}% of NCCL's speed{}\n",
        fusion_ms, bytes * bus / (fusion_ms * 1e6), nccl_ms, bytes * bus / (nccl_ms * 1e6), 100 * nccl_ms / fusion_ms,
        devices.size() == 1 ? " (one rank: nothing moves, both times are the calls' overhead)" : "");
  }
  // copies of 256 MiB (fz::to_device) from every device to every device, both directions, by every route
  // the pair allows; where the pair has peer access, beside the driver's own peer copy of the same bytes
  std::vector<std::string> copies;
  for (int from : devices)
    for (int to : devices) {
      if (from == to && from != devices[0]) continue;  // one device's own copy is enough
      fz::Array<float> src;
      {
        fz::DeviceScope on{fz::Device(from)};
        src = fz::full<float>({m}, 2.f);
      }
      const double bytes = f * m;
      const bool peer = from != to && fz::describe_copy_route(from, to).starts_with("peer");
      const double driver = peer ? driver_peer_copy_ms(from, to, static_cast<std::size_t>(bytes)) : 0;
      for (const fz::CopyRoute route : {fz::CopyRoute::automatic, fz::CopyRoute::staged}) {
        const double ms = median_ms([&] { fz::Array<float> r = fz::to_device(src, to, route); }, {from, to}, 9);
        const std::string how = fz::describe_copy_route(from, to, route);
        copies.push_back(fmt::format("to_device {} -> {} ({}): {:.3f} ms, {:.0f} GB/s", from, to,
                                     how.substr(0, how.find(':')), ms, bytes / (ms * 1e6)));
        if (peer && route == fz::CopyRoute::automatic)
          copies.back() += fmt::format("; the driver's own peer copy {:.3f} ms, {:.0f} GB/s: fusion at {:.1f}% of it",
                                       driver, bytes / (driver * 1e6), 100 * driver / ms);
        fmt::print("{}\n", copies.back());
      }
    }
  if (!json.empty()) {
    std::ofstream o(json);
    o << fmt::format("{{\"device\": \"{}\", \"gpus\": {}, \"log2n\": {}, \"copy_gbs\": {:.1f}, \"rows\": [",
                     fz::Device(devices[0]).properties().name, devices.size(), log2n, copy);
    for (std::size_t i = 0; i < rows.size(); ++i)
      o << fmt::format(
          "{}{{\"expression\": \"{}\", \"bytes\": {:.0f}, \"one_ms\": {:.4f}, \"all_ms\": {:.4f}, \"scaling\": "
          "{:.3f}}}",
          i ? ", " : "", rows[i].name, rows[i].bytes, rows[i].one_ms, rows[i].all_ms, rows[i].one_ms / rows[i].all_ms);
    o << fmt::format(
        "], \"sum_check\": \"{}\", \"all_reduce_fusion_ms\": {:.4f}, \"all_reduce_nccl_ms\": {:.4f}, \"copies\": "
        "[\"{}\"]}}\n",
        check, fusion_ms, nccl_ms, fmt::join(copies, "\", \""));
  }
  return 0;
}

int main(int argc, char** argv) {
  return bench::guarded_main("fusion-bench-sharded", [&] { return run(argc, argv); });
}
