// SPDX-License-Identifier: Apache-2.0
// An array split over every GPU of the machine (fz::Sharded): a fused elementwise expression runs as one
// kernel per GPU, all enqueued before anything waits, and a dot product as a fused partial per GPU that
// NCCL's all-reduce combines. Printed: the per-device kernel, results against the host, and wall times
// beside the same work on GPU 0 alone. Then the same dot product over several processes, one GPU each:
// this program starts one copy of itself per GPU (as any launcher would, through the environment that
// fz::ProcessGroup::from_environment reads) and each adds its slice's partial with NCCL.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include "fusion/fusion.hpp"

namespace fz = fusion;

namespace {

std::vector<float> host_data(std::int64_t n, unsigned seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& e : v) e = u(rng);
  return v;
}

/// One process of the group: its slice of x and y (split as Sharded splits), a fused partial on its GPU,
/// NCCL's all-reduce over the processes.
int process_main(std::int64_t n) {
  auto group = fz::ProcessGroup::from_environment();
  const auto x = group.local_piece(host_data(n, 7), {n}), y = group.local_piece(host_data(n, 8), {n});
  fz::DeviceScope on{fz::Device(group.device())};
  fz::Array<float> d = fz::sum(x * y);
  group.all_reduce(d);
  const float total = d.item();
  if (group.rank() == 0) fmt::print("{} process(es), one GPU each: sum(x*y) = {:.6f}\n", group.size(), total);
  return 0;
}

/// Starts one copy of this program per GPU with the group's environment, and waits for them all.
bool run_processes(const char* self, int count) {
  const std::string id_file = fmt::format("/tmp/fusion-multi-gpu-{}.id", ::getpid());
  std::vector<pid_t> children;
  std::fflush(stdout);  // what this process printed comes first
  for (int r = 0; r < count; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("FUSION_RANK", std::to_string(r).c_str(), 1);
      ::setenv("FUSION_WORLD_SIZE", std::to_string(count).c_str(), 1);
      ::setenv("FUSION_DEVICE", std::to_string(r).c_str(), 1);
      ::setenv("FUSION_NCCL_ID_FILE", id_file.c_str(), 1);
      ::execl(self, self, "--process", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    children.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

template <class F> double best_ms(F&& f, const std::vector<int>& devices, int repeats = 10) {
  f();  // compile and allocate outside the timing
  for (int d : devices) fz::Device(d).synchronize();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    for (int d : devices) fz::Device(d).synchronize();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = std::int64_t{1} << 26;
  if (argc > 1 && std::string(argv[1]) == "--process") return process_main(n);
  if (fz::device_count() == 0) {
    fmt::print("multi_gpu needs a GPU: {}\n", fz::no_device_reason());
    return 0;
  }
  std::vector<int> devices(static_cast<std::size_t>(fz::device_count()));
  std::iota(devices.begin(), devices.end(), 0);
  const auto hx = host_data(n, 7), hy = host_data(n, 8);

  const auto x = fz::Sharded<float>::from_host(hx, {n}, devices);
  const auto y = fz::Sharded<float>::from_host(hy, {n}, devices);
  fmt::print("{} elements over {} GPU(s), pieces of ({})\n", n, devices.size(), fmt::join(x.sizes(), ", "));
  auto axpy = [](const auto& x, const auto& y) { return 2.5f * x + y; };
  auto dot = [](const auto& x, const auto& y) { return fz::sum(x * y); };
  fmt::print("per-device kernels: {} | {}\n", fz::inspect(axpy(x[0], y[0])).name, fz::inspect(dot(x[0], y[0])).name);

  const auto z = fz::map_shards(axpy, x, y);
  const auto hz = z.to_host();
  double worst = 0;
  for (std::size_t i = 0; i < hz.size(); i += 4099) worst = std::max(worst, std::abs(hz[i] - (2.5 * hx[i] + hy[i])));
  auto d = fz::map_shards(dot, x, y);
  const bool have_nccl = fz::nccl_available();
  if (have_nccl) fz::all_reduce(d);
  double want = 0;
  for (std::size_t i = 0; i < hx.size(); ++i) want += double(hx[i]) * hy[i];
  fmt::print(
      "2.5*x+y: max error {:.2e}; sum(x*y) = {:.6f} on every GPU (float64 host: {:.6f}){}\n", worst, d[0].item(), want,
      have_nccl ? "" : fmt::format(" [NCCL unavailable, device 0's partial only: {}]", fz::nccl_unavailable_reason()));

  // the same work on GPU 0 alone, then split
  const auto x0 = fz::asarray(hx), y0 = fz::asarray(hy);
  const double one_axpy = best_ms([&] { fz::Array<float> r = axpy(x0, y0); }, {0});
  const double all_axpy = best_ms([&] { auto r = fz::map_shards(axpy, x, y); }, devices);
  const double one_dot = best_ms([&] { fz::Array<float> r = dot(x0, y0); }, {0});
  const double all_dot = best_ms([&] {
    auto r = fz::map_shards(dot, x, y);
    if (have_nccl) fz::all_reduce(r);
  }, devices);
  fmt::print("wall ms, best of 10 (host launch and synchronize included):\n");
  fmt::print("  2.5*x+y   one GPU {:7.3f}   {} GPU(s) {:7.3f}   {:.2f}x\n", one_axpy, devices.size(), all_axpy,
             one_axpy / all_axpy);
  fmt::print("  sum(x*y)  one GPU {:7.3f}   {} GPU(s) {:7.3f}   {:.2f}x\n", one_dot, devices.size(), all_dot,
             one_dot / all_dot);
  if (!have_nccl) return 0;
  // the same dot product over processes: one per GPU (NCCL takes one rank per GPU)
  return run_processes("/proc/self/exe", fz::device_count()) ? 0 : 1;
}
