// SPDX-License-Identifier: Apache-2.0
// Reductions on the GPU against the host reference: every reduction x dtype x axis pattern (odd sizes,
// size-1 and empty extents, 0-d, non-contiguous views), NaN rules, fused prologues and epilogues,
// results used inside larger expressions, accuracy at 2^26 elements, determinism, errors.
#include <cstring>
#include <map>

#include "reference_reduce.hpp"
#include "schedule/tuning.hpp"
#include "support.hpp"

using fz::DType;
using fz::ir::Op;

namespace {

fz::detail::ReduceArg axes_arg(std::vector<int> axes, bool keepdims, bool all = false) {
  fz::detail::ReduceArg a;
  a.n_axes = all ? -1 : static_cast<std::int8_t>(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) a.axes[i] = static_cast<std::int8_t>(axes[i]);
  a.keepdims = keepdims;
  return a;
}

unsigned mask_of(const fz::detail::ReduceArg& a, int rank) {
  if (a.n_axes < 0) return (1u << rank) - 1;
  unsigned m = 0;
  for (int i = 0; i < a.n_axes; ++i) m |= 1u << ((a.axes[i] + rank) % rank);
  return m;
}

fz::Shape result_shape(const fz::Shape& in, unsigned mask, bool keepdims) {
  fz::Shape s;
  for (int d = 0; d < in.size(); ++d) {
    if (!((mask >> d) & 1)) s.push_back(in[d]);
    else if (keepdims) s.push_back(1);
  }
  return s;
}

/// `op` over one array of any dtype, through the same evaluator as fz::sum and friends, into a poisoned output.
fz::ArrayBase run(Op op, const fz::ArrayBase& x, const fz::detail::ReduceArg& arg) {
  static std::map<std::pair<Op, DType>, const fz::detail::Lowered*> cache;
  const DType result = fz::ir::reduction_result_dtype(op, x.dtype());
  auto& lw = cache[{op, x.dtype()}];
  if (!lw) {
    fz::ir::Graph g;
    g.outputs.push_back(g.reduce(op, g.input(x.dtype()), result));
    lw = fz::detail::register_lowered(g);
  }
  fz::ArrayBase out = test::poisoned(result, result_shape(x.shape(), mask_of(arg, x.ndim()), arg.keepdims));
  const fz::ArrayBase* arrays[1] = {&x};
  fz::detail::evaluate(fz::detail::Call{lw, arrays, nullptr, &arg, 1, 0, 1, {}}, out, fz::detail::AssignMode::into);
  return out;
}

std::vector<test::Scalar> data_for(Op op, DType d, std::size_t n, unsigned seed) {
  std::vector<test::Scalar> v(n);
  const auto f = test::random<double>(n, -2, 2, seed);
  const auto i = test::random<std::int64_t>(n, fz::is_unsigned_int(d) ? 0 : -50, 50, seed + 1);
  const auto u = test::random<double>(n, 0, 1, seed + 2);
  for (std::size_t k = 0; k < n; ++k) {
    if (op == Op::prod) {  // products that neither overflow floats nor vanish
      v[k].f = 1 + f[k] / 40;
      v[k].i = i[k] % 7 == 0 ? 2 : (i[k] % 2 ? -1 : 1);
    } else if (op == Op::any || op == Op::all) {  // mostly nonzero, so that `all` is sometimes true
      v[k].f = u[k] < 0.002 ? 0 : 1 + f[k] * f[k];
      v[k].i = u[k] < 0.002 ? 0 : 1 + (i[k] & 3);
    } else {
      v[k].f = f[k];
      v[k].i = d == DType::bool_ ? (i[k] & 1) : i[k];
    }
    v[k] = test::normalize(v[k], d);
  }
  return v;
}

/// Compares one reduction's GPU output with the reference; returns the number of mismatches.
int compare(Op op, DType in, const fz::ArrayBase& out, const test::Reduced& want, const std::string& what) {
  const DType rd = out.dtype();
  const auto got = test::download(out);
  REQUIRE(got.size() == want.values.size());
  const double eps =
      fz::ir::reduction_accumulator_dtype(op, rd) == DType::float64 || rd == DType::float64 ? 0x1p-52 : 0x1p-23;
  int bad = 0;
  for (std::size_t k = 0; k < got.size(); ++k) {
    bool ok;
    if (!fz::is_floating(rd)) {
      ok = test::normalize(got[k], rd).i == want.values[k].i;
    } else {
      const double g = got[k].f, w = want.values[k].f;
      const auto t = test::tolerance(rd);
      double slack = 0;
      if (op == Op::sum || op == Op::mean || op == Op::var)
        slack = 8 * eps * want.magnitude[k] /
                (op == Op::mean || op == Op::var ? std::max<double>(1, static_cast<double>(want.count)) : 1);
      if (op == Op::prod) slack = 4 * eps * static_cast<double>(want.count) * std::abs(w);
      const bool exact = op != Op::sum && op != Op::mean && op != Op::prod && op != Op::var;
      ok = std::isnan(w) ? std::isnan(g) : exact ? g == w : std::abs(g - w) <= t.atol + t.rtol * std::abs(w) + slack;
    }
    if (!ok) {
      if (bad < 3)
        UNSCOPED_INFO(fz::ir::op_name(op)
                      << " of " << fz::dtype_name(in) << " " << what << ", output " << k << ": got "
                      << test::to_double(got[k], rd) << ", want " << test::to_double(want.values[k], rd));
      ++bad;
    }
  }
  return bad;
}

struct Case {
  fz::Shape shape;
  std::vector<int> axes;
  bool keepdims = false, all = false;
  int view = 0;  // 0: contiguous, 1: transposed, 2: every other element of the last axis, reversed
};

/// Every reduction op x dtype over each case, against the host reference: (cases checked, cases failed).
std::pair<int, int> check_every_op_and_dtype(const std::vector<Case>& cases) {
  int checked = 0, failed = 0;
  for (int o = static_cast<int>(Op::sum); o <= static_cast<int>(Op::var); ++o) {
    const Op op = static_cast<Op>(o);
    for (int di = 0; di < fz::kNumDTypes; ++di) {
      const DType d = static_cast<DType>(di);
      for (std::size_t ci = 0; ci < cases.size(); ++ci) {
        const Case& c = cases[ci];
        const std::size_t n = static_cast<std::size_t>(fz::numel(c.shape));
        const auto values = data_for(op, d, n, static_cast<unsigned>(o * 1000 + di * 31 + ci));
        fz::ArrayBase base = test::upload(values, d, c.shape);
        std::vector<fz::Slice> every_other_reversed(static_cast<std::size_t>(std::max(c.shape.size(), 1)));
        every_other_reversed.back() = fz::Slice{{}, {}, -2};
        fz::ArrayBase x = c.view == 1 ? base.transposed({}) : c.view == 2 ? base.sliced(every_other_reversed) : base;
        // the reference reads the view's elements in C order, like the GPU does
        const auto host = c.view == 0 ? values : test::download(x.contiguous_copy());
        const auto arg = axes_arg(c.axes, c.keepdims, c.all);
        const unsigned mask = mask_of(arg, x.ndim());
        const std::string what =
            fmt::format("shape {} view {} axes {}{}", fz::to_string(x.shape()), c.view,
                        c.all ? "all" : fmt::format("{}", fmt::join(c.axes, ",")), c.keepdims ? " keepdims" : "");
        std::int64_t n_red = 1, n_out = 1;
        for (int dim = 0; dim < x.ndim(); ++dim) ((mask >> dim) & 1 ? n_red : n_out) *= x.shape()[dim];
        if (fz::ir::needs_nonempty(op) && n_red == 0 && n_out > 0) {  // NumPy: "zero-size array ... has no identity"
          CHECK_THROWS_AS(run(op, x, arg), fz::ShapeError);
          continue;
        }
        const auto want = test::reduce(op, d, fz::ir::reduction_result_dtype(op, d), host, x.shape(), mask);
        failed += compare(op, d, run(op, x, arg), want, what) > 0;
        ++checked;
      }
    }
  }
  return {checked, failed};
}

}  // namespace

TEST_CASE("every reduction x dtype x axis pattern matches the host reference", "[gpu][reductions][sweep]") {
  const std::vector<Case> cases = {
      {{19, 27, 43}, {}, false, true},
      {{19, 27, 43}, {0}},
      {{19, 27, 43}, {-1}},
      {{19, 27, 43}, {0, 2}},
      {{19, 27, 43}, {1}, true},
      {{19, 27, 43}, {0}, false, false, 1},
      {{19, 27, 43}, {1, 2}, false, false, 1},
      {{19, 27, 86}, {-1}, false, false, 2},
      {{19, 27, 86}, {0, 1}, false, false, 2},
      {{1, 300, 1}, {1}},
      {{1, 300, 1}, {}, true, true},
      {{}, {}, false, true},
      {{5, 0}, {0}},
      {{4, 3000}, {1}},
      {{3000, 70}, {0}},
  };
  const auto [checked, failed] = check_every_op_and_dtype(cases);
  CHECK(failed == 0);
  CHECK(checked > 11 * 13 * 13);
}

TEST_CASE("every reduction x dtype over columns in row groups (few outputs, many rows) matches the host reference",
          "[gpu][reductions][columns]") {
  // Row groups of a block share few columns: 64 and 96 columns take 16-byte loads for every dtype (split over
  // blocks, or in one block per tile for 40 rows), 70 and 90 only for 8-byte dtypes (70: 2-wide), an odd 257
  // rows, a middle axis (kept rank 2), keepdims, and every other column reversed (negative strides: scalar).
  const std::vector<Case> cases = {{{3000, 64}, {0}},
                                   {{257, 96}, {0}},
                                   {{40, 128}, {0}},
                                   {{3000, 70}, {0}, true},
                                   {{6, 40, 96}, {1}},
                                   {{6, 40, 90}, {1}},
                                   {{300, 128}, {0}, false, false, 2}};
  // 3,000 rows: each tile's rows over a cluster of 8 (a split would cut it 47 ways); 257: split over 5 blocks
  CHECK_THAT(fz::inspect(fz::sum(fz::placeholder<float>({3000, 64}), 0)).variant, Catch::Contains("over a cluster of 8"));
  CHECK_THAT(fz::inspect(fz::sum(fz::placeholder<float>({257, 96}), 0)).variant, Catch::Contains("split over blocks"));
  const auto [checked, failed] = check_every_op_and_dtype(cases);
  CHECK(failed == 0);
  CHECK(checked == (static_cast<int>(Op::var) + 1 - static_cast<int>(Op::sum)) * fz::kNumDTypes * 7);
}

TEST_CASE("every reduction x dtype over columns in row groups split over a cluster (reduce_cluster) matches the host "
          "reference", "[gpu][reductions][clusters]") {
  // Each column tile's rows split over the blocks of a cluster, combined through distributed shared memory (by
  // default clusters of 8 where the split would cut a tile 16 ways; here forced at 2 and 8, with the default's
  // registers for 4 blocks an SM left out). 40 rows over 8 ranks leave each 5, fewer than its 8 row groups.
  const std::vector<Case> cases = {{{3000, 64}, {0}}, {{40, 128}, {0}}, {{3000, 70}, {0}, true}, {{6, 40, 96}, {1}}};
  const fz::detail::Tuning saved = fz::detail::tuning();
  for (const char* cluster : {"reduce_cluster=2", "reduce_cluster=8"}) {
    INFO(cluster);
    fz::detail::set_tuning(cluster);
    CHECK_THAT(fz::inspect(fz::sum(fz::placeholder<float>({3000, 64}), 0)).variant, Catch::Contains("over a cluster of"));
    const auto [checked, failed] = check_every_op_and_dtype(cases);
    fz::detail::tuning() = saved;
    CHECK(failed == 0);
    CHECK(checked == (static_cast<int>(Op::var) + 1 - static_cast<int>(Op::sum)) * fz::kNumDTypes * 4);
  }
}

TEST_CASE("a grouped column reduction of a misaligned view falls back to scalar loads", "[gpu][reductions][columns]") {
  const auto h = test::random<float>(300 * 132, -2, 2, 61);
  const auto base = fz::asarray(h, {300, 132});
  const auto view = base.slice({{}, fz::Slice{1, 129}});  // 128 columns starting one float past a 16-byte boundary
                                                          // (rows of 132: a whole number of vectors)
  const auto info = fz::inspect(fz::sum(view, 0));
  CHECK_THAT(info.variant, Catch::Contains("rows of 32 threads"));
  CHECK_THAT(info.variant, !Catch::Contains("vectors"));
  CHECK_THAT(fz::inspect(fz::sum(base.slice({{}, fz::Slice{0, 128}}), 0)).variant, Catch::Contains("4-wide vectors"));
  fz::Array<float> s(test::poisoned(DType::float32, {128})), v(test::poisoned(DType::float32, {128}));
  fz::copyto(s, fz::sum(view, 0));  // into the poisoned arrays, so an output the kernel skips shows
  fz::copyto(v, fz::var(view, 0));
  const auto hs = s.to_host(), hv = v.to_host();
  int bad = 0;
  for (int c = 0; c < 128; ++c) {
    double sum = 0, sq = 0;
    for (int r = 0; r < 300; ++r) sum += h[static_cast<std::size_t>(r * 132 + c + 1)];
    const double mean = sum / 300;
    for (int r = 0; r < 300; ++r)
      sq +=
          (h[static_cast<std::size_t>(r * 132 + c + 1)] - mean) * (h[static_cast<std::size_t>(r * 132 + c + 1)] - mean);
    bad += std::abs(hs[static_cast<std::size_t>(c)] - sum) > 1e-4 ||
           std::abs(hv[static_cast<std::size_t>(c)] - sq / 300) > 1e-5;
  }
  CHECK(bad == 0);
  // bit-identical run to run: the combination order is fixed by the layout alone
  fz::Array<float> again = fz::sum(view, 0);
  CHECK(std::memcmp(again.to_host().data(), hs.data(), hs.size() * sizeof(float)) == 0);
}

TEST_CASE("every reduction x dtype over N and H*W around C (a batch norm's statistics) matches the host reference",
          "[gpu][reductions][two_dims]") {
  // inner rows of 2,080 elements (a whole number of 16-byte vectors for every dtype): each block streams
  // part of one outer row; 2,091 (odd) and a strided view walk both dimensions element by element
  const std::vector<Case> cases = {{{3, 5, 40, 52}, {0, 2, 3}},
                                   {{3, 5, 40, 52}, {0, 2, 3}, true},
                                   {{3, 5, 41, 51}, {0, 2, 3}},
                                   {{3, 5, 40, 104}, {0, 2, 3}, false, false, 2}};
  const auto [checked, failed] = check_every_op_and_dtype(cases);
  CHECK(failed == 0);
  CHECK(checked == (static_cast<int>(Op::var) + 1 - static_cast<int>(Op::sum)) * fz::kNumDTypes * 4);
}

TEST_CASE("reductions over an odd 119x127x143 array", "[gpu][reductions]") {
  const fz::Shape shape{119, 127, 143};
  for (DType d : {DType::float32, DType::int32, DType::float16, DType::float64}) {
    for (Op op : {Op::sum, Op::max, Op::argmin, Op::mean}) {
      const auto values = data_for(op, d, static_cast<std::size_t>(fz::numel(shape)), 7);
      const fz::ArrayBase x = test::upload(values, d, shape);
      for (const auto& axes : std::vector<std::vector<int>>{{0}, {1}, {2}, {0, 2}, {0, 1, 2}}) {
        const auto arg = axes_arg(axes, false);
        const auto want = test::reduce(op, d, fz::ir::reduction_result_dtype(op, d), values, shape, mask_of(arg, 3));
        CHECK(compare(op, d, run(op, x, arg), want, fmt::format("axes {}", fmt::join(axes, ","))) == 0);
      }
    }
  }
}

TEST_CASE("min, max and their arg and nan forms follow NumPy's NaN rules", "[gpu][reductions]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  //                                    row 0: a NaN        row 1: all NaN      row 2: none
  const std::vector<float> row_nan_vals = {1, nan, -3, nan, nan, nan, nan, nan, 4, 2, -1, 4};
  auto v = fz::asarray(row_nan_vals, {3, 4});
  fz::Array<float> mx = fz::max(v, 1), nmx = fz::nanmax(v, 1), nmn = fz::nanmin(v, 1);
  fz::Array<std::int64_t> amx = fz::argmax(v, 1), amn = fz::argmin(v, 1);
  fz::Array<float> ns = fz::nansum(v, 1);
  const auto h = mx.to_host();
  CHECK((std::isnan(h[0]) && std::isnan(h[1]) && h[2] == 4));
  CHECK(nmx.to_host()[0] == 1);
  CHECK(std::isnan(nmx.to_host()[1]));
  CHECK(nmn.to_host()[2] == -1);
  CHECK(amx.to_host() == std::vector<std::int64_t>{1, 0, 0});  // the first NaN, else the first maximum
  CHECK(amn.to_host() == std::vector<std::int64_t>{1, 0, 2});
  CHECK(ns.to_host() == std::vector<float>{-2, 0, 9});
}

TEST_CASE("prologues and epilogues fuse; reduction results compose", "[gpu][reductions]") {
  const std::int64_t n = 100003;
  const auto hx = test::random<float>(static_cast<std::size_t>(n), -1, 1, 1),
             hy = test::random<float>(static_cast<std::size_t>(n), -1, 1, 2);
  auto x = fz::asarray(hx), y = fz::asarray(hy);
  double dot = 0, dot_f32 = 0, sq = 0, total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    dot += double(hx[i]) * hy[i], sq += double(hx[i]) * hx[i], total += hx[i];
    dot_f32 += static_cast<double>(hx[i] * hy[i]);  // the product rounded to float32, as the prologue computes it
  }

  fz::reset_stats();
  fz::Array<float> d = fz::sum(x * y);
  CHECK(d.ndim() == 0);
  CHECK(fz::stats().launches == 1);  // one kernel, nothing written but the result
  CHECK(fz::stats().bytes_written == 4);
  CHECK(d.item() == Approx(dot).epsilon(1e-5));
  fz::Array<float> norm = fz::sqrt(fz::sum(x * x));
  CHECK(norm.item() == Approx(std::sqrt(sq)).epsilon(1e-5));
  fz::Array<double> dd = fz::sum<double>(x * y);  // float64 accumulation of a float32 prologue (NumPy's dtype=)
  CHECK(dd.item() == Approx(dot_f32).epsilon(1e-12));

  fz::reset_stats();
  fz::Array<float> scaled = x / fz::sum(x);  // two kernels: the sum, then the division
  CHECK(fz::stats().launches == 2);
  const auto hs = scaled.to_host();
  CHECK(hs[17] == Approx(hx[17] / total).epsilon(1e-4));

  {  // the unfused baseline agrees and runs each op alone
    fz::Unfused unfused;
    fz::reset_stats();
    fz::Array<float> du = fz::sum(x * y);
    CHECK(fz::stats().launches == 2);
    CHECK(du.item() == Approx(dot).epsilon(1e-5));
  }

  // m - mean(m, 0, keepdims) broadcasts the means back; var/std with ddof; int mean is float64
  const std::int64_t R = 37, C = 53;
  const auto hm = test::random<float>(static_cast<std::size_t>(R * C), 0, 10, 3);
  auto m = fz::asarray(hm, {R, C});
  fz::Array<float> centered = m - fz::mean(m, 0, true);
  fz::Array<float> v1 = fz::var(m, 0, false, 1.0), s0 = fz::std(m, 0);
  const auto hc = centered.to_host(), hv = v1.to_host(), hsd = s0.to_host();
  for (std::int64_t c = 0; c < C; c += 13) {
    double mean = 0, ss = 0;
    for (std::int64_t r = 0; r < R; ++r) mean += hm[r * C + c];
    mean /= R;
    for (std::int64_t r = 0; r < R; ++r) ss += (hm[r * C + c] - mean) * (hm[r * C + c] - mean);
    CHECK(hc[5 * C + c] == Approx(hm[5 * C + c] - mean).margin(1e-4));
    CHECK(hv[c] == Approx(ss / (R - 1)).epsilon(1e-5));
    CHECK(hsd[c] == Approx(std::sqrt(ss / R)).epsilon(1e-5));
  }
  auto mi = fz::asarray<std::int32_t>({1, 2, 3, 4}, {2, 2});
  fz::Array<double> mean_i = fz::mean(mi, 1);
  CHECK(mean_i.to_host() == std::vector<double>{1.5, 3.5});

  // results land in existing arrays, strided views, and += adds a reduction in place
  fz::Array<float> rows = fz::zeros<float>({R});
  const auto rows_ptr = rows.data_ptr();
  rows = fz::sum(m, 1);
  CHECK(rows.data_ptr() == rows_ptr);
  rows += fz::sum(m, 1);
  fz::Array<float> wide = fz::zeros<float>({R, 2});
  auto col_view = wide.slice({{}, fz::Slice{1, 2}});
  col_view = fz::sum(m, 1, true);
  const auto hr = rows.to_host(), hw = wide.to_host();
  double r3 = 0;
  for (std::int64_t c = 0; c < C; ++c) r3 += hm[3 * C + c];
  CHECK(hr[3] == Approx(2 * r3).epsilon(1e-5));
  CHECK(hw[3 * 2 + 1] == Approx(r3).epsilon(1e-5));
  CHECK(hw[3 * 2 + 0] == 0);
}

TEST_CASE("a float32 sum of 2^26 elements is accurate and bit-identical run to run", "[gpu][reductions]") {
  const std::int64_t n = std::int64_t{1} << 26;
  const auto hx = test::random<float>(static_cast<std::size_t>(n), 0, 1, 11);
  auto x = fz::asarray(hx);
  double want = 0;
  for (float v : hx) want += v;
  fz::Array<float> s = fz::sum(x);
  const float got = s.item();
  const double ulp = std::nextafter(static_cast<float>(want), 1e30f) - static_cast<float>(want);
  INFO("sum " << got << " reference " << want << " error " << (got - want) / ulp << " ulp");
  CHECK(std::abs(got - want) <= 4 * 26 * ulp);  // a few ulp * log2(n)

  auto m = x.reshape({8192, 8192});
  fz::Array<float> rows0 = fz::sum(m, 1), cols0 = fz::sum(m, 0);
  for (int run = 0; run < 4; ++run) {
    fz::Array<float> s2 = fz::sum(x), rows = fz::sum(m, 1), cols = fz::sum(m, 0);
    const float g2 = s2.item();
    CHECK(std::memcmp(&g2, &got, sizeof got) == 0);
    CHECK(rows.to_host() == rows0.to_host());
    CHECK(cols.to_host() == cols0.to_host());
  }
}

TEST_CASE("reduction errors leave the output untouched", "[gpu][reductions]") {
  auto e = fz::zeros<float>({3, 0});
  fz::Array<float> out = fz::full<float>({3}, 7.f);
  CHECK_THROWS_AS(out = fz::max(e, 1), fz::ShapeError);
  CHECK_THROWS_AS(out = fz::sum(e, 2), fz::ShapeError);
  CHECK(out.to_host() == std::vector<float>{7, 7, 7});
  fz::Array<float> s = fz::sum(e, 1), p = fz::prod(e, 1), mean = fz::mean(e, 1);
  CHECK(s.to_host() == std::vector<float>{0, 0, 0});
  CHECK(p.to_host() == std::vector<float>{1, 1, 1});
  CHECK(std::isnan(mean.to_host()[0]));
}

TEST_CASE("fz::tie writes several outputs from one kernel", "[gpu][reductions][tie]") {
  auto x = fz::asarray<float>({1, 2, 3, 4, 5, 6}, {6});
  auto y = fz::asarray<float>({10, 20, 30, 40, 50, 60}, {6});
  fz::Array<float> a;
  fz::Array<double> b;
  fz::reset_stats();
  fz::tie(a, b) = std::make_tuple(x + y, x * y);
  CHECK(fz::stats().launches == 1);
  CHECK(fz::stats().bytes_read == 48);  // each input once
  CHECK(a.to_host() == std::vector<float>{11, 22, 33, 44, 55, 66});
  CHECK(b.to_host() == std::vector<double>{10, 40, 90, 160, 250, 360});

  // every output keeps its own shape: (2,) and (2, 2)
  auto u = fz::asarray<float>({1, 2}, {2});
  auto w = fz::asarray<float>({10, 20, 30, 40}, {2, 2});
  fz::Array<float> p, q;
  fz::tie(p, q) = std::forward_as_tuple(u * 3, u + w);
  CHECK(p.shape() == fz::Shape{2});
  CHECK(q.shape() == fz::Shape{2, 2});
  CHECK(p.to_host() == std::vector<float>{3, 6});
  CHECK(q.to_host() == std::vector<float>{11, 22, 31, 42});

  // outputs that are inputs: every read happens before any write (NumPy's answer)
  auto s = fz::asarray<float>({1, 2, 3}, {3});
  auto t = fz::asarray<float>({0, 0, 0, 100, 100, 100}, {2, 3});
  fz::Array<float> r;
  fz::tie(s, r) = std::forward_as_tuple(s + 1, s + t);
  CHECK(s.to_host() == std::vector<float>{2, 3, 4});
  CHECK(r.to_host() == std::vector<float>{1, 2, 3, 101, 102, 103});

  // with a large array: vectorized, big enough for many blocks, and with the in-place form
  const std::int64_t n = (1 << 20) + 3;
  const auto hx = test::random<float>(static_cast<std::size_t>(n), -1, 1, 5);
  auto bx = fz::asarray(hx), by = fz::asarray(hx);
  fz::Array<float> c1, c2;
  fz::tie(c1, c2) = std::forward_as_tuple(bx + by, bx - 2 * by);
  fz::tie(bx, by) = std::forward_as_tuple(bx * 2, bx + by);
  const auto h1 = c1.to_host(), h2 = c2.to_host(), hbx = bx.to_host(), hby = by.to_host();
  CHECK(h1[n - 1] == 2 * hx[n - 1]);
  CHECK(h2[12345] == -hx[12345]);
  CHECK(hbx[777] == 2 * hx[777]);
  CHECK(hby[777] == 2 * hx[777]);

  fz::Array<float> sum_out, max_out;  // reductions among the outputs: each its own kernel
  fz::tie(sum_out, max_out) = std::forward_as_tuple(fz::sum(x), fz::max(x * y));
  CHECK(sum_out.item() == 21);
  CHECK(max_out.item() == 360);
  CHECK_THROWS_AS((fz::tie(a, a) = std::forward_as_tuple(x, y)), fz::Error);
}

TEST_CASE("a column reduction of many columns reads neighbouring outputs per thread", "[gpu][reductions]") {
  const std::int64_t R = 5, C = std::int64_t{1} << 22;  // enough columns to use 16-byte loads across outputs
  const auto h = test::random<float>(static_cast<std::size_t>(R * C), -1, 1, 21);
  auto m = fz::asarray(h, {R, C});
  CHECK_THAT(fz::inspect(fz::max(m, 0)).variant, Catch::Contains("4-wide vectors"));
  fz::Array<float> s = fz::sum(m, 0), mx = fz::max(m, 0);
  fz::Array<std::int64_t> am = fz::argmin(m, 0);
  const auto hs = s.to_host(), hm = mx.to_host();
  const auto ha = am.to_host();
  int bad = 0;
  for (std::int64_t c = 0; c < C; c += 997) {
    double sum = 0;
    float best = -1e30f, low = 1e30f;
    std::int64_t arg = 0;
    for (std::int64_t r = 0; r < R; ++r) {
      const float v = h[static_cast<std::size_t>(r * C + c)];
      sum += v;
      best = std::max(best, v);
      if (v < low) low = v, arg = r;
    }
    bad += std::abs(hs[c] - sum) > 1e-5 || hm[c] != best || ha[c] != arg;
  }
  CHECK(bad == 0);
}
