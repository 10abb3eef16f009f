// SPDX-License-Identifier: Apache-2.0
// The differential fuzzer on the GPU: a fixed-seed slice of random expressions against the float64
// reference (fusion-fuzz runs the large campaign), and the bugs it found, kept as regression tests.
#include <optional>

#include "fuzz_region.hpp"
#include "fuzz_run.hpp"
#include "schedule/tuning.hpp"
#include "support.hpp"

namespace {

/// Region cases `first` .. `first + n - 1` (with gathers and scatters, user kernels, joins as `options` says), each
/// run statement by statement and as a region: every failure reported; returns how many were valid and passed.
int region_slice(std::uint64_t first, int n, const fuzz::RegionOptions& options) {
  int passed = 0;
  for (std::uint64_t seed = first; seed < first + static_cast<std::uint64_t>(n); ++seed) {
    const fuzz::Verdict v = fuzz::run_region_case(seed, options);
    INFO("region case " << seed << (options.indexing ? " --gathers" : "") << (options.kernels ? " --kernels" : "")
                        << (options.joins ? " --joins" : "") << ": " << v.detail);
    CHECK_FALSE(v.failed());
    passed += v.kind == fuzz::Verdict::pass;
  }
  return passed;
}

/// Runs cases `first` .. `first + n - 1` on the GPU against the reference; a failure's shrunk repro is printed.
struct Slice {
  int failed = 0, with_scans = 0, with_gathers = 0, with_scatters = 0, with_joins = 0, with_calls = 0, with_random = 0;
  int with_products = 0;
  int with_clusters = 0;  // cases that ran a layer kernel splitting its rows over clusters of blocks
  int with_registers = 0, with_whole = 0;  // ... holding its rows in registers; ... that fill every thread's vectors
  std::int64_t compared = 0;
};
Slice run_slice(std::uint64_t first, int n, const fuzz::GenOptions& options = {}) {
  Slice s;
  for (int k = 0; k < n; ++k) {
    const fuzz::Case c = fuzz::generate(first + static_cast<std::uint64_t>(k), options);
    bool scan = false, gather = false, join = false, call = false, random = false, product = false;
    s.with_scatters += !c.outputs.empty() && c.outputs[0].kind == fuzz::Kind::scatter;
    auto walk = [&](auto& self, const fuzz::Expr& x) -> void {
      scan = scan || x.kind == fuzz::Kind::scan;
      gather = gather || x.kind == fuzz::Kind::gather;
      join = join || x.kind == fuzz::Kind::join;
      call = call || x.kind == fuzz::Kind::call;
      random = random || x.kind == fuzz::Kind::random;
      product = product || x.kind == fuzz::Kind::product;
      for (const fuzz::Expr& a : x.args) self(self, a);
    };
    for (const fuzz::Expr& e : c.outputs) walk(walk, e);
    s.with_scans += scan;
    s.with_gathers += gather;
    s.with_joins += join;
    s.with_calls += call;
    s.with_random += random;
    s.with_products += product;
    const fuzz::Verdict v = fuzz::run_on_gpu(c);
    if (v.failed()) {
      ++s.failed;
      UNSCOPED_INFO(fuzz::kind_name(v.kind)
                    << ": " << v.detail << fuzz::to_cpp(fuzz::shrink(c, fuzz::run_on_gpu, 150), "repro"));
    }
    s.compared += v.compared;
    bool cluster = false, held = false, filled = false;
    for (const std::string& k : v.strategies) {
      cluster = cluster || k.find("+cluster") != std::string::npos;
      held = held || k.find("+registers") != std::string::npos;
      filled = filled || k.find("+whole parts") != std::string::npos;
    }
    s.with_clusters += cluster, s.with_registers += held, s.with_whole += filled;
  }
  return s;
}

}  // namespace

TEST_CASE("fuzz: a fixed-seed slice of random expressions matches the float64 reference", "[gpu][fuzz]") {
  const Slice s = run_slice(0x9a'0000, 300);
  CHECK(s.failed == 0);
  CHECK(s.compared > 100000);
}

TEST_CASE("fuzz: a fixed-seed slice with scans (running maxima, minima, integer sums) matches the reference",
          "[gpu][fuzz][slices]") {
  const Slice s = run_slice(0x5c'0000, 200, {.scans = true});
  CHECK(s.failed == 0);
  CHECK(s.with_scans > 25);  // (34 of the 200 on the H100 run that set this)
  CHECK(s.compared > 50000);
}

TEST_CASE("fuzz: a fixed-seed slice with gathers (take_along_axis, wrap and clip) and scans matches the reference",
          "[gpu][fuzz][slices]") {
  const Slice s = run_slice(0x6a'0000, 200, {.scans = true, .gathers = true});
  CHECK(s.failed == 0);
  CHECK(s.with_gathers > 25);
  CHECK(s.compared > 50000);
}

TEST_CASE("fuzz: a fixed-seed slice of scatters (add, max, min; fz::Deterministic half the time) matches the reference",
          "[gpu][fuzz][slices]") {
  const Slice s = run_slice(0x5ca'0000, 200, {.scans = true, .gathers = true, .scatters = true});
  CHECK(s.failed == 0);
  CHECK(s.with_scatters > 40);
  CHECK(s.compared > 20000);
}

TEST_CASE("fuzz: a fixed-seed slice with joins (fz::concatenate, gathers inside pieces) matches the reference",
          "[gpu][fuzz][slices]") {
  const Slice s = run_slice(0x701'0000, 200, {.gathers = true, .joins = true});
  CHECK(s.failed == 0);
  CHECK(s.with_joins > 30);  // (40 of the 200 since joins were cut on vectors half the time)
  CHECK(s.compared > 50000);
}

TEST_CASE("fuzz: a fixed-seed slice with matrix products (fz::matmul, math around and inside them) matches the "
          "reference",
          "[gpu][fuzz]") {
  const Slice s = run_slice(0x3a7'0000, 150, {.products = true});
  CHECK(s.failed == 0);
  CHECK(s.with_products > 40);
  CHECK(s.compared > 20000);
}

TEST_CASE("fuzz: a fixed-seed slice with scans in strips (along a non-contiguous axis, any rows) matches the reference",
          "[gpu][fuzz][slices]") {
  // The strips are chosen for 32 rows per SM or more, more than the fuzzer's shapes hold: tuned to take any.
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("scan_strips=2");
  const Slice s = run_slice(0x5c'0000, 200, {.scans = true});
  fz::detail::tuning() = saved;
  CHECK(s.failed == 0);
  CHECK(s.with_scans > 25);
}

TEST_CASE("fuzz: a fixed-seed slice with scans in one pass over tiles of 256 (any rows) matches the reference",
          "[gpu][fuzz][slices]") {
  // One pass is chosen for rows of two tiles or more (16,384 elements and up), longer than the fuzzer's rows:
  // tuned to take every such row, in tiles of 256, so that its shapes split into many partitions (the
  // pipelined look-back, a warp of its own, for all but logcumsumexp).
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("scan_lookback=1");
  fz::detail::set_tuning("scan_items=1");
  const Slice s = run_slice(0x1b'0000, 200, {.scans = true});
  fz::detail::tuning() = saved;
  CHECK(s.failed == 0);
  CHECK(s.with_scans > 25);
}

TEST_CASE("fuzz: a fixed-seed slice writing outputs into inputs they read (x = f(x.T, y)) matches the reference",
          "[gpu][fuzz][slices]") {
  int aliased = 0;
  for (int k = 0; k < 200; ++k)
    aliased += fuzz::aliased(fuzz::generate(0xa1a5'0000 + static_cast<std::uint64_t>(k), {.scans = true, .aliases = true}));
  const Slice s = run_slice(0xa1a5'0000, 200, {.scans = true, .aliases = true});
  CHECK(s.failed == 0);
  CHECK(aliased >= 20);
  CHECK(s.compared > 20000);
}

TEST_CASE("fuzz: a fixed-seed slice with fz::function calls and fz::random leaves matches the reference",
          "[gpu][fuzz][calls]") {
  const Slice s = run_slice(0xca11'0000, 200, {.scans = true, .gathers = true, .calls = true});
  CHECK(s.failed == 0);
  CHECK(s.with_calls > 30);
  CHECK(s.with_random > 30);
  CHECK(s.compared > 50000);
}

TEST_CASE("fuzz: a fixed-seed slice of layer expressions over long rows (up to 300,000) matches the reference",
          "[gpu][fuzz][calls]") {
  const Slice s = run_slice(0x1a7e'0000, 40, {.long_rows = true});
  CHECK(s.failed == 0);
  CHECK(s.compared > 1000000);
  // The cluster layout takes rows of more than 16,384 elements over more rows than the fuzzer's budget holds:
  // with a slice of 2,048 per block it takes the fuzzer's (the same kernels, with smaller slices).
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("cluster_slice=2048");
  const Slice c = run_slice(0x1a7e'1000, 40, {.long_rows = true});
  fz::detail::tuning() = saved;
  CHECK(c.failed == 0);
  CHECK(c.with_clusters >= 3);
}

TEST_CASE("fuzz: a fixed-seed slice of layer expressions over rows held in registers matches the reference",
          "[gpu][fuzz][calls]") {
  // (rows of 1,024, 4,096 and 8,192 elements, which fill every thread's vectors, and of 4,000, which do not)
  const Slice s = run_slice(0x4e9'1000, 60, {.calls = true, .register_rows = true});
  CHECK(s.failed == 0);
  CHECK(s.with_registers >= 10);
  CHECK(s.with_whole >= 5);
  CHECK(s.compared > 1000000);
}

// ---- regressions the fuzzer found ------------------------------------------------------------------

TEST_CASE("fuzz regression: a tie whose output is an input a later kernel of its plan reads gets NumPy's answer",
          "[gpu][fuzz]") {
  // (found by --aliases: under fz::Unfused the first output's kernel wrote x before the second one read it)
  const std::vector<float> h{0.5f, -1.f, 2.f, 3.5f, -0.25f, 1.f};
  for (bool unfused : {true, false}) {
    INFO("unfused " << unfused);
    fz::Array<float> x = fz::asarray(h, {2, 3});
    fz::Array<float> y = fz::full<float>({2, 3}, std::nanf(""));
    fz::Array<float> m = fz::full<float>({2, 1}, std::nanf(""));
    {
      std::optional<fz::Unfused> scope;
      if (unfused) scope.emplace();
      fz::tie(x, y, m) = std::make_tuple(fz::sin(x) * 2.f, fz::exp(x) + 1.f, fz::max(x, 1, true) - x(fz::_, fz::slice(0, 1)));
    }
    const auto hx = x.to_host(), hy = y.to_host(), hm = m.to_host();
    for (std::size_t i = 0; i < h.size(); ++i) {
      CHECK(std::abs(hx[i] - std::sin(h[i]) * 2.f) <= 1e-6f);
      CHECK(std::abs(hy[i] - (std::exp(h[i]) + 1.f)) <= 1e-5f * (std::exp(h[i]) + 1.f));
    }
    CHECK(hm[0] == 2.f - 0.5f);
    CHECK(hm[1] == 3.5f - 3.5f);
  }
}

TEST_CASE("fuzz regression: a gather's source that is also read per element stays two parameters",
          "[gpu][fuzz]") {
  // take_along_axis(x, ..., 0) of a one-element x: its source view is x itself, and merging the two slots
  // gave the kernel a pointer where it loaded a value (an NVRTC error)
  const auto x = fz::asarray(std::vector<float>{-1.0f}, {1});
  const auto y = fz::asarray(std::vector<fz::bfloat16>{fz::bfloat16(-2.0f)}, {1});
  const auto out = fz::eval(fz::take_along_axis<fz::IndexMode::clip>(x, fz::cast<std::int64_t>(fz::minimum(y, x)), 0));
  CHECK(out.to_host() == std::vector<float>{-1.0f});
}

TEST_CASE("fuzz regression: a plan that fails in a later step leaves earlier outputs unwritten", "[gpu][fuzz]") {
  // case 1002887: fz::tie of an argmin and a max over an empty extent wrote the argmin, then threw
  const auto x = fz::asarray(std::vector<float>{2.0f, -1.0f, 3.0f}, {3});
  const auto empty = fz::asarray(std::vector<std::uint64_t>{}, {1, 0});
  auto first = fz::full<std::int64_t>({}, -7);
  auto second = fz::full<std::uint64_t>({1}, 9);
  CHECK_THROWS_AS((fz::tie(first, second) = std::make_tuple(fz::argmin(x), fz::max(empty, 1))), fz::ShapeError);
  CHECK(first.item() == -7);
  CHECK(second.to_host() == std::vector<std::uint64_t>{9});
}

TEST_CASE("fuzz regression: a tie whose later step has too many operands writes none of its outputs", "[gpu][fuzz]") {
  // case 13000362: the min of a scalar was written, then the 65-operand elementwise part was refused
  const auto x = fz::asarray(std::vector<double>{1.5, -2.0, 4.0}, {3});
  const auto k = fz::asarray(std::vector<std::int64_t>{7}, {});
  auto e = x + x;
  auto e2 = e * e + e * e;      // 8 operands
  auto e3 = e2 * e2 + e2 * e2;  // 32
  auto e4 = e3 * e3 + x;        // 65
  auto first = fz::full<std::int64_t>({3}, -1);
  auto second = fz::full<double>({3}, 9.0);
  try {
    fz::tie(first, second) = std::make_tuple(fz::min(k), e4);
    FAIL("expected an error");
  } catch (const fz::Error& err) {
    CHECK_THAT(err.what(), Catch::Contains("at most 64 array operands"));
  }
  CHECK(first.to_host() == std::vector<std::int64_t>{-1, -1, -1});
  CHECK(second.to_host() == std::vector<double>{9.0, 9.0, 9.0});
}

TEST_CASE("fuzz regression: integer arithmetic wraps like NumPy instead of overflowing (undefined in C++)",
          "[gpu][fuzz]") {
  // case 2000118: argmax(sign(-x)) for int32 x = INT_MIN; NVRTC had folded sign(-x) into -sign(x)
  const std::vector<std::int32_t> xs{INT32_MIN, 5, -3, INT32_MAX, 0};
  const auto x = fz::asarray(xs, {5});
  const std::vector<std::int32_t> sign_neg = fz::eval(fz::sign(-x)).to_host();
  CHECK(sign_neg == std::vector<std::int32_t>{-1, -1, 1, -1, 0});  // -INT_MIN wraps to INT_MIN
  CHECK(fz::eval(x + 1).to_host() == std::vector<std::int32_t>{INT32_MIN + 1, 6, -2, INT32_MIN, 1});
  CHECK(fz::eval(fz::abs(x)).to_host() == std::vector<std::int32_t>{INT32_MIN, 5, 3, INT32_MAX, 0});
  const auto big = fz::asarray(std::vector<std::int64_t>{INT64_MAX, INT64_MIN, 3}, {3});
  CHECK(fz::eval(big * 2).to_host() == std::vector<std::int64_t>{-2, 0, 6});
  CHECK(fz::eval(fz::square(big - 1)).to_host() == std::vector<std::int64_t>{4, 1, 4});
  CHECK(fz::eval(fz::pow(big, 3)).to_host() == std::vector<std::int64_t>{INT64_MAX, 0, 27});  // mod 2^64
  // uint16 * uint16 is computed in int by C++'s promotion, which overflows at 65535^2
  const auto w = fz::asarray(std::vector<std::uint16_t>{65535, 300}, {2});
  CHECK(fz::eval(w * w).to_host() == std::vector<std::uint16_t>{1, static_cast<std::uint16_t>(90000 % 65536)});
}

TEST_CASE("fuzz regression: a tie whose second output casts a reduction runs that reduction, then the cast",
          "[gpu][fuzz]") {
  // case 7003048: cast(prod(y)) joined max's multi-reduction kernel with prod already a temporary (a crash)
  const auto x = fz::asarray(std::vector<double>{-1.5, 4.0, 2.0, -7.0, 0.5, 3.0}, {2, 3});
  const auto y = fz::asarray(std::vector<std::int32_t>{2, -3, 5, 1, 4, -1}, {3, 2});
  auto big = fz::empty<double>({});
  auto product = fz::empty<float>({});
  fz::tie(big, product) = std::make_tuple(fz::nanmax(fz::sum(x, 1), 0), fz::cast<float>(fz::prod(y, {0, 1})));
  CHECK(big.item() == 4.5);  // the row sums are 4.5 and -3.5
  CHECK(product.item() == 120.0f);
}

TEST_CASE("fuzz regression: var of a row holding an infinity is NaN, as NumPy's, even for a row of one",
          "[gpu][fuzz]") {
  // case 0x9a0000 slice: var over an axis of length 1 gave 0 for inf (Welford's m2 started at 0, not x - x)
  const float inf = std::numeric_limits<float>::infinity();
  const auto one = fz::asarray(std::vector<float>{inf, -inf, 2.5f, std::nanf("")}, {1, 4, 1});
  const std::vector<float> v1 = fz::eval(fz::var(one, {-3}, true)).to_host();
  CHECK(std::isnan(v1[0]));
  CHECK(std::isnan(v1[1]));
  CHECK(v1[2] == 0.0f);
  CHECK(std::isnan(v1[3]));
  const auto rows = fz::asarray(std::vector<float>{1, inf, 2, 1, 2, 3}, {2, 3});
  const std::vector<float> v2 = fz::eval(fz::var(rows, -1)).to_host();
  CHECK(std::isnan(v2[0]));
  CHECK(v2[1] == Approx(2.0 / 3.0));
  CHECK(std::isnan(fz::eval(fz::var(fz::asarray(std::vector<double>{1, 2, -HUGE_VAL}, {3}))).item()));
}

TEST_CASE("fuzz regression: an ordered comparison with a NaN is false even where ptxas knows the sign", "[gpu][fuzz]") {
  // case 16000780: exp2(x) >= isinf(u) was 1 for a NaN x (ptxas folded `exp2f(x) >= 0` and `fabsf(x) >= 0` to true)
  const auto x = fz::asarray(std::vector<float>{NAN, -NAN, 3.f, -2.f, INFINITY, -INFINITY});
  const auto u = fz::asarray(std::vector<std::uint32_t>{5, 0, 0, 2, 1, 7});
  const std::vector<std::uint8_t> want = {0, 0, 1, 1, 1, 1};
  auto same = [&](const auto& got) {
    const auto h = got.to_host();
    for (std::size_t i = 0; i < want.size(); ++i) {
      INFO("element " << i);
      CHECK(static_cast<std::uint8_t>(h[i]) == want[i]);
    }
  };
  same(fz::eval(fz::exp2(x) >= fz::isinf(u)));
  same(fz::eval(fz::exp2(x) >= 0.f));
  same(fz::eval(fz::abs(x) >= 0.f));
  same(fz::eval(fz::exp2(x) > -1.f));
  same(fz::eval(0.f <= fz::abs(x)));
  const auto below = (fz::abs(x) < 0.f).to_host();  // never true, NaN or not
  for (bool b : below) CHECK_FALSE(b);
  const auto d = fz::asarray(std::vector<double>{NAN, 1.0});
  const auto hd = (fz::exp2(d) >= 0.0).to_host();
  CHECK_FALSE(hd[0]);
  CHECK(hd[1]);
}

TEST_CASE("fuzz: random multi-statement regions are bit-identical to their statements run one by one",
          "[gpu][fuzz][region]") {
  // (most cases are valid: a few pick an op a dtype refuses in both runs)
  SECTION("elementwise statements") { CHECK(region_slice(1, 150, {}) > 100); }
  SECTION("statements that gather and scatter") { CHECK(region_slice(0x5ca000, 80, {.indexing = true}) > 55); }
  SECTION("statements that join pieces cut from elsewhere (rolls of arrays written before, or by the statement)") {
    CHECK(region_slice(0x10e000, 80, {.indexing = true, .joins = true}) > 55);
  }
}

TEST_CASE("fuzz: regions with user ElementwiseKernel calls between statements are bit-identical one by one",
          "[gpu][fuzz][region][user]") {
  CHECK(region_slice(0xce1000, 80, {.indexing = true, .kernels = true}) > 55);
}

TEST_CASE("fuzz regression: an integer negation inside two maxima or minima is kept (ptxas merged them and dropped it)",
          "[gpu][fuzz]") {
  // case 2711012653: maximum(clamp_low(-x, y), 7) with x = 20, y = -1 gave 20 (ptxas 13.0's VIMNMX3, sm_90)
  const auto x = fz::asarray(std::vector<std::int32_t>{20, -4, 3, INT32_MIN, 0, 9, -30, 12}, {8});
  const auto y = fz::asarray(std::vector<std::int32_t>{-1, 2, -8, 5, -2, -20, 1, -13}, {8});
  std::vector<std::int32_t> want_max, want_min;
  const std::vector<std::int32_t> xs = x.to_host(), ys = y.to_host();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::int32_t n = static_cast<std::int32_t>(0u - static_cast<std::uint32_t>(xs[i]));  // (INT_MIN wraps)
    want_max.push_back(std::max(std::max(n, ys[i]), 7));
    want_min.push_back(std::min(std::min(n, ys[i]), -7));
  }
  CHECK(fz::eval(fz::maximum(fz::maximum(-x, y), 7)).to_host() == want_max);
  CHECK(fz::eval(fz::maximum(fz::maximum(y, -x), 7)).to_host() == want_max);
  CHECK(fz::eval(fz::minimum(fz::minimum(-x, y), -7)).to_host() == want_min);
  // the largest and smallest of -x over int32 read as 16-byte vectors: every other negation was dropped
  std::vector<std::int32_t> big(4096);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::int32_t>((i * 7919) % 5003) - 2000;
  big[1234] = -2500;  // -x is largest here, at an odd position
  big[2001] = 3100;   // and smallest here
  const auto xb = fz::asarray(big, {64, 64});
  CHECK(fz::eval(fz::max(-xb)).to_host()[0] == 2500);
  CHECK(fz::eval(fz::min(-xb)).to_host()[0] == -3100);
  const std::vector<std::int32_t> rows = fz::eval(fz::max(-xb, {1})).to_host();
  CHECK(rows[1234 / 64] == 2500);
  // a 64-bit negation cut to 32 bits (the fuzz case's prod of int32 is int64, negated, then an int parameter)
  const auto wide = fz::asarray(std::vector<std::int64_t>{20, -4, 3, 2147483648LL, 0, 9, -30, 12}, {8});
  CHECK(fz::eval(fz::maximum(fz::maximum(fz::cast<std::int32_t>(-wide), y), 7)).to_host() == want_max);
  // 16- and 8-bit integers negate through int and wrap back
  const auto s = fz::asarray(std::vector<std::int16_t>{20, -32768, 5}, {3});
  const auto t = fz::asarray(std::vector<std::int16_t>{-1, 3, -9}, {3});
  CHECK(fz::eval(fz::maximum(fz::maximum(-s, t), std::int16_t{7})).to_host() == std::vector<std::int16_t>{7, 7, 7});
  CHECK(fz::eval(-fz::asarray(std::vector<std::int8_t>{-128, 5, 0}, {3})).to_host() == std::vector<std::int8_t>{-128, -5, 0});
}

TEST_CASE("fuzz regression: an 8- or 16-bit sum wraps before it is compared (ptxas compared a 16-bit negation in 32 bits)",
          "[gpu][fuzz]") {
  // case 2731011775: all((!x ^ x) + x) over int16 rows holding -32768 was true (NVVM's y != -x in 16 bits, CUDA 13.0)
  const auto x = fz::asarray(std::vector<std::int16_t>{-32768, 5, 0, -7, 19, 20, 16, -1, 4, 7, -13, 9, -16, 3, 2, 1, -2},
                             {1, 17});
  CHECK(fz::eval(fz::all((!x ^ x) + x, {1})).to_host() == std::vector<bool>{false});
  CHECK(fz::eval(((!x ^ x) + x) != 0).to_host()[0] == false);
  CHECK(fz::eval(fz::all(x + x, {1})).to_host() == std::vector<bool>{false});
  CHECK(fz::eval(fz::all(x - (-x), {1})).to_host() == std::vector<bool>{false});
  const auto u = fz::asarray(std::vector<std::uint16_t>{32768, 5, 1}, {3});
  CHECK(fz::eval(((!u ^ u) + u) != 0).to_host() == std::vector<bool>{false, true, true});
  const auto b = fz::asarray(std::vector<std::int8_t>{-128, 5, 0}, {3});
  CHECK(fz::eval(((!b ^ b) + b) != 0).to_host() == std::vector<bool>{false, true, true});
  const auto c = fz::asarray(std::vector<std::uint8_t>{128, 5, 0}, {3});
  CHECK(fz::eval(((!c ^ c) + c) != 0).to_host() == std::vector<bool>{false, true, true});
  // the sums themselves, wrapped as NumPy's
  CHECK(fz::eval(x + x).to_host()[0] == 0);
  CHECK(fz::eval(-b).to_host() == std::vector<std::int8_t>{-128, -5, 0});
}

TEST_CASE("fuzz regression: under fz::Unfused a pad beside a matrix product is computed over its own shape",
          "[gpu][fuzz]") {
  // cases 77000345 and 77000447: the pad's step took the product's operands into its region and refused to run
  const std::vector<double> ha{-2.5, -3.0, -1.5, 3.0, 1.0, -2.5, 2.5, -1.0, -1.5, -0.5};
  std::vector<float> hb(80);
  for (std::size_t i = 0; i < hb.size(); ++i) hb[i] = static_cast<float>(static_cast<int>(i * 7 % 13) - 6) * 0.5f;
  std::vector<fz::half> hz(20);
  for (std::size_t i = 0; i < hz.size(); ++i) hz[i] = fz::half(static_cast<float>(i) - 9.5f);
  const auto a = fz::asarray(ha, {5, 2});
  const auto b = fz::asarray(hb, {2, 40});
  const auto z = fz::asarray(hz, {1, 1, 1, 20});
  const fz::Unfused unfused;
  const auto got = fz::eval(fz::fmax(fz::matmul(a, b), fz::pad(z, {{2, 4}, {0, 0}, {3, 1}, {8, 12}}, 0))).to_host();
  REQUIRE(got.size() == std::size_t{7 * 5 * 40});
  for (std::int64_t i = 0; i < 7; ++i)
    for (std::int64_t r = 0; r < 5; ++r)
      for (std::int64_t c = 0; c < 40; ++c) {
        const double p = ha[r * 2] * hb[c] + ha[r * 2 + 1] * hb[40 + c];  // exact in float64
        const bool inside = i == 2 && r == 3 && c >= 8 && c < 28;
        const double padded = inside ? test::as_double(hz[c - 8]) : 0.0;
        CHECK(got[(i * 5 + r) * 40 + c] == std::max(p, padded));
      }
}

TEST_CASE("fuzz regression: abs of the most negative integer stays negative wherever it is used, as NumPy's wraps",
          "[gpu][fuzz]") {
  // case 29000980: floor_divide(half(-3), abs(int32 INT_MIN)) gave -1 (NumPy: 0, dividing by INT_MIN)
  const auto x = fz::asarray(std::vector<std::int32_t>{INT32_MIN, -7, 5, 0}, {4});
  const auto h = fz::asarray(std::vector<fz::half>{fz::half(-3.0f), fz::half(-3.0f), fz::half(2.5f), fz::half(1.0f)}, {4});
  CHECK(fz::eval(fz::cast<double>(fz::abs(x))).to_host() == std::vector<double>{-2147483648.0, 7.0, 5.0, 0.0});
  CHECK(fz::eval(fz::cast<float>(fz::abs(x))).to_host() == std::vector<float>{-2147483648.0f, 7.0f, 5.0f, 0.0f});
  const std::vector<double> q = fz::eval(fz::floor_divide(h, fz::abs(x))).to_host();
  CHECK(q[0] == 0.0);  // -3 / -2^31 is a small positive number
  CHECK(q[1] == -1.0);
  CHECK(q[2] == 0.0);
  CHECK(std::isinf(q[3]));
  const auto negative = (fz::abs(x) < 0).to_host();
  CHECK(negative == std::vector<bool>{true, false, false, false});
  const auto big = fz::asarray(std::vector<std::int64_t>{INT64_MIN, -3}, {2});
  CHECK(fz::eval(fz::cast<double>(fz::abs(big))).to_host() == std::vector<double>{-9223372036854775808.0, 3.0});
  const auto minus3 = fz::asarray(std::vector<double>{-3.0, -3.0}, {2});
  CHECK(fz::eval(fz::floor_divide(minus3, fz::abs(big))).to_host() == std::vector<double>{0.0, -1.0});
  const auto narrow = fz::asarray(std::vector<std::int8_t>{-128, -5, 7}, {3});
  CHECK(fz::eval(fz::abs(narrow)).to_host() == std::vector<std::int8_t>{-128, 5, 7});
  CHECK(fz::eval(fz::floor_divide(fz::asarray(std::vector<float>{-3.f, -3.f, -3.f}, {3}), fz::abs(narrow))).to_host() ==
        std::vector<float>{0.f, -1.f, -1.f});
  // the fuzzer's own shapes: (1, 55, 1) arrays read by the strided kernel
  std::vector<std::int32_t> xs(55, 3);
  std::vector<fz::half> hs(55, fz::half(-3.0f));
  xs[45] = INT32_MIN;
  const std::vector<double> q55 =
      fz::eval(fz::floor_divide(fz::asarray(hs, {1, 55, 1}), fz::abs(fz::asarray(xs, {1, 55, 1})))).to_host();
  CHECK(q55[45] == 0.0);
  CHECK(q55[0] == -1.0);
}
