// SPDX-License-Identifier: Apache-2.0
// Scans on the GPU against a float64 host reference: cumsum, cumprod, cummax, cummin, logcumsumexp along
// every axis of 1- to 3-D shapes (short rows, rows of many tiles, one long row in partitions over blocks in
// one pass), inclusive and exclusive, forward and reversed, every dtype class, views as inputs, a fused
// prologue (one launch), an epilogue (a second kernel), empty extents, in place, bit-identical results run
// to run, and the one-pass scan's shared state across sizes, policies and fz::Step replays.
#include <limits>

#include "schedule/tuning.hpp"
#include "support.hpp"

namespace {

using Op = fz::ir::Op;

double combine(Op op, double a, double b) {
  switch (op) {
    case Op::cumsum: return a + b;
    case Op::cumprod: return a * b;
    case Op::cummax: return (std::isnan(a) || std::isnan(b)) ? std::nan("") : std::max(a, b);
    case Op::cummin: return (std::isnan(a) || std::isnan(b)) ? std::nan("") : std::min(a, b);
    default: {  // logcumsumexp
      if (std::isnan(a) || std::isnan(b)) return std::nan("");
      const double hi = std::max(a, b), lo = std::min(a, b);
      return hi == -INFINITY ? hi : hi + std::log1p(std::exp(lo - hi));
    }
  }
}
double identity(Op op) {
  switch (op) {
    case Op::cumsum: return 0;
    case Op::cumprod: return 1;
    case Op::cummax: return -INFINITY;
    case Op::cummin: return INFINITY;
    default: return -INFINITY;
  }
}

/// The scan of `x` (C order, shape `s`) along `axis`, and per element the sum of |terms| it combined (the
/// scale of a sum's rounding error).
std::vector<double> scan_ref(Op op, const std::vector<double>& x, const fz::Shape& s, int axis, fz::ScanOptions o,
                             std::vector<double>* scale) {
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.size(); ++d) inner *= s[d];
  const std::int64_t n = s[axis];
  std::vector<double> y(x.size());
  if (scale) scale->assign(x.size(), 0);
  for (std::int64_t a = 0; a < outer; ++a)
    for (std::int64_t b = 0; b < inner; ++b) {
      double acc = identity(op), mag = 0;
      for (std::int64_t t = 0; t < n; ++t) {
        const std::int64_t j = o.reverse ? n - 1 - t : t;
        const auto at = static_cast<std::size_t>((a * n + j) * inner + b);
        if (o.exclusive) y[at] = acc;
        acc = combine(op, acc, x[at]);
        // (a log-sum-exp's rounding grows with the magnitudes of its terms' logarithms, not of the terms)
        if (op == Op::logcumsumexp) mag = std::max(mag, 1 + std::abs(x[at]));
        else mag += std::abs(x[at]);
        if (!o.exclusive) y[at] = acc;
        if (scale) (*scale)[at] = mag;
      }
    }
  return y;
}

template <Op OP, class A> auto scan_expr(const A& a, int axis, fz::ScanOptions o) {
  if constexpr (OP == Op::cumsum) return fz::cumsum(a, axis, o);
  else if constexpr (OP == Op::cumprod) return fz::cumprod(a, axis, o);
  else if constexpr (OP == Op::cummax) return fz::cummax(a, axis, o);
  else if constexpr (OP == Op::cummin) return fz::cummin(a, axis, o);
  else return fz::logcumsumexp(a, axis, o);
}

template <class T> std::vector<double> doubles(const std::vector<T>& v) {
  std::vector<double> r;
  for (const T& x : v) r.push_back(test::as_double(x));
  return r;
}

/// Elements of `got` off the reference: exact for integers and for max/min; sums within a bound that grows
/// with the magnitude combined and the number of tiles carried; 16-bit results within their rounding.
template <class R> std::size_t off(Op op, const std::vector<R>& got, const std::vector<double>& want,
                                   const std::vector<double>& scale, std::int64_t n) {
  const fz::DType d = fz::dtype_of<R>;
  const double eps = fz::is_floating(d) ? fz::dtype_info(d == fz::DType::float64 ? d : fz::DType::float32).epsilon : 0;
  const double store = d == fz::DType::float16 ? 0x1p-10 : d == fz::DType::bfloat16 ? 0x1p-7 : 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = test::as_double(got[i]), w = want[i];
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else if (!fz::is_floating(d) || op == Op::cummax || op == Op::cummin) ok = g == w || (store > 0 && std::abs(g - w) <= store * std::abs(w));
    else ok = std::abs(g - w) <= (64.0 + static_cast<double>(n) / 2048) * eps * (scale[i] + std::abs(w)) + store * std::abs(w) + 1e-300;
    if (!ok && bad++ < 5) UNSCOPED_INFO("element " << i << ": got " << g << ", want " << w);
  }
  return bad;
}

template <Op OP, class T> void check_scan(const fz::Shape& s, int axis, fz::ScanOptions o, double lo, double hi,
                                          unsigned seed) {
  INFO(fz::ir::op_name(OP) << " of " << fz::dtype_name(fz::dtype_of<T>) << " " << fz::to_string(s) << " axis "
                           << axis << (o.exclusive ? " exclusive" : "") << (o.reverse ? " reversed" : ""));
  const auto hx = test::random<T>(static_cast<std::size_t>(fz::numel(s)), lo, hi, seed);
  const auto x = fz::asarray(hx, s);
  std::vector<double> scale;
  const int a = axis < 0 ? axis + s.size() : axis;  // (the reference counts axes from 0)
  std::vector<double> want = scan_ref(OP, doubles(hx), s, a, o, &scale);
  using R = typename decltype(fz::eval(scan_expr<OP>(x, axis, o)))::value_type;
  // an exclusive scan's first element is the identity: for integers the dtype's extreme, not an infinity
  if constexpr (std::is_integral_v<R>)
    for (double& w : want)
      if (std::isinf(w)) w = w > 0 ? static_cast<double>(std::numeric_limits<R>::max()) : static_cast<double>(std::numeric_limits<R>::lowest());
  fz::Array<R> out = fz::full<R>(s, R(7.f));  // poisoned
  fz::reset_stats();
  out = scan_expr<OP>(x, axis, o);
  CHECK(fz::stats().launches <= 2);  // one kernel, two for a few long columns
  CHECK(off(OP, out.to_host(), want, scale, s[a]) == 0);
}

}  // namespace

TEST_CASE("scans: every op along every axis, inclusive and exclusive, forward and reversed", "[gpu][scans]") {
  unsigned seed = 1;
  for (const fz::ScanOptions o : {fz::ScanOptions{}, fz::ScanOptions{true, false}, fz::ScanOptions{false, true},
                                  fz::ScanOptions{true, true}})
    for (const fz::Shape& s : {fz::Shape{5, 300, 7}, fz::Shape{3, 5000}}) {
      for (int axis = 0; axis < s.size(); ++axis) {
        check_scan<Op::cumsum, float>(s, axis, o, -1, 1, seed++);
        check_scan<Op::cummax, float>(s, axis, o, -100, 100, seed++);
        check_scan<Op::cumsum, std::int32_t>(s, axis, o, -1000, 1000, seed++);
      }
      check_scan<Op::cumprod, double>(s, -1, o, 0.99, 1.01, seed++);
      check_scan<Op::cummin, std::int8_t>(s, 0, o, -128, 127, seed++);
      check_scan<Op::logcumsumexp, float>(s, -1, o, -20, 20, seed++);
    }
}

TEST_CASE("scans: every dtype class; one long row in partitions, one pass", "[gpu][scans]") {
  check_scan<Op::cumsum, double>({70000}, 0, {}, -1, 1, 11);
  check_scan<Op::cumsum, fz::half>({3000}, 0, {}, -1, 1, 12);
  check_scan<Op::cumsum, fz::bfloat16>({4, 3000}, 1, {}, -1, 1, 13);
  check_scan<Op::cumsum, bool>({5, 777}, 1, {}, 0, 1, 14);
  check_scan<Op::cumsum, std::uint8_t>({5, 777}, 1, {true, false}, 0, 255, 15);
  check_scan<Op::cumprod, std::int64_t>({6, 40}, 1, {}, -3, 3, 16);
  check_scan<Op::logcumsumexp, double>({2, 9000}, 1, {false, true}, -50, 50, 17);
  // one row of 2^22: 1024 partitions over blocks, each carry from the tree of published sums
  check_scan<Op::cumsum, float>({1 << 22}, 0, {}, -1, 1, 18);
  check_scan<Op::cumsum, std::int64_t>({1 << 22}, 0, {true, true}, -1000, 1000, 19);
  check_scan<Op::cummax, float>({2, 1 << 21}, 1, {false, true}, -1e6, 1e6, 20);
  check_scan<Op::logcumsumexp, float>({3, 100000}, 1, {true, false}, -30, 30, 21);
  check_scan<Op::cumprod, fz::bfloat16>({7, 9000}, 1, {}, 0.98, 1.02, 22);
  check_scan<Op::cumsum, std::uint8_t>({1 << 20}, 0, {true, true}, 0, 255, 23);  // uint64 partitions of 2048
  const auto info = fz::inspect(fz::cumsum(fz::placeholder<float>({1 << 22}), 0));
  CHECK(info.kernels == 1);
  CHECK_THAT(info.variant, Catch::Contains("in one pass"));
}

TEST_CASE("scans along a non-contiguous axis of many rows: a block per strip of 32 rows, one pass", "[gpu][scans]") {
  // 32 rows per SM or more (H100: 4224): strips, the last one partial; axes of whole and partial tiles of 128
  auto& t = fz::detail::tuning();
  const fz::detail::Tuning saved = t;
  // (the policies accumulate: strips loading each next tile ahead, strips without, a thread per row)
  for (const char* policy : {"scan_strips=1", "scan_ahead=0", "scan_strips=0"}) {
    fz::detail::set_tuning(policy);
    INFO(policy);
    const auto layout = fz::inspect(fz::cumsum(fz::placeholder<float>({300, 5000}), 0)).variant;
    CHECK((layout.find("a block per 32 neighbouring rows") != std::string::npos) == (std::string(policy) != "scan_strips=0"));
    CHECK((layout.find("next tile loaded before") != std::string::npos) == (std::string(policy) == "scan_strips=1"));
    check_scan<Op::cumsum, float>({300, 5000}, 0, {}, -1, 1, 60);
    check_scan<Op::cumsum, std::int64_t>({130, 5001}, 0, {true, true}, -1000, 1000, 61);
    check_scan<Op::cummax, std::int8_t>({77, 50, 120}, 0, {false, true}, -128, 127, 62);  // rows 50 x 120
    check_scan<Op::cumsum, double>({4, 129, 2000}, 1, {true, false}, -1, 1, 63);        // rows 4 x 2000 (kept rank 2)
    check_scan<Op::logcumsumexp, float>({200, 4500}, 0, {}, -20, 20, 64);
    check_scan<Op::cumsum, fz::bfloat16>({150, 5000}, 0, {}, -1, 1, 65);
    check_scan<Op::cumprod, float>({40, 6000}, 0, {}, 0.98, 1.02, 66);
  }
  t = saved;
  const auto info = fz::inspect(fz::cumsum(fz::placeholder<float>({300, 5000}), 0));
  CHECK(info.kernels == 1);
  CHECK_THAT(info.variant, Catch::Contains("a block per 32 neighbouring rows"));
  // broadcast operands (stride 0 along the axis, or along the rows) feed the strips
  const std::int64_t R = 257, C = 4800;
  const auto ha = test::random<float>(R, -1, 1, 67), hb = test::random<float>(C, -1, 1, 68);
  std::vector<double> want(static_cast<std::size_t>(R * C)), scale(want.size());
  for (std::int64_t c = 0; c < C; ++c) {
    double acc = 0, mag = 0;
    for (std::int64_t r = 0; r < R; ++r) {
      const double term = static_cast<double>(ha[static_cast<std::size_t>(r)]) * hb[static_cast<std::size_t>(c)];
      want[static_cast<std::size_t>(r * C + c)] = acc += term;
      scale[static_cast<std::size_t>(r * C + c)] = mag += std::abs(term);
    }
  }
  fz::Array<float> out = fz::full<float>({R, C}, 7.f);  // poisoned
  fz::reset_stats();
  out = fz::cumsum(fz::asarray(ha, {R, 1}) * fz::asarray(hb, {1, C}), 0);
  CHECK(fz::stats().launches == 1);
  const std::vector<float> got = out.to_host();
  CHECK(off(Op::cumsum, got, want, scale, R) == 0);
}

TEST_CASE("scans in one pass: the stream's state across sizes and policies, fz::Step replays", "[gpu][scans]") {
  // Each launch leaves the state ready for the next: small, large (the state grows), small again, many times.
  for (int run = 0; run < 3; ++run)
    for (const fz::Shape& s : {fz::Shape{9000}, fz::Shape{1 << 21}, fz::Shape{5, 70000}})
      check_scan<Op::cumsum, float>(s, -1, {}, -1, 1, 30 + static_cast<unsigned>(run));
  // Every policy gives the reference: one pass for many rows too, and a block per row for one long row.
  auto& t = fz::detail::tuning();
  const fz::detail::Tuning saved = t;
  for (const char* policy : {"scan_lookback=1", "scan_lookback=2"}) {
    fz::detail::set_tuning(policy);
    INFO(policy);
    check_scan<Op::cumsum, float>({1000, 9000}, 1, {}, -1, 1, 40);
    check_scan<Op::cummin, std::int32_t>({3, 50000}, 1, {true, true}, -1000000, 1000000, 41);
  }
  t = saved;
  // A warp of its own looking back while the others load the next partition (the default: two tiles in
  // dynamic shared memory), with and without the prefetch, tiles of 4096; and warp 0 looking back between
  // barriers: whole and partial last partitions, every dtype class.
  for (const char* policy : {"scan_prefetch=4", "scan_prefetch=0", "scan_items=16", "scan_pipelined=0"}) {
    t = saved;
    fz::detail::set_tuning(policy);
    INFO(policy);
    const bool piped = fz::inspect(fz::cumsum(fz::placeholder<float>({1 << 22}), 0)).variant.find(
                           "a warp looking back while the others load") != std::string::npos;
    CHECK(piped == (std::string(policy) != "scan_pipelined=0"));
    check_scan<Op::cumsum, float>({1 << 22}, 0, {}, -1, 1, 43);
    check_scan<Op::cumsum, float>({(1 << 20) + 12345}, 0, {true, false}, -1, 1, 44);
    check_scan<Op::cumsum, std::int64_t>({1 << 21}, 0, {true, true}, -1000, 1000, 45);
    check_scan<Op::cummax, float>({2, 1 << 20}, 1, {false, true}, -1e6, 1e6, 46);
    check_scan<Op::cumprod, fz::bfloat16>({7, 90000}, 1, {}, 0.98, 1.02, 47);
    check_scan<Op::cumsum, std::uint8_t>({1 << 20}, 0, {true, true}, 0, 255, 48);
    // logcumsumexp in one pass likewise
    const bool lse_piped = fz::inspect(fz::logcumsumexp(fz::placeholder<float>({1 << 22}), 0)).variant.find(
                               "a warp looking back") != std::string::npos;
    CHECK(lse_piped == piped);
    check_scan<Op::logcumsumexp, float>({3, 100000}, 1, {true, false}, -30, 30, 49);
    check_scan<Op::logcumsumexp, float>({1 << 21}, 0, {false, true}, -30, 30, 50);
  }
  t = saved;
  // A step's graph has a state of its own: replays between direct scans on the stream stay exact.
  const auto hx = test::random<float>(1 << 21, -1, 1, 42);
  const fz::Array<float> x = fz::asarray(hx, {1 << 21});
  fz::Array<float> in_step = fz::zeros<float>({1 << 21});
  fz::Step step([&] { in_step = fz::cumsum(x * 2.f, 0); });
  const std::vector<float> direct = fz::eval(fz::cumsum(x * 2.f, 0)).to_host();
  for (int run = 0; run < 3; ++run) {
    in_step = fz::full<float>({1 << 21}, 7.f);  // poisoned
    step();
    fz::Array<float> between = fz::cumsum(x * 2.f, 0);
    CHECK(in_step.to_host() == direct);  // the same partitions, the same order: the same bits
    CHECK(between.to_host() == direct);
  }
}

TEST_CASE("scans: NaN propagates through cummax; -inf through logcumsumexp; a sum of -0 stays -0", "[gpu][scans]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const auto x = fz::asarray(std::vector<float>{1, 3, nan, 5, 2}, {5});
  CHECK(test::mismatches(fz::eval(fz::cummax(x, 0)).to_host(), {1, 3, NAN, NAN, NAN}, fz::DType::float32) == 0);
  const auto ninf = fz::asarray(std::vector<float>{-inf, -inf, 0, -inf}, {4});
  CHECK(test::mismatches(fz::eval(fz::logcumsumexp(ninf, 0)).to_host(), {-INFINITY, -INFINITY, 0, 0},
                         fz::DType::float32) == 0);
  // Long rows with -inf runs, +inf and NaN placed among ordinary values: some threads' elements are all
  // -inf, some carries are +inf or NaN, some threads' elements spread wider than float's exponent (the
  // exp-domain pass falls back to the exact step there).
  for (bool exclusive : {false, true}) {
    const std::int64_t rows = 6, n = 20000;
    std::vector<float> h = test::random<float>(static_cast<std::size_t>(rows * n), -40, 40, 50);
    for (std::int64_t j = 0; j < 3000; ++j) h[static_cast<std::size_t>(j)] = -inf;  // row 0 starts with -inf
    h[static_cast<std::size_t>(n + 5000)] = inf;                                      // row 1: +inf midway
    h[static_cast<std::size_t>(2 * n + 7)] = nan;                                     // row 2: NaN early
    for (std::int64_t j = 100; j < n; j += 37) h[static_cast<std::size_t>(3 * n + j)] = -inf;  // row 3: sprinkled
    h[static_cast<std::size_t>(4 * n + n - 1)] = inf;                                 // row 4: +inf last
    for (std::int64_t j = 0; j < 5000; j += 8) h[static_cast<std::size_t>(5 * n + j)] = j % 16 ? -120.f : -250.f;
    // row 5: elements far below their neighbours (exp(-250) is 0 in float): their own results stay theirs
    std::vector<double> scale;
    const std::vector<double> want = scan_ref(Op::logcumsumexp, doubles(h), {rows, n}, 1, {exclusive, false}, &scale);
    fz::Array<float> got = fz::full<float>({rows, n}, 7.f);
    got = fz::logcumsumexp(fz::asarray(h, {rows, n}), 1, {exclusive, false});
    INFO((exclusive ? "exclusive" : "inclusive"));
    CHECK(off(Op::logcumsumexp, got.to_host(), want, scale, n) == 0);
  }
  // The same in one pass over rows of 74 partitions (the look-back folds -inf partitions, an +inf and a NaN in
  // the tree's nodes), pipelined and with warp 0 looking back between barriers.
  auto& t = fz::detail::tuning();
  const fz::detail::Tuning saved = t;
  for (const char* policy : {"scan_pipelined=1", "scan_pipelined=0"}) {
    t = saved;
    fz::detail::set_tuning(policy);
    const std::int64_t rows = 4, n = 600000;
    std::vector<float> h = test::random<float>(static_cast<std::size_t>(rows * n), -40, 40, 51);
    for (std::int64_t j = 0; j < 200000; ++j) h[static_cast<std::size_t>(j)] = -inf;  // row 0: 24 partitions of -inf
    h[static_cast<std::size_t>(n + 300000)] = inf;                                     // row 1: +inf midway
    h[static_cast<std::size_t>(2 * n + 400000)] = nan;                                 // row 2: NaN late
    for (std::int64_t j = 0; j < n; j += 5) h[static_cast<std::size_t>(3 * n + j)] = j % 10 ? -150.f : 85.f;
    std::vector<double> scale;
    const std::vector<double> want = scan_ref(Op::logcumsumexp, doubles(h), {rows, n}, 1, {false, false}, &scale);
    const auto in = fz::asarray(h, {rows, n});
    CHECK_THAT(fz::inspect(fz::logcumsumexp(in, 1)).variant, Catch::Contains("in one pass"));
    fz::Array<float> got = fz::full<float>({rows, n}, 7.f);
    got = fz::logcumsumexp(in, 1);
    INFO(policy);
    CHECK(off(Op::logcumsumexp, got.to_host(), want, scale, n) == 0);
  }
  t = saved;
  const auto z = fz::eval(fz::cumsum(fz::asarray(std::vector<float>{-0.f, -0.f}, {2}), 0)).to_host();
  CHECK((std::signbit(z[0]) && std::signbit(z[1])));
}

TEST_CASE("scans fuse their prologue; the math reading them is the next kernel", "[gpu][scans]") {
  const std::int64_t R = 64, D = 3000;
  const auto hx = test::random<float>(static_cast<std::size_t>(R * D), -1, 1, 31);
  const auto x = fz::asarray(hx, {R, D});
  std::vector<double> count(hx.size()), centered(hx.size());
  for (std::int64_t r = 0; r < R; ++r) {
    double c = 0, s = 0;
    for (std::int64_t j = 0; j < D; ++j) {
      const auto at = static_cast<std::size_t>(r * D + j);
      c += hx[at] > 0.25f;
      s += hx[at];
      count[at] = c;
      centered[at] = hx[at] - s / static_cast<double>(D);
    }
  }
  fz::reset_stats();
  fz::Array<std::int64_t> k = fz::cumsum(x > 0.25f, 1);
  CHECK(fz::stats().launches == 1);
  CHECK(test::mismatches(k.to_host(), count, fz::DType::int64) == 0);
  fz::reset_stats();
  fz::Array<float> c = x - fz::cumsum(x, 1) / static_cast<float>(D);
  CHECK(fz::stats().launches == 2);
  CHECK(test::mismatches(c.to_host(), centered, fz::DType::float32) == 0);
  // a scan of a transposed view, and a scan read by a reduction
  fz::Array<float> t = fz::cumsum(x.transpose(), 0);
  std::vector<double> tw(hx.size());  // tw[j, r]: row r's sum up to j
  std::vector<double> rowsum(static_cast<std::size_t>(R), 0);
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t j = 0; j < D; ++j) {
      rowsum[static_cast<std::size_t>(r)] += hx[static_cast<std::size_t>(r * D + j)];
      tw[static_cast<std::size_t>(j * R + r)] = rowsum[static_cast<std::size_t>(r)];
    }
  std::vector<double> scale(tw.size(), 0);
  for (std::size_t i = 0; i < tw.size(); ++i) scale[i] = static_cast<double>(D);
  CHECK(off(Op::cumsum, t.to_host(), tw, scale, 1) == 0);
  // (counted against the scan's own results: a double reference could differ in sign near 0)
  const std::int64_t positive = fz::sum(fz::cumsum(x, 1) > 0.f).item();
  std::int64_t want_positive = 0;
  for (float v : fz::eval(fz::cumsum(x, 1)).to_host()) want_positive += v > 0;
  CHECK(positive == want_positive);
}

TEST_CASE("scans: empty extents, in place, the unfused baseline, bit-identical runs", "[gpu][scans]") {
  fz::Array<float> e = fz::cumsum(fz::zeros<float>({0, 5}), 0);
  CHECK(e.shape() == fz::Shape{0, 5});
  fz::Array<float> e2 = fz::cumsum(fz::zeros<float>({4, 0}), 0);
  CHECK(e2.shape() == fz::Shape{4, 0});
  CHECK_THROWS_AS(fz::eval(fz::cumsum(fz::zeros<float>({4, 3}), 2)), fz::ShapeError);

  const auto hx = test::random<float>(1 << 20, -1, 1, 41);
  fz::Array<float> x = fz::asarray(hx, {1 << 20});
  const std::vector<float> first = fz::eval(fz::cumsum(x * 3.f, 0)).to_host();
  for (int run = 0; run < 3; ++run) CHECK(fz::eval(fz::cumsum(x * 3.f, 0)).to_host() == first);
  {
    fz::Unfused baseline;
    const std::vector<float> unfused = fz::eval(fz::cumsum(x * 3.f, 0)).to_host();
    CHECK(unfused == first);  // the same kernel reading a temporary: the same order of additions
  }
  x = fz::cumsum(x, 0);  // in place: computed aside, copied
  std::vector<double> scale;
  const auto want = scan_ref(Op::cumsum, doubles(hx), {1 << 20}, 0, {}, &scale);
  CHECK(off(Op::cumsum, x.to_host(), want, scale, 1 << 20) == 0);
}

TEST_CASE("scans written into a larger array broadcast as any expression does", "[gpu][scans]") {
  // (the fuzzer's case 21000348: fz::copyto of a (1, n) scan into (2, n) was refused)
  const auto row = fz::asarray(std::vector<std::int64_t>{1, 2, 3}, {1, 3});
  auto out = fz::empty<std::int64_t>({2, 3});
  fz::copyto(out, fz::cumsum(row, -1));
  CHECK(out.to_host() == std::vector<std::int64_t>{1, 3, 6, 1, 3, 6});
  auto wide = fz::full<double>({4, 1, 3}, 7.0);
  fz::copyto(wide, fz::cummax(fz::asarray(std::vector<float>{2, 1, 5}, {3}), 0, {.exclusive = false, .reverse = true}));
  for (std::size_t i = 0; i < 12; i += 3) CHECK((wide.to_host()[i] == 5 && wide.to_host()[i + 1] == 5 && wide.to_host()[i + 2] == 5));
  CHECK_THROWS_AS(fz::copyto(out, fz::cumsum(fz::asarray(std::vector<std::int64_t>{1, 2}, {2}), 0)), fz::ShapeError);
}

TEST_CASE("scans of contiguous rows: whole tiles in 16-byte vectors, misaligned views, the last tile's tail", "[gpu][scans]") {
  // (rows of 3 tiles and 8 elements, 16-byte aligned: whole tiles take the vector path, the last its bounds tests)
  const std::int64_t R = 6, D = 3 * 4096 + 8;
  const auto hx = test::random<float>(static_cast<std::size_t>(R * D), -1, 1, 51);
  const auto x = fz::asarray(hx, {R, D});
  const std::vector<double> dx = doubles(hx);
  auto check = [&](const auto& e, const std::vector<double>& want, const std::vector<double>& scale, const char* variant,
                   bool has) {
    INFO(fz::inspect(e).variant);
    CHECK((fz::inspect(e).variant.find(variant) != std::string::npos) == has);
    fz::Array<float> out = fz::full<float>({R, static_cast<std::int64_t>(want.size()) / R}, 7.f);  // poisoned
    out = e;
    CHECK(off(Op::cumsum, out.to_host(), want, scale, D) == 0);
  };
  std::vector<double> scale;
  const auto want = scan_ref(Op::cumsum, dx, {R, D}, 1, {}, &scale);
  check(fz::cumsum(x, 1), want, scale, "4-element vectors", true);
  // a view starting one element in: rows contiguous, not 16-byte aligned
  const auto shifted = x(fz::_, fz::from(1));
  std::vector<double> ds;
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t j = 1; j < D; ++j) ds.push_back(dx[static_cast<std::size_t>(r * D + j)]);
  std::vector<double> sscale;
  const auto swant = scan_ref(Op::cumsum, ds, {R, D - 1}, 1, {true, false}, &sscale);
  check(fz::cumsum(shifted, 1, {.exclusive = true}), swant, sscale, "4-element vectors", false);
  check(fz::cumsum(shifted, 1, {.exclusive = true}), swant, sscale, "contiguous", true);
  // a per-row value broadcast along the axis (stride 0 there): every element tested and addressed
  const auto bias = fz::asarray(std::vector<float>{1, -2, 3, -4, 5, -6}, {R, 1});
  std::vector<double> db = dx;
  for (std::size_t i = 0; i < db.size(); ++i) db[i] -= std::vector<double>{1, -2, 3, -4, 5, -6}[i / D];
  std::vector<double> bscale;
  const auto bwant = scan_ref(Op::cumsum, db, {R, D}, 1, {}, &bscale);
  check(fz::cumsum(x - bias, 1), bwant, bscale, "contiguous", false);
  // an int32 scan in vectors, and one long row in partitions from a misaligned view
  const auto hi = test::random<std::int32_t>(static_cast<std::size_t>(R * D), -1000, 1000, 52);
  const auto xi = fz::asarray(hi, {R, D});
  CHECK_THAT(fz::inspect(fz::cumsum(xi, 1)).variant, Catch::Contains("contiguous"));  // (int64 results: no vectors)
  std::vector<double> iscale;
  const auto iwant = scan_ref(Op::cumsum, doubles(hi), {R, D}, 1, {true, true}, &iscale);
  fz::Array<std::int32_t> iout = fz::cumsum(xi, 1, {.exclusive = true, .reverse = true});
  CHECK(off(Op::cumsum, iout.to_host(), iwant, iscale, D) == 0);
  const auto long_row = fz::asarray(hx, {R * D})(fz::from(3));
  std::vector<double> lscale;
  const auto lwant = scan_ref(Op::cumsum, std::vector<double>(dx.begin() + 3, dx.end()), {R * D - 3}, 0, {}, &lscale);
  fz::Array<float> lout = fz::cumsum(long_row, 0);
  CHECK_THAT(fz::inspect(fz::cumsum(long_row, 0)).variant, Catch::Contains("in one pass"));
  CHECK(off(Op::cumsum, lout.to_host(), lwant, lscale, R * D) == 0);
}
