// SPDX-License-Identifier: Apache-2.0
#include "runtime/compile/nvrtc.hpp"

#include <fmt/format.h>
#include <nvrtc.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <cstdlib>
#include <sstream>

#include "fusion/error.hpp"
#include "runtime/compile/cubin_registers.hpp"

namespace fusion::detail {
namespace {

void check_nvrtc(nvrtcResult r, const char* call) {
  if (r != NVRTC_SUCCESS) throw Error(fmt::format("{} failed: {}", call, nvrtcGetErrorString(r)));
}

const std::vector<int>& supported_archs() {
  static const std::vector<int> archs = [] {
    int n = 0;
    check_nvrtc(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
    std::vector<int> a(static_cast<std::size_t>(n));
    check_nvrtc(nvrtcGetSupportedArchs(a.data()), "nvrtcGetSupportedArchs");
    return a;
  }();
  return archs;
}

/// ptxas' "Used N registers" in `log`, or -1. (No function-local static: a build on a worker thread may still
/// run while statics are destroyed at exit.)
int registers_in(const std::string& log) {
  for (std::size_t at = log.find("Used "); at != std::string::npos; at = log.find("Used ", at + 1)) {
    std::size_t end = at + 5;
    while (end < log.size() && std::isdigit(static_cast<unsigned char>(log[end]))) ++end;
    if (end > at + 5 && log.compare(end, 10, " registers") == 0) return std::stoi(log.substr(at + 5, end - at - 5));
  }
  return -1;
}

std::string numbered(const std::string& source) {
  std::istringstream in(source);
  std::string line, out;
  for (int i = 1; std::getline(in, line); ++i) out += fmt::format("{:4} | {}\n", i, line);
  return out;
}

}  // namespace

std::string Target::name() const {
  return fmt::format("{}_{}{}", ptx ? "compute" : "sm", arch, specific ? "a" : "");
}

Target target_for_arch(int device_arch) {
  const auto& archs = supported_archs();
  if (std::find(archs.begin(), archs.end(), device_arch) != archs.end()) return {device_arch, false};
  int best = archs.front();
  for (int a : archs)
    if (a <= device_arch) best = a;
  return {best, true};  // the driver JIT-compiles PTX for a device newer than this NVRTC
}

Target default_target() {
  if (const char* env = std::getenv("FUSION_ARCH")) {
    const int a = std::atoi(env);
    const auto& archs = supported_archs();
    if (a <= 0) throw Error(fmt::format("FUSION_ARCH='{}' is not a compute capability like 90", env));
    // (a value outside what this NVRTC compiles for is a typo, not a device: 7 for 70, 999 for 90)
    if (a < archs.front() || a > archs.back())
      throw Error(fmt::format("FUSION_ARCH='{}': this NVRTC compiles for compute capabilities {} to {} (sm_{} to "
                              "sm_{}); give one like 90",
                              env, archs.front(), archs.back(), archs.front(), archs.back()));
    return target_for_arch(a);
  }
  return target_for_arch(90);
}

const std::string& nvrtc_version() {
  static const std::string v = [] {
    int major = 0, minor = 0;
    check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
    return fmt::format("{}.{}", major, minor);
  }();
  return v;
}

const std::string& cuda_include_dir() {
  static const std::string dir = [] {
    std::vector<std::string> candidates;
    for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
      if (const char* v = std::getenv(env); v && *v) candidates.push_back(std::string(v) + "/include");
    candidates.push_back(FUSION_CUDA_INCLUDE_DIR);  // where the library was built
    candidates.push_back("/usr/local/cuda/include");
    for (const auto& c : candidates)
      if (std::filesystem::exists(std::filesystem::path(c) / "cuda_fp16.h")) return c;
    return std::string();
  }();
  return dir;
}

std::vector<std::string> compile_options(const Target& t, const std::vector<std::string>& extra, bool minimal) {
  std::vector<std::string> o = {"--gpu-architecture=" + t.name(), "-std=c++17"};
  // -minimal leaves out texture, device-runtime and driver-API declarations generated kernels never
  // use: about 13% less NVRTC time for a small kernel. User code gets everything, and the toolkit's
  // headers (cuda_fp16.h, cooperative_groups.h, ...) on the include path.
  if (minimal) o.push_back("-minimal");
  else if (!cuda_include_dir().empty()) o.push_back("--include-path=" + cuda_include_dir());
  if (!t.ptx) o.push_back("--ptxas-options=-v");  // reports registers; costs nothing measurable
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

CompileOutput compile(const std::string& source, const std::string& kernel_name, const Target& t,
                      const std::vector<std::string>& extra, bool minimal) {
  const auto start = std::chrono::steady_clock::now();
  nvrtcProgram prog;
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), (kernel_name + ".cu").c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  struct Guard {
    nvrtcProgram& p;
    ~Guard() { nvrtcDestroyProgram(&p); }
  } guard{prog};
  const auto opts = compile_options(t, extra, minimal);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  CompileOutput out;
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  out.log.resize(log_size);
  nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (r != NVRTC_SUCCESS) throw CompileError(kernel_name, out.log, numbered(source));
  std::size_t size = 0;
  if (t.ptx) {
    check_nvrtc(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
    out.binary.resize(size);
    check_nvrtc(nvrtcGetPTX(prog, out.binary.data()), "nvrtcGetPTX");
  } else {
    check_nvrtc(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    out.binary.resize(size);
    check_nvrtc(nvrtcGetCUBIN(prog, out.binary.data()), "nvrtcGetCUBIN");
    out.registers = registers_in_cubin(out.binary, kernel_name);
    if (out.registers < 0) out.registers = registers_in(out.log);  // (a module whose kernels' names are not its own)
  }
  out.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace fusion::detail
