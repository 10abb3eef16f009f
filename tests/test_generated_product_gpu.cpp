// SPDX-License-Identifier: Apache-2.0
// Generated matrix products on the GPU (fz::GeneratedProducts) against a float64 host reference: both
// 16-bit dtypes, every layout (NN, NT, TN, TT through transposed views), sizes that are not multiples of a
// tile, unaligned extents (plain loads), K = 1, both tile classes, batches and broadcast batches, epilogues
// with a bias, a bias along the rows, a residual, a float32 result, into poisoned and in-place outputs; and the
// default route's race between cuBLASLt and the generated kernel.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "runtime/compile/disk_cache.hpp"

#include "schedule/tuning.hpp"
#include "support.hpp"

namespace {

/// Row-major float64 product of batch items of A (items x m x k; one item broadcasts) and B (likewise).
std::vector<double> product(const std::vector<double>& A, const std::vector<double>& B, std::int64_t items,
                            bool a_batched, bool b_batched, std::int64_t m, std::int64_t k, std::int64_t n,
                            std::vector<double>& scale) {
  std::vector<double> C(static_cast<std::size_t>(items * m * n));
  scale.assign(C.size(), 0);
  for (std::int64_t i = 0; i < items; ++i)
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < n; ++c) {
        double s = 0, sa = 0;
        for (std::int64_t j = 0; j < k; ++j) {
          const double x = A[static_cast<std::size_t>(((a_batched ? i : 0) * m + r) * k + j)];
          const double y = B[static_cast<std::size_t>(((b_batched ? i : 0) * k + j) * n + c)];
          s += x * y, sa += std::abs(x * y);
        }
        C[static_cast<std::size_t>((i * m + r) * n + c)] = s;
        scale[static_cast<std::size_t>((i * m + r) * n + c)] = sa;
      }
  return C;
}

/// `values` (row-major, logical shape `shape`) on the device; `transposed`: stored as the transpose of the
/// last two axes and viewed back (a column-major operand).
template <class T> fz::Array<T> operand(const std::vector<T>& values, fz::Shape shape, bool transposed) {
  if (!transposed) return fz::asarray(values, shape);
  const int r = shape.size();
  const std::int64_t R = shape[r - 2], C = shape[r - 1], items = fz::numel(shape) / (R * C);
  std::vector<T> t(values.size());
  for (std::int64_t i = 0; i < items; ++i)
    for (std::int64_t a = 0; a < R; ++a)
      for (std::int64_t b = 0; b < C; ++b)
        t[static_cast<std::size_t>((i * C + b) * R + a)] = values[static_cast<std::size_t>((i * R + a) * C + b)];
  std::swap(shape[r - 2], shape[r - 1]);
  std::vector<int> axes;
  for (int i = 0; i < r; ++i) axes.push_back(i);
  std::swap(axes[static_cast<std::size_t>(r - 2)], axes[static_cast<std::size_t>(r - 1)]);
  return fz::asarray(t, shape).transpose(axes);
}

template <class T> double ulp_of() { return fz::dtype_of<T> == fz::DType::bfloat16 ? 0x1p-8 : 0x1p-11; }
template <class T> double rounded(double v) { return test::as_double(T(static_cast<float>(v))); }

/// relu(a @ b + bias) * 0.5 + residual (bias along the columns, or the rows with `row_bias`) in a generated
/// kernel, against float64: the product rounded to T as its step would store it, the epilogue in float.
template <class T>
void check_epilogue(std::int64_t items, bool a_batched, bool b_batched, std::int64_t m, std::int64_t k, std::int64_t n,
                    bool ta, bool tb, bool row_bias, unsigned seed, const char* path = "generated") {
  INFO(fz::dtype_name(fz::dtype_of<T>) << " items " << items << (a_batched ? " a" : "") << (b_batched ? " b" : "")
                                       << " (m, k, n) = (" << m << ", " << k << ", " << n << ") " << (ta ? "T" : "N")
                                       << (tb ? "T" : "N") << (row_bias ? " row bias" : ""));
  const auto ha = test::random<T>(static_cast<std::size_t>((a_batched ? items : 1) * m * k), -1, 1, seed);
  const auto hb = test::random<T>(static_cast<std::size_t>((b_batched ? items : 1) * k * n), -1, 1, seed + 1);
  const std::int64_t bias_n = row_bias ? m : n;
  const auto hbias = test::random<T>(static_cast<std::size_t>(bias_n), -1, 1, seed + 2);
  const auto hres = test::random<T>(static_cast<std::size_t>(items * m * n), -1, 1, seed + 3);
  std::vector<double> ra, rb, scale;
  for (T v : ha) ra.push_back(test::as_double(v));
  for (T v : hb) rb.push_back(test::as_double(v));
  const std::vector<double> p = product(ra, rb, items, a_batched, b_batched, m, k, n, scale);
  fz::Shape as = {m, k}, bs = {k, n}, out_shape = {m, n};
  if (a_batched) as.insert(0, items);
  if (b_batched) bs.insert(0, items);
  if (a_batched || b_batched) out_shape.insert(0, items);
  const auto a = operand(ha, as, ta), b = operand(hb, bs, tb);
  const auto bias = row_bias ? fz::asarray(hbias, {m, 1}) : fz::asarray(hbias, {n});
  const auto residual = fz::asarray(hres, out_shape);
  auto epilogue = [&](const auto& prod) { return fz::maximum(prod + bias, 0.0f) * 0.5f + residual; };
  fz::GeneratedProducts on;
  const fz::KernelInfo info = fz::inspect(epilogue(fz::matmul(a, b)));
  REQUIRE(info.kernels == 1);
  REQUIRE_THAT(info.name, Catch::StartsWith("fz_matmul_"));
  REQUIRE_THAT(info.variant, Catch::Contains(path));
  fz::reset_stats();
  fz::Array<T> fresh = epilogue(fz::matmul(a, b));
  CHECK(fz::stats().launches == 1);  // the generated kernel alone (cuBLASLt's calls are not counted)
  fz::Array<T> poisoned = fz::empty<T>(out_shape);
  poisoned.fill(T(std::nanf("")));
  fz::copyto(poisoned, epilogue(fz::matmul(a, b)));
  // the result written over the residual it reads (each element read by the thread that writes it)
  fz::Array<T> in_place = fz::asarray(hres, out_shape);
  in_place = fz::maximum(fz::matmul(a, b) + bias, 0.0f) * 0.5f + in_place;
  const double tol = fz::dtype_of<T> == fz::DType::bfloat16 ? 1.6e-2 : 2e-3;  // (as test_matmul_gpu.cpp)
  for (const fz::Array<T>* got : {&fresh, &poisoned, &in_place}) {
    const std::vector<T> g = got->to_host();
    REQUIRE(g.size() == p.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const std::int64_t col = static_cast<std::int64_t>(i) % n, row = static_cast<std::int64_t>(i) / n % m;
      const double pr = rounded<T>(p[i]);
      const double want = std::max(pr + test::as_double(hbias[static_cast<std::size_t>(row_bias ? row : col)]), 0.0) * 0.5 +
                          test::as_double(hres[i]);
      // the product's error and one rounding of it to T either way, halved; the result's rounding
      const double bound = 0.5 * (tol * scale[i] + 2 * ulp_of<T>() * std::abs(pr)) + 2 * ulp_of<T>() * std::abs(want) + 1e-6;
      if (!(std::abs(test::as_double(g[i]) - want) <= bound)) {
        if (bad < 5) UNSCOPED_INFO("element " << i << ": got " << test::as_double(g[i]) << ", want " << want);
        ++bad;
      }
    }
    CHECK(bad == 0);
  }
}

/// A bfloat16 layer with random values (seeds `seed` to `seed + 3`): a (m x k) and b (k x n) on the device, a bias
/// along the columns and a residual (host and device), and the float64 product with each element's sum of |terms|.
struct Layer {
  std::vector<fz::bfloat16> hbias, hres;
  std::vector<double> p, scale;
  fz::Array<fz::bfloat16> a, b, bias, residual;
};
Layer random_layer(std::int64_t M, std::int64_t K, std::int64_t N, unsigned seed) {
  using T = fz::bfloat16;
  const auto ha = test::random<T>(static_cast<std::size_t>(M * K), -1, 1, seed);
  const auto hb = test::random<T>(static_cast<std::size_t>(K * N), -1, 1, seed + 1);
  Layer l;
  l.hbias = test::random<T>(static_cast<std::size_t>(N), -1, 1, seed + 2);
  l.hres = test::random<T>(static_cast<std::size_t>(M * N), -1, 1, seed + 3);
  std::vector<double> ra, rb;
  for (T v : ha) ra.push_back(test::as_double(v));
  for (T v : hb) rb.push_back(test::as_double(v));
  l.p = product(ra, rb, 1, false, false, M, K, N, l.scale);
  l.a = fz::asarray(ha, {M, K}), l.b = fz::asarray(hb, {K, N}), l.bias = fz::asarray(l.hbias, {N});
  l.residual = fz::asarray(l.hres, {M, N});
  return l;
}

}  // namespace

TEST_CASE("generated products match float64 in every layout, at edge sizes, with unaligned operands",
          "[gpu][matmul]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_epilogue<fz::bfloat16>(1, false, false, 200, 96, 136, ta, tb, false, 1);  // 64x64 tiles with edges
      check_epilogue<fz::half>(1, false, false, 72, 40, 88, ta, tb, tb, 2);
      check_epilogue<fz::bfloat16>(1, false, false, 77, 13, 50, ta, tb, ta, 3);  // plain loads
    }
  check_epilogue<fz::bfloat16>(1, false, false, 70, 1, 33, false, false, false, 4);      // K = 1
  check_epilogue<fz::half>(1, false, false, 5, 300, 3, false, true, false, 5);          // tiny result, long K
  // 128x128 tiles of mma.sync (on an H100 only with the Hopper path off)
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("product_hopper=0");
  check_epilogue<fz::bfloat16>(1, false, false, 1100, 64, 2100, false, false, false, 6, "128x128x32");
  check_epilogue<fz::bfloat16>(1, false, false, 1100, 72, 2100, true, true, true, 7, "128x128x32");
  fz::detail::tuning() = saved;
}

TEST_CASE("generated products on Hopper (tensor copies, wgmma) match float64 in every layout, at edges, in batches",
          "[gpu][matmul]") {
  // (the Hopper path is for compute capability 9.0 alone: elsewhere the same products take the mma.sync kernel)
  const char* path = fz::Device::current().properties().arch() == 90 ? "Hopper" : "mma.sync";
  // results of 9 x 9 tiles of 128 x 256 and more, whose last row and column tiles are partial; K not a multiple
  // of 64 (the copies fill past the end with zeros), K of one short step
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_epilogue<fz::bfloat16>(1, false, false, 1032, 72, 2056, ta, tb, ta != tb, 41, path);
      check_epilogue<fz::half>(1, false, false, 1040, 200, 2104, ta, tb, false, 42, path);
    }
  check_epilogue<fz::bfloat16>(1, false, false, 1030, 8, 2056, false, false, false, 43, path);
  // too few tiles of 128 x 256 to fill the device, enough of 128 x 128
  const bool hopper = std::string(path) == "Hopper";
  check_epilogue<fz::bfloat16>(1, false, false, 1000, 136, 1040, false, false, false, 50, hopper ? "128x128x64" : path);
  check_epilogue<fz::half>(1, false, false, 1000, 136, 1040, true, true, true, 51, hopper ? "128x128x64" : path);
  check_epilogue<fz::bfloat16>(1, false, false, 1157, 1000, 2064, false, true, true, 44, path);
  // more tiles than SMs: each persistent block takes two or three in turn, the epilogue of one overlapping the
  // next's products (17 x 17 tiles, partial at the edges), in every layout; batch items' tiles in one sequence
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check_epilogue<fz::bfloat16>(1, false, false, 2056, 72, 4104, ta, tb, tb, 52, path);
  check_epilogue<fz::half>(200, true, true, 136, 40, 520, false, false, false, 53, path);
  // a few hundred rows: 64 x 128 tiles, one consumer warpgroup
  check_epilogue<fz::bfloat16>(1, false, false, 250, 72, 4000, false, false, false, 54, hopper ? "64x128x64" : path);
  check_epilogue<fz::half>(1, false, false, 248, 136, 4000, true, true, true, 55, hopper ? "64x128x64" : path);
  check_epilogue<fz::bfloat16>(1, false, false, 64, 200, 8500, false, true, false, 56, hopper ? "64x128x64" : path);
  // tens of rows: K split over 64-row tiles, a unit (tile and slice) a block, the last of a tile's units summing
  // the slices in order; every layout, a shorter last slice and rows past M in a tile, batches sharing counters
  const char* split = hopper ? "persistent blocks, K split" : "K split";
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check_epilogue<fz::bfloat16>(1, false, false, 16, 2048, 1000, ta, tb, ta, 57, split);
  check_epilogue<fz::half>(1, false, false, 100, 1000, 1000, false, false, true, 58, split);
  check_epilogue<fz::bfloat16>(3, true, false, 40, 1024, 520, false, false, false, 59, split);
  // batches: b shared by every item, both batched, a shared (tensor maps of one item read at item 0)
  check_epilogue<fz::bfloat16>(40, true, false, 128, 64, 512, false, false, false, 45, path);
  check_epilogue<fz::half>(40, true, true, 136, 48, 512, true, false, false, 46, path);
  check_epilogue<fz::bfloat16>(40, false, true, 128, 96, 520, false, true, true, 47, path);
  // the same bits every run
  const auto a = fz::asarray(test::random<fz::bfloat16>(2048 * 512, -1, 1, 48), {2048, 512});
  const auto b = fz::asarray(test::random<fz::bfloat16>(512 * 4096, -1, 1, 49), {512, 4096});
  fz::GeneratedProducts on;
  const fz::Array<fz::bfloat16> first = fz::gelu(fz::matmul(a, b));
  const auto want = first.to_host();
  for (int run = 0; run < 5; ++run) {
    const fz::Array<fz::bfloat16> again = fz::gelu(fz::matmul(a, b));
    REQUIRE(std::memcmp(again.to_host().data(), want.data(), want.size() * sizeof(want[0])) == 0);
  }
}

TEST_CASE("generated products on Hopper in clusters of 2 sharing b's tiles (multicast copies) match float64",
          "[gpu][matmul]") {
  const bool hopper = fz::Device::current().properties().arch() == 90;
  const char* path = hopper ? "in clusters of 2 sharing b's tiles" : "mma.sync";
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("product_cluster=2");
  // 64 x 128 tiles, 4 row tiles (the last partial) by 17 columns of tiles (the last partial), K not a multiple of 64,
  // in every layout (rows 16 bytes apart, as the copy engine needs): b's boxes of 64 columns alternate between the pair, or a column-major b's halves
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check_epilogue<fz::bfloat16>(1, false, false, 248, 1000, 2104, ta, tb, tb, 62, path);
  // 128 x 256 tiles, two consumer warpgroups; then two units a block and more (the stages' phases run on across
  // tiles); batches (a pair's units in one batch item)
  check_epilogue<fz::half>(1, false, false, 512, 296, 4200, false, false, false, 63, path);
  check_epilogue<fz::bfloat16>(1, false, false, 2048, 256, 4096, true, true, true, 64, path);
  check_epilogue<fz::bfloat16>(3, true, false, 250, 200, 700, false, true, false, 65, path);
  // the same bits every run
  const auto a = fz::asarray(test::random<fz::bfloat16>(256 * 512, -1, 1, 66), {256, 512});
  const auto b = fz::asarray(test::random<fz::bfloat16>(512 * 4096, -1, 1, 67), {512, 4096});
  fz::GeneratedProducts on;
  const fz::Array<fz::bfloat16> first = fz::gelu(fz::matmul(a, b));
  const auto want = first.to_host();
  for (int run = 0; run < 10; ++run) {
    const fz::Array<fz::bfloat16> again = fz::gelu(fz::matmul(a, b));
    REQUIRE(std::memcmp(again.to_host().data(), want.data(), want.size() * sizeof(want[0])) == 0);
  }
  fz::detail::tuning() = saved;
}

TEST_CASE("generated products split K over blocks when the tiles are few: the same bits every run",
          "[gpu][matmul]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_epilogue<fz::bfloat16>(1, false, false, 16, 2048, 256, ta, tb, false, 31);  // 32-row tiles
      check_epilogue<fz::half>(1, false, false, 100, 1000, 200, ta, tb, true, 32);     // a shorter last slice
    }
  check_epilogue<fz::bfloat16>(2, true, false, 24, 1536, 136, false, false, false, 33);  // batches share counters
  const auto a = fz::asarray(test::random<fz::bfloat16>(16 * 4096, -1, 1, 34), {16, 4096});
  const auto b = fz::asarray(test::random<fz::bfloat16>(4096 * 512, -1, 1, 35), {4096, 512});
  fz::GeneratedProducts on;
  REQUIRE_THAT(fz::inspect(fz::matmul(a, b) * 2.0f).variant, Catch::Contains("K split"));
  const fz::Array<fz::bfloat16> first = fz::matmul(a, b) * 2.0f;
  const auto want = first.to_host();
  for (int run = 0; run < 20; ++run) {
    const fz::Array<fz::bfloat16> again = fz::matmul(a, b) * 2.0f;
    const auto got = again.to_host();
    REQUIRE(std::memcmp(got.data(), want.data(), got.size() * sizeof(got[0])) == 0);
  }
}

TEST_CASE("generated products: batches, broadcast batches, a float32 result", "[gpu][matmul]") {
  check_epilogue<fz::bfloat16>(3, true, false, 64, 48, 40, false, false, false, 11);  // b shared by every item
  check_epilogue<fz::half>(3, true, true, 64, 48, 40, true, false, false, 12);
  check_epilogue<fz::bfloat16>(4, false, true, 33, 16, 70, false, true, true, 13);     // a shared
  // a float32 result: the product rounded to bfloat16 (its dtype), then the math in float32
  const std::int64_t m = 150, k = 64, n = 90;
  const auto ha = test::random<fz::bfloat16>(m * k, -1, 1, 21), hb = test::random<fz::bfloat16>(k * n, -1, 1, 22);
  const auto hbias = test::random<float>(n, -1, 1, 23);
  std::vector<double> ra, rb, scale;
  for (auto v : ha) ra.push_back(test::as_double(v));
  for (auto v : hb) rb.push_back(test::as_double(v));
  const auto p = product(ra, rb, 1, false, false, m, k, n, scale);
  const auto a = fz::asarray(ha, {m, k}), b = fz::asarray(hb, {k, n});
  const auto bias = fz::asarray(hbias, {n});
  fz::GeneratedProducts on;
  REQUIRE(fz::inspect(fz::tanh(fz::matmul(a, b).astype<float>()) + bias).kernels == 1);
  const fz::Array<float> y = fz::tanh(fz::matmul(a, b).astype<float>()) + bias;
  const auto g = y.to_host();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double pr = rounded<fz::bfloat16>(p[i]);
    const double want = std::tanh(pr) + hbias[i % static_cast<std::size_t>(n)];
    REQUIRE(std::abs(g[i] - want) <= 1.6e-2 * scale[i] + 2 * 0x1p-8 * std::abs(pr) + 1e-5);
  }
}

namespace {

/// The default route's race on a product of `M` x `K` x `N` (rows new to this process, so that no earlier run's
/// verdict decides; the kernels themselves may be cached) over `layouts` candidate tile layouts: cuBLASLt until
/// they are built, every call right (into poisoned arrays), then the fastest route, named by fz::inspect and
/// kept in the kernel cache.
void check_race(std::int64_t M, std::int64_t K, std::int64_t N, unsigned seed, std::size_t layouts, const char* planned) {
  using T = fz::bfloat16;
  INFO("(m, k, n) = (" << M << ", " << K << ", " << N << ")");
  const Layer layer = random_layer(M, K, N, seed);
  const auto& [hbias, hres, p, scale, a, b, bias, residual] = layer;
  const auto expr = fz::maximum(fz::matmul(a, b) + bias, 0.0f) * 0.5f + residual;
  auto wrong = [&](const fz::Array<T>& y) {
    const std::vector<T> g = y.to_host();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double pr = rounded<T>(p[i]);
      const double want = std::max(pr + test::as_double(hbias[i % static_cast<std::size_t>(N)]), 0.0) * 0.5 + test::as_double(hres[i]);
      const double bound = 0.5 * (1.6e-2 * scale[i] + 2 * ulp_of<T>() * std::abs(pr)) + 2 * ulp_of<T>() * std::abs(want) + 1e-6;
      bad += !(std::abs(test::as_double(g[i]) - want) <= bound);
    }
    return bad;
  };
  const fz::DeviceProperties props = fz::Device(0).properties();
  const std::string before = fz::inspect(expr).plan[0];
  INFO(before);
  REQUIRE_THAT(before, Catch::Contains("cublasLtMatmul"));
  if (props.compute_capability_major != 9 || props.compute_capability_minor != 0) {  // the mma.sync kernel: not raced
    CHECK_THAT(before, Catch::Contains("is not raced"));
    fz::Array<T> y = expr;
    CHECK(wrong(y) == 0);
    return;
  }
  CHECK_THAT(before, Catch::Contains(std::string(planned) + " tiles, Hopper") &&
                         Catch::Contains(fmt::format("{} tile layout{}, built on worker threads", layouts, layouts == 1 ? "" : "s")) &&
                         Catch::Contains("timed against it on 6 calls each (0 so far)"));
  std::string plan;
  std::size_t calls = 0;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60); std::chrono::steady_clock::now() < until;) {
    fz::Array<T> y = fz::empty<T>({M, N});
    y.fill(T(std::nanf("")));
    y = expr;  // (into the poisoned array: every route writes every element)
    ++calls;
    REQUIRE(wrong(y) == 0);
    plan = fz::inspect(expr).plan[0];
    if (plan.find("measured") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  INFO(plan << " after " << calls << " calls");
  REQUIRE_THAT(plan, Catch::Contains("measured") && Catch::Contains(props.name) && Catch::Contains("us a call") &&
                         Catch::Contains(fmt::format("the fastest of {} tile layouts", layouts)));
  // six timed calls of cuBLASLt's route, two at least of each candidate (one far behind leaves after two)
  CHECK(calls >= 6 + 2 * layouts);
  const fz::KernelInfo kept = fz::inspect(expr);
  const bool generated = plan.starts_with("fz_matmul_");
  CHECK(kept.kernels == (generated ? 1 : 2));
  fz::Array<T> after = expr;
  CHECK(wrong(after) == 0);
  // the verdict is in the kernel cache, for the next process: the route and the fastest candidate's kernel
  const std::string shape = fmt::format("{}x{}x{} batch 1\n", M, N, K);
  int verdicts = 0;
  for (const auto& path : fz::detail::DiskCache::instance().entries())
    if (const auto e = fz::detail::DiskCache::read_file(path); e && fz::detail::is_verdict(e->key) &&
                                                                e->key.source.find(shape) != std::string::npos) {
      ++verdicts;
      CHECK_THAT(e->binary, Catch::StartsWith(generated ? "generated fz_matmul_" : "library fz_matmul_"));
      if (generated) CHECK_THAT(e->binary, Catch::StartsWith("generated " + kept.name + " "));
    }
  CHECK(verdicts == 1);
  // fz::Deterministic and fz::CublasProducts keep cuBLASLt whatever the verdict
  fz::Deterministic exact;
  CHECK_THAT(fz::inspect(expr).plan[0], Catch::Contains("cublasLtMatmul"));
  fz::Array<T> library = expr;
  CHECK(wrong(library) == 0);
}

}  // namespace

TEST_CASE("by default a product is raced: cuBLASLt while its generated kernel builds, then the faster route, the "
          "verdict kept in the kernel cache", "[gpu][matmul]") {
  check_race(520 + getpid() % 200, 256, 1024, 71, 1, "64x128x64");  // (too few rows for larger tiles)
}

TEST_CASE("the race times every candidate tile layout that fills the device and keeps the fastest route",
          "[gpu][matmul]") {
  // 128 x 256, 128 x 192, 128 x 128 and 64 x 128 tiles all give the SMs a tile each
  check_race(1024 + 16 * (getpid() % 64), 192, 4096, 73, 4, "128x256x64");
}

TEST_CASE("generated products write a tie's outputs in one kernel: an activation, a float32 value, the product itself",
          "[gpu][matmul]") {
  using T = fz::bfloat16;
  const std::int64_t M = 200, K = 96, N = 136;
  const Layer layer = random_layer(M, K, N, 81);
  const auto& [hbias, hres, p, scale, a, b, bias, residual] = layer;
  const fz::detail::Tuning saved = fz::detail::tuning();
  for (const bool hopper : {true, false}) {  // (off compute capability 9.0 both are the mma.sync kernel)
    if (!hopper) fz::detail::set_tuning("product_hopper=0");
    fz::GeneratedProducts on;
    const auto prod = fz::matmul(a, b);
    const auto act = fz::maximum(prod + bias, 0.0f) * 0.5f + residual;
    const auto wide = ((prod + bias) * 0.5f).astype<float>();
    const fz::KernelInfo info = fz::inspect(act, wide, prod);
    INFO(info);
    REQUIRE(info.kernels == 1);
    CHECK_THAT(info.plan[0], Catch::StartsWith("fz_matmul_"));
    fz::Array<T> y0 = fz::empty<T>({M, N}), y2 = fz::empty<T>({M, N});
    fz::Array<float> y1 = fz::empty<float>({M, N});
    y0.fill(T(std::nanf("")));
    y1.fill(std::nanf(""));
    y2.fill(T(std::nanf("")));
    fz::reset_stats();
    fz::tie(y0, y1, y2) = std::make_tuple(act, wide, prod);
    CHECK(fz::stats().launches == 1);
    const std::vector<T> g0 = y0.to_host(), g2 = y2.to_host();
    const std::vector<float> g1 = y1.to_host();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double pr = rounded<T>(p[i]), bi = test::as_double(hbias[i % static_cast<std::size_t>(N)]);
      const double err = 0.5 * (1.6e-2 * scale[i] + 2 * ulp_of<T>() * std::abs(pr));  // the product's, rounded
      const double w0 = std::max(pr + bi, 0.0) * 0.5 + test::as_double(hres[i]), w1 = (pr + bi) * 0.5;
      bad += !(std::abs(test::as_double(g0[i]) - w0) <= err + 2 * ulp_of<T>() * std::abs(w0) + 1e-6);
      bad += !(std::abs(double(g1[i]) - w1) <= err + 1e-6 * std::abs(w1) + 1e-6);
      bad += !(std::abs(test::as_double(g2[i]) - pr) <= err + 1e-6);
    }
    CHECK(bad == 0);
  }
  fz::detail::tuning() = saved;
}
