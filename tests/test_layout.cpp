// SPDX-License-Identifier: Apache-2.0
// Layout analysis without a GPU: which variant a call gets from its arrays' shapes, strides and
// alignment (placeholders are enough), for elementwise and reduction kernels.
#include "codegen/launch_shape.hpp"
#include "runtime/exec/plan.hpp"
#include "schedule/call_graph.hpp"
#include "schedule/layout.hpp"
#include "schedule/partition.hpp"
#include "schedule/reduce_layout.hpp"
#include "schedule/tuning.hpp"
#include "support.hpp"

using fz::codegen::Access;

namespace {

/// The layout of `e` written into one output of `out_shape`.
template <class E> fz::detail::Layout layout_of(const E& e, fz::DType out_dtype, const fz::Shape& out_shape) {
  fz::detail::Layout L;
  const fz::ArrayBase out = fz::ArrayBase::make_placeholder(out_dtype, out_shape);
  const fz::ArrayBase* outs[1] = {&out};
  fz::detail::with_call(e, [&](const fz::detail::Call& c) { fz::detail::analyze(c, outs, 1, L); });
  return L;
}

/// The layout of reducing `x` over `axes` (keepdims false).
/// (`device`: the one planned for; by default the H100 fusion plans for without a GPU.)
fz::detail::ReduceLayout reduce_layout_of(const fz::ArrayBase& x, std::vector<int> axes,
                                          const fz::codegen::TargetDevice& device = {}) {
  fz::detail::ReduceArg arg;
  arg.n_axes = static_cast<std::int8_t>(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) arg.axes[i] = static_cast<std::int8_t>(axes[i]);
  const fz::detail::Reduced shapes = fz::detail::reduced_shapes(x.shape(), arg);
  const fz::ArrayBase out = fz::ArrayBase::make_placeholder(x.dtype(), shapes.out);
  fz::detail::ReduceLayout L;
  L.params[0] = &x;
  fz::detail::analyze_reduction(1, out, shapes, arg, fz::itemsize(x.dtype()), device, L);
  return L;
}

/// The kernels the expressions `e...` split into (their canonical graph, equal reduction arguments merged
/// as a call's are before it runs, partitioned in `mode`).
template <class... E>
fz::detail::Partition partition_of(fz::detail::PartitionMode mode, const E&... e) {
  fz::detail::Partition p;
  fz::detail::with_call_multi(
      [&](const fz::detail::Call& c) {
        p = fz::detail::partition(fz::ir::canonicalize(fz::detail::graph_of(fz::detail::with_shared_reductions(c))),
                                  mode);
      },
      fz::detail::to_node(e)...);
  return p;
}

}  // namespace

TEST_CASE("partition: the kernels a graph splits into, decided from the graph alone", "[layout]") {
  using fz::detail::PartitionMode;
  auto x = fz::placeholder<float>({64, 1024}), y = fz::placeholder<float>({64, 1024});
  SECTION("elementwise math and a reduction at the root are one kernel over the expression's own graph") {
    CHECK(partition_of(PartitionMode::fused, fz::sin(x) + fz::cos(y)).direct);
    CHECK(partition_of(PartitionMode::fused, fz::sum((x - y) * (x - y))).direct);
  }
  SECTION("a reduction that meets its rows again: a layer kernel to try, else its own kernel, then the division") {
    const auto p = partition_of(PartitionMode::fused, x / fz::sum(x, -1, true));
    CHECK(p.layer);
    REQUIRE(p.steps.size() == 2);
    CHECK(p.temp_dtypes == std::vector<fz::DType>{fz::DType::float32});
    CHECK(p.steps[0].targets == std::vector<int>{0});   // the sum, into temporary 0
    CHECK(p.steps[1].targets == std::vector<int>{~0});  // the division, into the call's output 0
    CHECK(p.steps[1].arrays == std::vector<int>{0, ~0});  // reading x and the temporary
    CHECK(partition_of(PartitionMode::separate, x / fz::sum(x, -1, true)).layer == false);
  }
  SECTION("sibling reductions with equal axes share one kernel, each kept alone for when they cannot") {
    const auto p = partition_of(PartitionMode::fused, fz::sum(x, -1), fz::sum(x * x, -1));
    REQUIRE(p.steps.size() == 1);
    CHECK(p.steps[0].graph.outputs.size() == 2);
    CHECK(p.steps[0].alone.size() == 2);
    CHECK(p.kernels == 3);
    CHECK(partition_of(PartitionMode::separate, fz::sum(x, -1), fz::sum(x * x, -1)).steps.size() == 2);
  }
  SECTION("unfused: a kernel per operation, numbered in order") {
    const auto p = partition_of(PartitionMode::unfused, fz::sin(x) * 2.0f + y);
    REQUIRE(p.steps.size() == 3);
    for (int k = 0; k < 3; ++k) CHECK(p.steps[static_cast<std::size_t>(k)].kernel == k);
  }
}

TEST_CASE("layout: contiguous arrays of any rank become one linear loop with 16-byte vectors", "[layout]") {
  auto a = fz::placeholder<float>({64, 32, 8}), b = fz::placeholder<float>({64, 32, 8});
  const auto L = layout_of(a + b, fz::DType::float32, {64, 32, 8});
  CHECK(L.v.rank == 1);
  CHECK(L.shape == fz::Shape{64 * 32 * 8});
  CHECK(L.v.vector_width == fz::codegen::kVectorBytes / 4);
  CHECK_FALSE(L.v.has_strided());
  CHECK_FALSE(L.v.index64);
  CHECK(L.v.n_params == 2);
  // the same array read twice is one parameter
  CHECK(layout_of(a * a + b, fz::DType::float32, {64, 32, 8}).v.n_params == 2);
  // double: 2 per vector; bfloat16: 8
  auto d = fz::placeholder<double>({100});
  CHECK(layout_of(d + 1.0, fz::DType::float64, {100}).v.vector_width == 2);
  auto h = fz::placeholder<fz::bfloat16>({100});
  CHECK(layout_of(h + h, fz::DType::bfloat16, {100}).v.vector_width == 8);
}

TEST_CASE("layout: broadcasting, transposes and offsets pick the addressing", "[layout]") {
  auto m = fz::placeholder<float>({128, 64}), row = fz::placeholder<float>({64}),
       col = fz::placeholder<float>({128, 1});
  const auto L = layout_of(m + row * col, fz::DType::float32, {128, 64});
  CHECK(L.v.rank == 2);
  // every input walks the last dimension contiguously or not at all: a rows kernel, 16-byte vectors
  CHECK(L.v.rows);
  CHECK_FALSE(L.v.has_strided());
  CHECK(L.v.vector_width == 4);
  CHECK(L.v.access[0] == Access::along);  // m
  CHECK(L.v.access[1] == Access::along);  // row: stride 0 along the rows, 1 along the columns
  CHECK(L.v.access[2] == Access::row);    // col: one value per row
  CHECK(L.strides[1 + 1] == fz::Strides{0, 1});
  CHECK(L.strides[1 + 2] == fz::Strides{1, 0});
  // rows of 63 cannot hold whole vectors; a bias starting one element in cannot be aligned
  auto m63 = fz::placeholder<float>({128, 63}), row63 = fz::placeholder<float>({63});
  const auto L63 = layout_of(m63 + row63, fz::DType::float32, {128, 63});
  CHECK(L63.v.rows);
  CHECK(L63.v.vector_width == 1);
  auto wide_row = fz::placeholder<float>({65});
  CHECK(layout_of(m + wide_row.slice({fz::Slice{1, 65}}), fz::DType::float32, {128, 64}).v.vector_width == 1);
  // a batch norm's per-channel statistics: rows of H*W, one value per (n, c) row
  auto bn = fz::placeholder<float>({8, 64, 14, 14}), mu = fz::placeholder<float>({1, 64, 1, 1});
  const auto B = layout_of((bn - mu) * mu, fz::DType::float32, {8, 64, 14, 14});
  CHECK(B.v.rows);
  CHECK(B.v.rank == 3);
  CHECK(B.v.access[1] == Access::row);

  auto one = fz::placeholder<float>({1});
  CHECK(layout_of(m + one, fz::DType::float32, {128, 64}).v.access[1] == Access::broadcast);

  const auto T = layout_of(m.transpose() + 1.f, fz::DType::float32, {64, 128});
  CHECK(T.v.access[0] == Access::across);  // walks the second-to-last dimension contiguously: a tile
  CHECK(T.v.tiles);
  CHECK_FALSE(T.v.rows);
  CHECK(T.v.rank == 2);
  // every other column: not a transpose; one dimension of stride 2, read as whole vectors of m
  const auto S = layout_of(m.slice({{}, fz::Slice{{}, {}, 2}}) + 1.f, fz::DType::float32, {128, 32});
  CHECK(S.v.access[0] == Access::stepped);
  CHECK(S.v.step == 2);
  CHECK(S.v.rank == 1);
  CHECK(S.v.vector_width == 4);
  CHECK_FALSE(S.v.tiles);
  CHECK_FALSE(S.v.has_strided());
  // odd columns: one element past a vector boundary, less than the step: vectors from the boundary
  const auto odd = layout_of(m.slice({{}, fz::Slice{1, {}, 2}}) + 1.f, fz::DType::float32, {128, 32});
  CHECK(odd.v.access[0] == Access::stepped);
  CHECK(odd.v.vector_width == 4);
  CHECK(odd.v.step_phase[0] == 1);
  // every other column of a view of wider rows (a query of a fused qkv projection): a rows kernel, in vectors
  auto qkv = fz::placeholder<float>({128, 3 * 64});
  const auto q = qkv.slice({{}, fz::Slice{64, 128}});
  const auto rot = layout_of(q.slice({{}, fz::Slice{0, {}, 2}}) - q.slice({{}, fz::Slice{1, {}, 2}}), fz::DType::float32,
                             {128, 32});
  CHECK(rot.v.rows);
  CHECK(rot.v.rank == 2);
  CHECK(rot.v.step == 2);
  CHECK(rot.v.vector_width == 4);
  CHECK(rot.v.access[0] == Access::stepped);
  CHECK(rot.v.step_phase[0] == 0);
  CHECK(rot.v.step_phase[1] == 1);
  // rows read backwards: stepped, element by element (a row's last vector reads into the next row's span)
  const auto back = layout_of(q.slice({fz::Slice{{}, {}, -1}, fz::Slice{0, {}, 2}}) * 2.f, fz::DType::float32, {128, 32});
  CHECK(back.v.rows);
  CHECK(back.v.access[0] == Access::stepped);
  CHECK(back.v.vector_width == 1);
  // one stepped row for every row (its stride 0 along the rows): element by element, as its last vector would reach
  // past the view in every row
  const auto line64 = fz::placeholder<float>({64});
  const auto repeated = layout_of(m.slice({{}, fz::Slice{0, 32}}) + line64.slice({fz::Slice{{}, {}, 2}}),
                                  fz::DType::float32, {128, 32});
  CHECK(repeated.v.rows);
  CHECK(repeated.v.access[1] == Access::stepped);
  CHECK(repeated.v.vector_width == 1);
  // every third column of 64 (rows of 22 at 64 apart: a rows kernel, element by element: 22 holds no whole vectors)
  // and every fifth element (N-d indexing)
  const auto third = layout_of(m.slice({{}, fz::Slice{{}, {}, 3}}) + 1.f, fz::DType::float32, {128, 22});
  CHECK(third.v.rows);
  CHECK(third.v.access[0] == Access::stepped);
  CHECK(third.v.vector_width == 1);
  auto line = fz::placeholder<float>({1000});
  const auto five = layout_of(line.slice({fz::Slice{{}, {}, 5}}) + 1.f, fz::DType::float32, {200});
  CHECK(five.v.access[0] == Access::strided);
  CHECK(five.v.step == 0);
  // two inputs at strides 2 and 4: strided (one step per kernel)
  const auto two =
      layout_of(line.slice({fz::Slice{0, 500, 2}}) + line.slice({fz::Slice{{}, {}, 4}}), fz::DType::float32, {250});
  CHECK(two.v.access[0] == Access::strided);
  CHECK(two.v.access[1] == Access::strided);
  // double at stride 2 (16 bytes together): 2-wide vectors; at stride 4 (32 bytes): strided
  auto d = fz::placeholder<double>({1000});
  const auto d2 = layout_of(d.slice({fz::Slice{{}, {}, 2}}) * 2.0, fz::DType::float64, {500});
  CHECK(d2.v.access[0] == Access::stepped);
  CHECK(d2.v.vector_width == 2);
  CHECK(layout_of(d.slice({fz::Slice{{}, {}, 4}}) * 2.0, fz::DType::float64, {250}).v.access[0] == Access::strided);

  // A view starting one element in cannot use 16-byte accesses.
  auto v = fz::placeholder<float>({1000});
  const auto off = layout_of(v.slice({fz::Slice{1, 1000}}) * 2.f, fz::DType::float32, {999});
  CHECK(off.v.vector_width == 1);
  CHECK(off.v.rank == 1);
}

TEST_CASE("layout: 64-bit indexing only beyond 2^31 elements or offsets", "[layout]") {
  auto small = fz::placeholder<std::int8_t>({std::int64_t{1} << 30});
  CHECK_FALSE(layout_of(small + small, fz::DType::int8, {std::int64_t{1} << 30}).v.index64);
  auto big = fz::placeholder<std::int8_t>({(std::int64_t{1} << 31) + 16});
  CHECK(layout_of(big + big, fz::DType::int8, {(std::int64_t{1} << 31) + 16}).v.index64);
}

TEST_CASE("layout: a linear kernel takes a thread a vector, one calling a device function loops", "[layout]") {
  using fz::ir::Op;
  auto graph = [](fz::DType d, int adds, bool call) {
    fz::ir::Graph g;
    std::uint32_t x = g.input(d);
    if (d != fz::DType::float32 && d != fz::DType::float64) x = g.cast(x, fz::DType::float32);
    for (int i = 0; i < adds; ++i) x = g.binary(Op::add, x, g.scalar(fz::DType::float32));
    if (call) x = g.unary(Op::exp, x);
    g.outputs.push_back(x);
    return g;
  };
  CHECK_FALSE(fz::detail::loops_over_vectors(graph(fz::DType::float32, 20, false)));  // float32: a thread a vector
  CHECK_FALSE(fz::detail::loops_over_vectors(graph(fz::DType::bfloat16, 2, false)));  // 16-bit, little math
  CHECK(fz::detail::loops_over_vectors(graph(fz::DType::bfloat16, fz::detail::kLoopingMathOps, false)));
  CHECK(fz::detail::loops_over_vectors(graph(fz::DType::float16, 3, true)));  // 3 adds and an exp
  fz::ir::Graph drawn;  // a device function (fz::random's generators are ones): float32 loops too
  const std::uint32_t arg = drawn.input(fz::DType::float32);
  const fz::DType param = fz::DType::float32;
  drawn.outputs.push_back(drawn.call(fz::DType::float32, &arg, &param, 1));
  CHECK(fz::detail::loops_over_vectors(drawn));
  // 2^26 float32 in vectors of 4 on 132 SMs: 65,536 blocks of 256 threads, or 32 blocks an SM when the
  // expression calls a function (fz::random's key schedule is paid once per thread, not per vector)
  CHECK(fz::detail::linear_grid(std::int64_t{1} << 24, false, 132) == 65536);
  CHECK(fz::detail::linear_grid(std::int64_t{1} << 24, true, 132) == 132 * 32);
  CHECK(fz::detail::linear_grid(1000, true, 132) == 4);  // fewer vectors than the cap: a thread each still
  CHECK(fz::detail::linear_grid(0, false, 132) == 0);
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("linear_call_blocks_per_sm=0");
  CHECK(fz::detail::linear_grid(std::int64_t{1} << 24, true, 132) == 65536);
  fz::detail::set_tuning("linear_blocks_per_sm=4");
  CHECK(fz::detail::linear_grid(std::int64_t{1} << 24, false, 132) == 132 * 4);
  fz::detail::tuning() = saved;
  CHECK(fz::detail::linear_grid(std::int64_t{1} << 24, true, 100) == 100 * 32);
}

TEST_CASE("reduction layout: rows, columns, short rows and splits", "[layout][reductions]") {
  using fz::codegen::ReduceMode;
  const auto m = fz::ArrayBase::make_placeholder(fz::DType::float32, {8192, 8192});
  const auto rows = reduce_layout_of(m, {1});
  CHECK(rows.v.mode == ReduceMode::inner);
  CHECK(rows.v.group == fz::codegen::kBlockThreads);
  CHECK(rows.v.vector_width == 4);
  CHECK_FALSE(rows.v.split);  // 8192 outputs fill the GPU
  CHECK(rows.n_out == 8192);
  CHECK(rows.n_red == 8192);

  const auto cols = reduce_layout_of(m, {0});
  CHECK(cols.v.mode == ReduceMode::outer);
  CHECK(cols.n_out == 8192);

  const auto short_rows = reduce_layout_of(fz::ArrayBase::make_placeholder(fz::DType::float32, {4096, 100}), {1});
  // short rows take part of a warp: about kAccessesPerLane 16-byte accesses per lane
  CHECK(short_rows.v.group == 8);  // 25 vectors of 4
  CHECK(reduce_layout_of(fz::ArrayBase::make_placeholder(fz::DType::float32, {4096, 1000}), {1}).v.group ==
        fz::codegen::kWarpThreads);
  CHECK(reduce_layout_of(fz::ArrayBase::make_placeholder(fz::DType::float32, {4096, 7}), {1}).v.group ==
        2);  // 7 scalars
  CHECK(reduce_layout_of(fz::ArrayBase::make_placeholder(fz::DType::float32, {4096, 4000}), {1}).v.group ==
        fz::codegen::kWarpThreads);  // rows up to 4096 elements: a warp each (schedule/tuning.hpp)
  CHECK(reduce_layout_of(fz::ArrayBase::make_placeholder(fz::DType::float32, {4096, 5000}), {1}).v.group ==
        fz::codegen::kBlockThreads);

  const auto all = reduce_layout_of(fz::ArrayBase::make_placeholder(fz::DType::float32, {std::int64_t{1} << 26}), {0});
  CHECK(all.v.split);  // one output: the reduced range is split over blocks
  CHECK(all.splits > 1);
  CHECK(all.chunk * all.splits >= all.n_red);
  CHECK(all.splits * 32 <= 132 * fz::codegen::kBlocksPerSm * 32);

  // batch norm's statistics: N and H*W around C stay two reduced dimensions
  const auto bn = reduce_layout_of(fz::ArrayBase::make_placeholder(fz::DType::float32, {8, 64, 112, 112}), {0, 2, 3});
  CHECK(bn.v.rank_reduced == 2);
  CHECK(bn.n_out == 64);
  // ... streamed as rows of 16-byte vectors: every outer row (n) split into parts of `chunk` elements
  CHECK(bn.v.vector_width == 4);
  CHECK(bn.v.split);
  CHECK(bn.chunk % 4 == 0);
  const std::int64_t per_row = (112 * 112 + bn.chunk - 1) / bn.chunk;
  CHECK(bn.splits == 8 * per_row);
  // parts only as far as one wave of resident blocks holds: 64 channels x 8 images are 512 blocks already
  CHECK(per_row == 1);
  CHECK(bn.blocks * bn.splits <= 132 * fz::codegen::kSplitRowsBlocksPerSm);
  // two images: 128 rows, split (each thread still streaming several vectors) within one wave
  const auto two = reduce_layout_of(fz::ArrayBase::make_placeholder(fz::DType::float32, {2, 64, 112, 112}), {0, 2, 3});
  CHECK(two.v.rank_reduced == 2);
  CHECK(two.splits >= 2 * 2);
  CHECK(two.blocks * two.splits <= 132 * fz::codegen::kSplitRowsBlocksPerSm);
  // an odd H*W is no whole number of vectors: the scalar walk over both dimensions
  const auto odd = reduce_layout_of(fz::ArrayBase::make_placeholder(fz::DType::float32, {8, 64, 111, 111}), {0, 2, 3});
  CHECK(odd.v.rank_reduced == 2);
  CHECK(odd.v.vector_width == 1);
  // short inner rows (N and C around a small H*W) stay scalar too
  CHECK(reduce_layout_of(fz::ArrayBase::make_placeholder(fz::DType::float32, {64, 64, 16, 16}), {0, 2, 3})
            .v.vector_width == 1);
}

TEST_CASE("layout: transposed operands take tiles through shared memory", "[layout]") {
  auto a = fz::placeholder<float>({96, 200}), b = fz::placeholder<float>({200, 96});
  const auto L = layout_of(a + b.transpose(), fz::DType::float32, {96, 200});
  CHECK(L.v.tiles);
  CHECK_FALSE(L.v.has_strided());
  CHECK(L.v.access[0] == Access::strided);  // read at row and column offsets, along the output's rows
  CHECK(L.v.access[1] == Access::across);   // through the tile
  CHECK(L.v.describe().find("tiles") == 0);
  // a batch of transposes: the leading dimension stays, the last two are tiled
  auto x = fz::placeholder<double>({6, 40, 50});
  const auto X = layout_of(x + x.transpose({0, 2, 1}).transpose({0, 2, 1}), fz::DType::float64, {6, 40, 50});
  CHECK_FALSE(X.v.tiles);  // the same layout as x: contiguous
  const auto Xt = layout_of(x.transpose({0, 2, 1}) * 2.0, fz::DType::float64, {6, 50, 40});
  CHECK(Xt.v.tiles);
  CHECK(Xt.v.rank == 3);
  // 16-bit inputs, a row bias and a scalar beside the transposed one
  auto h = fz::placeholder<fz::half>({64, 64}), bias = fz::placeholder<fz::half>({64});
  const auto H = layout_of(h.transpose() + bias + 1.f, fz::DType::float16, {64, 64});
  CHECK(H.v.tiles);
  CHECK(H.v.access[1] == Access::strided);
  // too narrow for a tile (fewer than half a tile's rows): N-d indexing as before
  auto thin = fz::placeholder<float>({300, 8});
  CHECK_FALSE(layout_of(thin.transpose() + 1.f, fz::DType::float32, {8, 300}).v.tiles);
  // shared memory for a few transposed inputs (32 KiB: three float64 tiles); the rest are read strided
  std::vector<fz::Array<double>> qs;
  for (int i = 0; i < 5; ++i) qs.push_back(fz::placeholder<double>({64, 64}).transpose());
  const auto Q = layout_of(qs[0] + qs[1] + qs[2] + qs[3] + qs[4], fz::DType::float64, {64, 64});
  int across = 0, strided = 0;
  for (int p = 0; p < Q.v.n_params; ++p)
    across += Q.v.access[p] == Access::across, strided += Q.v.access[p] == Access::strided;
  CHECK(across == 3);
  CHECK(strided == 2);
  CHECK(Q.v.tiles);
}

TEST_CASE("reduction layout: the decisions take a plain description of the device, no runtime", "[layout][reductions]") {
  // One output over 2^26 elements: the reduced range is split so that the blocks fill the device once, so a
  // device of half the SMs gets half the splits (about), and one read off no GPU is the H100 planned for.
  const auto x = fz::ArrayBase::make_placeholder(fz::DType::float32, {std::int64_t{1} << 26});
  const fz::codegen::TargetDevice h100, half{.sms = 66};
  CHECK_FALSE(h100.real);
  CHECK(h100.sms == 132);
  const auto full = reduce_layout_of(x, {0}, h100), smaller = reduce_layout_of(x, {0}, half);
  REQUIRE(full.v.split);
  REQUIRE(smaller.v.split);
  CHECK(smaller.splits < full.splits);
  CHECK(smaller.splits * 2 >= full.splits - 2);
  CHECK(smaller.splits * 2 <= full.splits + 2);
  // a split fitted to the compiled kernel's registers needs a real device: the planned one is left as it is
  auto fitted = full;
  fz::detail::fit_split_to_kernel(fitted, 255, h100);
  CHECK(fitted.splits == full.splits);
  auto real = full;
  fz::detail::fit_split_to_kernel(real, 255, fz::codegen::TargetDevice{.real = true});
  CHECK(real.splits < full.splits);  // 255 registers a thread: fewer blocks fit an SM than the layout assumed
}
