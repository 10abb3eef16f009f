// SPDX-License-Identifier: Apache-2.0
// fz::matmul against a direct cuBLASLt call with the same heuristic in the same process (issue 37's bare
// product targets): TFLOPS per shape and dtype, and the host time per call once descriptors are cached.
//   fusion-bench-matmul [--quick]      (bench/peers/matmul.py times torch.matmul on the same shapes)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "fusion/fusion.hpp"
#include "runtime/blas/cublaslt.hpp"
#include "runtime/cuda/stream_state.hpp"

namespace fz = fusion;
namespace lt = fusion::detail::cublaslt;

namespace {

struct Case {
  const char* name;
  std::int64_t m, n, k;
  fz::DType dtype;
  bool tf32;
};

template <class F> double median_ms(F&& run, int calls) {
  fz::Event start, stop;
  std::vector<double> ms;
  for (int rep = 0; rep < 7; ++rep) {
    start.record();
    for (int i = 0; i < calls; ++i) run();
    stop.record();
    stop.synchronize();
    ms.push_back(fz::elapsed_time(start, stop) / calls);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// The same product through cuBLASLt directly: row-major C = A·B as column-major Cᵀ = Bᵀ·Aᵀ, the
/// heuristic's first algorithm, a 32 MiB workspace, the current stream.
struct Direct {
  cublasLtHandle_t handle{};
  cublasLtMatmulDesc_t desc{};
  cublasLtMatrixLayout_t la{}, lb{}, lc{};
  cublasLtMatmulAlgo_t algo{};
  void* workspace = nullptr;
  fz::ArrayBase ws{fz::DType::uint8};
  Direct(const Case& c) {
    const lt::Api& api = lt::api();
    const cudaDataType_t t = c.dtype == fz::DType::bfloat16 ? CUDA_R_16BF
                             : c.dtype == fz::DType::float16 ? CUDA_R_16F
                                                             : CUDA_R_32F;
    lt::check(api.cublasLtCreate(&handle), "create");
    lt::check(api.cublasLtMatmulDescCreate(&desc, c.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    lt::check(api.cublasLtMatrixLayoutCreate(&lb, t, static_cast<std::uint64_t>(c.n), static_cast<std::uint64_t>(c.k), c.n), "layout");
    lt::check(api.cublasLtMatrixLayoutCreate(&la, t, static_cast<std::uint64_t>(c.k), static_cast<std::uint64_t>(c.m), c.k), "layout");
    lt::check(api.cublasLtMatrixLayoutCreate(&lc, t, static_cast<std::uint64_t>(c.n), static_cast<std::uint64_t>(c.m), c.n), "layout");
    cublasLtMatmulPreference_t pref{};
    lt::check(api.cublasLtMatmulPreferenceCreate(&pref), "pref");
    const std::uint64_t most = std::uint64_t{32} << 20;
    api.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &most, sizeof most);
    cublasLtMatmulHeuristicResult_t r{};
    int n = 0;
    lt::check(api.cublasLtMatmulAlgoGetHeuristic(handle, desc, lb, la, lc, lc, pref, 1, &r, &n), "heuristic");
    algo = r.algo;
    ws = fz::ArrayBase::make_empty(fz::DType::uint8, {static_cast<std::int64_t>(most)});
    workspace = reinterpret_cast<void*>(static_cast<std::uintptr_t>(ws.data_ptr()));
  }
  void run(const fz::ArrayBase& a, const fz::ArrayBase& b, fz::ArrayBase& c) {
    const float one = 1, zero = 0;
    auto p = [](const fz::ArrayBase& x) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(x.data_ptr())); };
    lt::check(lt::api().cublasLtMatmul(handle, desc, &one, p(b), lb, p(a), la, &zero, p(c), lc, p(c), lc, &algo,
                                       workspace, std::size_t{32} << 20,
                                       reinterpret_cast<cudaStream_t>(fz::detail::current_stream_state()->handle)),
              "matmul");
  }
};

template <class T> void bench(const Case& c) {
  auto a = fz::asarray(std::vector<T>(static_cast<std::size_t>(c.m * c.k), T(0.01f)), {c.m, c.k});
  auto b = fz::asarray(std::vector<T>(static_cast<std::size_t>(c.k * c.n), T(0.02f)), {c.k, c.n});
  auto out = fz::empty<T>({c.m, c.n});
  std::optional<fz::TF32Products> tf32;
  if (c.tf32) tf32.emplace();
  const int calls = c.m * c.n * c.k > (std::int64_t{1} << 36) ? 10 : 50;
  for (int i = 0; i < 3; ++i) out = fz::matmul(a, b);  // warm: descriptors, heuristic, workspace
  const double fused = median_ms([&] { out = fz::matmul(a, b); }, calls);
  Direct d(c);
  d.run(a, b, out);
  const double direct = median_ms([&] { d.run(a, b, out); }, calls);
  // host time per call, queue not waited on: fz::matmul's whole path (allocation of the result included)
  fz::current_stream().synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  const int host_calls = 200;
  for (int i = 0; i < host_calls; ++i) out = fz::matmul(a, b);
  const double host_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / host_calls;
  fz::current_stream().synchronize();
  const double flop = 2.0 * double(c.m) * double(c.n) * double(c.k);
  fmt::print("{:<28} {:>9} {:>9.3f} {:>8.1f} {:>11.3f} {:>8.1f} {:>7.1f}% {:>9.1f}\n", c.name, fz::dtype_name(c.dtype),
             fused, flop / fused / 1e9, direct, flop / direct / 1e9, 100 * direct / fused, host_us);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  fmt::print("fusion-bench-matmul on {}: fz::matmul against cuBLASLt called directly with the same heuristic\n",
             fz::Device(0).properties().name);
  fmt::print("(GPU time per call: median of 7 runs of 10-50 calls between events; host us: the host time of one\n"
             " fz::matmul call, queueing only, result allocation included)\n");
  fmt::print("{:<28} {:>9} {:>9} {:>8} {:>11} {:>8} {:>8} {:>9}\n", "product (m, n, k)", "dtype", "fused ms", "TFLOPS",
             "direct ms", "TFLOPS", "of direct", "host us");
  std::vector<Case> cases = {{"8192^3", 8192, 8192, 8192, fz::DType::bfloat16, false},
                             {"8192x14336x4096 (MLP up)", 8192, 14336, 4096, fz::DType::bfloat16, false},
                             {"8192x4096x14336 (MLP down)", 8192, 4096, 14336, fz::DType::bfloat16, false},
                             {"8192^3", 8192, 8192, 8192, fz::DType::float16, false},
                             {"8192^3 TF32", 8192, 8192, 8192, fz::DType::float32, true},
                             {"4096^3", 4096, 4096, 4096, fz::DType::float32, false},
                             {"1024^3", 1024, 1024, 1024, fz::DType::bfloat16, false},
                             {"256x256x256", 256, 256, 256, fz::DType::bfloat16, false}};
  if (quick) cases.resize(2);
  for (const Case& c : cases) {
    if (c.dtype == fz::DType::bfloat16) bench<fz::bfloat16>(c);
    else if (c.dtype == fz::DType::float16) bench<fz::half>(c);
    else bench<float>(c);
  }
}
