// SPDX-License-Identifier: Apache-2.0
// Reductions without a GPU: NumPy's result dtypes, every reduction x dtype x thread layout through
// NVRTC, the plans (how many kernels, which fused), and bad axes.
#include <fmt/format.h>

#include "codegen/emit_reduction.hpp"
#include "runtime/compile/nvrtc.hpp"
#include "schedule/tuning.hpp"
#include "support.hpp"

using fz::DType;
using fz::ir::Op;

TEST_CASE("reduction result dtypes follow NumPy", "[reduction][dtype]") {
  using fz::ir::reduction_result_dtype;
  // np.sum / np.prod: bool and signed ints -> int64, unsigned -> uint64, floats keep their dtype
  for (DType d : {DType::bool_, DType::int8, DType::int16, DType::int32, DType::int64}) {
    CHECK(reduction_result_dtype(Op::sum, d) == DType::int64);
    CHECK(reduction_result_dtype(Op::prod, d) == DType::int64);
  }
  for (DType d : {DType::uint8, DType::uint16, DType::uint32, DType::uint64})
    CHECK(reduction_result_dtype(Op::sum, d) == DType::uint64);
  for (DType d : {DType::float16, DType::bfloat16, DType::float32, DType::float64}) {
    CHECK(reduction_result_dtype(Op::sum, d) == d);
    CHECK(reduction_result_dtype(Op::mean, d) == d);
    CHECK(reduction_result_dtype(Op::max, d) == d);
  }
  // np.mean of integers and bool is float64; argmin/argmax give int64; any/all give bool
  for (DType d : {DType::bool_, DType::int8, DType::uint32, DType::int64})
    CHECK(reduction_result_dtype(Op::mean, d) == DType::float64);
  CHECK(reduction_result_dtype(Op::argmax, DType::float16) == DType::int64);
  CHECK(reduction_result_dtype(Op::any, DType::float32) == DType::bool_);
  CHECK(reduction_result_dtype(Op::min, DType::int8) == DType::int8);
  // 16-bit floats accumulate in float32
  CHECK(fz::ir::reduction_accumulator_dtype(Op::sum, DType::float16) == DType::float32);
  CHECK(fz::ir::reduction_accumulator_dtype(Op::mean, DType::bfloat16) == DType::float32);
  CHECK(fz::ir::reduction_accumulator_dtype(Op::sum, DType::int8) == DType::int8);  // sum<int8>: as NumPy's dtype=

  // the C++ result types agree with the table
  auto i32 = fz::placeholder<std::int32_t>({4});
  auto u8 = fz::placeholder<std::uint8_t>({4});
  auto h = fz::placeholder<fz::half>({4});
  auto b = fz::placeholder<bool>({4});
  STATIC_REQUIRE(decltype(fz::sum(i32))::dtype == DType::int64);
  STATIC_REQUIRE(decltype(fz::sum(u8))::dtype == DType::uint64);
  STATIC_REQUIRE(decltype(fz::mean(i32))::dtype == DType::float64);
  STATIC_REQUIRE(decltype(fz::mean(h))::dtype == DType::float16);
  STATIC_REQUIRE(decltype(fz::var(i32))::dtype == DType::float64);
  STATIC_REQUIRE(decltype(fz::std(h))::dtype == DType::float16);
  STATIC_REQUIRE(decltype(fz::sum(b))::dtype == DType::int64);
  STATIC_REQUIRE(decltype(fz::sum<double>(h))::dtype == DType::float64);
  STATIC_REQUIRE(decltype(fz::argmax(h, 0))::dtype == DType::int64);
  STATIC_REQUIRE(decltype(fz::all(i32))::dtype == DType::bool_);
  STATIC_REQUIRE(decltype(fz::sqrt(fz::sum(h * h)))::dtype == DType::float16);
}

namespace {

/// One reduction graph: `op` over input(d) (times 2 for arithmetic dtypes, to have a prologue) with an
/// epilogue adding a scalar where the result allows it.
fz::ir::Graph reduction_graph(Op op, DType d) {
  fz::ir::Graph g;
  std::uint32_t x = g.input(d);
  if (d != DType::bool_) x = g.binary(Op::mul, x, g.scalar(d));
  std::uint32_t r = g.reduce(op, x, fz::ir::reduction_result_dtype(op, d));
  if (g.dtype(r) != DType::bool_) r = g.binary(Op::add, r, g.scalar(g.dtype(r)));
  g.outputs.push_back(r);
  return fz::ir::canonicalize(g);
}

std::vector<fz::codegen::ReduceVariant> layouts(DType d, DType out) {
  using fz::codegen::ReduceMode;
  std::vector<fz::codegen::ReduceVariant> vs;
  auto base = [&] {
    fz::codegen::ReduceVariant v;
    v.out_dtype = out;
    v.n_params = 1;
    return v;
  };
  auto v = base();  // a warp per output, 2-d kept and reduced spaces
  v.group = 32, v.rank_kept = 2, v.rank_reduced = 2;
  vs.push_back(v);
  v = base();  // a block per output, vectorized, split (the full reduction)
  v.group = 256, v.rank_reduced = 1, v.vector_width = static_cast<std::uint8_t>(16 / fz::itemsize(d)), v.split = true;
  vs.push_back(v);
  v = base();  // a thread per output, split (the column reduction)
  v.mode = ReduceMode::outer, v.rank_kept = 1, v.rank_reduced = 1, v.split = true;
  vs.push_back(v);
  v.vector_width = static_cast<std::uint8_t>(16 / fz::itemsize(d));  // ... with neighbouring outputs per thread
  vs.push_back(v);
  v.split = false;
  vs.push_back(v);
  v = base();  // a block per part of an outer row, vectorized (a batch norm's N and H*W around C)
  v.group = 256, v.rank_kept = 1, v.rank_reduced = 2, v.vector_width = static_cast<std::uint8_t>(16 / fz::itemsize(d)),
  v.split = true;
  vs.push_back(v);
  v = base();  // row groups over a few columns, split (a column sum of few columns)
  v.mode = ReduceMode::outer, v.rank_kept = 1, v.rank_reduced = 1, v.row_groups = 8, v.split = true;
  vs.push_back(v);
  v.vector_width = static_cast<std::uint8_t>(16 / fz::itemsize(d));  // ... with neighbouring outputs per thread
  vs.push_back(v);
  v.rank_kept = 2, v.row_groups = 4, v.split = false;  // ... a middle axis, in one block per tile
  vs.push_back(v);
  v.rank_kept = 1, v.row_groups = 8, v.cluster = 8;  // ... each tile's rows over a cluster (reduce_cluster)
  vs.push_back(v);
  return vs;
}

}  // namespace

TEST_CASE("every reduction compiles through NVRTC for every dtype and thread layout", "[reduction][nvrtc][compile-sweep]") {
  int kernels = 0;
  for (int di = 0; di < fz::kNumDTypes; ++di) {
    const DType d = static_cast<DType>(di);
    std::string program;  // one NVRTC program per dtype, each kernel in its own namespace
    for (int o = static_cast<int>(Op::sum); o <= static_cast<int>(Op::var); ++o) {
      const Op op = static_cast<Op>(o);
      const fz::ir::Graph g = reduction_graph(op, d);
      for (const auto& v : layouts(d, g.dtype(g.outputs[0])))
        program += fmt::format("namespace k{} {{\n{}}}\n", kernels++, fz::codegen::emit_reduction(g, v, "").source);
    }
    INFO("dtype " << fz::dtype_name(d));
    CHECK_NOTHROW(
        fz::detail::compile(program, fmt::format("all_reductions_{}", fz::dtype_tag(d)), test::sweep_target(d)));
  }
  constexpr int n_ops = static_cast<int>(Op::var) + 1 - static_cast<int>(Op::sum);
  CHECK(kernels == n_ops * fz::kNumDTypes * 10);
}

TEST_CASE("inspect shows how an expression with reductions runs", "[reduction][plan]") {
  auto x = fz::placeholder<float>({1 << 20}), y = fz::placeholder<float>({1 << 20});
  auto m = fz::placeholder<float>({119, 127});

  const fz::KernelInfo dot = fz::inspect(fz::sum(x * y));
  CHECK(dot.kernels == 1);
  CHECK_THAT(dot.name, Catch::StartsWith("fz_mul_sum_f32_"));
  CHECK_THAT(dot.variant, Catch::Contains("split over blocks"));
  CHECK_THAT(dot.variant, Catch::Contains("4-wide vectors"));

  const fz::KernelInfo norm = fz::inspect(fz::sqrt(fz::sum(x * x)));  // prologue and epilogue, one kernel
  CHECK(norm.kernels == 1);
  CHECK_THAT(norm.source, Catch::Contains("= sqrt(r)"));  // in the finalization, after the sum

  const fz::KernelInfo rows = fz::inspect(fz::mean(m, 1));
  CHECK(rows.kernels == 1);
  CHECK_THAT(rows.variant, Catch::Contains("a warp per output"));
  const fz::KernelInfo cols = fz::inspect(fz::mean(m, 0));  // few columns: row groups of a block share them
  CHECK_THAT(cols.variant, Catch::Contains("8 rows of 32 threads"));
  CHECK_THAT(cols.source, Catch::Contains("__launch_bounds__(256)") && Catch::Contains("#pragma unroll 4"));
  {  // a measurement's registers and unrolling for those row groups: other kernels, other hashes
    const fz::detail::Tuning saved = fz::detail::tuning();
    fz::detail::set_tuning("reduce_min_blocks=4");
    fz::detail::set_tuning("reduce_unroll=8");
    const fz::KernelInfo tuned = fz::inspect(fz::mean(m, 0));
    fz::detail::tuning() = saved;
    CHECK_THAT(tuned.variant, Catch::Contains("registers for 4 blocks per SM, rows unrolled 8 times"));
    CHECK_THAT(tuned.source, Catch::Contains("__launch_bounds__(256, 4)") && Catch::Contains("#pragma unroll 8"));
    CHECK(tuned.hash != cols.hash);
    CHECK_THROWS_AS(fz::detail::set_tuning("reduce_min_blocks=9"), fz::Error);
    // the row ranges of a column tile as a cluster's blocks (reduce_cluster): no split partials
    fz::detail::set_tuning("reduce_cluster=8");
    auto tall = fz::placeholder<float>({3000, 64});
    const fz::KernelInfo clustered = fz::inspect(fz::mean(tall, 0));
    const fz::KernelInfo arg = fz::inspect(fz::argmin(fz::placeholder<std::int64_t>({3000, 64}), 0));
    fz::detail::tuning() = saved;
    CHECK_THAT(clustered.variant, Catch::Contains("over a cluster of 8 blocks") && !Catch::Contains("split over blocks"));
    CHECK_THAT(clustered.source, Catch::Contains("__cluster_dims__(1, 8, 1)") && !Catch::Contains("counters"));
    CHECK(clustered.registers > 0);  // compiled (NVRTC, sm_90)
    CHECK(arg.registers > 0);        // an int64 argmin's accumulators too
    // by default too, with registers for 4 blocks an SM (a split would cut each tile 47 ways)
    CHECK_THAT(fz::inspect(fz::mean(tall, 0)).variant,
               Catch::Contains("over a cluster of 8") && Catch::Contains("registers for 4 blocks per SM"));
    fz::detail::set_tuning("reduce_cluster=0");
    CHECK_THAT(fz::inspect(fz::mean(tall, 0)).variant, Catch::Contains("split over blocks"));
    fz::detail::set_tuning("reduce_cluster=-1");  // the default again, as --tune can say it
    CHECK_THAT(fz::inspect(fz::mean(tall, 0)).variant, Catch::Contains("over a cluster of 8"));
    fz::detail::tuning() = saved;
    CHECK_THROWS_AS(fz::detail::set_tuning("reduce_cluster=3"), fz::Error);
    CHECK_THROWS_AS(fz::detail::set_tuning("reduce_cluster=-2"), fz::Error);
    CHECK_THROWS_AS(fz::detail::set_tuning("reduce_min_blocks=-1"), fz::Error);  // (the only negative value)
  }
  CHECK_THAT(fz::inspect(fz::mean(m.slice({fz::Slice{0, 20}}), 0)).variant,
             Catch::Contains("a thread per output"));  // 20 rows

  const fz::KernelInfo centered =
      fz::inspect(m - fz::mean(m, 0, true));  // the mean meets its columns again: one layer kernel
  CHECK(centered.kernels == 1);
  CHECK_THAT(centered.variant, Catch::StartsWith("layer"));
  CHECK_THAT(centered.name, Catch::Contains("mean"));

  CHECK(fz::inspect(x / fz::sum(x)).kernels == 2);
  CHECK(fz::inspect(fz::var(m, 1)).kernels == 1);  // one pass: Welford's update, Chan's combine
  CHECK(fz::inspect(fz::sum(x) + fz::max(y)).kernels == 2);  // the sum and the max in one pass, then the addition

  // the same expression at two other sizes needs no other kernel source
  auto m2 = fz::placeholder<float>({300, 500});
  CHECK(fz::inspect(fz::mean(m2, 1)).name == fz::inspect(fz::mean(fz::placeholder<float>({40, 700}), 1)).name);
}

TEST_CASE("bad reduction axes are ShapeErrors naming the axis and rank", "[reduction][errors]") {
  auto m = fz::placeholder<float>({3, 4});
  CHECK_THROWS_MATCHES(fz::inspect(fz::sum(m, 2)), fz::ShapeError, Catch::Matchers::Message(
      "axis 2 is out of range for an operand of rank 2 (valid: -2 to 1)"));
  CHECK_THROWS_AS(fz::inspect(fz::sum(m, -3)), fz::ShapeError);
  CHECK_THROWS_AS(fz::inspect(fz::sum(m, {0, 0})), fz::ShapeError);
  CHECK_NOTHROW(fz::inspect(fz::sum(m, {-1, 0})));
  auto empty = fz::placeholder<float>({3, 0});
  CHECK_THROWS_AS(fz::inspect(fz::max(empty, 1)), fz::ShapeError);
}

TEST_CASE("generated reduction kernels match the golden files", "[reduction][golden]") {
  auto m = fz::placeholder<float>({4096, 1000});
  test::check_golden("row_sum", fz::inspect(fz::sum(m, 1)).source);
  auto x = fz::placeholder<double>({std::int64_t{1} << 24});
  const auto split = fz::inspect(fz::argmax(fz::abs(x)));
  CHECK(split.variant.find("split over blocks") != std::string::npos);
  test::check_golden("split_argmax", split.source);
  auto tall = fz::placeholder<float>({4096, 4096});
  const auto columns = fz::inspect(fz::sum(tall, 0));  // row groups over 128 columns, 16-byte loads, a cluster of 8
  CHECK_THAT(columns.variant, Catch::Contains("8 rows of 32 threads"));
  CHECK_THAT(columns.variant, Catch::Contains("over a cluster of 8"));
  test::check_golden("column_sum_cluster", columns.source);
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("reduce_cluster=0");  // the same split over blocks, combined through partials
  const auto split_columns = fz::inspect(fz::sum(tall, 0));
  fz::detail::tuning() = saved;
  CHECK_THAT(split_columns.variant, Catch::Contains("split over blocks"));
  test::check_golden("column_sum_grouped", split_columns.source);
  // 8,192^2 splits each tile only 9 ways: the split stays
  CHECK_THAT(fz::inspect(fz::sum(fz::placeholder<float>({8192, 8192}), 0)).variant, !Catch::Contains("cluster"));
}

TEST_CASE("short rows reduce in part of a warp, for every op and dtype", "[reduction][nvrtc]") {
  int compiled = 0;
  auto check = [&]<class T>(T, std::int64_t D, int lanes) {
    auto m = fz::placeholder<T>({300, D});
    for (const fz::KernelInfo& k : {fz::inspect(fz::sum(m, -1)), fz::inspect(fz::var(m, -1)),
                                    fz::inspect(fz::argmax(m, -1)), fz::inspect(fz::max(m, -1), fz::mean(m, -1))}) {
      INFO(k.name << ": " << k.variant);
      CHECK_THAT(k.variant,
                 Catch::Contains(fmt::format("{} thread{} per", lanes,
                                             lanes == 1 ? "" : "s")));  // output, or row (a layer kernel for the tie)
      CHECK(!k.arch.empty());
      ++compiled;
    }
  };
  check(float{}, 100, 8);        // 25 vectors of 4
  check(double{}, 7, 2);         // 7 scalars
  check(fz::half{}, 128, 4);     // 16 vectors of 8
  check(std::int32_t{}, 3, 1);   // three scalars: one lane
  CHECK(compiled == 16);
}

TEST_CASE("reductions over two reduced dimensions stream rows of vectors, for every op", "[reduction][nvrtc]") {
  // a batch norm's statistics: N and H*W around C; each block streams part of one image's channel plane
  int compiled = 0;
  auto check = [&]<class T>(T, int V) {
    auto t = fz::placeholder<T>({4, 16, 48, 48});
    for (const fz::KernelInfo& k : {fz::inspect(fz::sum(t, {0, 2, 3})), fz::inspect(fz::var(t, {0, 2, 3})),
                                    fz::inspect(fz::max(t * t, {0, 2, 3})),
                                    fz::inspect(fz::mean(t, {0, 2, 3}, true), fz::var(t, {0, 2, 3}, true))}) {
      INFO(k.name << ": " << k.variant);
      ++compiled;
      CHECK_THAT(k.variant, Catch::Contains(fmt::format("{}-wide vectors", V)));
      CHECK_THAT(k.variant, Catch::Contains("reduced rank 2"));
      CHECK_THAT(k.variant, Catch::Contains("split over blocks"));
      CHECK_THAT(k.source, Catch::Contains("r_base + r"));
      CHECK(!k.arch.empty());
    }
  };
  check(float{}, 4);
  check(fz::bfloat16{}, 8);
  check(double{}, 2);
  CHECK(compiled == 12);
}
