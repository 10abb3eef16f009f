// SPDX-License-Identifier: Apache-2.0
// User kernels on a GPU against host references: ElementwiseKernel (broadcasting, views, placeholders
// at two dtypes, raw parameters), ReductionKernel (full, axes, keepdims, 16-bit, options), RawKernel and
// RawModule (streams, shared memory, attributes), fz::function inside fused expressions, and errors.
#include <cmath>
#include <limits>

#include "support.hpp"

namespace {

template <class T> std::vector<double> doubles(const std::vector<T>& v) {
  std::vector<double> d;
  for (const T& x : v) d.push_back(test::as_double(x));
  return d;
}

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST_CASE("ElementwiseKernel::call takes its arrays as a list, of dtypes chosen at run time", "[gpu][user]") {
  fz::ElementwiseKernel scaled("T x, U y", "T z", "z = (T)((double)x * 0.5 - (double)y)", "scaled_list");
  const auto xh = test::random<double>(1000, -50, 50, 31);
  const auto yh = test::random<std::int32_t>(1000, -9, 9, 32);
  const fz::ArrayBase x = fz::asarray(xh), y = fz::asarray(yh);
  fz::ArrayBase z = fz::full<double>({1000}, static_cast<double>(kPoison));
  const fz::Outputs outs = scaled.call({x, y, z});
  CHECK(outs[0].data_ptr() == z.data_ptr());
  std::vector<double> want(1000);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = xh[i] * 0.5 - yh[i];
  CHECK(test::mismatches(fz::Array<double>(z).to_host(), want, fz::DType::float64) == 0);
  const fz::Array<double> fresh = scaled.call({x, y});  // the output allocated, T bound to float64
  CHECK(test::mismatches(fresh.to_host(), want, fz::DType::float64) == 0);
  // the output must have the placeholder's dtype, and nothing is written when it does not
  fz::ArrayBase wrong = fz::full<float>({1000}, 7.f);
  CHECK_THROWS_AS(scaled.call({x, y, wrong}), fz::TypeError);
  for (float v : fz::Array<float>(wrong).to_host()) REQUIRE(v == 7.f);
}

TEST_CASE("ElementwiseKernel computes what its code says, into given or new outputs", "[gpu][user]") {
  fz::ElementwiseKernel squared_diff("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "squared_diff");
  const std::size_t n = (1 << 20) + 7;
  const auto xh = test::random<float>(n, -5, 5, 11), yh = test::random<float>(n, -5, 5, 12);
  fz::Array<float> x = fz::asarray(xh), y = fz::asarray(yh);
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = (double(xh[i]) - yh[i]) * (double(xh[i]) - yh[i]);

  fz::Array<float> z = fz::full<float>({static_cast<std::int64_t>(n)}, kPoison);
  fz::reset_stats();
  fz::Outputs outs = squared_diff(x, y, z);
  CHECK(fz::stats().launches == 1);
  CHECK(fz::stats().bytes_read == 8 * n);
  CHECK(fz::stats().bytes_written == 4 * n);
  CHECK(test::mismatches(z.to_host(), want, fz::DType::float32) == 0);
  CHECK(outs.get<float>().data_ptr() == z.data_ptr());  // the output passed in is the one returned

  fz::Array<float> fresh = squared_diff(x, y);  // allocated
  CHECK(fresh.shape() == x.shape());
  CHECK(test::mismatches(fresh.to_host(), want, fz::DType::float32) == 0);
  CHECK_THROWS_AS(static_cast<fz::Array<double>>(squared_diff(x, y)), fz::TypeError);

  // broadcasting (a column against a row) and a transposed view
  const auto ch = test::random<float>(64, -3, 3, 13), rh = test::random<float>(50, -3, 3, 14);
  fz::Array<float> col = fz::asarray(ch, {64, 1}), row = fz::asarray(rh, {1, 50});
  fz::Array<float> grid = squared_diff(col, row);
  REQUIRE(grid.shape() == fz::Shape{64, 50});
  std::vector<double> gw;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 50; ++j) gw.push_back((double(ch[i]) - rh[j]) * (double(ch[i]) - rh[j]));
  CHECK(test::mismatches(grid.to_host(), gw, fz::DType::float32) == 0);
  fz::Array<float> gt = squared_diff(grid.transpose(), 1.5f);  // a scalar for a float32 parameter
  REQUIRE(gt.shape() == fz::Shape{50, 64});
  std::vector<double> tw;
  for (int j = 0; j < 50; ++j)
    for (int i = 0; i < 64; ++i) tw.push_back(std::pow(double(static_cast<float>(gw[i * 50 + j])) - 1.5, 2));
  CHECK(test::mismatches(gt.to_host(), tw, fz::DType::float32) == 0);

  // outputs can be read (z += ...), and an empty call launches nothing
  fz::ElementwiseKernel accumulate("T x", "T acc", "acc += 2 * x", "accumulate");
  fz::Array<double> acc = fz::full<double>({5}, 1.0);
  fz::Array<double> five = fz::arange<double>(5);
  accumulate(five, acc);
  CHECK(acc.to_host() == std::vector<double>{1, 3, 5, 7, 9});
  fz::reset_stats();
  fz::Array<float> none = squared_diff(fz::empty<float>({0}), fz::empty<float>({0}));
  CHECK(none.size() == 0);
  CHECK(fz::stats().launches == 0);
}

TEST_CASE("ElementwiseKernel placeholders at two dtypes: two kernels, both cached", "[gpu][user]") {
  fz::ElementwiseKernel axpy("T a, T x, T y", "T z", "z = a * x + y", "axpy_two_dtypes");
  const std::size_t n = 10001;
  const auto xf = test::random<float>(n, -2, 2, 21), yf = test::random<float>(n, -2, 2, 22);
  const auto xd = test::random<double>(n, -2, 2, 23), yd = test::random<double>(n, -2, 2, 24);
  const auto xh = test::random<fz::half>(n, -2, 2, 25), yh = test::random<fz::half>(n, -2, 2, 26);
  fz::Array<float> fx = fz::asarray(xf), fy = fz::asarray(yf);
  fz::Array<double> dx = fz::asarray(xd), dy = fz::asarray(yd);
  fz::Array<fz::half> hx = fz::asarray(xh), hy = fz::asarray(yh);
  auto want = [&](const auto& x, const auto& y, double a) {
    std::vector<double> w;
    for (std::size_t i = 0; i < n; ++i) w.push_back(a * test::as_double(x[i]) + test::as_double(y[i]));
    return w;
  };
  fz::reset_stats();
  fz::Array<float> rf = axpy(0.5, fx, fy);  // a double scalar adapts to T = float32
  fz::Array<double> rd = axpy(0.5, dx, dy);
  const auto first = fz::stats();
  CHECK(first.compiles + first.disk_hits == 2);  // two new kernels
  CHECK(test::mismatches(rf.to_host(), want(xf, yf, 0.5), fz::DType::float32) == 0);
  CHECK(test::mismatches(rd.to_host(), want(xd, yd, 0.5), fz::DType::float64) == 0);
  fz::reset_stats();
  rf = axpy(-1.0, fx, fy);
  rd = axpy(-1.0, dx, dy);
  CHECK(fz::stats().compiles + fz::stats().disk_hits == 0);  // both found in memory
  CHECK(fz::stats().launches == 2);
  CHECK(test::mismatches(rd.to_host(), want(xd, yd, -1.0), fz::DType::float64) == 0);
  CHECK(axpy.inspect(0.5, fx, fy).name != axpy.inspect(0.5, dx, dy).name);
  fz::Array<fz::half> rh = axpy(0.5, hx, hy);  // 16-bit: float arithmetic, one rounding
  CHECK(test::mismatches(rh.to_host(), want(xh, yh, 0.5), fz::DType::float16) == 0);
}

TEST_CASE("raw parameters index their arrays in C order, whatever the layout", "[gpu][user]") {
  fz::ElementwiseKernel gather("raw T table, int64 idx", "T out", "out = table[idx] + (T)table.size()", "gather_rows");
  const auto th = test::random<float>(40, -1, 1, 31);
  fz::Array<float> table = fz::asarray(th, {8, 5});
  const std::vector<std::int64_t> ih = {0, 39, 7, 12, 5, 5, 20};
  fz::Array<std::int64_t> idx = fz::asarray(ih);
  std::vector<double> want;
  for (auto k : ih) want.push_back(double(th[static_cast<std::size_t>(k)]) + 40);
  CHECK(test::mismatches(fz::Array<float>(gather(table, idx)).to_host(), want, fz::DType::float32) == 0);
  // the transposed table (5 x 8, strided): element k in its own C order
  std::vector<double> want_t;
  for (auto k : ih) want_t.push_back(double(th[static_cast<std::size_t>((k % 8) * 5 + k / 8)]) + 40);
  CHECK(test::mismatches(fz::Array<float>(gather(table.transpose(), idx)).to_host(), want_t, fz::DType::float32) == 0);

  // a raw output written at a computed index, _ind.size() as the element count, bfloat16 through float
  fz::ElementwiseKernel reverse("T x", "raw T y", "y[_ind.size() - 1 - i] = x * 2", "reverse_twice");
  const auto bh = test::random<fz::bfloat16>(1000, -4, 4, 32);
  fz::Array<fz::bfloat16> bx = fz::asarray(bh);
  fz::Array<fz::bfloat16> by = fz::full<fz::bfloat16>({1000}, fz::bfloat16(kPoison));
  reverse(bx, by);
  std::vector<double> want_r;
  for (std::size_t i = 0; i < 1000; ++i) want_r.push_back(2 * test::as_double(bh[999 - i]));
  CHECK(test::mismatches(by.to_host(), want_r, fz::DType::bfloat16) == 0);
}

TEST_CASE("ElementwiseKernel errors leave outputs untouched", "[gpu][user]") {
  fz::ElementwiseKernel sq("float32 x, float32 y", "float32 z", "z = x * y", "sq_errors");
  fz::Array<float> x = fz::asarray(std::vector<float>{1, 2, 3, 4});
  fz::Array<float> z = fz::full<float>({4}, kPoison);
  fz::Array<double> d = fz::asarray(std::vector<double>{1, 2, 3, 4});
  CHECK_THROWS_WITH(sq(x, d, z), Catch::Contains("the input 'y' is float32"));
  CHECK_THROWS_WITH(sq(x), Catch::Contains("takes 2 inputs"));
  CHECK_THROWS_AS(sq(x, fz::empty<float>({3}), z), fz::ShapeError);
  CHECK_THROWS_AS(sq(x, x, fz::empty<float>({2})), fz::ShapeError);
  fz::ElementwiseKernel broken("float32 x", "float32 z", "z = x +* 1", "broken_gpu");
  CHECK_THROWS_AS(broken(x, z), fz::CompileError);
  for (float v : z.to_host()) CHECK(std::isnan(v));
}

TEST_CASE("ReductionKernel matches host references over every axis choice", "[gpu][user]") {
  fz::ReductionKernel l2norm("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm");
  const std::size_t n = (1 << 22) + 5;
  const auto vh = test::random<float>(n, -1, 1, 41);
  fz::Array<float> v = fz::asarray(vh);
  double ss = 0;
  for (float e : vh) ss += double(e) * e;
  fz::Array<float> r = l2norm(v);
  CHECK(r.ndim() == 0);
  CHECK(test::close(r.item(), std::sqrt(ss), test::tolerance(fz::DType::float32)));

  const int R = 300, C = 517;
  const auto mh = test::random<double>(R * C, -2, 2, 42);
  fz::Array<double> m = fz::asarray(mh, {R, C});
  std::vector<double> rows(R, 0), cols(C, 0);
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) rows[i] += mh[i * C + j] * mh[i * C + j], cols[j] += mh[i * C + j] * mh[i * C + j];
  for (double& e : rows) e = std::sqrt(e);
  for (double& e : cols) e = std::sqrt(e);
  fz::Array<double> rr = l2norm(m, fz::Axes(1));
  CHECK(rr.shape() == fz::Shape{R});
  CHECK(test::mismatches(rr.to_host(), rows, fz::DType::float64) == 0);
  fz::Array<double> cc = l2norm(m, fz::Axes(0), fz::keepdims);
  CHECK(cc.shape() == fz::Shape{1, C});
  CHECK(test::mismatches(cc.to_host(), cols, fz::DType::float64) == 0);
  fz::Array<double> tt = l2norm(m.transpose(), fz::Axes(-1));  // strided: the columns again
  CHECK(test::mismatches(tt.to_host(), cols, fz::DType::float64) == 0);
  fz::Array<double> into = fz::full<double>({R}, std::nan(""));
  l2norm(m, into, fz::Axes(1));  // an output passed in, before the axes
  CHECK(test::mismatches(into.to_host(), rows, fz::DType::float64) == 0);
  CHECK_THROWS_AS(l2norm(m, fz::Axes(2)), fz::ShapeError);
  CHECK_THROWS_AS(l2norm(m, fz::empty<double>({C}), fz::Axes(1)), fz::ShapeError);

  // an empty extent gives the identity; 16-bit input reduced in float32 with a scalar, loop_prep and
  // after_loop around post_map
  fz::Array<float> empty_rows = l2norm(fz::empty<float>({3, 0}), fz::Axes(1));
  CHECK(empty_rows.to_host() == std::vector<float>{0, 0, 0});
  // CuPy's _in_ind / _out_ind sizes, loop_prep and after_loop around post_map, a scalar input, and
  // 16-bit input reduced in float32
  fz::ReductionKernel mean_abs(
      "T x, float32 shift", "float32 y", "fabsf((float)x) + shift", "a + b",
      "y = a / (_in_ind.size() / _out_ind.size()) + offset", "0", "mean_abs",
      {.reduce_type = "float32", .loop_prep = "float offset = 0.25f", .after_loop = "offset *= 2"});
  const auto hh = test::random<fz::half>(64 * 1000, -3, 3, 43);
  fz::Array<fz::half> h = fz::asarray(hh, {64, 1000});
  std::vector<double> want(64, 0);
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 1000; ++j) want[i] += std::abs(test::as_double(hh[i * 1000 + j])) + 1.0;
    want[i] = want[i] / 1000 + 0.5;
  }
  fz::Array<float> ma = mean_abs(h, 1, fz::Axes(1));
  CHECK(test::mismatches(ma.to_host(), want, fz::DType::float32) == 0);
}

TEST_CASE("ReductionKernel placeholders at two dtypes and errors", "[gpu][user]") {
  fz::ReductionKernel maxabs("T x", "T y", "x < 0 ? -x : x", "a > b ? a : b", "y = a", "0", "maxabs_two");
  fz::Array<std::int32_t> i = fz::asarray(std::vector<std::int32_t>{3, -9, 4, 1});
  fz::Array<double> d = fz::asarray(std::vector<double>{-0.5, 0.25, -7.5});
  fz::reset_stats();
  CHECK(fz::Array<std::int32_t>(maxabs(i)).item() == 9);
  CHECK(fz::Array<double>(maxabs(d)).item() == 7.5);
  CHECK(fz::stats().compiles + fz::stats().disk_hits == 2);
  fz::reset_stats();
  CHECK(fz::Array<std::int32_t>(maxabs(i)).item() == 9);
  CHECK(fz::stats().compiles + fz::stats().disk_hits == 0);
  fz::Array<double> out = fz::full<double>({}, 42.0);
  CHECK_THROWS_AS(maxabs(i, out), fz::TypeError);  // T is int32 from x, float64 from y
  CHECK(out.item() == 42.0);
  fz::ReductionKernel broken("T x", "T y", "x", "a +* b", "y = a", "0", "broken_red_gpu");
  CHECK_THROWS_AS(broken(d), fz::CompileError);
}

TEST_CASE("RawKernel and RawModule launch user CUDA with arrays, values, streams and shared memory", "[gpu][user]") {
  fz::RawKernel square(R"(extern "C" __global__ void elementwise_square(const float* x, float* y, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] * x[i]; })",
                       "elementwise_square");
  const unsigned n = 300001;
  const auto xh = test::random<float>(n, -3, 3, 51);
  fz::Array<float> x = fz::asarray(xh);
  fz::Array<float> y = fz::full<float>({n}, kPoison);
  fz::reset_stats();
  square({128}, {1024}, x, y, n);
  CHECK(fz::stats().launches == 1);
  std::vector<double> want;
  for (float v : xh) want.push_back(double(v) * v);
  CHECK(test::mismatches(y.to_host(), want, fz::DType::float32) == 0);

  const fz::KernelAttributes at = square.attributes();
  CHECK(at.registers > 0);
  CHECK(at.max_threads_per_block >= 256);
  CHECK(at.local_bytes >= 0);
  CHECK(at.binary_version >= 90);

  // dynamic shared memory beyond 48 KiB, on an explicit stream: reverse each block of 16384 floats
  fz::RawModule module(R"(
extern "C" __global__ void reverse_blocks(const float* x, float* y, int per_block) {
  extern __shared__ float tile[];
  const float* in = x + (long long)blockIdx.x * per_block;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) tile[i] = in[i];
  __syncthreads();
  float* out = y + (long long)blockIdx.x * per_block;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) out[i] = tile[per_block - 1 - i];
}
extern "C" __global__ void add_value(float* y, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += v;
})");
  fz::RawKernel rev = module.get_function("reverse_blocks"), add = module.get_function("add_value");
  const int per = 16384, blocks = 8;
  const auto bh = test::random<float>(per * blocks, -1, 1, 52);
  fz::Array<float> b = fz::asarray(bh);
  fz::Array<float> r = fz::full<float>({per * blocks}, kPoison);
  rev.set_max_dynamic_shared_memory(per * 4);
  fz::Stream s;
  rev.launch({blocks}, {256}, {.shared_mem = per * 4, .stream = s}, b, r, per);
  add.launch({(per * blocks + 255) / 256}, {256}, {.stream = s}, r, 1.0f, per * blocks);
  s.synchronize();
  std::vector<double> want_r;
  for (int k = 0; k < blocks; ++k)
    for (int i = 0; i < per; ++i) want_r.push_back(double(bh[k * per + per - 1 - i]) + 1);
  CHECK(test::mismatches(r.to_host(), want_r, fz::DType::float32) == 0);

  // a kernel the module does not have; an empty grid
  CHECK_THROWS_WITH(module.get_function("missing").attributes(), Catch::Contains("no kernel named 'missing'") &&
                                                                     Catch::Contains("reverse_blocks") &&
                                                                     Catch::Contains("add_value"));
  CHECK_THROWS_AS(square({0}, {128}, x, y, n), fz::Error);
  fz::RawKernel broken("extern \"C\" __global__ void k(float* x) { x[0] = undefined_name; }", "k");
  CHECK_THROWS_AS(broken({1}, {1}, x), fz::CompileError);
}

TEST_CASE("fz::function runs inside fused expressions and reductions", "[gpu][user][function]") {
  auto sq_r = fz::function<float(float, float)>("sq_r", "(float x, float y) { return x * x + y * y; }");
  const std::size_t n = (1 << 20) + 1;
  const auto xh = test::random<float>(n, -2, 2, 61), yh = test::random<float>(n, -2, 2, 62);
  fz::Array<float> x = fz::asarray(xh), y = fz::asarray(yh);
  std::vector<double> want(n);
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double q = double(xh[i]) * xh[i] + double(yh[i]) * yh[i];
    want[i] = std::sqrt(q) + 1;
    total += q;
  }
  fz::Array<float> r2 = fz::full<float>({static_cast<std::int64_t>(n)}, kPoison);
  fz::reset_stats();
  r2 = fz::sqrt(sq_r(x, y)) + 1.f;
  CHECK(fz::stats().launches == 1);
  CHECK(test::mismatches(r2.to_host(), want, fz::DType::float32) == 0);
  {
    fz::Unfused scope;
    fz::reset_stats();
    fz::Array<float> eager = fz::sqrt(sq_r(x, y)) + 1.f;
    CHECK(fz::stats().launches == 3);  // the call, sqrt, add
    CHECK(test::mismatches(eager.to_host(), want, fz::DType::float32) == 0);
  }
  fz::reset_stats();
  fz::Array<float> s = fz::sum(sq_r(x, y));
  CHECK(fz::stats().launches == 1);
  CHECK(test::close(s.item(), total, {1e-5, 0}));

  auto clampi = fz::function<std::int32_t(std::int32_t, std::int32_t, std::int32_t)>(
      "clampi", "(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }");
  fz::Array<std::int64_t> i = fz::arange<std::int64_t>(20) - 5;
  fz::Array<std::int64_t> c = clampi(i, 0, 10) * 2;
  std::vector<std::int64_t> wc;
  for (int k = -5; k < 15; ++k) wc.push_back(2 * std::clamp(k, 0, 10));
  CHECK(c.to_host() == wc);
}

TEST_CASE("ElementwiseKernel vectors: tails, outputs read and written, 16-bit, mixed widths, misaligned views",
          "[gpu][user]") {
  const std::size_t n = 1001;  // 250 vectors of 4 and a tail of one
  const auto hx = test::random<float>(n, -5, 5, 61), hy = test::random<float>(n, -5, 5, 62);
  auto x = fz::asarray(hx), y = fz::asarray(hy);
  fz::ElementwiseKernel diff("float32 x, float32 y", "float32 z", "z = x - y", "vec_diff");
  REQUIRE_THAT(diff.inspect(x, y).variant, Catch::Contains("4-wide vectors"));
  const auto d = fz::Array<float>(diff(x, y)).to_host();
  for (std::size_t i = 0; i < n; ++i) CHECK(d[i] == hx[i] - hy[i]);

  // an output the code reads: its old values come in through the vectors
  fz::ElementwiseKernel acc("T x", "T z", "z += x", "vec_acc");
  const auto hh = test::random<fz::half>(n, -2, 2, 63);
  auto h = fz::asarray(hh);
  fz::Array<fz::half> total = fz::full<fz::half>({static_cast<std::int64_t>(n)}, fz::half(1.0f));
  acc(h, total);
  const auto t = total.to_host();
  for (std::size_t i = 0; i < n; ++i)
    CHECK(static_cast<float>(t[i]) == static_cast<float>(fz::half(1.0f + static_cast<float>(hh[i]))));

  // float32 in, float64 out: 2-wide vectors for both; a broadcast scale
  fz::ElementwiseKernel mixed("float32 x, float64 s", "float64 z", "z = x * s", "vec_mixed");
  auto s = fz::asarray(std::vector<double>{0.5});
  const auto m = fz::Array<double>(mixed(x, s)).to_host();
  for (std::size_t i = 0; i < n; ++i) CHECK(m[i] == static_cast<double>(hx[i]) * 0.5);

  // a view starting one element in: not aligned for vectors, one element at a time
  auto shifted = x.slice({fz::Slice{1, {}}});
  auto shifted_y = y.slice({fz::Slice{1, {}}});
  CHECK_THAT(diff.inspect(shifted, shifted_y).variant, !Catch::Contains("vectors"));
  const auto ds = fz::Array<float>(diff(shifted, shifted_y)).to_host();
  for (std::size_t i = 0; i + 1 < n; ++i) CHECK(ds[i] == hx[i + 1] - hy[i + 1]);
}
