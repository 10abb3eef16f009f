// SPDX-License-Identifier: Apache-2.0
// Matrix products on the GPU against a float64 host reference: every floating dtype, every layout (NN, NT,
// TN, TT through transposed views), batched and broadcast batches, 1-D operands, mixed dtypes, TF32, an
// empty inner dimension, a non-default stream and a captured CUDA graph.
#include "support.hpp"

namespace {

/// Row-major float64 product of A (batch_a..., m, k) and B (batch_b..., k, n) with NumPy's broadcast of
/// the batch axes (each at most 2-D here), as the reference.
std::vector<double> reference(const std::vector<double>& A, const fz::Shape& as, const std::vector<double>& B,
                              const fz::Shape& bs, fz::Shape& out_shape, std::vector<double>* scale = nullptr) {
  const int ra = as.size(), rb = bs.size();
  const std::int64_t m = as[ra - 2], k = as[ra - 1], n = bs[rb - 1];
  const fz::Shape ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const fz::Shape batch = fz::broadcast_shapes(ba, bb);
  out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  const std::int64_t items = fz::numel(batch);
  auto item_of = [&](std::int64_t i, const fz::Shape& own) {  // the operand's batch item for result item i
    std::int64_t at = 0, stride = 1, rest = i;
    for (int d = batch.size() - 1, o = own.size() - 1; d >= 0; --d, --o) {
      const std::int64_t idx = rest % batch[d];
      rest /= batch[d];
      if (o >= 0) {
        at += (own[o] == 1 ? 0 : idx) * stride;
        stride *= own[o];
      }
    }
    return at;
  };
  std::vector<double> C(static_cast<std::size_t>(items * m * n));
  if (scale) scale->assign(C.size(), 0);
  for (std::int64_t i = 0; i < items; ++i) {
    const double* a = &A[static_cast<std::size_t>(item_of(i, ba) * m * k)];
    const double* b = &B[static_cast<std::size_t>(item_of(i, bb) * k * n)];
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < n; ++c) {
        double s = 0, sa = 0;
        for (std::int64_t j = 0; j < k; ++j) s += a[r * k + j] * b[j * n + c], sa += std::abs(a[r * k + j] * b[j * n + c]);
        C[static_cast<std::size_t>((i * m + r) * n + c)] = s;
        if (scale) (*scale)[static_cast<std::size_t>((i * m + r) * n + c)] = sa;
      }
  }
  return C;
}

/// The bound on a product's error relative to sum |a_ij b_jk| (inputs exact in their dtype; float32 accumulation
/// for 16-bit inputs, rounding once on store).
double product_tolerance(fz::DType d, bool tf32 = false) {
  switch (d) {
    case fz::DType::float64: return 1e-13;
    case fz::DType::float32: return tf32 ? 4e-3 : 2e-6;
    case fz::DType::float16: return 2e-3;
    default: return 1.6e-2;  // bfloat16
  }
}

/// A device array of logical shape `shape` holding `values` (row-major); `transposed`: stored as the
/// transpose of its last two axes (a column-major view, as `w.transpose()` gives).
template <class T> fz::Array<T> device_array(const std::vector<T>& values, const fz::Shape& shape, bool transposed) {
  if (!transposed || shape.size() < 2) return fz::asarray(values, shape);
  const int r = shape.size();
  const std::int64_t R = shape[r - 2], C = shape[r - 1], items = fz::numel(shape) / (R * C);
  std::vector<T> t(values.size());
  for (std::int64_t i = 0; i < items; ++i)
    for (std::int64_t a = 0; a < R; ++a)
      for (std::int64_t b = 0; b < C; ++b) t[static_cast<std::size_t>((i * C + b) * R + a)] = values[static_cast<std::size_t>((i * R + a) * C + b)];
  fz::Shape stored = shape;
  std::swap(stored[r - 2], stored[r - 1]);
  std::vector<int> axes;
  for (int i = 0; i < r; ++i) axes.push_back(i);
  std::swap(axes[static_cast<std::size_t>(r - 2)], axes[static_cast<std::size_t>(r - 1)]);
  return fz::asarray(t, stored).transpose(axes);
}

/// Counts result elements off the reference by more than the dtype's bound.
template <class T>
std::size_t off(const fz::Array<T>& got, const std::vector<double>& want, const std::vector<double>& scale, double tol) {
  const std::vector<T> g = got.to_host();
  REQUIRE(g.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(test::as_double(g[i]) - want[i]) <= tol * scale[i] + 1e-30)) {
      if (bad < 5) UNSCOPED_INFO("element " << i << ": got " << test::as_double(g[i]) << ", want " << want[i]);
      ++bad;
    }
  return bad;
}

template <class T> void check_product(const fz::Shape& as, const fz::Shape& bs, bool ta, bool tb, unsigned seed) {
  const fz::DType d = fz::dtype_of<T>;
  INFO(fz::dtype_name(d) << " " << fz::to_string(as) << (ta ? "ᵀ" : "") << " @ " << fz::to_string(bs) << (tb ? "ᵀ" : ""));
  const auto ha = test::random<T>(static_cast<std::size_t>(fz::numel(as)), -1, 1, seed);
  const auto hb = test::random<T>(static_cast<std::size_t>(fz::numel(bs)), -1, 1, seed + 1);
  std::vector<double> ra, rb, scale;
  for (T v : ha) ra.push_back(test::as_double(v));
  for (T v : hb) rb.push_back(test::as_double(v));
  fz::Shape out_shape;
  const std::vector<double> want = reference(ra, as, rb, bs, out_shape, &scale);
  const fz::Array<T> a = device_array(ha, as, ta), b = device_array(hb, bs, tb);
  fz::Array<T> c = fz::matmul(a, b);
  CHECK(c.shape() == out_shape);
  CHECK(off(c, want, scale, product_tolerance(d)) == 0);
  // into an array poisoned first: every element written by the call (compute-sanitizer's initcheck does
  // not see the TMA stores of some cuBLASLt kernels; fusion marks their results through NVTX, and this
  // checks by value what the mark asserts)
  fz::Array<T> poisoned = fz::empty<T>(out_shape);
  poisoned.fill(T(std::nanf("")));
  fz::copyto(poisoned, fz::matmul(a, b));
  CHECK(off(poisoned, want, scale, product_tolerance(d)) == 0);
}

}  // namespace

TEST_CASE("matmul matches float64 for every floating dtype and every transpose of its operands", "[gpu][matmul]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_product<float>({96, 80}, {80, 72}, ta, tb, 1);
      check_product<double>({33, 17}, {17, 65}, ta, tb, 2);
      check_product<fz::half>({128, 64}, {64, 40}, ta, tb, 3);
      check_product<fz::bfloat16>({64, 256}, {256, 48}, ta, tb, 4);
    }
  check_product<float>({1, 1}, {1, 1}, false, false, 5);
  check_product<float>({7, 3}, {3, 5}, true, false, 6);  // odd sizes: alignments below 16 bytes
}

TEST_CASE("matmul: batches, broadcast batches and 1-D operands follow NumPy", "[gpu][matmul]") {
  check_product<float>({4, 32, 24}, {4, 24, 16}, false, false, 11);      // one strided-batched call
  check_product<float>({3, 2, 16, 8}, {8, 12}, false, true, 12);        // b broadcast over every item
  check_product<fz::bfloat16>({2, 1, 16, 32}, {3, 32, 8}, true, false, 13);  // middle axis broadcast: outer loop
  check_product<double>({5, 8, 4}, {1, 4, 6}, false, false, 14);
  // 1-D: a row on the left, a column on the right, their axis dropped from the result
  const auto v = fz::asarray(test::random<float>(24, -1, 1, 15), {24});
  const auto hm = test::random<float>(24 * 10, -1, 1, 16);
  const auto m = fz::asarray(hm, {24, 10});
  const auto hv = v.to_host();
  const fz::Array<float> vm = fz::matmul(v, m);
  REQUIRE(vm.shape() == fz::Shape{10});
  const auto got = vm.to_host();
  for (int j = 0; j < 10; ++j) {
    double s = 0;
    for (int i = 0; i < 24; ++i) s += double(hv[static_cast<std::size_t>(i)]) * hm[static_cast<std::size_t>(i * 10 + j)];
    CHECK(std::abs(got[static_cast<std::size_t>(j)] - s) <= 1e-5);
  }
  const fz::Array<float> dot = fz::matmul(v, v);
  CHECK(dot.shape() == fz::Shape{});
  double s = 0;
  for (float x : hv) s += double(x) * x;
  CHECK(std::abs(dot.to_host()[0] - s) <= 1e-5);
  CHECK(fz::eval(fz::matmul(m.transpose(), v)).shape() == fz::Shape{10});
}

TEST_CASE("matmul: mixed dtypes promote, TF32 is opt-in, an empty inner axis gives zeros", "[gpu][matmul]") {
  const auto hx = test::random<float>(64 * 128, -1, 1, 21);
  const auto hw = test::random<fz::half>(128 * 32, -1, 1, 22);
  const auto x = fz::asarray(hx, {64, 128});
  const auto w = fz::asarray(hw, {128, 32});
  const auto y = fz::eval(fz::matmul(x, w));  // float32 result: w cast by one fused kernel first
  static_assert(std::is_same_v<decltype(y), const fz::Array<float>>);
  std::vector<double> rx(hx.begin(), hx.end()), rw, scale;
  for (fz::half h : hw) rw.push_back(test::as_double(h));
  fz::Shape shape;
  const auto want = reference(rx, {64, 128}, rw, {128, 32}, shape, &scale);
  CHECK(off(y, want, scale, product_tolerance(fz::DType::float32)) == 0);
  {
    const auto w32 = w.astype<float>();
    fz::TF32Products tf32;
    const fz::Array<float> t = fz::matmul(x, fz::Array<float>(w32));
    CHECK(off(t, want, scale, product_tolerance(fz::DType::float32, true)) == 0);
  }
  const fz::Array<float> z = fz::matmul(fz::zeros<float>({5, 0}), fz::zeros<float>({0, 7}) + 1.0f);
  CHECK(z.shape() == fz::Shape{5, 7});
  for (float v : z.to_host()) CHECK(v == 0.0f);
  CHECK(fz::eval(fz::matmul(fz::zeros<float>({0, 4}), fz::zeros<float>({4, 3}))).shape() == fz::Shape{0, 3});
}

TEST_CASE("matmul runs on the current stream and is captured into a replayable CUDA graph", "[gpu][matmul]") {
  const auto ha = test::random<fz::bfloat16>(256 * 128, -1, 1, 31), hb = test::random<fz::bfloat16>(128 * 64, -1, 1, 32);
  const auto a = fz::asarray(ha, {256, 128}), b = fz::asarray(hb, {128, 64});
  std::vector<double> ra, rb, scale;
  for (auto v : ha) ra.push_back(test::as_double(v));
  for (auto v : hb) rb.push_back(test::as_double(v));
  fz::Shape shape;
  const auto want = reference(ra, {256, 128}, rb, {128, 64}, shape, &scale);
  fz::Stream s(fz::StreamOptions{.non_blocking = true});
  fz::Array<fz::bfloat16> c;
  {
    fz::StreamScope on(s);
    c = fz::matmul(a, b);
  }
  s.synchronize();
  CHECK(off(c, want, scale, product_tolerance(fz::DType::bfloat16)) == 0);
  // captured: the first call plans and allocates outside the capture; the graph replays the product
  auto out = fz::empty<fz::bfloat16>({256, 64});
  fz::Graph g;
  {
    fz::StreamScope on(s);
    out = fz::matmul(a, b);  // warm: descriptors, heuristic and workspace exist before the capture
    s.synchronize();
    fz::copyto(out, fz::bfloat16(7.0f));
    s.begin_capture();
    fz::copyto(out, fz::matmul(a, b));
    g = s.end_capture();
  }
  s.synchronize();
  for (auto v : out.to_host()) REQUIRE(test::as_double(v) == 7.0);  // capturing ran nothing
  g.launch(s);
  s.synchronize();
  CHECK(off(out, want, scale, product_tolerance(fz::DType::bfloat16)) == 0);
}

TEST_CASE("the math around a product fuses: the product, then one kernel reading it once", "[gpu][matmul]") {
  const std::int64_t M = 96, K = 64, N = 80;
  const auto ha = test::random<float>(M * K, -1, 1, 41), hb = test::random<float>(K * N, -1, 1, 42);
  const auto hbias = test::random<float>(N, -1, 1, 43), hres = test::random<float>(M * N, -1, 1, 44);
  const auto a = fz::asarray(ha, {M, K}), b = fz::asarray(hb, {K, N});
  const auto bias = fz::asarray(hbias, {N}), residual = fz::asarray(hres, {M, N});
  std::vector<double> ra(ha.begin(), ha.end()), rb(hb.begin(), hb.end()), scale;
  fz::Shape shape;
  const auto p = reference(ra, {M, K}, rb, {K, N}, shape, &scale);
  auto epilogue = [&](const auto& prod) { return fz::maximum(prod + bias, 0.0f) * 0.5f + residual; };
  const auto info = fz::inspect(epilogue(fz::matmul(a, b)));
  REQUIRE(info.kernels == 2);
  CHECK_THAT(info.plan[0], Catch::Contains("cublasLtMatmul"));
  CHECK_THAT(info.plan[1], Catch::StartsWith("fz_"));
  fz::Array<float> y = epilogue(fz::matmul(a, b));
  const auto got = y.to_host();
  for (std::int64_t i = 0; i < M * N; ++i) {
    const double want = std::max(p[static_cast<std::size_t>(i)] + hbias[static_cast<std::size_t>(i % N)], 0.0) * 0.5 +
                        hres[static_cast<std::size_t>(i)];
    REQUIRE(std::abs(got[static_cast<std::size_t>(i)] - want) <= 2e-6 * scale[static_cast<std::size_t>(i)] + 1e-6);
  }
  // a row softmax of the product (a layer kernel after it), and a tie of two results (one kernel, two outputs)
  const auto m = fz::matmul(a, b);
  const auto row_max = fz::max(m, -1, true);
  fz::Array<float> soft = fz::exp(m - row_max) / fz::sum(fz::exp(m - row_max), -1, true);
  fz::Array<float> shifted = fz::zeros<float>({M, N}), relu = fz::zeros<float>({M, N});
  fz::tie(shifted, relu) = std::make_tuple(m + 1.0f, fz::maximum(m, 0.0f));
  const auto hsoft = soft.to_host(), hshift = shifted.to_host(), hrelu = relu.to_host();
  for (std::int64_t r = 0; r < M; ++r) {
    double top = -1e300, total = 0;
    for (std::int64_t c = 0; c < N; ++c) top = std::max(top, p[static_cast<std::size_t>(r * N + c)]);
    for (std::int64_t c = 0; c < N; ++c) total += std::exp(p[static_cast<std::size_t>(r * N + c)] - top);
    for (std::int64_t c = 0; c < N; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * N + c);
      REQUIRE(std::abs(hsoft[i] - std::exp(p[i] - top) / total) <= 1e-5 * (1 + scale[i]) * hsoft[i] + 1e-7);
      REQUIRE(std::abs(hshift[i] - (p[i] + 1)) <= 2e-6 * scale[i] + 1e-6);
      REQUIRE(std::abs(hrelu[i] - std::max(p[i], 0.0)) <= 2e-6 * scale[i] + 1e-6);
    }
  }
  // a reduction of the product: the product, then the reduction over it
  const float total = fz::eval(fz::sum(fz::matmul(a, b))).item();
  double want_total = 0;
  for (double v : p) want_total += v;
  CHECK(std::abs(total - want_total) <= 1e-3 * (1 + std::abs(want_total)));
  // scalar factors of the operands: cuBLASLt's alpha, no kernel; another expression operand: its kernel first
  const auto scaled = fz::eval(fz::matmul(a * 2.0f, -0.5f * b));
  CHECK(fz::inspect(fz::matmul(a * 2.0f, -0.5f * b)).kernels == 1);
  const auto plus_one = fz::eval(fz::matmul(a + 1.0f, b));
  CHECK(fz::inspect(fz::matmul(a + 1.0f, b)).kernels == 2);
  const auto hs = scaled.to_host(), hsh = plus_one.to_host();
  for (std::int64_t i = 0; i < M * N; ++i) {
    const std::size_t at = static_cast<std::size_t>(i);
    double plus = 0;  // (a + 1) @ b = a @ b + the column sums of b
    for (std::int64_t k = 0; k < K; ++k) plus += hb[static_cast<std::size_t>(k * N + i % N)];
    REQUIRE(std::abs(hs[at] + p[at]) <= 4e-6 * scale[at] + 1e-6);
    REQUIRE(std::abs(hsh[at] - (p[at] + plus)) <= 4e-6 * (scale[at] + K) + 1e-6);
  }
}

TEST_CASE("a product written into existing arrays: in place where it can, aside where it overlaps", "[gpu][matmul]") {
  const std::int64_t N = 48;
  const auto ha = test::random<double>(N * N, -1, 1, 51), hb = test::random<double>(N * N, -1, 1, 52);
  std::vector<double> scale;
  fz::Shape shape;
  const auto p = reference(ha, {N, N}, hb, {N, N}, shape, &scale);
  auto a = fz::asarray(ha, {N, N});
  const auto b = fz::asarray(hb, {N, N});
  auto out = fz::full<double>({N, N}, -7.0);
  const auto view = out;  // shares out's memory only if assignment writes in place: it does (same shape)
  const std::uint64_t where = out.data_ptr();
  out = fz::matmul(a, b);
  CHECK(out.data_ptr() == where);
  auto check = [&](const fz::Array<double>& got) {
    const auto h = got.to_host();
    for (std::size_t i = 0; i < h.size(); ++i) REQUIRE(std::abs(h[i] - p[i]) <= 1e-13 * scale[i] + 1e-15);
  };
  check(out);
  a = fz::matmul(a, b);  // reads a while it is written: computed aside, then copied in
  check(a);
  auto wide = fz::zeros<double>({N, 2 * N});
  auto left = wide.slice({fz::Slice{}, fz::Slice{0, N}});  // not C-ordered: aside, then copied in
  fz::copyto(left, fz::matmul(fz::asarray(ha, {N, N}), b));
  check(fz::eval(left + 0.0));
}

TEST_CASE("a product inside fz::Lazy runs in order with the statements around it, and a step replays it",
          "[gpu][matmul]") {
  const std::int64_t M = 64, K = 32, N = 48;
  const auto ha = test::random<float>(M * K, -1, 1, 61), hb = test::random<float>(K * N, -1, 1, 62);
  const auto hbias = test::random<float>(N, -1, 1, 64);
  auto a = fz::asarray(ha, {M, K});
  const auto b = fz::asarray(hb, {K, N});
  const auto bias = fz::asarray(hbias, {N});
  // `with_bias`: relu(2a @ b + bias) (cuBLASLt's epilogue); otherwise relu(2a @ b) + 1 (a kernel of fusion's)
  auto expect = [&](const std::vector<float>& av, const fz::Array<float>& y, bool with_bias) {
    std::vector<double> ra, rb(hb.begin(), hb.end()), scale;
    for (float v : av) ra.push_back(2.0 * v);
    fz::Shape shape;
    const auto p = reference(ra, {M, K}, rb, {K, N}, shape, &scale);
    const auto h = y.to_host();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < h.size(); ++i) {
      const double want = with_bias ? std::max(p[i] + hbias[i % N], 0.0) : std::max(p[i], 0.0) + 1;
      bad += !(std::abs(h[i] - want) <= 2e-6 * scale[i] + 1e-6);
    }
    return bad;
  };
  fz::Array<float> t = fz::zeros<float>({M, K}), y, z;
  {
    fz::Lazy region;
    t = a * 2.0f;  // recorded: the product must read it written
    y = fz::maximum(fz::matmul(t, b), 0.0f) + 1.0f;
  }
  CHECK(expect(ha, y, false) == 0);
  // A step records each product as a node of its graph (a captured cuBLASLt call) between its kernels.
  fz::Step step([&] {
    t = a * 2.0f;
    y = fz::maximum(fz::matmul(t, b), 0.0f) + 1.0f;
    z = fz::maximum(fz::matmul(t, b) + bias, 0.0f);  // one node: the product with its bias+ReLU epilogue
  });
  step();
  CHECK(step.kernels() == 4);  // 2a, the product, relu(..) + 1, the product with its epilogue
  CHECK(expect(ha, y, false) == 0);
  CHECK(expect(ha, z, true) == 0);
  // A replay reads what the arrays hold now (results poisoned first).
  const auto ha2 = test::random<float>(M * K, -1, 1, 63);
  fz::copyto(a, fz::asarray(ha2, {M, K}));
  y.fill(std::nanf(""));
  z.fill(std::nanf(""));
  step.replay();
  CHECK(expect(ha2, y, false) == 0);
  CHECK(expect(ha2, z, true) == 0);
  // Run again with `a` another array: the graph is updated in place, not rebuilt; on another stream.
  const auto ha3 = test::random<float>(M * K, -1, 1, 65);
  a = fz::asarray(ha3, {M, K});
  fz::Stream other;
  {
    fz::StreamScope on(other);  // (a blocking stream: ordered after the copy into `a`)
    step();
  }
  other.synchronize();
  CHECK(step.builds() == 1);
  CHECK(expect(ha3, y, false) == 0);
  CHECK(expect(ha3, z, true) == 0);
}

namespace {

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(0.797884560802865355 * (x + 0.044715 * x * x * x))); }

/// Every epilogue route after a product of dtype T against float64: each expression is checked to run as
/// one cuBLASLt call (or, where cuBLASLt has no such epilogue for T, falls back to the fused kernel), and
/// its values against the reference of the same math; then the same through fz::Unfused.
template <class T>
void check_epilogues(unsigned seed) {
  const std::int64_t M = 128, K = 64, N = 96;
  const auto ha = test::random<T>(M * K, -1, 1, seed), hb = test::random<T>(K * N, -1, 1, seed + 1);
  const auto hbias = test::random<T>(N, -1, 1, seed + 2), hres = test::random<T>(M * N, -1, 1, seed + 3);
  const auto a = fz::asarray(ha, {M, K}), b = fz::asarray(hb, {K, N}), bias = fz::asarray(hbias, {N});
  const auto res = fz::asarray(hres, {M, N});
  std::vector<double> ra, rb, scale;
  for (auto v : ha) ra.push_back(test::as_double(v));
  for (auto v : hb) rb.push_back(test::as_double(v));
  fz::Shape shape;
  const auto p = reference(ra, {M, K}, rb, {K, N}, shape, &scale);
  const double tol = product_tolerance(fz::dtype_of<T>);
  enum Act { none, relu, gelu };
  auto check = [&](const fz::Array<T>& got, bool with_bias, bool with_res, Act act, const char* what) {
    INFO(what << " in " << fz::dtype_name(fz::dtype_of<T>));
    const auto h = got.to_host();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < h.size(); ++i) {
      double want =
          p[i] + (with_bias ? test::as_double(hbias[i % N]) : 0.0) + (with_res ? test::as_double(hres[i]) : 0.0);
      want = act == relu ? std::max(want, 0.0) : act == gelu ? gelu_tanh(want) : want;
      // the product's bound, plus the result's own rounding and the activation's (GELU: 2 ulp of float32)
      bad += !(std::abs(test::as_double(h[i]) - want) <= tol * (scale[i] + 2) + 2.4e-7 * std::abs(want));
    }
    CHECK(bad == 0);
  };
  auto one_call = [&](const auto& e) {
    const fz::KernelInfo k = fz::inspect(e);
    INFO(k);
    CHECK(k.kernels == 1);
  };
  const auto m = fz::matmul(a, b);
  fz::Array<T> y = fz::empty<T>({M, N});
  auto run = [&](const auto& e, bool with_bias, bool with_res, Act act, const char* what) {
    one_call(e);
    y.fill(T(std::nanf("")));  // poisoned: every element must be written
    fz::copyto(y, e);
    check(y, with_bias, with_res, act, what);
  };
  run(m + bias, true, false, none, "bias");
  run(fz::maximum(m + bias, 0.0f), true, false, relu, "bias+relu");
  run(fz::maximum(m, 0.0f), false, false, relu, "relu");
  run(fz::gelu_tanh(m), false, false, gelu, "gelu_tanh");
  run(fz::gelu_tanh(m + bias), true, false, gelu, "bias+gelu_tanh");
  run(m + res, false, true, none, "residual");
  run(m + bias + res, true, true, none, "residual+bias");
  run(fz::maximum(res + m + bias, 0.0f), true, true, relu, "residual+bias+relu");
  run(fz::gelu_tanh(m + bias + res), true, true, gelu, "residual+bias+gelu_tanh");
  if constexpr (fz::is_16bit_float(fz::dtype_of<T>)) {
    // a float32 result of 16-bit operands: cuBLASLt converts as it stores (no rounding to T between)
    std::vector<float> hb32, hr32;
    for (auto v : hbias) hb32.push_back(float(test::as_double(v)));
    for (auto v : hres) hr32.push_back(float(test::as_double(v)));
    const auto bias32 = fz::asarray(hb32, {N}), res32 = fz::asarray(hr32, {M, N});
    auto wide = fz::empty<float>({M, N});
    auto check32 = [&](bool with_bias, bool with_res, Act act, const char* what) {
      INFO(what << " of " << fz::dtype_name(fz::dtype_of<T>) << " operands, written as float32");
      const auto h = wide.to_host();
      std::size_t bad = 0;
      for (std::size_t i = 0; i < h.size(); ++i) {
        double want = p[i] + (with_bias ? hb32[i % N] : 0.0) + (with_res ? hr32[i] : 0.0);
        want = act == gelu ? gelu_tanh(want) : want;
        bad += !(std::abs(h[i] - want) <= 2e-6 * (scale[i] + 2) + 2.4e-7 * std::abs(want));
      }
      CHECK(bad == 0);
    };
    auto run32 = [&](const auto& e, bool with_bias, bool with_res, Act act, const char* what) {
      one_call(e);
      wide.fill(std::nanf(""));
      fz::copyto(wide, e);
      check32(with_bias, with_res, act, what);
    };
    run32(m.template astype<float>(), false, false, none, "a cast");
    run32(m + bias32, true, false, none, "bias");
    run32(fz::gelu_tanh(m + bias32 + res32), true, true, gelu, "residual+bias+gelu_tanh");
  }
  // into an existing array (the residual itself: computed aside, then copied in)
  fz::Array<T> acc = fz::asarray(hres, {M, N});
  acc = m + bias + acc;
  check(acc, true, true, none, "acc = a @ b + bias + acc");
  // the same through fusion's own kernels (fz::Unfused runs every operation on its own) agrees
  fz::Array<T> unfused;
  {
    fz::Unfused baseline;
    unfused = fz::gelu_tanh(m + bias + res);
  }
  check(unfused, true, true, gelu, "unfused");
}

}  // namespace

TEST_CASE("cuBLASLt's epilogues give what the fused kernel would: bias, residual, ReLU, GELU", "[gpu][matmul]") {
  check_epilogues<fz::bfloat16>(71);
  check_epilogues<fz::half>(75);
  check_epilogues<float>(79);
  check_epilogues<double>(83);
}

TEST_CASE("a generator after a reduction of a product numbers the result's elements", "[gpu][matmul]") {
  // fusion-fuzz case 95000598: the plan refused the shapes; the same expression over the product's values computed
  // first is the reference (the generator's values depend on the element's index alone)
  const auto y = fz::asarray(std::vector<std::int64_t>{1, 3}, {1, 2, 1});
  const auto a = fz::asarray(std::vector<float>{-1.5f, 1.5f}, {2, 1});
  const auto b = fz::asarray(std::vector<float>{-3.0f, 2.0f, 0.0f, 3.0f, -1.5f}, {1, 5});
  const fz::Array<float> p = fz::matmul(a, b);
  const auto got = fz::eval(fz::sum(y != fz::matmul(a, b), {-3, -1}, false) + fz::random::uniform<double>(77ull));
  const auto want = fz::eval(fz::sum(y != p, {-3, -1}, false) + fz::random::uniform<double>(77ull));
  REQUIRE(got.shape() == fz::Shape{2});
  CHECK(got.to_host() == want.to_host());
}
