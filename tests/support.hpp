// SPDX-License-Identifier: Apache-2.0
// Test helpers: random data, dtype-aware comparison, and a float64 host interpreter of the IR that
// GPU results are checked against.
#pragma once
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <random>
#include <string>
#include <stdexcept>
#include <vector>

#include <unistd.h>

#include "fusion/fusion.hpp"
#include "runtime/compile/nvrtc.hpp"

namespace fz = fusion;

namespace test {

/// The running test binary's own path, for tests that start it again as a child process: wherever the binary was
/// copied to (a GPU round may run binaries built elsewhere), not where CMake built it.
inline std::string self_binary() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(path, static_cast<std::size_t>(n));
}

/// Sets an environment variable for a scope, then puts back what was there.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? ::setenv(name_, old_.c_str(), 1) : ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  const char* name_;
  std::string old_;
  bool had_ = false;
};

/// A value of any dtype, kept as double (floats) or as exact 64-bit integers.
struct Value {
  double f = 0;
  std::int64_t i = 0;
  std::uint64_t u = 0;
};

/// Relative and absolute tolerance for comparing a dtype's results with a float64 reference.
struct Tolerance {
  double rtol, atol;
};
inline Tolerance tolerance(fz::DType d) {
  switch (d) {
    case fz::DType::float64: return {1e-12, 1e-13};
    case fz::DType::float32: return {2e-5, 1e-6};
    case fz::DType::float16: return {4e-3, 1e-3};
    case fz::DType::bfloat16: return {2e-2, 1e-2};
    default: return {0, 0};  // integers and bool: exact
  }
}

inline bool close(double got, double want, Tolerance t) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::abs(got - want) <= t.atol + t.rtol * std::abs(want);
}

template <class T>
double as_double(T v) {
  return static_cast<double>(
      static_cast<std::conditional_t<std::is_same_v<T, fz::half> || std::is_same_v<T, fz::bfloat16>, float, T>>(v));
}

/// Uniform random values in [lo, hi] of type T (integers inclusive).
template <class T> std::vector<T> random(std::size_t n, double lo, double hi, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (std::size_t k = 0; k < n; ++k) {
    if constexpr (std::is_same_v<T, bool>) {
      v[k] = (rng() & 1) != 0;
    } else if constexpr (std::is_integral_v<T>) {
      std::uniform_int_distribution<std::int64_t> d(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi));
      v[k] = static_cast<T>(d(rng));
    } else {
      std::uniform_real_distribution<double> d(lo, hi);
      v[k] = T(static_cast<float>(d(rng)));
      if constexpr (std::is_same_v<T, double>) v[k] = d(rng);
    }
  }
  return v;
}

/// Count of elements of `got` that are not within tolerance of `want`; prints the first few.
template <class T> std::size_t mismatches(const std::vector<T>& got, const std::vector<double>& want, fz::DType d) {
  REQUIRE(got.size() == want.size());
  const Tolerance t = tolerance(d);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!close(as_double(got[i]), want[i], t)) {
      if (bad < 5) UNSCOPED_INFO("element " << i << ": got " << as_double(got[i]) << ", want " << want[i]);
      ++bad;
    }
  }
  return bad;
}

/// What a shell command printed (stdout; add 2>&1 for stderr too) and its exit status, as pclose gives it.
struct CommandOutput {
  std::string text;
  int status = -1;
};
inline CommandOutput run_command(const std::string& cmd) {
  CommandOutput out;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (std::size_t got = std::fread(buf, 1, sizeof buf, p)) out.text.append(buf, got);
  out.status = pclose(p);
  return out;
}

/// Where the NVRTC sweeps (every op, every reduction layout, for every dtype) take `d`'s program: to a cubin for the
/// 8-byte dtypes, whose kernels hold the most registers and shared memory (ptxas checks both), to PTX for
/// the others: the front end sees every kernel, and the sweeps take half the time (CI: the reductions' 252 s ->
/// 123 s at PTX alone, 2 cores).
inline fz::detail::Target sweep_target(fz::DType d) {
  fz::detail::Target t = fz::detail::default_target();
  if (fz::itemsize(d) < 8) t.ptx = true;
  return t;
}

/// Compares with tests/golden/<name>.cu; FUSION_UPDATE_GOLDEN=1 rewrites the file instead.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// True under a compute-sanitizer tool (scripts/sanitize sets FUSION_TEST_SANITIZER): kernels run tens of times
/// slower there, so the few sanity checks of measured speed and waiting time stand down, and the longest
/// repetitions repeat less; everything else is checked.
inline bool under_sanitizer() { return std::getenv("FUSION_TEST_SANITIZER") != nullptr; }

#ifdef FUSION_GOLDEN_DIR
inline void check_golden(const std::string& name, const std::string& source) {
  const std::string path = std::string(FUSION_GOLDEN_DIR) + "/" + name + ".cu";
  if (const char* u = std::getenv("FUSION_UPDATE_GOLDEN"); u && std::string(u) == "1") std::ofstream(path) << source;
  INFO("golden file " << path << " (FUSION_UPDATE_GOLDEN=1 rewrites it after a deliberate change)");
  CHECK(read_file(path) == source);
}
#endif

}  // namespace test
