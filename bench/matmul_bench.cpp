// SPDX-License-Identifier: Apache-2.0
// fz::matmul against a direct cuBLASLt call with the same heuristic in the same process (issue 37's bare
// product targets): TFLOPS per shape and dtype, and the host time per call once descriptors are cached.
//   fusion-bench-matmul [--quick]      (bench/peers/matmul.py times torch.matmul on the same shapes)
//   fusion-bench-matmul --generated [--skinny] [--varied] [--sustain S] [--race-batch N] [--race-sleep MS] [--tune k=v]...
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <thread>
#include <cstring>
#include <vector>

#include "bench_main.hpp"
#include "fusion/fusion.hpp"
#include "held_alone.hpp"
#include "runtime/blas/cublaslt.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "schedule/tuning.hpp"

namespace fz = fusion;
namespace lt = fusion::detail::cublaslt;

namespace {

/// `count` values spread over [-scale, scale) by a hash of their index (--varied). Tensor cores multiplying
/// constants plausibly draw less power, and so hold higher clocks, than on the varied values of real work: H200,
/// 8192x14336x4096, the bare cuBLASLt product 1.18 ms on this bench's constants, 1.39 ms (median; 1.17 the fastest)
/// in a probe's batches of 10 calls on varied values (2026-12-01, not yet measured with --varied here)
template <class T> std::vector<T> varied(std::size_t count, std::uint32_t seed, float scale) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed * 40503u;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    v[i] = T(scale * (static_cast<float>(h % 2048u) / 1024.0f - 1.0f));
  }
  return v;
}

struct Case {
  const char* name;
  std::int64_t m, n, k;
  fz::DType dtype;
  bool tf32;
};

/// Medians (ms per call) of `first` and `second`, timed in alternating runs so that clock and thermal
/// drift fall on both alike.
template <class F, class G> std::pair<double, double> median_ms(F&& first, G&& second, int calls) {
  fz::Event start, stop;
  std::vector<double> a, b;
  auto time = [&](auto&& run) {
    start.record();
    for (int i = 0; i < calls; ++i) run();
    stop.record();
    stop.synchronize();
    return fz::elapsed_time(start, stop) / calls;
  };
  for (int rep = 0; rep < 9; ++rep) a.push_back(time(first)), b.push_back(time(second));
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return {a[a.size() / 2], b[b.size() / 2]};
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
  /// `epilogue`: cuBLASLt's own (bias ones read `bias`), as a hand-written call would pick it.
  Direct(const Case& c, cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT, const fz::ArrayBase* bias = nullptr) {
    const lt::Api& api = lt::api();
    const cudaDataType_t t = c.dtype == fz::DType::bfloat16 ? CUDA_R_16BF
                             : c.dtype == fz::DType::float16 ? CUDA_R_16F
                                                             : CUDA_R_32F;
    lt::check(api.cublasLtCreate(&handle), "create");
    lt::check(
        api.cublasLtMatmulDescCreate(&desc, c.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "desc");
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
      lt::check(api.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
                "epilogue");
    if (bias) {
      const void* at = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(bias->data_ptr()));
      lt::check(api.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &at, sizeof at), "bias");
    }
    lt::check(
        api.cublasLtMatrixLayoutCreate(&lb, t, static_cast<std::uint64_t>(c.n), static_cast<std::uint64_t>(c.k), c.n),
        "layout");
    lt::check(
        api.cublasLtMatrixLayoutCreate(&la, t, static_cast<std::uint64_t>(c.k), static_cast<std::uint64_t>(c.m), c.k),
        "layout");
    lt::check(
        api.cublasLtMatrixLayoutCreate(&lc, t, static_cast<std::uint64_t>(c.n), static_cast<std::uint64_t>(c.m), c.n),
        "layout");
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
  Direct d(c);
  d.run(a, b, out);
  const auto [fused, direct] = median_ms([&] { out = fz::matmul(a, b); }, [&] { d.run(a, b, out); }, calls);
  // host time per call, queue not waited on: fz::matmul's whole path (allocation of the result included)
  fz::current_stream().synchronize();
  const int host_calls = 200;
  auto host_us = [&](auto&& run) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < host_calls; ++i) run();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    fz::current_stream().synchronize();
    return us / host_calls;
  };
  const double fused_host = host_us([&] { out = fz::matmul(a, b); });
  const double direct_host = host_us([&] { d.run(a, b, out); });
  const double flop = 2.0 * double(c.m) * double(c.n) * double(c.k);
  fmt::print("{:<28} {:>9} {:>9.3f} {:>8.1f} {:>11.3f} {:>8.1f} {:>7.1f}% {:>9.1f} {:>10.1f}\n", c.name,
             fz::dtype_name(c.dtype), fused, flop / fused / 1e9, direct, flop / direct / 1e9, 100 * direct / fused,
             fused_host, direct_host);
}

/// Products with math around them (bfloat16): what cuBLASLt's epilogues express against the same epilogue
/// called directly; other math as the product then one fused kernel reading it once, against the bare
/// product; and the MLP layer gelu(x @ w1 + b1) @ w2 + b2 + x over both products.
void epilogues() {
  using T = fz::bfloat16;
  // cuBLASLt's route alone (the default route would move some of these to generated kernels once timed: --generated
  // compares the two)
  fz::CublasProducts library;
  fmt::print("\nproducts with their surroundings (bfloat16, fz::CublasProducts):\n");
  fmt::print("{:<56} {:>9} {:>8} {:>8} {:>10} {:>12}\n", "expression", "ms", "TFLOPS", "kernels", "against", "ratio");
  const std::int64_t M = 8192, N = 8192, K = 8192;
  auto a = fz::asarray(std::vector<T>(static_cast<std::size_t>(M * K), T(0.01f)), {M, K});
  auto b = fz::asarray(std::vector<T>(static_cast<std::size_t>(K * N), T(0.02f)), {K, N});
  auto bias = fz::asarray(std::vector<T>(static_cast<std::size_t>(N), T(0.5f)), {N});
  auto residual = fz::asarray(std::vector<T>(static_cast<std::size_t>(M * N), T(1.0f)), {M, N});
  auto out = fz::empty<T>({M, N});
  const auto p = fz::matmul(a, b);
  const Case shape{"", M, N, K, fz::DType::bfloat16, false};
  Direct bare_call(shape), gelu_call(shape, CUBLASLT_EPILOGUE_GELU_BIAS, &bias),
      relu_call(shape, CUBLASLT_EPILOGUE_RELU_BIAS, &bias);
  const double flop = 2.0 * double(M) * double(N) * double(K);
  auto row = [&](const char* name, auto&& run, const auto& expr, const char* against, auto&& base) {
    for (int i = 0; i < 2; ++i) run(), base();
    const auto [ms, base_ms] = median_ms(run, base, 10);
    fmt::print("{:<56} {:>9.3f} {:>8.1f} {:>8} {:>10} {:>11.3f}x\n", name, ms, flop / ms / 1e9,
               fz::inspect(expr).kernels, against, ms / base_ms);
  };
  auto bare = [&] { bare_call.run(a, b, out); };
  row(
      "a @ b (8192^3)", [&] { out = p; }, p, "direct", bare);
  row(
      "gelu_tanh(a @ b + bias)", [&] { out = fz::gelu_tanh(p + bias); }, fz::gelu_tanh(p + bias), "direct",
      [&] { gelu_call.run(a, b, out); });
  row(
      "maximum(a @ b + bias, 0)", [&] { out = fz::maximum(p + bias, 0.0f); }, fz::maximum(p + bias, 0.0f), "direct",
      [&] { relu_call.run(a, b, out); });
  row(
      "a @ b + bias + residual", [&] { out = p + bias + residual; }, p + bias + residual, "bare", bare);
  row(
      "relu(a @ b + bias) * 0.5 + residual", [&] { out = fz::maximum(p + bias, 0.0f) * 0.5f + residual; },
      fz::maximum(p + bias, 0.0f) * 0.5f + residual, "bare", bare);
  const auto h = p + bias;
  const auto formula = 0.5f * h * (1.0f + fz::tanh(0.7978845608f * (h + 0.044715f * h * h * h)));
  row(
      "GELU's tanh formula written out (a @ b + bias)", [&] { out = formula; }, formula, "bare", bare);
  row(
      "gelu(a @ b + bias) (through erf)", [&] { out = fz::gelu(p + bias); }, fz::gelu(p + bias), "bare", bare);
  // The MLP layer: batch 8192, 4096 -> 14336 -> 4096.
  const std::int64_t B = 8192, D = 4096, H = 14336;
  auto x = fz::asarray(std::vector<T>(static_cast<std::size_t>(B * D), T(0.01f)), {B, D});
  auto w1 = fz::asarray(std::vector<T>(static_cast<std::size_t>(D * H), T(0.01f)), {D, H});
  auto w2 = fz::asarray(std::vector<T>(static_cast<std::size_t>(H * D), T(0.01f)), {H, D});
  auto b1 = fz::asarray(std::vector<T>(static_cast<std::size_t>(H), T(0.1f)), {H});
  auto b2 = fz::asarray(std::vector<T>(static_cast<std::size_t>(D), T(0.1f)), {D});
  auto y = fz::empty<T>({B, D});
  fz::Array<T> hidden;
  auto mlp = [&] {
    hidden = fz::gelu_tanh(fz::matmul(x, w1) + b1);
    y = fz::matmul(hidden, w2) + b2 + x;
  };
  auto mlp_erf = [&] {
    hidden = fz::gelu(fz::matmul(x, w1) + b1);
    y = fz::matmul(hidden, w2) + b2 + x;
  };
  auto products = [&] {
    hidden = fz::matmul(x, w1);
    y = fz::matmul(hidden, w2);
  };
  const double mlp_flop = 2.0 * 2.0 * double(B) * double(D) * double(H);
  for (int i = 0; i < 2; ++i) mlp(), mlp_erf(), products();
  const auto [t_mlp, t_products] = median_ms(mlp, products, 5);
  const auto [t_erf, t_products2] = median_ms(mlp_erf, products, 5);
  const int kernels =
      fz::inspect(fz::gelu_tanh(fz::matmul(x, w1) + b1)).kernels + fz::inspect(fz::matmul(hidden, w2) + b2 + x).kernels;
  const int kernels_erf =
      fz::inspect(fz::gelu(fz::matmul(x, w1) + b1)).kernels + fz::inspect(fz::matmul(hidden, w2) + b2 + x).kernels;
  fmt::print("{:<56} {:>9.3f} {:>8.1f} {:>8} {:>10} {:>11.3f}x\n",
             "MLP gelu_tanh(x@w1+b1)@w2+b2+x (8192, 4096->14336->4096)", t_mlp, mlp_flop / t_mlp / 1e9, kernels, "bare",
             t_mlp / t_products);
  fmt::print("{:<56} {:>9.3f} {:>8.1f} {:>8} {:>10} {:>11.3f}x\n", "MLP with gelu through erf", t_erf,
             mlp_flop / t_erf / 1e9, kernels_erf, "bare", t_erf / t_products2);
  fmt::print("{:<56} {:>9.3f} {:>8.1f} {:>8}\n", "  its two bare products", t_products, mlp_flop / t_products / 1e9, 2);
}

/// fz::GeneratedProducts against the library route (fz::CublasProducts: cuBLASLt's product, then the fused epilogue
/// kernel, or one cuBLASLt call where its epilogues express the math) and against the bare cuBLASLt product:
/// bfloat16, relu(a @ b + bias) * 0.5 + residual, on a large product and on the skinny ones of inference; then
/// what the default route's race settles on, and the times it measured. Then the compile time of one new generated
/// kernel (NVRTC warm: another kernel compiled first).
void generated(bool skinny, int race_batch, int race_sleep_ms, bool varied_data, double sustain) {
  using T = fz::bfloat16;
  fmt::print("\ngenerated products (fz::GeneratedProducts, bfloat16): relu(a @ b + bias) * 0.5 + residual\n");
  // (generated: the planned tile layout, forced; library: cuBLASLt + the epilogue kernel (the columns earlier
  // results call "default"); raced: the default route once its race has a verdict, the fastest of the library and
  // every candidate layout)
  fmt::print("{:<24} {:>11} {:>8} {:>11} {:>8} {:>9} {:>9} {:>10} {:>9} {:>10}  {}\n", "(m, n, k)", "generated ms", "TFLOPS",
             "library ms", "TFLOPS", "ratio", "bare ms", "of bare", "raced ms", "of bare", "generated kernel");
  struct Shape3 { std::int64_t m, n, k; };
  for (const Shape3 s : {Shape3{8192, 8192, 8192}, Shape3{8192, 14336, 4096}, Shape3{4096, 4096, 4096}, Shape3{512, 4096, 4096},
                         Shape3{256, 4096, 4096}, Shape3{64, 4096, 4096}, Shape3{16, 4096, 4096},
                         Shape3{64, 14336, 4096}, Shape3{16, 4096, 14336}}) {
    if (skinny && s.m > 512) continue;
    // (0.01, 0.02, 0.5 and 1.0 everywhere, as every result so far; --varied: values spread by a hash)
    const auto values = [&](std::int64_t count, std::uint32_t seed, float scale, float constant) {
      return varied_data ? varied<T>(static_cast<std::size_t>(count), seed, scale)
                         : std::vector<T>(static_cast<std::size_t>(count), T(constant));
    };
    auto a = fz::asarray(values(s.m * s.k, 1, 0.1f, 0.01f), {s.m, s.k});
    auto b = fz::asarray(values(s.k * s.n, 2, 0.1f, 0.02f), {s.k, s.n});
    auto bias = fz::asarray(values(s.n, 3, 1.0f, 0.5f), {s.n});
    auto residual = fz::asarray(values(s.m * s.n, 4, 1.0f, 1.0f), {s.m, s.n});
    auto out = fz::empty<T>({s.m, s.n});
    const auto expr = fz::maximum(fz::matmul(a, b) + bias, 0.0f) * 0.5f + residual;
    auto with = [&] {
      fz::GeneratedProducts on;
      out = expr;
    };
    auto without = [&] {
      fz::CublasProducts off;
      out = expr;
    };
    auto bare = [&] { out = fz::matmul(a, b); };
    for (int i = 0; i < 2; ++i) with(), without(), bare();
    const int calls = s.m * s.n * s.k >= (std::int64_t{1} << 36) ? 10 : 50;
    const auto [g_ms, d_ms] = median_ms(with, without, calls);
    const auto [g2_ms, bare_ms] = median_ms(with, bare, calls);
    (void)g2_ms;
    std::string variant;
    {
      fz::GeneratedProducts on;
      const fz::KernelInfo k = fz::inspect(expr);
      variant = k.kernels == 1 ? k.variant.substr(0, k.variant.find(", float32")) : "(not generated)";
      // (the words after the cut that tell kernels of one tile apart)
      if (const auto at = k.variant.find(" in clusters of "); k.kernels == 1 && at != std::string::npos)
        variant += "," + k.variant.substr(at, k.variant.find(" sharing", at) - at);
      if (k.kernels == 1 && k.variant.find("K split") != std::string::npos) variant += ", K split";
    }
    // what the default route settles on for this shape: calls until its race has a verdict (or 20 s), in batches of
    // race_batch calls waited on, race_sleep_ms apart (--race-batch, --race-sleep: how a program's pattern of
    // calls meets the race)
    std::string race;
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         std::chrono::steady_clock::now() < until;) {
      for (int i = 0; i < race_batch; ++i) out = expr;
      fz::current_stream().synchronize();
      race = fz::inspect(expr).plan[0];
      if (race.find("measured") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(race_sleep_ms));
    }
    // (the race's words less the device's name: "measured ... kernel's 1385.9; the fastest of 4 tile layouts ...")
    const std::size_t at = race.find("measured"), on = race.find(" on ", at), shape = race.find(", this shape", on);
    std::string words = at == std::string::npos ? "" : race.substr(at, on - at);
    if (shape != std::string::npos) words += race.substr(shape + 12, race.size() - 1 - shape - 12);  // (less the plan's ')')
    variant += at == std::string::npos ? " [race: no verdict]"
                                       : fmt::format(" [race: {} {}]", race.starts_with("fz_matmul_") ? "generated" : "cuBLASLt", words);
    const auto [raced_ms, bare2_ms] = median_ms([&] { out = expr; }, bare, calls);
    const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k);
    fmt::print("{:<24} {:>11.4f} {:>8.1f} {:>11.4f} {:>8.1f} {:>8.3f}x {:>9.4f} {:>9.3f}x {:>9.4f} {:>9.3f}x  {}\n",
               fmt::format("{}x{}x{}", s.m, s.n, s.k), g_ms, flop / g_ms / 1e9, d_ms, flop / d_ms / 1e9, g_ms / d_ms,
               bare_ms, g_ms / bare_ms, raced_ms, raced_ms / bare2_ms, variant);
    if (sustain > 0) {  // each route alone for seconds (--sustain)
      using fusion_bench::held_alone_ms;
      const double g = held_alone_ms(with, sustain, calls), d = held_alone_ms(without, sustain, calls),
                   r = held_alone_ms([&] { out = expr; }, sustain, calls), c = held_alone_ms(bare, sustain, calls);
      fmt::print("{:<24} held alone {} s: generated {:.4f} ms ({:.3f}x bare), library {:.4f} ({:.3f}x), raced {:.4f} "
                 "({:.3f}x), bare {:.4f}\n", "", sustain, g, g / c, d, d / c, r, r / c, c);
    }
  }
  // compile time: a new epilogue (a constant no other kernel has) after NVRTC is warm
  auto a = fz::asarray(std::vector<T>(64 * 64, T(0.01f)), {64, 64});
  fz::GeneratedProducts on;
  fz::Array<T> warm = fz::matmul(a, a) * 3.0f - 1.0f;
  const auto start = std::chrono::steady_clock::now();
  fz::reset_stats();
  fz::Array<T> fresh = fz::exp(fz::matmul(a, a) * 0.5f) + a;
  fz::current_stream().synchronize();
  const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  fmt::print("compile of a new generated product kernel: NVRTC {:.0f} ms ({} compile), first call {:.0f} ms\n",
             fz::stats().compile_ms, fz::stats().compiles, wall);
  // and of a new one on the Hopper path (where the device has it)
  auto x = fz::asarray(std::vector<T>(2048 * 512, T(0.01f)), {2048, 512});
  auto w = fz::asarray(std::vector<T>(512 * 4096, T(0.01f)), {512, 4096});
  const auto hopper = fz::exp(fz::matmul(x, w) * 0.25f) - 3.0f;
  const auto h_start = std::chrono::steady_clock::now();
  fz::reset_stats();
  fz::Array<T> h = hopper;
  fz::current_stream().synchronize();
  const double h_wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - h_start).count();
  fmt::print("compile of a new generated product kernel ({}): NVRTC {:.0f} ms ({} compile), first call {:.0f} ms\n",
             fz::inspect(hopper).variant.substr(0, 60), fz::stats().compile_ms, fz::stats().compiles, h_wall);
}

}  // namespace

static int run(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (argc > 1 && std::strcmp(argv[1], "--generated") == 0) {  // [--skinny] [--tune name=value]...
    bool skinny = false;  // only the products of 512 rows and fewer
    bool varied_data = false;  // --varied: operands of varied values, not every element the same
    int race_batch = 4, race_sleep_ms = 20;
    double sustain = 0;  // --sustain S: each route also held alone, S / 2 seconds settling, S timed
    std::string tuned;
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--skinny") == 0) skinny = true;
      if (std::strcmp(argv[i], "--varied") == 0) varied_data = true;
      if (std::strcmp(argv[i], "--race-batch") == 0 && i + 1 < argc) race_batch = std::max(1, std::atoi(argv[++i]));
      if (std::strcmp(argv[i], "--race-sleep") == 0 && i + 1 < argc) race_sleep_ms = std::max(0, std::atoi(argv[++i]));
      if (std::strcmp(argv[i], "--sustain") == 0 && i + 1 < argc) sustain = std::max(0.0, std::atof(argv[++i]));
      if (std::strcmp(argv[i], "--tune") == 0 && i + 1 < argc) {
        fz::detail::set_tuning(argv[i + 1]);
        tuned += fmt::format(" (--tune {})", argv[++i]);
      }
    }
    fmt::print("fusion-bench-matmul --generated on {}{}{}\n", fz::Device(0).properties().name, tuned,
               varied_data ? " (--varied: operands of varied values)" : "");
    generated(skinny, race_batch, race_sleep_ms, varied_data, sustain);
    return 0;
  }
  fmt::print("fusion-bench-matmul on {}: fz::matmul against cuBLASLt called directly with the same heuristic\n",
             fz::Device(0).properties().name);
  fmt::print("(GPU time per call: median of 9 runs of 10-50 calls between events, the two alternating; host us:\n"
             " the host time of one fz::matmul call, result allocation included, beside the direct call's)\n");
  fmt::print("{:<28} {:>9} {:>9} {:>8} {:>11} {:>8} {:>8} {:>9} {:>10}\n", "product (m, n, k)", "dtype", "fused ms",
             "TFLOPS", "direct ms", "TFLOPS", "of direct", "host us", "direct us");
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
  epilogues();
  return 0;
}

int main(int argc, char** argv) {
  return bench::guarded_main("fusion-bench-matmul", [&] { return run(argc, argv); });
}
