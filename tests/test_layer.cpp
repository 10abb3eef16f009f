// SPDX-License-Identifier: Apache-2.0
// Layer kernels without a GPU: which expressions run as one kernel (and which stay plans), the
// strategies chosen, equal reductions computed once, and NVRTC compiling every layer x dtype x strategy.
#include "schedule/tuning.hpp"
#include "support.hpp"

namespace {

template <class T> struct Layers {
  // Each written the way a user writes it, over the last axis of `x` (rows of length D).
  static auto softmax(const fz::Array<T>& x) {
    return fz::exp(x - fz::max(x, -1, true)) / fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true);
  }
  static auto log_softmax(const fz::Array<T>& x) {
    return x - fz::max(x, -1, true) - fz::log(fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true));
  }
  static auto logsumexp(const fz::Array<T>& x) {
    return fz::max(x, -1) + fz::log(fz::sum(fz::exp(x - fz::max(x, -1, true)), -1));
  }
  static auto layer_norm(const fz::Array<T>& x, const fz::Array<T>& w, const fz::Array<T>& b) {
    return (x - fz::mean(x, -1, true)) * fz::rsqrt(fz::var(x, -1, true) + 1e-5f) * w + b;
  }
  static auto rms_norm(const fz::Array<T>& x, const fz::Array<T>& w) {
    auto xf = fz::cast<float>(x);
    return fz::cast<T>(xf * fz::rsqrt(fz::mean(xf * xf, -1, true) + 1e-6f) * fz::cast<float>(w));
  }
  static auto normalize(const fz::Array<T>& x) { return x / fz::sum(x, -1, true); }
  static auto center(const fz::Array<T>& x) { return x - fz::mean(x, -1, true); }
  static auto row_range(const fz::Array<T>& x) { return fz::max(x, -1) - fz::min(x, -1); }  // one value per row
};

/// Every layer of `Layers<T>` over rows of length `d` (`rows` of them; `transposed`: reading x.T), as one kernel.
template <class T> int check_layers(std::int64_t rows, std::int64_t d, bool transposed, const char* strategy) {
  using L = Layers<T>;
  auto base = transposed ? fz::placeholder<T>({d, rows}) : fz::placeholder<T>({rows, d});
  fz::Array<T> x = transposed ? base.transpose() : base;
  auto w = fz::placeholder<T>({d}), b = fz::placeholder<T>({d});
  int kernels = 0;
  const std::string one_pass = fz::inspect(L::row_range(x)).variant;  // nothing to keep: one read of the row
  CHECK_THAT(one_pass, Catch::Contains("each pass reads the row from memory"));
  for (const fz::KernelInfo& k :
       {fz::inspect(L::softmax(x)), fz::inspect(L::log_softmax(x)), fz::inspect(L::logsumexp(x)),
        fz::inspect(L::layer_norm(x, w, b)), fz::inspect(L::rms_norm(x, w)), fz::inspect(L::normalize(x)),
        fz::inspect(L::center(x))}) {
    INFO(fz::dtype_name(fz::dtype_of<T>) << " rows " << rows << " x " << d << (transposed ? " transposed: " : ": ")
                                         << k.name << ", " << k.variant);
    CHECK(k.kernels == 1);
    CHECK_THAT(k.variant, Catch::StartsWith("layer"));
    CHECK_THAT(k.variant, Catch::Contains(strategy));
    CHECK(!k.arch.empty());  // compiled by NVRTC
    ++kernels;
  }
  return kernels + 1;
}

}  // namespace

TEST_CASE("normalization layers and softmax compile as one kernel for every dtype and strategy", "[layer][nvrtc]") {
  int kernels = 0;
  kernels += check_layers<float>(4096, 1000, false, "a warp per row");
  kernels += check_layers<double>(4096, 1000, false, "a warp per row");
  kernels += check_layers<fz::half>(4096, 1000, false, "a warp per row");
  kernels += check_layers<fz::bfloat16>(4096, 1000, false, "a warp per row");
  kernels += check_layers<float>(1024, 8192, false, "a block per row");  // (softmax holds its row in registers)
  kernels += check_layers<fz::bfloat16>(1024, 8192, false, "a block per row");
  // long rows: a cluster of blocks per row, a slice of at most 16,384 elements each kept in shared memory
  kernels += check_layers<float>(256, 65536, false, "a cluster of 4 blocks per row");
  kernels += check_layers<fz::bfloat16>(256, 65536, false, "a cluster of 4 blocks per row");
  kernels += check_layers<double>(160, 100003, false, "a cluster of 8 blocks per row");  // odd rows: strided slices
  kernels +=
      check_layers<float>(128, 1 << 20, false, "each pass reads the row from memory");  // 4 MB rows: too long to keep
  kernels += check_layers<double>(300, 77, true, "strided rows");
  kernels += check_layers<fz::half>(300, 3000, true, "strided rows");
  CHECK(kernels == 12 * 8);
}

TEST_CASE("layer kernels: which expressions they take and which stay plans", "[layer][plan]") {
  auto m = fz::placeholder<float>({512, 1000});
  auto sq = fz::placeholder<float>({300, 300});
  auto v = fz::placeholder<float>({1 << 22});

  const fz::KernelInfo sm =
      fz::inspect(fz::exp(m - fz::max(m, -1, true)) / fz::sum(fz::exp(m - fz::max(m, -1, true)), -1, true));
  CHECK_THAT(sm.variant, Catch::Contains("2 reduction passes over each of 512 rows of 1000 elements"));
  CHECK_THAT(sm.source, Catch::Contains("reduction 1: sum (wave 2)"));
  CHECK_THAT(sm.source, !Catch::Contains("reduction 2"));  // the two max(m, -1, true) are one

  // leading reduced axes broadcast back without keepdims; a column softmax reads strided rows
  CHECK(fz::inspect(sq / fz::sum(sq, 0)).kernels == 1);
  CHECK_THAT(fz::inspect(fz::exp(m) / fz::sum(fz::exp(m), 0, true)).variant, Catch::Contains("strided rows"));

  // sum(sq, -1) without keepdims meets the rows along the other axis (NumPy broadcasting): not a layer
  const fz::KernelInfo wrong_axis = fz::inspect(sq + fz::sum(sq, -1));
  CHECK(wrong_axis.kernels == 2);
  // reductions over different axes
  CHECK(fz::inspect(m - fz::mean(m, 0, true) + fz::max(m, 1, true)).kernels == 3);
  // one row of 4M elements: a plan of split reductions; the equal max() runs once there too
  const fz::KernelInfo whole = fz::inspect(fz::exp(v - fz::max(v)) / fz::sum(fz::exp(v - fz::max(v))));
  CHECK(whole.kernels == 3);
  REQUIRE(whole.plan.size() == 3);
  CHECK_THAT(whole.plan[0], Catch::Contains("max"));
  CHECK_THAT(whole.plan[1], Catch::Contains("sum"));
  CHECK_THAT(whole.plan[1], !Catch::Contains("_max_"));
  // fz::SeparateReductions: the plan of one kernel per reduction, for comparisons
  {
    fz::SeparateReductions separate;
    CHECK(
        fz::inspect(fz::exp(m - fz::max(m, -1, true)) / fz::sum(fz::exp(m - fz::max(m, -1, true)), -1, true)).kernels ==
        3);
  }
  CHECK(fz::inspect(m / fz::sum(m, -1, true)).kernels == 1);
  // argmin/argmax keep their own kernels
  CHECK(fz::inspect(m - fz::cast<float>(fz::argmax(m, -1, true))).kernels == 2);
}

TEST_CASE("the named layers and activations are one kernel each, and relu is cuBLASLt's after a product",
          "[layer][plan]") {
  for (fz::DType d : {fz::DType::float32, fz::DType::bfloat16}) {
    INFO(fz::dtype_name(d));
    auto one = [](const fz::KernelInfo& k) {
      INFO(k);
      CHECK(k.kernels == 1);
      return k.variant;
    };
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const auto x = fz::placeholder<T>({64, 1000}), w = fz::placeholder<T>({1000}), b = fz::placeholder<T>({1000});
      CHECK_THAT(one(fz::inspect(fz::softmax(x))), Catch::Contains("layer"));
      CHECK_THAT(one(fz::inspect(fz::log_softmax(x))), Catch::Contains("layer"));
      CHECK_THAT(one(fz::inspect(fz::logsumexp(x, -1))), Catch::Contains("layer"));
      CHECK_THAT(one(fz::inspect(fz::rms_norm(x + 1.0f, w, 1e-6f))), Catch::Contains("layer"));
      CHECK_THAT(one(fz::inspect(fz::layer_norm(x, w, b, 1e-5f))), Catch::Contains("layer"));
      (void)one(fz::inspect(fz::layer_norm(x, 1e-5f)));
      (void)one(fz::inspect(fz::rms_norm(x, 1e-6f)));
      (void)one(fz::inspect(fz::silu(x) * fz::sigmoid(x) + fz::softplus(x) + fz::relu(x)));
      CHECK(fz::inspect(fz::softmax(x, 0)).kernels == 1);  // along columns too
      // NumPy dtypes: relu keeps integers, sigmoid makes them floating
      STATIC_REQUIRE(decltype(fz::relu(fz::placeholder<int>({4})))::dtype == fz::DType::int32);
      STATIC_REQUIRE(decltype(fz::relu(x))::dtype == fz::dtype_of<T>);
      STATIC_REQUIRE(decltype(fz::sigmoid(fz::placeholder<std::int16_t>({4})))::dtype == fz::DType::float32);
      const auto p = fz::matmul(x, fz::placeholder<T>({1000, 48}));
      CHECK_THAT(fz::inspect(fz::relu(p + fz::placeholder<T>({48}))).plan[0], Catch::Contains("bias+relu epilogue"));
    };
    if (d == fz::DType::float32)
      run(float{});
    else
      run(fz::bfloat16{});
  }
}

TEST_CASE("a layer kernel's source is stable", "[layer][golden]") {
  auto x = fz::placeholder<float>({64, 1000});
  auto softmax = [&] { return fz::exp(x - fz::max(x, -1, true)) / fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true); };
  // the row and its exps held in registers, 8 vectors a lane
  test::check_golden("softmax_layer_registers", fz::inspect(softmax()).source);
  // in shared memory
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("layer_registers=0");
  const std::string shared = fz::inspect(softmax()).source;
  fz::detail::tuning() = saved;
  test::check_golden("softmax_layer", shared);
}

TEST_CASE("sibling reductions over the same axes share one pass: ties, statistics, batch norm", "[layer][plan]") {
  auto x = fz::placeholder<float>({1 << 22}), z = fz::placeholder<float>({5});
  // whole arrays: one split reduction kernel computing both
  const fz::KernelInfo tie = fz::inspect(fz::sum(x), fz::sum(x * x));
  CHECK(tie.kernels == 1);
  CHECK_THAT(tie.variant, Catch::Contains("2 results from one pass") && Catch::Contains("split over blocks"));
  CHECK_THAT(tie.source, Catch::Contains("struct FzAcc { float a0; float a1; };"));
  // arrays of other shapes: each reduction over its own extent, a kernel each
  CHECK(fz::inspect(fz::sum(x), fz::sum(z)).kernels == 2);
  // a batch norm: one layer kernel over rows in segments (N and H·W around C), each channel's 100,352
  // elements kept in the shared memory of a cluster of blocks; its statistics alone over few channels
  // stay one split reduction computing both in one pass
  auto bn = fz::placeholder<float>({8, 64, 112, 112});
  auto g = fz::placeholder<float>({1, 64, 1, 1}), b = fz::placeholder<float>({1, 64, 1, 1});
  const fz::KernelInfo norm =
      fz::inspect((bn - fz::mean(bn, {0, 2, 3}, true)) * fz::rsqrt(fz::var(bn, {0, 2, 3}, true) + 1e-5f) * g + b);
  CHECK(norm.kernels == 1);
  CHECK_THAT(norm.variant, Catch::Contains("in segments") && Catch::Contains("a cluster of 8 blocks") &&
                               Catch::Contains("4-wide vectors"));
  CHECK_THAT(norm.source, Catch::Contains("fz_q * sst0 + fz_r"));
  auto few = fz::placeholder<float>({4, 16, 48, 48});
  const fz::KernelInfo stats = fz::inspect(fz::mean(few, {0, 2, 3}, true), fz::var(few, {0, 2, 3}, true));
  CHECK_THAT(stats.variant, Catch::Contains("2 results from one pass") && Catch::Contains("split over blocks"));
  // an output computed from a reduction that has its own kernel (several outputs give each reduction
  // one) is elementwise: it joins no sibling's pass (fuzz case 7003048 once put it in max's kernel)
  auto in0 = fz::placeholder<double>({1, 1, 1, 1});
  auto in1 = fz::placeholder<int>({1, 1});
  const fz::KernelInfo mixed =
      fz::inspect(fz::nanmax(fz::sum(in0, {2, 3}), {0, 1}), fz::cast<float>(fz::prod(in1, {0, 1})));
  CHECK(mixed.kernels == 4);
  // a reduction that reads another's result waits for it: softmax over one long row stays three kernels
  CHECK(fz::inspect(fz::exp(x - fz::max(x)) / fz::sum(fz::exp(x - fz::max(x)))).kernels == 3);
  // every dtype and thread layout of a multi-reduction compiles
  int compiled = 0;
  auto compile_all = [&]<class T>(T) {
    auto v = fz::placeholder<T>({1 << 20}), m = fz::placeholder<T>({300, 4000}), c = fz::placeholder<T>({4000, 300});
    for (const fz::KernelInfo& k :
         {fz::inspect(fz::sum(v), fz::var(v)), fz::inspect(fz::min(m, 0), fz::max(m, 0)),
          fz::inspect(fz::mean(c, 0), fz::var(c, 0, false, 1)), fz::inspect(fz::sum(m, 1), fz::prod(m, 1))}) {
      INFO(k.name << ": " << k.variant);
      CHECK(k.kernels == 1);
      CHECK(!k.arch.empty());
      ++compiled;
    }
    // and a batch norm, rows in segments, with vectors or not
    if constexpr (!std::is_integral_v<T>)
      for (const fz::Shape& shape : {fz::Shape{8, 64, 112, 112}, fz::Shape{4, 16, 30, 30}, fz::Shape{3, 5, 7, 9}}) {
        auto t = fz::placeholder<T>(shape);
        auto w = fz::placeholder<T>({1, shape[1], 1, 1});
        const fz::KernelInfo k =
            fz::inspect((t - fz::mean(t, {0, 2, 3}, true)) * fz::rsqrt(fz::var(t, {0, 2, 3}, true) + 1e-5f) * w + w);
        INFO(k.name << ": " << k.variant);
        CHECK(k.kernels == 1);
        CHECK_THAT(k.variant, Catch::Contains("in segments"));
        CHECK(!k.arch.empty());
        ++compiled;
      }
  };
  compile_all(float{});
  compile_all(double{});
  compile_all(fz::half{});
  compile_all(fz::bfloat16{});
  compile_all(std::int32_t{});
  CHECK(compiled == 32);  // 5 dtypes x 4 multi-reductions, 4 floating x 3 batch norms
}

TEST_CASE("layout thresholds a benchmark may change steer the variant, and bad names are errors", "[layer][tuning]") {
  auto& t = fz::detail::tuning();
  const fz::detail::Tuning saved = t;
  auto x = fz::placeholder<float>({256, 65536});
  auto softmax = [&] {
    return fz::exp(x - fz::max(x, -1, true)) / fz::sum(fz::exp(x - fz::max(x, -1, true)), -1, true);
  };
  fz::detail::set_tuning("cluster_slice=32768");
  CHECK_THAT(fz::inspect(softmax()).variant, Catch::Contains("a cluster of 2 blocks per row"));
  fz::detail::set_tuning("max_cluster=1");  // no clusters: 256 KB rows do not fit one block's shared memory
  CHECK_THAT(fz::inspect(softmax()).variant, Catch::Contains("each pass reads the row from memory"));
  t = saved;
  CHECK_THAT(fz::inspect(softmax()).variant, Catch::Contains("a cluster of 4 blocks per row"));
  fz::detail::set_tuning("layer_fit_blocks=1");  // 64 KB slices: three blocks of 512 threads per SM
  const fz::KernelInfo capped = fz::inspect(softmax());
  CHECK_THAT(capped.variant, Catch::Contains("registers capped for 3 blocks per SM"));
  CHECK_THAT(capped.source, Catch::Contains("__launch_bounds__(512, 3)"));
  CHECK(!capped.arch.empty());
  t = saved;
  // By default only a block that owns its whole row is capped (rows of 16,384: yes; a cluster's slice: no).
  CHECK_THAT(fz::inspect(softmax()).variant, !Catch::Contains("registers capped"));
  auto y = fz::placeholder<float>({1024, 16384});
  auto layer_norm = [&] { return (y - fz::mean(y, -1, true)) * fz::rsqrt(fz::var(y, -1, true) + 1e-5f); };
  CHECK_THAT(fz::inspect(layer_norm()).variant, Catch::Contains("registers capped"));
  auto z = fz::placeholder<float>({4096, 4096});  // rows of 4,096: the cap would leave 39 registers
  CHECK_THAT(fz::inspect((z - fz::mean(z, -1, true)) * fz::rsqrt(fz::var(z, -1, true) + 1e-5f)).variant,
             !Catch::Contains("registers capped"));
  fz::detail::set_tuning("layer_fit_blocks=0");
  CHECK_THAT(fz::inspect(layer_norm()).variant, !Catch::Contains("registers capped"));
  t = saved;
  // 16-bit rows in shared memory keep 64 registers a thread: fewer blocks than shared memory would hold (rows of
  // 16,384: 4 of 256 threads, not 6; 8,192: 8 of 128, where 13 would leave 39 registers and went uncapped)
  for (const auto& [length, bounds] : {std::pair<std::int64_t, const char*>{16384, "__launch_bounds__(256, 4)"},
                                       std::pair<std::int64_t, const char*>{8192, "__launch_bounds__(128, 8)"}}) {
    auto h = fz::placeholder<fz::bfloat16>({1024, length});
    auto hf = fz::cast<float>(h);
    const fz::KernelInfo k = fz::inspect(fz::cast<fz::bfloat16>(hf * fz::rsqrt(fz::mean(hf * hf, -1, true) + 1e-6f)));
    INFO(length << ": " << k.variant);
    CHECK_THAT(k.variant, Catch::Contains("the row kept in shared memory"));
    CHECK_THAT(k.source, Catch::Contains(bounds));
  }
  CHECK_THAT(fz::inspect(layer_norm()).source, Catch::Contains("__launch_bounds__(512, 3)"));  // float32: 42 registers
  // an experiment: long rows held in registers with no values kept (layer norm over rows of 16,384 by 1,024 threads)
  fz::detail::set_tuning("layer_long_registers=1");
  fz::detail::set_tuning("layer_block=1024");
  CHECK_THAT(fz::inspect(layer_norm()).variant,
             Catch::Contains("(1024 threads per block)") && Catch::Contains("the row held in registers (4 vectors a thread)"));
  t = saved;
  CHECK_THAT(fz::inspect(layer_norm()).variant, !Catch::Contains("held in registers"));
  CHECK_THROWS_AS(fz::detail::set_tuning("layer_long_registers=2"), fz::Error);
  // float32 rows of 4,097-8,192 whose outputs are rows: in registers by blocks of 1,024, two vectors a thread; the
  // row's statistics alone, 16-bit rows and rows of 16,384 stay in shared memory
  auto e = fz::placeholder<float>({2048, 8192});
  const auto norm_rows = [](const auto& a) { return a * fz::rsqrt(fz::mean(a * a, -1, true) + 1e-6f); };
  CHECK_THAT(fz::inspect(norm_rows(e)).variant,
             Catch::Contains("(1024 threads per block)") && Catch::Contains("the row held in registers (2 vectors a thread)"));
  auto odd = fz::placeholder<float>({2048, 6000});
  CHECK_THAT(fz::inspect(norm_rows(odd)).variant, Catch::Contains("(1024 threads per block), the row held in registers"));
  CHECK_THAT(fz::inspect(fz::var(e, -1, true)).variant, !Catch::Contains("held in registers"));
  auto eh = fz::cast<float>(fz::placeholder<fz::bfloat16>({2048, 8192}));
  CHECK_THAT(fz::inspect(fz::cast<fz::bfloat16>(norm_rows(eh))).variant, !Catch::Contains("held in registers"));
  CHECK_THAT(fz::inspect(norm_rows(y)).variant, !Catch::Contains("held in registers"));
  fz::detail::set_tuning("layer_block=512");  // a measurement's block: the rule steps aside
  CHECK_THAT(fz::inspect(norm_rows(e)).variant, !Catch::Contains("1024 threads"));
  t = saved;
  fz::detail::set_tuning("layer_min_blocks=5");  // a measurement's override, wherever the row is held
  CHECK_THAT(fz::inspect(layer_norm()).source, Catch::Contains("__launch_bounds__(512, 5)"));
  t = saved;
  CHECK_THROWS_AS(fz::detail::set_tuning("layer_min_blocks=33"), fz::Error);
  CHECK_THROWS_AS(fz::detail::set_tuning("layer_fit_blocks=3"), fz::Error);
  CHECK_THROWS_AS(fz::detail::set_tuning("cluster_slice"), fz::Error);
  CHECK_THROWS_AS(fz::detail::set_tuning("max_cluster=3"), fz::Error);
  CHECK_THROWS_AS(fz::detail::set_tuning("layer_block=100"), fz::Error);
  CHECK_THROWS_WITH(fz::detail::set_tuning("nonsense=1"), Catch::Contains("known are"));
  CHECK(t.cluster_slice == saved.cluster_slice);
}

TEST_CASE("var inside a layer kernel is the mean of squared deviations: two float passes, no Welford", "[layer]") {
  auto x = fz::placeholder<float>({1024, 16384});
  const fz::KernelInfo ln = fz::inspect((x - fz::mean(x, -1, true)) * fz::rsqrt(fz::var(x, -1, true) + 1e-5f));
  CHECK(ln.kernels == 1);
  CHECK_THAT(ln.variant, Catch::Contains("2 reduction passes"));
  CHECK(ln.source.find("FzWelford") == std::string::npos);
  CHECK(ln.source.find("fz_step0") != std::string::npos);
  // layer norm's own mean serves as the inner one: two means in all, not three
  CHECK(ln.source.find("reduction 2") == std::string::npos);
  // var alone: where one block holds each row (its registers or shared memory), a layer kernel's two passes
  // (tests/test_layer_gpu.cpp checks them against float64), also for std with ddof 1; not fz::Unfused's; over
  // rows a cluster of blocks would share, a reduction kernel with Welford's one pass
  CHECK_THAT(fz::inspect(fz::var(x, -1)).variant, Catch::StartsWith("layer") && Catch::Contains("shared memory"));
  auto longer = fz::placeholder<float>({256, 65536});
  CHECK(fz::inspect(fz::var(longer, -1)).source.find("FzWelford") != std::string::npos);
  auto s = fz::placeholder<float>({4096, 1024});
  for (const fz::KernelInfo& k : {fz::inspect(fz::var(s, -1)), fz::inspect(fz::std(s, 1, true, 1.0))}) {
    CHECK_THAT(k.variant, Catch::StartsWith("layer") && Catch::Contains("the row held in registers"));
    CHECK(k.source.find("FzWelford") == std::string::npos);
  }
  {
    fz::Unfused unfused;
    CHECK(fz::inspect(fz::var(s, -1)).source.find("FzWelford") != std::string::npos);
  }
  // rows not of whole vectors: in shared memory
  CHECK_THAT(fz::inspect(fz::var(fz::placeholder<float>({4096, 1022}), -1)).variant,
             Catch::StartsWith("layer") && Catch::Contains("shared memory"));
  // a tie of mean and var (torch.var_mean): the layer kernel over rows a block holds, one reduction kernel of both
  // results over longer ones, unless tuning says layer_statistics=2 (or 0: never a layer kernel)
  CHECK_THAT(fz::inspect(fz::mean(s, -1), fz::var(s, -1)).variant, Catch::Contains("the row held in registers"));
  // (the graph with the var centered depends on whether the tie's mean may serve it: keepdims, ddof 0, the same
  // axes; asked first with keepdims, then without, the second once got the first one's graph and no layer kernel)
  auto s2 = fz::placeholder<float>({2048, 512});
  CHECK_THAT(fz::inspect(fz::mean(s2, {1}, true), fz::var(s2, {1}, true)).variant, Catch::StartsWith("layer"));
  CHECK_THAT(fz::inspect(fz::mean(s2, {1}), fz::var(s2, {1})).variant, Catch::StartsWith("layer"));
  CHECK_THAT(fz::inspect(fz::mean(longer, -1), fz::var(longer, -1)).variant,
             Catch::StartsWith("reduction") && Catch::Contains("2 results from one pass"));
  {
    const fz::detail::Tuning saved = fz::detail::tuning();
    fz::detail::set_tuning("layer_statistics=2");
    CHECK_THAT(fz::inspect(fz::mean(longer, -1), fz::var(longer, -1)).variant, Catch::StartsWith("layer"));
    fz::detail::set_tuning("layer_statistics=0");
    CHECK_THAT(fz::inspect(fz::var(s, -1)).variant, Catch::StartsWith("reduction"));
    fz::detail::tuning() = saved;
  }
  // and a bare x / std over the row, ddof 1, still one layer kernel
  const fz::KernelInfo z = fz::inspect(x / fz::sqrt(fz::var(x, -1, true, 1.0)));
  CHECK(z.kernels == 1);
  CHECK(z.source.find("FzWelford") == std::string::npos);
}

TEST_CASE("a layer kernel keeps a row in shared memory only beside room for its reductions' scratch", "[layer]") {
  // Rows of 28,900 float64 (231,296 bytes kept) fit the 227 KB a block may take on an H100 beside 1 KB of
  // static scratch, not beside the 2.3 KB eight float64 reductions' partials take: that kernel must stream
  // its row, or its launch would ask for more shared memory than a block has.
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("cluster_slice=1000000");  // (one block per row, no cluster to split it over)
  const auto x = fz::placeholder<double>({256, 28900});
  const auto two = fz::inspect(x - fz::mean(x, -1, true) + fz::max(x, -1, true));
  const auto eight = fz::inspect(x - fz::mean(x, -1, true) + fz::var(x, -1, true) + fz::max(x, -1, true) +
                                 fz::min(x, -1, true) + fz::sum(x * x, -1, true) + fz::sum(fz::abs(x), -1, true) +
                                 fz::max(fz::abs(x), -1, true) + fz::sum(fz::exp(x), -1, true));
  fz::detail::tuning() = saved;
  INFO(two.variant << "\n" << eight.variant);
  REQUIRE(two.kernels == 1);
  REQUIRE(eight.kernels == 1);
  CHECK_THAT(two.variant, Catch::Contains("kept in shared memory"));
  CHECK_THAT(eight.variant, !Catch::Contains("kept in shared memory"));
}
