// SPDX-License-Identifier: Apache-2.0
// Layer kernels on the GPU against float64 host references: softmax, log-softmax, layer norm, RMSNorm,
// x / sum(x) and row statistics for row lengths from 1 to 65,536 (warp, block, kept and re-read rows),
// every floating dtype, -inf and NaN rows, transposed and strided inputs, keepdims forms, in place,
// determinism, one launch each; var's one pass accuracy.
#include <cstring>
#include <limits>

#include "support.hpp"

namespace {

using Rows = std::vector<double>;  // R x D, row-major

Rows softmax_ref(const Rows& x, std::int64_t R, std::int64_t D, bool log) {
  Rows y(x.size());
  for (std::int64_t r = 0; r < R; ++r) {
    const double* a = &x[static_cast<std::size_t>(r * D)];
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    bool nan = false;
    for (std::int64_t j = 0; j < D; ++j) nan = nan || std::isnan(a[j]), m = std::max(m, a[j]);
    if (nan) m = std::numeric_limits<double>::quiet_NaN();  // max propagates NaN, as NumPy's
    for (std::int64_t j = 0; j < D; ++j) s += std::exp(a[j] - m);
    for (std::int64_t j = 0; j < D; ++j)
      y[static_cast<std::size_t>(r * D + j)] = log ? a[j] - m - std::log(s) : std::exp(a[j] - m) / s;
  }
  return y;
}

Rows norm_ref(const Rows& x, std::int64_t R, std::int64_t D, const Rows& w, const Rows* b, double eps) {
  Rows y(x.size());
  for (std::int64_t r = 0; r < R; ++r) {
    const double* a = &x[static_cast<std::size_t>(r * D)];
    double mean = 0, var = 0, ms = 0;
    for (std::int64_t j = 0; j < D; ++j) mean += a[j], ms += a[j] * a[j];
    mean /= static_cast<double>(D);
    ms /= static_cast<double>(D);
    for (std::int64_t j = 0; j < D; ++j) var += (a[j] - mean) * (a[j] - mean);
    var /= static_cast<double>(D);
    for (std::int64_t j = 0; j < D; ++j)
      y[static_cast<std::size_t>(r * D + j)] =
          b ? (a[j] - mean) / std::sqrt(var + eps) * w[static_cast<std::size_t>(j)] + (*b)[static_cast<std::size_t>(j)]
            : a[j] / std::sqrt(ms + eps) * w[static_cast<std::size_t>(j)];
  }
  return y;
}

template <class T> Rows as_rows(const std::vector<T>& v) {
  Rows r;
  for (const T& x : v) r.push_back(test::as_double(x));
  return r;
}

template <class T> void check_rows(std::int64_t R, std::int64_t D, unsigned seed) {
  INFO(fz::dtype_name(fz::dtype_of<T>) << " rows " << R << " x " << D);
  const auto hx = test::random<T>(static_cast<std::size_t>(R * D), -3, 3, seed);
  const auto hw = test::random<T>(static_cast<std::size_t>(D), 0.5, 1.5, seed + 1),
             hb = test::random<T>(static_cast<std::size_t>(D), -1, 1, seed + 2);
  const auto x = fz::asarray(hx, {R, D});
  const auto w = fz::asarray(hw), b = fz::asarray(hb);
  const Rows rx = as_rows(hx), rw = as_rows(hw), rb = as_rows(hb);
  const fz::DType d = fz::dtype_of<T>;

  fz::reset_stats();
  fz::Array<T> sm = fz::exp(x - fz::max(x, -1, true)) / fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true);
  CHECK(fz::stats().launches == 1);
  CHECK(test::mismatches(sm.to_host(), softmax_ref(rx, R, D, false), d) == 0);

  fz::Array<T> lsm = x - fz::max(x, -1, true) - fz::log(fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true));
  CHECK(test::mismatches(lsm.to_host(), softmax_ref(rx, R, D, true), d) == 0);

  fz::reset_stats();
  fz::Array<T> ln = (x - fz::mean(x, -1, true)) * fz::rsqrt(fz::var(x, -1, true) + 1e-5f) * w + b;
  CHECK(fz::stats().launches == 1);
  CHECK(test::mismatches(ln.to_host(), norm_ref(rx, R, D, rw, &rb, 1e-5), d) == 0);

  // RMSNorm as mixed-precision code writes it: 16-bit rows, float math (float64 rows keep float64 math)
  using Math = std::conditional_t<(sizeof(T) < 4), float, T>;
  auto xf = fz::cast<Math>(x);
  fz::Array<T> rms = fz::cast<T>(xf * fz::rsqrt(fz::mean(xf * xf, -1, true) + Math(1e-6)) * fz::cast<Math>(w));
  CHECK(test::mismatches(rms.to_host(), norm_ref(rx, R, D, rw, nullptr, 1e-6), d) == 0);

  // the same layers by name (fusion/layers.hpp): one launch each, the same results
  auto one_launch = [&](auto&& run) {
    fz::reset_stats();
    const fz::Array<T> y = run();
    CHECK(fz::stats().launches == 1);
    return y.to_host();
  };
  CHECK(test::mismatches(one_launch([&] { return fz::Array<T>(fz::softmax(x)); }), softmax_ref(rx, R, D, false), d) ==
        0);
  CHECK(test::mismatches(one_launch([&] { return fz::Array<T>(fz::log_softmax(x, 1)); }), softmax_ref(rx, R, D, true),
                         d) == 0);
  CHECK(test::mismatches(one_launch([&] { return fz::Array<T>(fz::layer_norm(x, w, b, 1e-5f)); }),
                         norm_ref(rx, R, D, rw, &rb, 1e-5), d) == 0);
  CHECK(test::mismatches(one_launch([&] { return fz::Array<T>(fz::rms_norm(x, w, 1e-6f)); }),
                         norm_ref(rx, R, D, rw, nullptr, 1e-6), d) == 0);
  Rows lse(static_cast<std::size_t>(R));
  for (std::int64_t r = 0; r < R; ++r) {
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (std::int64_t j = 0; j < D; ++j) m = std::max(m, rx[static_cast<std::size_t>(r * D + j)]);
    for (std::int64_t j = 0; j < D; ++j) sum += std::exp(rx[static_cast<std::size_t>(r * D + j)] - m);
    lse[static_cast<std::size_t>(r)] = m + std::log(sum);
  }
  CHECK(test::mismatches(one_launch([&] { return fz::Array<T>(fz::logsumexp(x, -1)); }), lse, d) == 0);
}

}  // namespace

TEST_CASE("named activations match float64: relu, sigmoid, silu, softplus, gelu, gelu_tanh", "[gpu][layers]") {
  const std::size_t n = 4099;
  auto check = [&](auto tag, unsigned seed) {
    using T = decltype(tag);
    const fz::DType d = fz::dtype_of<T>;
    INFO(fz::dtype_name(d));
    auto hx = test::random<T>(n, -30, 30, seed);
    hx[0] = T(0.0f), hx[1] = T(-100.0f), hx[2] = T(100.0f);  // both far ends: no overflow to NaN
    const auto x = fz::asarray(hx);
    const Rows rx = as_rows(hx);
    auto against = [&](const auto& e, double (*f)(double), const char* what) {
      INFO(what);
      fz::reset_stats();
      const fz::Array<T> y = e;
      CHECK(fz::stats().launches == 1);
      Rows want;
      for (double v : rx) want.push_back(f(v));
      CHECK(test::mismatches(y.to_host(), want, d) == 0);
    };
    against(
        fz::relu(x), [](double v) { return std::max(v, 0.0); }, "relu");
    against(
        fz::sigmoid(x), [](double v) { return 1 / (1 + std::exp(-v)); }, "sigmoid");
    against(
        fz::silu(x), [](double v) { return v / (1 + std::exp(-v)); }, "silu");
    against(
        fz::softplus(x), [](double v) { return std::max(v, 0.0) + std::log1p(std::exp(-std::abs(v))); }, "softplus");
    against(
        fz::gelu(x), [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, "gelu");
    against(
        fz::gelu_tanh(x),
        [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); },
        "gelu_tanh");
  };
  check(float{}, 31);
  check(double{}, 32);
  check(fz::bfloat16{}, 33);
  check(fz::half{}, 34);
}

TEST_CASE("softmax, log-softmax, layer norm and RMSNorm match float64 at every row length", "[gpu][layers]") {
  for (std::int64_t D : {1, 7, 31, 1000, 1025, 8193})
    check_rows<float>(std::max<std::int64_t>(3, 40000 / D), D, 7 + static_cast<unsigned>(D));
  check_rows<float>(70, 65536, 11);  // 256 KB rows: a cluster of 4 blocks per row, 64 KB of it in each
  check_rows<double>(33, 1000, 12);
  check_rows<double>(5, 8193, 13);
  check_rows<fz::half>(100, 1000, 14);
  check_rows<fz::half>(9, 4099, 15);
  check_rows<fz::bfloat16>(100, 777, 16);
  check_rows<fz::bfloat16>(70, 65536, 17);  // 128 KB rows: a cluster of 4 blocks per row
  check_rows<float>(40, 100003, 18);          // a cluster of 8, odd rows: strided slices, the last one shorter
  check_rows<double>(20, 70000, 19);          // a cluster of 8, 2-wide vectors
  // rows of exactly 48 KB kept in shared memory beside the kernel's static scratch: past 48 KB in all, which a
  // kernel must opt in to (the launch was refused, CUDA_ERROR_INVALID_VALUE, before load_kernel opted in)
  check_rows<float>(70, 12288, 20);
  check_rows<double>(70, 6144, 21);
  const auto x = fz::asarray(test::random<float>(70 * 12288, -3, 3, 22), {70, 12288});
  // (softmax holds rows this long in registers with their exps: RMSNorm keeps nothing and keeps its row in shared memory)
  CHECK_THAT(fz::inspect(fz::rms_norm(x, 1e-6f)).variant, Catch::Contains("the row kept in shared memory"));
}

TEST_CASE("rows split over a cluster of blocks: the strategy the device takes, and the same bits every run",
          "[gpu][layers]") {
  const auto hx = test::random<float>(static_cast<std::size_t>(70 * 65536), -30, 30, 23);
  const auto x = fz::asarray(hx, {70, 65536});
  auto softmax = [&] {
    return fz::exp(x - fz::max(x, -1, true)) / fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true);
  };
  const fz::KernelInfo k = fz::inspect(softmax());
  INFO(k.variant);
  CHECK_THAT(k.variant, Catch::Contains("a cluster of 4 blocks per row"));
  CHECK_THAT(k.variant, Catch::Contains("the row kept in shared memory"));
  fz::Array<float> first = softmax(), again = softmax();
  const auto a = first.to_host(), b = again.to_host();
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  // each row sums to 1 (within float32's rounding over 65,536 terms)
  for (std::size_t r = 0; r < 70; ++r) {
    double s = 0;
    for (std::size_t j = 0; j < 65536; ++j) s += a[r * 65536 + j];
    CHECK(std::abs(s - 1) < 1e-4);
  }
}

TEST_CASE("layer kernels follow NumPy on -inf and NaN rows, other layouts, keepdims forms and in place",
          "[gpu][layers]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::int64_t R = 5, D = 40;
  auto hx = test::random<float>(static_cast<std::size_t>(R * D), -3, 3, 21);
  for (std::int64_t j = 0; j < D; ++j) hx[static_cast<std::size_t>(D + j)] = -inf;  // row 1: all -inf -> NaN
  hx[2 * D + 5] = nan;                                                             // row 2: a NaN -> NaN
  hx[3 * D + 7] = inf;  // row 3: +inf -> NaN where finite / inf
  hx[4 * D + 9] = -inf;                                                            // row 4: one -inf -> 0 there
  const auto x = fz::asarray(hx, {R, D});
  const Rows want = softmax_ref(as_rows(hx), R, D, false);
  fz::Array<float> sm = fz::exp(x - fz::max(x, -1, true)) / fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true);
  CHECK(test::mismatches(sm.to_host(), want, fz::DType::float32) == 0);

  // a column softmax (reduced axis 0, strided rows) of the transposed matrix gives the transposed answer
  const auto xt = fz::asarray(x.transpose().to_host(), {D, R});
  fz::Array<float> cols = fz::exp(xt - fz::max(xt, 0, true)) / fz::sum(fz::exp(xt - fz::max(xt, 0, true)), 0, true);
  CHECK(test::mismatches(cols.transpose().to_host(), want, fz::DType::float32) == 0);
  // a transposed view read directly, and every other column of a wider matrix
  fz::Array<float> tv = fz::exp(x.transpose() - fz::max(x.transpose(), 0, true)) /
                        fz::sum(fz::exp(x.transpose() - fz::max(x.transpose(), 0, true)), 0, true);
  CHECK(test::mismatches(tv.transpose().to_host(), want, fz::DType::float32) == 0);
  std::vector<float> wide(static_cast<std::size_t>(R * 2 * D), 100.f);
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t j = 0; j < D; ++j)
      wide[static_cast<std::size_t>(r * 2 * D + 2 * j)] = hx[static_cast<std::size_t>(r * D + j)];
  const auto strided = fz::asarray(wide, {R, 2 * D}).slice({{}, fz::Slice{{}, {}, 2}});
  fz::Array<float> ss =
      fz::exp(strided - fz::max(strided, -1, true)) / fz::sum(fz::exp(strided - fz::max(strided, -1, true)), -1, true);
  CHECK(test::mismatches(ss.to_host(), want, fz::DType::float32) == 0);

  // leading reduced axes broadcast back without keepdims: x / sum(x, 0) of a square matrix
  const auto sq = fz::asarray(test::random<float>(64 * 64, 0.5, 2, 22), {64, 64});
  const auto hsq = sq.to_host();
  fz::reset_stats();
  fz::Array<float> by_col = sq / fz::sum(sq, 0);
  CHECK(fz::stats().launches == 1);
  // ... while sum(sq, -1) without keepdims adds row sums along the columns, as NumPy broadcasts
  fz::Array<float> numpy_axis = sq + fz::sum(sq, -1);
  std::vector<double> want_col(64 * 64), want_np(64 * 64);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j) {
      double cs = 0, rs = 0;
      for (int k = 0; k < 64; ++k) cs += hsq[k * 64 + j], rs += hsq[j * 64 + k];
      want_col[i * 64 + j] = hsq[i * 64 + j] / cs;
      want_np[i * 64 + j] = hsq[i * 64 + j] + rs;
    }
  CHECK(test::mismatches(by_col.to_host(), want_col, fz::DType::float32) == 0);
  CHECK(test::mismatches(numpy_axis.to_host(), want_np, fz::DType::float32) == 0);

  // in place: x = softmax(x), every element read before it is written
  fz::Array<float> y = fz::asarray(hx, {R, D});
  y = fz::exp(y - fz::max(y, -1, true)) / fz::sum(fz::exp(y - fz::max(y, -1, true)), -1, true);
  CHECK(test::mismatches(y.to_host(), want, fz::DType::float32) == 0);
}

TEST_CASE("row statistics in one pass: a tie of row reductions, var, determinism", "[gpu][layers]") {
  const std::int64_t R = 300, D = 5000;
  const auto hx = test::random<float>(static_cast<std::size_t>(R * D), -2, 2, 31);
  const auto x = fz::asarray(hx, {R, D});
  fz::Array<float> s, q;
  fz::reset_stats();
  fz::tie(s, q) = std::make_tuple(fz::sum(x, -1), fz::sum(x * x, -1));
  CHECK(fz::stats().launches == 1);
  CHECK(fz::stats().bytes_read == static_cast<std::uint64_t>(R * D * 4));  // the input read once
  std::vector<double> ws(R), wq(R);
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t j = 0; j < D; ++j) {
      const double v = hx[static_cast<std::size_t>(r * D + j)];
      ws[static_cast<std::size_t>(r)] += v, wq[static_cast<std::size_t>(r)] += v * v;
    }
  CHECK(s.shape() == fz::Shape{R});
  CHECK(test::mismatches(s.to_host(), ws, fz::DType::float32) == 0);
  CHECK(test::mismatches(q.to_host(), wq, fz::DType::float32) == 0);

  // the same input, the same bits, run after run
  fz::Array<float> a = x / fz::sum(x, -1, true), b = x / fz::sum(x, -1, true);
  CHECK(a.to_host() == b.to_host());
}

TEST_CASE("var stays accurate in float32 where a sum of squares would cancel (mean 1e4, std 1)", "[gpu][layers]") {
  const std::int64_t R = 64, D = 1 << 16;
  auto hx = test::random<float>(static_cast<std::size_t>(R * D), -1.7, 1.7, 41);  // std ~1
  for (float& v : hx) v += 1e4f;
  const auto x = fz::asarray(hx, {R, D});
  std::vector<double> want(R);
  double all_mean = 0, all_var = 0;
  for (std::int64_t r = 0; r < R; ++r) {
    double m = 0, v = 0;
    for (std::int64_t j = 0; j < D; ++j) m += hx[static_cast<std::size_t>(r * D + j)];
    m /= D;
    for (std::int64_t j = 0; j < D; ++j)
      v += (hx[static_cast<std::size_t>(r * D + j)] - m) * (hx[static_cast<std::size_t>(r * D + j)] - m);
    want[static_cast<std::size_t>(r)] = v / D;
    all_mean += m / R;
  }
  for (float v : hx) all_var += (v - all_mean) * (v - all_mean);
  all_var /= static_cast<double>(R * D);
  fz::Array<float> rows = fz::var(x, -1);
  const auto got = rows.to_host();
  double worst = 0;
  for (std::int64_t r = 0; r < R; ++r)
    worst = std::max(worst, std::abs(got[static_cast<std::size_t>(r)] - want[static_cast<std::size_t>(r)]) /
                                want[static_cast<std::size_t>(r)]);
  CHECK(worst < 1e-4);
  const double whole = fz::Array<float>(fz::var(x)).item();  // 4M elements, split over blocks
  CHECK(std::abs(whole - all_var) / all_var < 1e-4);
  CHECK(fz::Array<float>(fz::std(x, -1, false, 1)).to_host()[3] ==
        Approx(std::sqrt(want[3] * D / (D - 1))).epsilon(1e-4));

  // Outliers where threads start (each thread shifts by its first element): still accurate.
  for (std::size_t k = 0; k < hx.size(); k += 4) hx[k] += (k / 4) % 7 == 0 ? 3000.0f : 0.0f;
  const auto y = fz::asarray(hx, {R, D});
  const auto got_y = fz::Array<float>(fz::var(y, -1)).to_host();
  for (std::int64_t r = 0; r < R; r += 9) {
    double m = 0, v = 0;
    for (std::int64_t j = 0; j < D; ++j) m += hx[static_cast<std::size_t>(r * D + j)];
    m /= D;
    for (std::int64_t j = 0; j < D; ++j)
      v += (hx[static_cast<std::size_t>(r * D + j)] - m) * (hx[static_cast<std::size_t>(r * D + j)] - m);
    CHECK(got_y[static_cast<std::size_t>(r)] == Approx(v / D).epsilon(1e-5));
  }
}

TEST_CASE("var and std over rows a block holds: two passes over the held row, accurate where sums of squares cancel",
          "[gpu][layers]") {
  for (const std::int64_t D : {128, 1022, 1024, 4096, 16384}) {  // (1,022: no vectors; 16,384: in shared memory)
    const std::int64_t R = (1 << 21) / D;
    INFO("rows of " << D);
    auto hx = test::random<float>(static_cast<std::size_t>(R * D), -1.7, 1.7, static_cast<unsigned>(D));
    for (std::size_t k = 0; k < hx.size(); ++k) hx[k] += 1e4f + (k % 29 == 0 ? 3000.0f : 0.0f);  // and outliers
    const auto x = fz::asarray(hx, {R, D});
    CHECK_THAT(fz::inspect(fz::var(x, -1)).variant, Catch::StartsWith("layer"));
    std::vector<double> var(static_cast<std::size_t>(R)), std1(var.size());
    for (std::int64_t r = 0; r < R; ++r) {
      double m = 0, v = 0;
      for (std::int64_t j = 0; j < D; ++j) m += hx[static_cast<std::size_t>(r * D + j)];
      m /= static_cast<double>(D);
      for (std::int64_t j = 0; j < D; ++j) {
        const double d = hx[static_cast<std::size_t>(r * D + j)] - m;
        v += d * d;
      }
      var[static_cast<std::size_t>(r)] = v / static_cast<double>(D);
      std1[static_cast<std::size_t>(r)] = std::sqrt(v / static_cast<double>(D - 1));
    }
    fz::Array<float> got = fz::full<float>({R}, 7.f), got_std = fz::full<float>({R, 1}, 7.f);
    fz::reset_stats();
    got = fz::var(x, -1);
    got_std = fz::std(x, 1, true, 1.0);
    CHECK(fz::stats().launches == 2);
    CHECK(test::mismatches(got.to_host(), var, fz::DType::float32) == 0);
    CHECK(test::mismatches(got_std.to_host(), std1, fz::DType::float32) == 0);
    // and in float64, to float64's tolerance
    const auto xd = fz::eval(fz::cast<double>(x));
    CHECK(test::mismatches(fz::Array<double>(fz::var(xd, -1)).to_host(), var, fz::DType::float64) == 0);
  }
  // a tie of mean and var over rows a block holds (a layer kernel) and longer ones (one reduction kernel, both)
  for (const std::int64_t D : {1024, 65536}) {
    const std::int64_t R = 96;
    INFO("tie over rows of " << D);
    const auto hx = test::random<float>(static_cast<std::size_t>(R * D), -3, 5, static_cast<unsigned>(D) + 1);
    const auto x = fz::asarray(hx, {R, D});
    std::vector<double> mean(static_cast<std::size_t>(R)), var(mean.size());
    for (std::int64_t r = 0; r < R; ++r) {
      double m = 0, v = 0;
      for (std::int64_t j = 0; j < D; ++j) m += hx[static_cast<std::size_t>(r * D + j)];
      m /= static_cast<double>(D);
      for (std::int64_t j = 0; j < D; ++j) v += std::pow(hx[static_cast<std::size_t>(r * D + j)] - m, 2);
      mean[static_cast<std::size_t>(r)] = m, var[static_cast<std::size_t>(r)] = v / static_cast<double>(D);
    }
    fz::Array<float> m = fz::full<float>({R}, 7.f), v = fz::full<float>({R}, 7.f);
    fz::reset_stats();
    fz::tie(m, v) = std::make_tuple(fz::mean(x, -1), fz::var(x, -1));
    CHECK(fz::stats().launches == 1);
    CHECK(test::mismatches(m.to_host(), mean, fz::DType::float32) == 0);
    CHECK(test::mismatches(v.to_host(), var, fz::DType::float32) == 0);
  }
  // the reduction kernel's tie takes the mean from var's accumulator: over a whole array split over blocks (the
  // partials combined by the last block), and over a batch norm's N, H, W
  const std::int64_t n = (1 << 22) + 3;
  auto hx = test::random<float>(static_cast<std::size_t>(n), -1, 3, 81);
  for (std::size_t k = 0; k < hx.size(); k += 997) hx[k] += 2000.0f;  // (outliers)
  double mean = 0, var = 0;
  for (float e : hx) mean += e;
  mean /= static_cast<double>(n);
  for (float e : hx) var += (e - mean) * (e - mean);
  var /= static_cast<double>(n);
  const auto flat = fz::asarray(hx);
  CHECK_THAT(fz::inspect(fz::mean(flat), fz::var(flat)).variant, Catch::Contains("2 results from one pass"));
  fz::Array<float> m, v;
  fz::tie(m, v) = std::make_tuple(fz::mean(flat), fz::var(flat));
  CHECK(m.item() == Approx(mean).epsilon(1e-5));
  CHECK(v.item() == Approx(var).epsilon(1e-5));
  const std::int64_t N = 4, C = 16, HW = 48 * 48;
  const auto t = fz::asarray(std::vector<float>(hx.begin(), hx.begin() + N * C * HW), {N, C, 48, 48});
  const fz::Axes nhw{0, 2, 3};
  CHECK_THAT(fz::inspect(fz::mean(t, nhw), fz::var(t, nhw)).variant, Catch::StartsWith("reduction"));
  fz::tie(m, v) = std::make_tuple(fz::mean(t, nhw), fz::var(t, nhw));
  std::vector<double> cm(C), cv(C);
  for (std::int64_t c = 0; c < C; ++c) {
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < HW; ++k) cm[static_cast<std::size_t>(c)] += hx[static_cast<std::size_t>((i * C + c) * HW + k)];
    cm[static_cast<std::size_t>(c)] /= static_cast<double>(N * HW);
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < HW; ++k)
        cv[static_cast<std::size_t>(c)] += std::pow(hx[static_cast<std::size_t>((i * C + c) * HW + k)] - cm[static_cast<std::size_t>(c)], 2);
    cv[static_cast<std::size_t>(c)] /= static_cast<double>(N * HW);
  }
  CHECK(test::mismatches(m.to_host(), cm, fz::DType::float32) == 0);
  CHECK(test::mismatches(v.to_host(), cv, fz::DType::float32) == 0);
  // and a mean over no elements is NaN, as NumPy's (var's too)
  const auto none = fz::zeros<float>({3, 0});
  fz::tie(m, v) = std::make_tuple(fz::mean(none, -1), fz::var(none, -1));
  for (float e : m.to_host()) CHECK(std::isnan(e));
  for (float e : v.to_host()) CHECK(std::isnan(e));
}

TEST_CASE("sibling reductions share one pass: whole-array ties, batch norm statistics, and their fallbacks",
          "[gpu][layers]") {
  const std::int64_t n = (1 << 22) + 7;
  const auto hx = test::random<float>(static_cast<std::size_t>(n), -2, 2, 51);
  const auto x = fz::asarray(hx);
  double s = 0, q = 0;
  for (float v : hx) s += v, q += double(v) * v;
  fz::Array<float> a, b;
  fz::reset_stats();
  fz::tie(a, b) = std::make_tuple(fz::sum(x), fz::sum(x * x));
  CHECK(fz::stats().launches == 1);
  CHECK(a.item() == Approx(s).margin(1e-2));
  CHECK(b.item() == Approx(q).epsilon(1e-5));

  // operands of other shapes: each reduction over its own array, as separate kernels
  const auto small = fz::asarray(std::vector<float>{1, 2, 3});
  fz::tie(a, b) = std::make_tuple(fz::sum(x), fz::sum(small));
  CHECK(b.item() == 6.f);
  CHECK(a.item() == Approx(s).margin(1e-2));

  // batch norm: the mean and variance in one pass, then the normalization
  const std::int64_t N = 4, C = 16, HW = 3001;
  const auto hb = test::random<float>(static_cast<std::size_t>(N * C * HW), 1, 5, 52);
  const auto t = fz::asarray(hb, {N, C, HW});
  fz::reset_stats();
  fz::Array<float> y = (t - fz::mean(t, {0, 2}, true)) * fz::rsqrt(fz::var(t, {0, 2}, true) + 1e-5f);
  CHECK(fz::stats().launches == 1);  // a layer kernel over rows in segments (batch norm's own test below)
  std::vector<double> want(hb.size());
  for (std::int64_t c = 0; c < C; ++c) {
    double m = 0, v = 0;
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < HW; ++k) m += hb[static_cast<std::size_t>((i * C + c) * HW + k)];
    m /= static_cast<double>(N * HW);
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < HW; ++k) v += std::pow(hb[static_cast<std::size_t>((i * C + c) * HW + k)] - m, 2);
    v /= static_cast<double>(N * HW);
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < HW; ++k) {
        const std::size_t e = static_cast<std::size_t>((i * C + c) * HW + k);
        want[e] = (hb[e] - m) / std::sqrt(v + 1e-5);
      }
  }
  CHECK(test::mismatches(y.to_host(), want, fz::DType::float32) == 0);

  // existing outputs of different layouts: written one by one, each right
  fz::Array<float> every_other = fz::zeros<float>({2 * C});
  fz::Array<float> col = every_other.slice({fz::Slice{{}, {}, 2}});  // a strided view (stride 2)
  REQUIRE(col.strides()[0] == 2);
  fz::Array<float> dense = fz::zeros<float>({C});
  auto m2 = t.transpose({1, 0, 2}).reshape({C, N * HW});
  fz::tie(col, dense) = std::make_tuple(fz::sum(m2, 1), fz::max(m2, 1));
  const auto got_sum = col.to_host(), got_max = dense.to_host();
  for (std::int64_t c = 0; c < C; ++c) {
    double sum = 0, mx = -1e30;
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < HW; ++k)
        sum += hb[static_cast<std::size_t>((i * C + c) * HW + k)],
            mx = std::max<double>(mx, hb[static_cast<std::size_t>((i * C + c) * HW + k)]);
    CHECK(got_sum[static_cast<std::size_t>(c)] == Approx(sum).epsilon(1e-5));
    CHECK(got_max[static_cast<std::size_t>(c)] == static_cast<float>(mx));
  }
}

namespace {

/// Batch norm's float64 reference over x (N, C, HW): per channel the mean and biased variance, and
/// y = (x - mean) / sqrt(var + eps) * g[c] + b[c].
struct BatchNormRef {
  std::vector<double> y, mean, var;
};
template <class T>
BatchNormRef batch_norm_ref(const std::vector<T>& x, std::int64_t N, std::int64_t C, std::int64_t HW,
                            const std::vector<T>& g, const std::vector<T>& b, double eps) {
  BatchNormRef r{std::vector<double>(x.size()), std::vector<double>(static_cast<std::size_t>(C)),
                 std::vector<double>(static_cast<std::size_t>(C))};
  auto at = [&](std::int64_t n, std::int64_t c, std::int64_t k) {
    return static_cast<std::size_t>((n * C + c) * HW + k);
  };
  for (std::int64_t c = 0; c < C; ++c) {
    double m = 0, v = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t k = 0; k < HW; ++k) m += test::as_double(x[at(n, c, k)]);
    m /= static_cast<double>(N * HW);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t k = 0; k < HW; ++k) v += std::pow(test::as_double(x[at(n, c, k)]) - m, 2);
    v /= static_cast<double>(N * HW);
    r.mean[static_cast<std::size_t>(c)] = m;
    r.var[static_cast<std::size_t>(c)] = v;
    const double gc = test::as_double(g[static_cast<std::size_t>(c)]),
                 bc = test::as_double(b[static_cast<std::size_t>(c)]);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t k = 0; k < HW; ++k)
        r.y[at(n, c, k)] = (test::as_double(x[at(n, c, k)]) - m) / std::sqrt(v + eps) * gc + bc;
  }
  return r;
}

/// A training-mode batch norm of (N, C, H, W) as one layer kernel (rows in segments: N and H·W around C),
/// with its statistics as more outputs of the same kernel, in place, and run twice for the same bits.
template <class T>
void check_batch_norm(std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, unsigned seed,
                      const char* strategy) {
  INFO(fz::dtype_name(fz::dtype_of<T>) << " batch norm " << N << "x" << C << "x" << H << "x" << W);
  const std::int64_t HW = H * W;
  const auto hx = test::random<T>(static_cast<std::size_t>(N * C * HW), 1, 5, seed);  // mean 3: centering matters
  const auto hg = test::random<T>(static_cast<std::size_t>(C), 0.5, 1.5, seed + 1),
             hb = test::random<T>(static_cast<std::size_t>(C), -1, 1, seed + 2);
  const auto x = fz::asarray(hx, {N, C, H, W});
  const auto g = fz::asarray(hg, {1, C, 1, 1}), b = fz::asarray(hb, {1, C, 1, 1});
  const fz::Axes nhw{0, 2, 3};
  const fz::DType d = fz::dtype_of<T>;
  const BatchNormRef want = batch_norm_ref(hx, N, C, HW, hg, hb, 1e-5);
  auto layer = [&](const fz::Array<T>& in) {
    return (in - fz::mean(in, nhw, true)) * fz::rsqrt(fz::var(in, nhw, true) + 1e-5f) * g + b;
  };

  const fz::KernelInfo info = fz::inspect(layer(x));
  CHECK(info.kernels == 1);
  CHECK_THAT(info.variant, Catch::Contains("in segments") && Catch::Contains(strategy));
  fz::reset_stats();
  fz::Array<T> y = layer(x);
  CHECK(fz::stats().launches == 1);
  const std::vector<T> got = y.to_host();
  CHECK(test::mismatches(got, want.y, d) == 0);
  fz::Array<T> again = layer(x);
  const std::vector<T> got_again = again.to_host();
  CHECK(std::memcmp(got.data(), got_again.data(), got.size() * sizeof(T)) == 0);

  // the statistics beside y, keepdims and not, from the same kernel
  fz::Array<T> y2 = fz::full<T>({N, C, H, W}, T(7.f)), mean = fz::full<T>({1, C, 1, 1}, T(7.f)),
               var = fz::full<T>({C}, T(7.f));
  fz::reset_stats();
  fz::tie(y2, mean, var) = std::make_tuple(layer(x), fz::mean(x, nhw, true), fz::var(x, nhw));
  CHECK(fz::stats().launches == 1);
  CHECK(test::mismatches(y2.to_host(), want.y, d) == 0);
  CHECK(test::mismatches(mean.to_host(), want.mean, d) == 0);
  CHECK(test::mismatches(var.to_host(), want.var, d) == 0);

  // in place: x = batch_norm(x)
  fz::Array<T> inplace = fz::asarray(hx, {N, C, H, W});
  inplace = layer(inplace);
  CHECK(test::mismatches(inplace.to_host(), want.y, d) == 0);
}

}  // namespace

TEST_CASE("batch norm over N, H, W is one layer kernel: clusters, blocks, warps and strided rows against float64",
          "[gpu][layers]") {
  // the benchmark's shape (25.7 MB): clusters of 8 blocks in one wave, each keeping most of its slice
  check_batch_norm<float>(8, 64, 112, 112, 61, "a cluster of 8 blocks");
  check_batch_norm<float>(16, 32, 112, 112, 69, "(the rest re-read)");
  check_batch_norm<float>(32, 256, 14, 14, 62, "a block per row");
  check_batch_norm<float>(3, 5, 7, 9, 63, "strided rows");                 // odd segments: no vectors
  check_batch_norm<float>(2, 3, 1, 3001, 64, "a block per row");
  check_batch_norm<double>(4, 16, 30, 30, 65, "2-wide vectors");
  check_batch_norm<fz::bfloat16>(8, 32, 28, 28, 66, "8-wide vectors");
  check_batch_norm<fz::half>(4, 24, 16, 16, 67, "8-wide vectors");

  // a strided view (every other column): segments of strided elements, no vectors
  const auto hx = test::random<float>(static_cast<std::size_t>(4 * 6 * 10 * 20), -2, 2, 68);
  const auto wide = fz::asarray(hx, {4, 6, 10, 20});
  const fz::Array<float> x = wide.slice({fz::Slice{}, fz::Slice{}, fz::Slice{}, fz::Slice{{}, {}, 2}});
  std::vector<float> dense;
  for (std::size_t i = 0; i < hx.size(); i += 2) dense.push_back(hx[i]);
  const std::vector<float> ones(6, 1.f), zeros(6, 0.f);
  const BatchNormRef want = batch_norm_ref(dense, 4, 6, 100, ones, zeros, 1e-5);
  const fz::Axes nhw{0, 2, 3};
  fz::reset_stats();
  fz::Array<float> y = (x - fz::mean(x, nhw, true)) * fz::rsqrt(fz::var(x, nhw, true) + 1e-5f);
  CHECK(fz::stats().launches == 1);
  CHECK(test::mismatches(y.to_host(), want.y, fz::DType::float32) == 0);

  // statistics alone over few channels stay a split reduction (fills the device), over many a layer kernel
  const auto small = fz::placeholder<float>({4, 16, 48, 48}), big = fz::placeholder<float>({8, 64, 112, 112});
  CHECK_THAT(fz::inspect(fz::mean(small, nhw, true), fz::var(small, nhw, true)).variant,
             Catch::StartsWith("reduction"));
  CHECK_THAT(fz::inspect(fz::mean(big, nhw, true), fz::var(big, nhw, true)).variant, Catch::StartsWith("layer"));
}
