// SPDX-License-Identifier: Apache-2.0
// Where a new kernel's compile time goes (issue 16): NVRTC to PTX (front end and NVVM), PTX to SASS
// (ptxas, inside NVRTC or through the driver's JIT), at several optimization levels, and whether it grows
// with the process's age. Built with the benchmarks; needs NVRTC, and the driver for the JIT rows.
//   fusion-compile-probe KERNEL.cu [ARCH]      e.g. tests/golden/seed_f32.cu 90
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "fusion/fusion.hpp"
#include "runtime/compile/nvrtc.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

int unique = 0;

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

/// `src` made a new program: its kernel renamed (a comment would not do: the PTX, and so ptxas's work,
/// would be the same, and the H100 machine's NVRTC showed ptxas at 2 ms for a repeated PTX against ~50 ms for
/// a new one).
std::string renamed(const std::string& src) {
  std::smatch m;
  static const std::regex kernel(R"(__global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\()");
  if (!std::regex_search(src, m, kernel)) return src + "\n// " + std::to_string(unique++) + "\n";
  const std::string name = m[1];
  const std::string fresh = name + "_u" + std::to_string(unique++);
  std::string out = src;
  for (std::size_t at = 0; (at = out.find(name, at)) != std::string::npos; at += fresh.size())
    out.replace(at, name.size(), fresh);
  return out;
}

/// One NVRTC compile of `s` with `opts`, timed (ms); its PTX into `ptx` when asked.
double compile_once(const std::string& s, const std::vector<const char*>& opts, std::string* ptx = nullptr) {
  const auto t0 = Clock::now();
  nvrtcProgram p;
  nvrtcCreateProgram(&p, s.c_str(), "probe.cu", 0, nullptr, nullptr);
  const nvrtcResult r = nvrtcCompileProgram(p, static_cast<int>(opts.size()), opts.data());
  if (r != NVRTC_SUCCESS) std::printf("  (compile error %d)\n", static_cast<int>(r));
  std::size_t n = 0;
  if (ptx && nvrtcGetPTXSize(p, &n) == NVRTC_SUCCESS) {
    ptx->resize(n);
    nvrtcGetPTX(p, ptx->data());
  }
  nvrtcDestroyProgram(&p);
  return ms_since(t0);
}

/// Median of 5 compiles with `opts` of the sources `make()` returns.
template <class Make> double median_ms(Make&& make, const std::vector<const char*>& opts, std::string* ptx = nullptr) {
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) t.push_back(compile_once(make(), opts, ptx));
  std::sort(t.begin(), t.end());
  return t[2];
}

/// Median of 5 compiles of `src` (made unique each time) with `opts`; the PTX of the last one in `ptx`.
double nvrtc_ms(const std::string& src, const std::vector<const char*>& opts, std::string* ptx = nullptr) {
  return median_ms([&] { return renamed(src); }, opts, ptx);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::printf("usage: fusion-compile-probe KERNEL.cu [ARCH]\n"), 2;
  std::ifstream f(argv[1]);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string arch = argc > 2 ? argv[2] : "90";
  // "named": the kernel fusion-bench compiles when it measures new kernels (fz::named of x * 3 + 1)
  const std::string src =
      std::string(argv[1]) == "named"
          ? fusion::inspect(fusion::named("bench_new_probe", fusion::placeholder<float>({1024}) * 3.f + 1.f)).source
          : ss.str();
  const std::string sm = "--gpu-architecture=sm_" + arch, compute = "--gpu-architecture=compute_" + arch;
  std::printf("compile probe: %s for sm_%s (median of 5, each a new program)\n", argv[1], arch.c_str());
  nvrtc_ms(src, {sm.c_str(), "-std=c++17", "-minimal"});  // the first compile of a process loads NVRTC's state
  std::string ptx;
  const double to_ptx = nvrtc_ms(src, {compute.c_str(), "-std=c++17", "-minimal"}, &ptx);
  std::printf("  NVRTC to PTX                        %7.1f ms\n", to_ptx);
  std::printf("  NVRTC to SASS (as fusion compiles)  %7.1f ms\n",
              nvrtc_ms(src, {sm.c_str(), "-std=c++17", "-minimal", "--ptxas-options=-v"}));
  std::printf("  NVRTC to SASS, ptxas -O1            %7.1f ms\n",
              nvrtc_ms(src, {sm.c_str(), "-std=c++17", "-minimal", "--ptxas-options=-O1"}));
  std::printf("  NVRTC to SASS, ptxas -O0            %7.1f ms\n",
              nvrtc_ms(src, {sm.c_str(), "-std=c++17", "-minimal", "--ptxas-options=-O0"}));
  std::printf("  NVRTC to SASS, -Ofast-compile=min   %7.1f ms\n",
              nvrtc_ms(src, {sm.c_str(), "-std=c++17", "-minimal", "--Ofast-compile=min"}));
  std::printf("  NVRTC to SASS, -Ofast-compile=max   %7.1f ms\n",
              nvrtc_ms(src, {sm.c_str(), "-std=c++17", "-minimal", "--Ofast-compile=max"}));
  {
    const std::string same = renamed(src);  // a comment appended each time: the same PTX
    std::printf("  NVRTC to SASS, the same PTX again   %7.1f ms\n",
                median_ms([&] { return same + "\n// " + std::to_string(unique++) + "\n"; },
                          {sm.c_str(), "-std=c++17", "-minimal"}));
  }
  {
    // The same source through fusion's own compile call (its options, its log and cubin handling).
    std::vector<double> t;
    long faults = 0;
    for (int i = 0; i < 5; ++i) {
      const std::string s = renamed(src);
      const long f0 = minor_faults();
      const auto t0 = Clock::now();
      fusion::detail::compile(s, "probe", fusion::detail::target_for_arch(std::stoi(arch)), {}, true);
      t.push_back(ms_since(t0));
      faults = minor_faults() - f0;
    }
    std::sort(t.begin(), t.end());
    std::printf("  fusion::detail::compile             %7.1f ms (%ld page faults in the last)\n", t[2], faults);
  }
  // The driver's JIT of the same PTX (what loading PTX instead of a cubin costs).
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib) {
    auto init = reinterpret_cast<decltype(&cuInit)>(dlsym(lib, "cuInit"));
    auto get = reinterpret_cast<decltype(&cuDeviceGet)>(dlsym(lib, "cuDeviceGet"));
    auto retain = reinterpret_cast<decltype(&cuDevicePrimaryCtxRetain)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    auto set = reinterpret_cast<decltype(&cuCtxSetCurrent)>(dlsym(lib, "cuCtxSetCurrent"));
    auto load = reinterpret_cast<decltype(&cuModuleLoadDataEx)>(dlsym(lib, "cuModuleLoadDataEx"));
    auto unload = reinterpret_cast<decltype(&cuModuleUnload)>(dlsym(lib, "cuModuleUnload"));
    CUdevice d;
    CUcontext c;
    if (init(0) == CUDA_SUCCESS && get(&d, 0) == CUDA_SUCCESS && retain(&c, d) == CUDA_SUCCESS &&
        set(c) == CUDA_SUCCESS) {
      std::vector<double> t;
      for (int i = 0; i < 5; ++i) {
        const std::string p = ptx + "\n// " + std::to_string(unique++) + "\n";  // (the driver caches by content)
        CUmodule m;
        const auto t0 = Clock::now();
        if (load(&m, p.c_str(), 0, nullptr, nullptr) == CUDA_SUCCESS) unload(m);
        t.push_back(ms_since(t0));
      }
      std::sort(t.begin(), t.end());
      std::printf("  driver JIT of that PTX              %7.1f ms\n", t[2]);
    }
  }
  auto in_a_row = [&](const char* what, int count) {
    std::printf("  %d compiles in a row (to SASS) %s:", count, what);
    for (int i = 0; i < count; ++i)
      std::printf(" %.0f", compile_once(renamed(src), {sm.c_str(), "-std=c++17", "-minimal"}));
    std::printf(" ms\n");
  };
  in_a_row("", 20);
  if (fusion::device_count() > 0) {
    // The whole path a new kernel takes in fusion (generate, compile, disk cache, load, launch), as
    // fusion-bench measures it, then NVRTC again in this same process.
    fusion::Array<float> x = fusion::full<float>({1024}, 1.f);
    std::printf("  10 new kernels through fusion (total ms / NVRTC ms / compiles):");
    for (int i = 0; i < 10; ++i) {
      fusion::Recorder rec;
      const auto t0 = Clock::now();
      fusion::Array<float> r = fusion::named("probe_new_" + std::to_string(unique++), x * 3.f + 1.f);
      fusion::current_stream().synchronize();
      std::printf(" %.0f/%.0f/%d", ms_since(t0), rec.stats().compile_ms, static_cast<int>(rec.stats().compiles));
    }
    std::printf("\n");
    // The source fusion generated for the real array, compiled here directly: is it the source or the path?
    const std::string real = fusion::inspect(fusion::named("probe_real", x * 3.f + 1.f)).source;
    std::printf("  that kernel's source (%s the placeholder's) through NVRTC directly: %.1f ms\n",
                real == src ? "same as" : "differs from",
                nvrtc_ms(real, {sm.c_str(), "-std=c++17", "-minimal", "--ptxas-options=-v"}));
    in_a_row("after fusion's", 10);
  }
  if (lib) {
    // What a fusion process holds that this one does not: pinned host memory and large device allocations.
    auto host = reinterpret_cast<decltype(&cuMemAllocHost)>(dlsym(lib, "cuMemAllocHost_v2"));
    auto free_host = reinterpret_cast<decltype(&cuMemFreeHost)>(dlsym(lib, "cuMemFreeHost"));
    auto dev = reinterpret_cast<decltype(&cuMemAlloc)>(dlsym(lib, "cuMemAlloc_v2"));
    CUdeviceptr big = 0;
    if (dev && dev(&big, std::size_t{2} << 30) == CUDA_SUCCESS) in_a_row("with 2 GiB of device memory", 10);
    void* pinned = nullptr;
    if (host && host(&pinned, std::size_t{256} << 20) == CUDA_SUCCESS) in_a_row("and 256 MiB pinned", 10);
    if (pinned) free_host(pinned);
    in_a_row("after freeing the pinned memory", 10);
  }
  return 0;
}
