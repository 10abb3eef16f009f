// SPDX-License-Identifier: Apache-2.0
// Generated source: golden files for representative kernels, every op x dtype through NVRTC, compile
// errors, and compile time for large expressions.
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "codegen/emit_elementwise.hpp"
#include "codegen/exact_sum.hpp"
#include "runtime/compile/nvrtc.hpp"
#include "support.hpp"

using fz::DType;
using fz::ir::Op;

namespace {

fz::codegen::Variant linear_variant(const fz::ir::Graph& g, DType out) {
  fz::codegen::Variant v;
  v.out_dtype[0] = out;
  v.n_params = static_cast<std::uint8_t>(g.n_inputs);
  for (std::uint32_t s = 0; s < g.n_inputs; ++s) v.param_of_slot[s] = static_cast<std::uint8_t>(s);
  v.vector_width = static_cast<std::uint8_t>(16 / fz::itemsize(out) > 16 ? 16 : 16 / fz::itemsize(out));
  return v;
}

}  // namespace

TEST_CASE("generated source of representative kernels matches the golden files", "[codegen]") {
  auto x = fz::placeholder<float>({1 << 20}), y = fz::placeholder<float>({1 << 20}),
       z = fz::placeholder<float>({1 << 20});
  test::check_golden("seed_f32", fz::inspect(fz::sin(x) + fz::cos(y) / fz::sqrt(z)).source);
  test::check_golden("squared_diff", fz::inspect(fz::named("squared_diff", (x - y) * (x - y))).source);
  auto h = fz::placeholder<fz::half>({3, 4});
  auto m = fz::placeholder<std::int32_t>({4});
  test::check_golden("where_half_broadcast", fz::inspect(fz::where(h > 0, h * 2.5, m)).source);
  auto big = fz::placeholder<float>({64, 32});
  test::check_golden(
      "transposed_softplus",
      fz::inspect(fz::maximum(big.transpose(), 0.f) + fz::log1p(fz::exp(-fz::abs(big.transpose())))).source);
  // every fifth column of 32 (N-d indexing: steps of more than 4 are not loaded as vectors); every other column: one
  // stride of 2
  test::check_golden("strided_slice", fz::inspect(big.slice({{}, fz::Slice{{}, {}, 5}}) * 2.f + 1.f).source);
  test::check_golden("stepped_slice", fz::inspect(big.slice({{}, fz::Slice{{}, {}, 2}}) * 2.f + 1.f).source);
}

TEST_CASE("every op compiles through NVRTC for every dtype it accepts", "[codegen][nvrtc][compile-sweep]") {
  std::vector<Op> ops;
  for (const fz::ir::OpInfo& o : fz::ir::kOps)
    // (a join's two ops spell only inside a concatenate: tests/test_joining*.cpp compile them)
    if (fz::ir::is_elementwise(o.op) && o.op != Op::cast && o.op != Op::leading && o.op != Op::concatenate)
      ops.push_back(o.op);
  int kernels = 0;
  for (int di = 0; di < fz::kNumDTypes; ++di) {
    const DType d = static_cast<DType>(di);
    // One NVRTC program per dtype holding every op's kernel, each in its own namespace: the same
    // coverage as one program per kernel at a fraction of the compile time.
    std::string program;
    for (Op op : ops) {
      fz::ir::Graph g;
      const std::uint32_t a = g.input(d);
      std::uint32_t r;
      if (fz::ir::arity(op) == fz::ir::Arity::unary) {
        if (!fz::ir::accepts(op, d)) continue;
        r = g.unary(op, a);
      } else if (fz::ir::arity(op) == fz::ir::Arity::binary) {
        if (!fz::ir::accepts(op, d, d)) continue;
        r = g.binary(op, a, g.scalar(d));
      } else {
        r = g.where(g.input(DType::bool_), a, g.scalar(d));
      }
      g.outputs.push_back(r);
      const auto k = fz::codegen::emit_elementwise(fz::ir::canonicalize(g), linear_variant(g, g.dtype(r)), "");
      program += fmt::format("namespace k{} {{\n{}}}\n", kernels++, k.source);
    }
    INFO("dtype " << fz::dtype_name(d));
    CHECK_NOTHROW(
        fz::detail::compile(program, fmt::format("all_ops_{}", fz::dtype_tag(d)), test::sweep_target(d)));
  }
  CHECK(kernels > 13 * 50);
}

TEST_CASE("a compile error carries NVRTC's log and the numbered source", "[codegen][nvrtc]") {
  try {
    fz::detail::compile("extern \"C\" __global__ void k() { undefined_thing(); }\n", "broken",
                        fz::detail::default_target());
    FAIL("expected a CompileError");
  } catch (const fz::CompileError& e) {
    CHECK(e.kernel() == "broken");
    CHECK_THAT(e.log(), Catch::Contains("undefined_thing"));
    CHECK_THAT(e.numbered_source(), Catch::StartsWith("   1 | extern"));
  }
}

TEST_CASE("large expressions compile in bounded time", "[codegen][nvrtc][compile-time]") {
  auto timed = [](const fz::ir::Graph& g) {
    const auto k = fz::codegen::emit_elementwise(fz::ir::canonicalize(g), linear_variant(g, DType::float32), "");
    const auto t0 = std::chrono::steady_clock::now();
    fz::detail::compile(k.source, k.name, fz::detail::default_target());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  fz::ir::Graph chain;
  std::uint32_t v = chain.input(DType::float32);
  for (int i = 0; i < 256; ++i) v = chain.unary(Op::sin, v);
  chain.outputs.push_back(v);
  const double chain_s = timed(chain);

  fz::ir::Graph poly;  // 500 Horner steps = 1000 ops, each coefficient a run-time scalar
  const std::uint32_t x = poly.input(DType::float32);
  std::uint32_t acc = poly.scalar(DType::float32);
  for (int i = 0; i < 500; ++i) acc = poly.binary(Op::add, poly.binary(Op::mul, acc, x), poly.scalar(DType::float32));
  poly.outputs.push_back(acc);
  const double poly_s = timed(poly);
  WARN("compile time: 256-sin chain " << chain_s << " s, 1000-op polynomial " << poly_s << " s");
  // A guard against compile time that grows faster than the expression (a blow-up takes minutes), not a
  // speed target: 0.3-0.8 s each on an idle CI machine, 2.1 s once while another build shared its 2 cores.
  CHECK(chain_s < 10.0);
  CHECK(poly_s < 10.0);
}

TEST_CASE("the docs show the generated seed kernel exactly; the README's example is examples/hello.cpp",
          "[codegen][docs]") {
  const std::string root = std::string(FUSION_GOLDEN_DIR) + "/../../";
  const std::string tour = test::read_file(root + "docs/tour.md");
  CHECK(tour.find(test::read_file(std::string(FUSION_GOLDEN_DIR) + "/seed_f32.cu")) != std::string::npos);
  const std::string readme = test::read_file(root + "README.md"), hello = test::read_file(root + "examples/hello.cpp");
  const std::size_t code = readme.find("```cpp\n") + 7;
  const std::string snippet = readme.substr(code, readme.find("```", code) - code);
  CHECK(hello.ends_with("\n" + snippet));
}

TEST_CASE("an emitted kernel's signature is its parameter list: sources in launch order", "[codegen][signature]") {
  using fz::codegen::ArgSource;
  // Two strided inputs, a scalar, one contiguous output: pointers, scalar, n, shape, strides.
  fz::ir::Graph g;
  const std::uint32_t a = g.input(DType::float32), b = g.input(DType::float32);
  g.outputs.push_back(g.binary(Op::add, g.binary(Op::mul, a, g.scalar(DType::float32)), b));
  fz::codegen::Variant v = linear_variant(g, DType::float32);
  v.rank = 2;
  v.vector_width = 1;
  v.access[0] = v.access[1] = fz::codegen::Access::strided;
  const auto k = fz::codegen::emit_elementwise(fz::ir::canonicalize(g), v, "");
  std::vector<std::pair<ArgSource, int>> got;
  for (const auto& p : k.signature.params()) got.emplace_back(p.source, p.index);
  const std::vector<std::pair<ArgSource, int>> want{
      {ArgSource::pointer, 0}, {ArgSource::pointer, 1}, {ArgSource::pointer, 2}, {ArgSource::scalar, 0},
      {ArgSource::count, 0},   {ArgSource::dims, 0},    {ArgSource::dims, 2},    {ArgSource::dims, 3}};
  CHECK(got == want);
  CHECK(k.source.find(k.signature.list()) != std::string::npos);
}

TEST_CASE("rows kernels compile for every mix of per-row, along-the-row and broadcast operands and outputs",
          "[codegen][nvrtc]") {
  // fuzz case 23000516: a per-row input's name clashed with the second output's vector
  auto h = fz::placeholder<fz::half>({2, 1, 76});
  auto row = fz::placeholder<float>({76});
  auto col = fz::placeholder<double>({2, 1, 1});
  const fz::KernelInfo k = fz::inspect(h, col <= row);
  CHECK_THAT(k.variant, Catch::StartsWith("rows") && Catch::Contains("2 outputs"));
  CHECK(!k.arch.empty());
  auto m = fz::placeholder<std::int8_t>({5, 3, 32});
  auto s = fz::placeholder<std::int8_t>({1});
  auto r = fz::placeholder<fz::bfloat16>({5, 1, 1});
  for (const fz::KernelInfo& i : {fz::inspect(m * s + r), fz::inspect(fz::where(m > 0, r, m), m - r),
                                  fz::inspect(m.slice({fz::Slice{{}, {}, -1}}) + r)}) {
    INFO(i.variant);
    CHECK_THAT(i.variant, Catch::StartsWith("rows"));
    CHECK(!i.arch.empty());
  }
}

TEST_CASE("tiles kernels compile for transposes of every dtype, beside other operands, several outputs and batches",
          "[codegen][nvrtc]") {
  std::vector<fz::KernelInfo> kernels;
  auto f = fz::placeholder<float>({70, 40}), g = fz::placeholder<float>({40, 70});
  auto h = fz::placeholder<fz::half>({70, 40});
  auto bf = fz::placeholder<fz::bfloat16>({70, 40});
  auto d = fz::placeholder<double>({3, 70, 40});
  auto row = fz::placeholder<float>({70}), col = fz::placeholder<float>({40, 1});
  auto i8 = fz::placeholder<std::int8_t>({70, 40});
  kernels.push_back(fz::inspect(f.transpose() + g));
  kernels.push_back(fz::inspect(h.transpose() * 2.f + bf.transpose()));
  kernels.push_back(fz::inspect(fz::where(i8.transpose() > 0, f.transpose(), col) + row));
  kernels.push_back(fz::inspect(d.transpose({0, 2, 1}) - 1.0));
  kernels.push_back(fz::inspect(f.transpose() + fz::random::uniform<float>(3)));  // the flat index of the output
  kernels.push_back(fz::inspect(f.transpose() * g, f.transpose() - g));            // two outputs
  for (const fz::KernelInfo& k : kernels) {
    INFO(k.variant);
    CHECK_THAT(k.variant, Catch::StartsWith("tiles"));
    CHECK_THAT(k.source, Catch::Contains("__syncthreads()"));
    CHECK(!k.arch.empty());
  }
}

TEST_CASE("ordered float comparisons test for NaN explicitly (ptxas folds exp2f(x) >= 0 to true)", "[codegen]") {
  auto x = fz::placeholder<float>({64});
  auto i = fz::placeholder<std::int32_t>({64});
  CHECK_THAT(fz::inspect(fz::exp2(x) >= 0.f).source, Catch::Contains("!isnan(t"));
  CHECK_THAT(fz::inspect(i >= 3).source, !Catch::Contains("&&"));  // integers: a plain compare
}

TEST_CASE("fz::Deterministic's exact sums compile: the scatter into them (global and shared bins) and the rounding kernel",
          "[codegen][nvrtc][scatter]") {
  std::string program;
  int n = 0;
  for (DType d : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
    INFO(fz::dtype_name(d));
    const int words = fz::codegen::exact_sum_words(d);
    CHECK(words == (d == DType::float64 ? 67 : 10));
    for (bool shared : {false, true}) {
      fz::ir::Graph g;
      const std::uint32_t idx = g.input(DType::int32), values = g.input(d);
      const std::uint32_t k = g.take_index(idx, g.scalar(DType::int64), fz::ir::IndexMode::raise);
      const std::uint32_t at = g.binary(Op::mul, k, g.scalar(DType::int64));
      g.outputs.push_back(g.scatter(Op::scatter_add, at, g.binary(Op::mul, values, values), d, k));
      fz::codegen::Variant v = linear_variant(g, d);
      v.vector_width = 1;
      v.access[0] = v.access[1] = fz::codegen::Access::strided;
      v.out_access[0] = fz::codegen::Access::strided;
      v.private_bins = shared;
      v.exact_words = static_cast<std::uint8_t>(words);
      const auto kernel = fz::codegen::emit_elementwise(fz::ir::canonicalize(g), v, "");
      CHECK_THAT(kernel.source, Catch::Contains("fz_scatter_exact(") && Catch::Contains("long long* __restrict__ out"));
      CHECK_THAT(v.describe(), Catch::Contains("exact sums"));
      program += fmt::format("namespace k{} {{\n{}}}\n", n++, kernel.source);
    }
    const auto finish = fz::codegen::exact_sum_finish_kernel(d);
    CHECK_THAT(finish.name, Catch::StartsWith("fz_exact_sum_" + std::string(fz::dtype_tag(d))));
    CHECK(fz::codegen::exact_sum_finish_kernel(d).hash == finish.hash);  // stable: one cache entry
    CHECK_NOTHROW(fz::detail::compile(finish.source, finish.name, fz::detail::default_target()));
  }
  CHECK_NOTHROW(fz::detail::compile(program, "exact_scatters", fz::detail::default_target()));
  CHECK(fz::codegen::exact_sum_words(DType::int32) == 0);  // integer sums are exact as they are
}

TEST_CASE("every kind of generated kernel first waits for the kernel before it (launched as its programmatic dependent)",
          "[codegen]") {
  auto m = fz::placeholder<float>({300, 4096});
  auto x = fz::placeholder<float>({1 << 20});
  auto w = fz::placeholder<float>({4096});
  fz::ElementwiseKernel user("float32 a", "float32 b", "b = a * 2", "twice");
  std::vector<std::string> sources = {
      fz::inspect(x * 2.f + 1.f).source,                                                       // elementwise
      fz::inspect(fz::sum(m, 0)).source,                                                       // reduction, split
      fz::inspect(m * fz::rsqrt(fz::mean(m * m, -1, true) + 1e-6f) * w).source,                // layer
      fz::inspect(fz::cumsum(m, 1)).source,                                                    // scan along rows
      fz::inspect(fz::cumsum(x, 0)).source,                                                    // one long scan
      user.inspect(x).source,                                                                  // user kernel
      fz::codegen::exact_sum_finish_kernel(DType::float32).source,                             // exact sums
  };
  for (const std::string& s : sources) {
    INFO(s.substr(0, 200));
    std::size_t at = s.find("__global__"), kernels = 0;
    REQUIRE(at != std::string::npos);
    for (; at != std::string::npos; at = s.find("__global__", at + 1), ++kernels) {
      const std::size_t body = s.find("{\n", at);
      REQUIRE(body != std::string::npos);
      // the body's first two lines, indentation aside: the guard, then the wait
      std::istringstream lines(s.substr(body + 2, 400));
      std::string guard, wait;
      lines >> std::ws;
      std::getline(lines, guard);
      lines >> std::ws;
      std::getline(lines, wait);
      CHECK(guard == "#if __CUDA_ARCH__ >= 900");
      CHECK_THAT(wait, Catch::StartsWith("asm volatile(\"griddepcontrol.wait;\""));
    }
    CHECK(kernels >= 1);
  }
}
