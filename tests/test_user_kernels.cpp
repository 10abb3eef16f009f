// SPDX-License-Identifier: Apache-2.0
// User kernels without a GPU: CuPy's parameter syntax, placeholder binding, and the generated kernels
// compiled by NVRTC (through fz::inspect on placeholder arrays).
#include "codegen/emit_user.hpp"
#include "codegen/user_params.hpp"
#include "runtime/custom/user_kernel.hpp"
#include "runtime/compile/disk_cache.hpp"

#include <cstring>
#include <filesystem>
#include "support.hpp"

using fz::DType;
using fz::codegen::ArgKind;
using fz::codegen::bind_types;
using fz::codegen::parse_params;

TEST_CASE("user kernel parameter lists parse as CuPy's", "[user][params]") {
  const auto ps = parse_params(" float32 x,T y ,  raw int64 idx, raw U  table,bool  flag", "test");
  REQUIRE(ps.size() == 5);
  CHECK(ps[0].name == "x");
  CHECK(ps[0].dtype == DType::float32);
  CHECK(!ps[0].raw);
  CHECK(ps[1].name == "y");
  CHECK(ps[1].type == "T");
  CHECK(!ps[1].dtype);
  CHECK(ps[2].raw);
  CHECK(ps[2].dtype == DType::int64);
  CHECK(ps[3].raw);
  CHECK(ps[3].type == "U");
  CHECK(ps[4].dtype == DType::bool_);
  CHECK(parse_params("", "test").empty());
  CHECK(parse_params("  ", "test").empty());
  // every dtype name, plus the unambiguous C spellings
  for (int d = 0; d < fz::kNumDTypes; ++d) {
    const auto p = parse_params(fmt::format("{} v", fz::dtype_name(static_cast<DType>(d))), "test");
    CHECK(p[0].dtype == static_cast<DType>(d));
  }
  CHECK(parse_params("double a, half b", "test")[0].dtype == DType::float64);
  CHECK(parse_params("double a, half b", "test")[1].dtype == DType::float16);
}

TEST_CASE("malformed parameter lists are TypeErrors that say what is wrong", "[user][params][errors]") {
  auto fails_with = [](const char* spec, const char* words) {
    INFO(spec);
    REQUIRE_THROWS_AS(parse_params(spec, "ElementwiseKernel 'k' in_params"), fz::TypeError);
    try {
      parse_params(spec, "ElementwiseKernel 'k' in_params");
    } catch (const fz::TypeError& e) {
      CHECK_THAT(e.what(), Catch::Contains(words));
      CHECK_THAT(e.what(), Catch::Contains("ElementwiseKernel 'k' in_params"));
    }
  };
  fails_with("float32", "needs a type and a name");
  fails_with("float32 x y", "more than a type and a name");
  fails_with("float32 x, float32 x", "repeats the name 'x'");
  fails_with("float32 2x", "not an identifier");
  fails_with("float x", "different widths");        // NumPy float64 vs C float
  fails_with("int n", "different widths");
  fails_with("complex64 z", "complex");
  fails_with("float32 i", "reserved");
  fails_with("float32 _ind", "reserved");
  fails_with("float32 x,", "needs a type and a name");
  fails_with("float32 int32", "type name");
}

TEST_CASE("placeholders bind from arrays first, then from scalars", "[user][params]") {
  const auto in = parse_params("T x, T y, U s", "test");
  const auto out = parse_params("T z", "test");
  // arrays bind T; the scalar binds U
  auto b = bind_types(
      in, out, std::vector<ArgKind>{{true, DType::float16}, {true, DType::float16}, {false, DType::float64}}, "k");
  CHECK(b.find("T") == DType::float16);
  CHECK(b.find("U") == DType::float64);
  // a scalar for T adapts to the array's T (NumPy's weak scalars)
  b = bind_types(parse_params("T x, T y", "t"), out,
                 std::vector<ArgKind>{{false, DType::float64}, {true, DType::int32}}, "k");
  CHECK(b.find("T") == DType::int32);
  // only scalars: the first binds
  b = bind_types(parse_params("T x", "t"), out, std::vector<ArgKind>{{false, DType::float32}}, "k");
  CHECK(b.find("T") == DType::float32);
  // an output binds its placeholder when passed
  b = bind_types(parse_params("float32 x", "t"), parse_params("U y", "t"),
                 std::vector<ArgKind>{{true, DType::float32}, {true, DType::int8}}, "k");
  CHECK(b.find("U") == DType::int8);
  CHECK(b.of(parse_params("U y", "t")[0]) == DType::int8);
}

TEST_CASE("arguments that do not fit the parameters are TypeErrors naming the parameter", "[user][params][errors]") {
  const auto in = parse_params("T x, T y, float32 w, raw int32 r", "t");
  const auto out = parse_params("T z", "t");
  using K = std::vector<ArgKind>;
  auto message = [&](const K& args) -> std::string {
    try {
      bind_types(in, out, args, "ElementwiseKernel 'k'");
    } catch (const fz::TypeError& e) {
      return e.what();
    }
    return "no error";
  };
  const ArgKind f32{true, DType::float32}, f64{true, DType::float64}, i32{true, DType::int32};
  CHECK_THAT(message(K{f32, f32, f32}),
             Catch::Contains("takes 4 inputs (x, y, w, r) and optionally 1 output (z); got 3"));
  CHECK_THAT(message(K{f32, f64, f32, i32}),
             Catch::Contains("placeholder T is float32 from 'x' but the array for 'y' is float64"));
  CHECK_THAT(message(K{f32, f32, f64, i32}),
             Catch::Contains("the input 'w' is float32 but the array passed for it is float64"));
  CHECK_THAT(message(K{f32, f32, f32, {false, DType::int32}}), Catch::Contains("raw input 'r' needs an array"));
  CHECK_THAT(message(K{f32, f32, f32, i32, {false, DType::float32}}), Catch::Contains("output 'z' needs an array"));
  CHECK_THAT(message(K{f32, f32, f32, i32, f64}), Catch::Contains("placeholder T is float32"));
  CHECK(message(K{f32, f32, {false, DType::int64}, i32}) == "no error");  // scalars convert to fixed dtypes
  // an output placeholder that nothing binds
  CHECK_THROWS_WITH(bind_types(parse_params("float32 x", "t"), parse_params("U y", "t"), K{f32}, "k"),
                    Catch::Contains("nothing binds the type U of the output 'y'"));
  CHECK_THROWS_WITH(bind_types(parse_params("float32 x", "t"), parse_params("raw float32 y", "t"), K{f32}, "k"),
                    Catch::Contains("raw output 'y' has no shape"));
}

TEST_CASE("ElementwiseKernel generates, names and compiles one kernel per bound dtype and layout", "[user][nvrtc]") {
  fz::ElementwiseKernel squared_diff("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "squared_diff");
  auto x = fz::placeholder<float>({1000}), y = fz::placeholder<float>({1000});
  const fz::KernelInfo k = squared_diff.inspect(x, y);
  CHECK(k.name.starts_with("squared_diff_"));
  CHECK(k.name.size() == std::string("squared_diff_").size() + 16);
  CHECK_THAT(k.source, Catch::Contains("z = (x - y) * (x - y);"));
  CHECK_THAT(k.source, Catch::Contains("const float x = _fz_p_x[_fz_i];"));  // the tail, one element at a time
  CHECK_THAT(k.source, Catch::Contains("float& z = _fz_p_z[_fz_i];"));
  CHECK(k.variant == "linear, 4-wide vectors, 32-bit index");  // the code reads no index: 16-byte accesses
  CHECK_THAT(k.source, Catch::Contains("float& z = _fz_w_z.v[_fz_k];"));
  CHECK(squared_diff.inspect(x, y).name == k.name);  // stable
  if (!k.cache_path.empty()) {  // listed by `fusion cache ls` under its name, like fused kernels
    const auto entry = fz::detail::DiskCache::read_file(k.cache_path);
    REQUIRE(entry);
    CHECK(entry->key.kernel_name == k.name);
  }
  // the same code with other bodies or names gives other kernels
  fz::ElementwiseKernel other("float32 x, float32 y", "float32 z", "z = x - y", "squared_diff");
  CHECK(other.inspect(x, y).name != k.name);

  // placeholders at two dtypes: two kernels, each with its typedef
  fz::ElementwiseKernel axpy("T a, T x, T y", "T z", "z = a * x + y", "axpy");
  auto xd = fz::placeholder<double>({64}), yd = fz::placeholder<double>({64});
  auto xh = fz::placeholder<fz::half>({64}), yh = fz::placeholder<fz::half>({64});
  const auto kd = axpy.inspect(2.0, xd, yd);
  const auto kh = axpy.inspect(2.0, xh, yh);
  CHECK(kd.name != kh.name);
  CHECK_THAT(kd.source, Catch::Contains("typedef double T;"));
  CHECK_THAT(kd.source, Catch::Contains("const double a"));
  CHECK_THAT(kh.source, Catch::Contains("typedef float T;"));            // 16-bit values compute in float
  CHECK_THAT(kh.source, Catch::Contains("fz_float_to_half"));            // and round once on store
  CHECK_THAT(kd.variant, Catch::Contains("T=float64"));

  // broadcasting and strided views: N-d addressing
  auto col = fz::placeholder<float>({8, 1}), row = fz::placeholder<float>({5});
  const auto kb = squared_diff.inspect(col, row);
  CHECK_THAT(kb.variant, Catch::Contains("strided, rank 2"));
  auto m = fz::placeholder<float>({6, 7});
  CHECK_THAT(squared_diff.inspect(m.transpose(), fz::placeholder<float>({7, 6})).variant, Catch::Contains("strided"));
}

TEST_CASE("raw parameters, preamble and options reach the kernel", "[user][nvrtc]") {
  fz::ElementwiseKernel gather("raw T table, int64 idx", "T out", "out = table[idx] * SCALE + twice(table.size())",
                               "gather", {.preamble = "__device__ long long twice(long long v) { return 2 * v; }",
                                          .options = {"-DSCALE=3"}});
  auto table = fz::placeholder<float>({10, 4});
  auto idx = fz::placeholder<std::int64_t>({32});
  const auto k = gather.inspect(table, idx);
  CHECK_THAT(k.source, Catch::Contains("const FzRaw<float> table"));
  CHECK_THAT(k.source, Catch::Contains("__device__ long long twice"));
  const auto ks = gather.inspect(table.transpose(), idx);  // a strided raw array indexes in its own C order
  CHECK_THAT(ks.source, Catch::Contains("const FzRawN<float, 2> table"));
  CHECK(ks.name != k.name);
  // 16-bit raw elements read as float and round on assignment; _ind.size() is the element count
  fz::ElementwiseKernel reverse("raw T x", "raw T y", "y[_ind.size() - 1 - i] = x[i]", "reverse");
  auto hx = fz::placeholder<fz::bfloat16>({16}), hy = fz::placeholder<fz::bfloat16>({16});
  fz::ElementwiseKernel reverse_n("raw T x, int64 n", "raw T y", "if (i < n) y[n - 1 - i] = x[i]", "reverse_n");
  CHECK_THAT(reverse_n.inspect(hx, fz::placeholder<std::int64_t>({16}), hy).source, Catch::Contains("FzBF16Ref"));
}

TEST_CASE("user kernel mistakes are typed errors with what to fix", "[user][errors]") {
  // a syntax error in the body: CompileError with NVRTC's log and the numbered source
  fz::ElementwiseKernel broken("float32 x", "float32 y", "y = x +* 2", "broken");
  auto x = fz::placeholder<float>({4});
  try {
    broken.inspect(x);
    FAIL("no CompileError");
  } catch (const fz::CompileError& e) {
    CHECK_THAT(e.log(), Catch::Contains("error"));
    CHECK_THAT(e.numbered_source(), Catch::Contains("y = x +* 2;"));
    CHECK_THAT(e.numbered_source(), Catch::Contains("   1 | "));
    CHECK(e.kernel().starts_with("broken_"));
  }
  // construction checks
  CHECK_THROWS_AS(fz::ElementwiseKernel("float32 x", "float32 x", "x = 1", "k"), fz::TypeError);
  CHECK_THROWS_AS(fz::ElementwiseKernel("float32 x", "float32 y", "  ", "k"), fz::TypeError);
  CHECK_THROWS_AS(fz::ElementwiseKernel("float32 x", "float32 y", "y = x", "my kernel"), fz::TypeError);
  CHECK_THROWS_AS(fz::ElementwiseKernel("float32 x", "float32 y", "y = x", "k", {.options = {"-arch=sm_80"}}),
                  fz::TypeError);
  // wrong argument count and dtype name the parameter
  fz::ElementwiseKernel sq("float32 x, float32 y", "float32 z", "z = x * y", "sq");
  CHECK_THROWS_WITH(sq.inspect(x), Catch::Contains("takes 2 inputs (x, y)"));
  CHECK_THROWS_WITH(sq.inspect(x, fz::placeholder<double>({4})), Catch::Contains("the input 'y' is float32"));
  // shapes that do not broadcast, an output of the wrong shape
  CHECK_THROWS_AS(sq.inspect(x, fz::placeholder<float>({5})), fz::ShapeError);
  CHECK_THROWS_WITH(sq.inspect(x, fz::placeholder<float>({5})), Catch::Contains("x, y ((4,), (5,))"));
  auto m24 = fz::placeholder<float>({2, 4});
  CHECK_THROWS_WITH(sq.inspect(m24, x, x),
                    Catch::Contains("the output 'z' has shape (4,) but the arguments broadcast to (2, 4)"));
  CHECK_NOTHROW(sq.inspect(x, x, m24));  // an output broadcasts the inputs, as in CuPy
  // scalars that do not fit their parameter
  fz::ElementwiseKernel shift("int8 x, int8 s", "int8 y", "y = x << s", "shift");
  auto xi = fz::placeholder<std::int8_t>({4});
  CHECK_THROWS_WITH(shift.inspect(xi, 300), Catch::Contains("300 does not fit"));
  CHECK_THROWS_WITH(shift.inspect(xi, 1.5), Catch::Contains("1.5 does not fit"));
  CHECK_NOTHROW(shift.inspect(xi, 3));
  // nothing to set the size
  fz::ElementwiseKernel fill("raw float32 x", "", "x[i] = 1", "fill");
  CHECK_THROWS_AS(fill.inspect(x), fz::ShapeError);
}

TEST_CASE("ReductionKernel generates the fused reductions' layouts around the user's expressions", "[user][nvrtc]") {
  fz::ReductionKernel l2norm("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm");
  auto v = fz::placeholder<float>({1 << 20});
  const auto full = l2norm.inspect(v);
  CHECK(full.name.starts_with("l2norm_"));
  CHECK_THAT(full.source, Catch::Contains("return (float)(x * x);"));
  CHECK_THAT(full.source, Catch::Contains("return (float)(a + b);"));
  CHECK_THAT(full.source, Catch::Contains("y = sqrt(a);"));
  CHECK_THAT(full.variant, Catch::Contains("split over blocks"));  // one output: the whole GPU works on it
  auto m = fz::placeholder<double>({512, 300});
  const auto rows = l2norm.inspect(m, fz::Axes(1));
  CHECK_THAT(rows.source, Catch::Contains("typedef double T;"));
  CHECK(rows.name != full.name);
  CHECK_THAT(l2norm.inspect(m, fz::Axes(0)).variant,
             Catch::Contains("8 rows of 32 threads"));  // 300 columns share blocks

  // scalars, a reduce_type wider than the inputs, loop_prep / after_loop, a preamble
  fz::ReductionKernel weighted("T x, T w, float64 scale", "float64 y", "(double)x * w", "a + b", "y = a * scale + bias",
                               "0", "weighted",
                               {.preamble = "#define FZ_TEST_BIAS 0",
                                .reduce_type = "float64",
                                .loop_prep = "double bias = FZ_TEST_BIAS",
                                .after_loop = "bias += 0.0"});
  auto h = fz::placeholder<fz::half>({4096});
  const auto kw = weighted.inspect(h, h, 2.0);
  CHECK_THAT(kw.source, Catch::Contains("double bias = FZ_TEST_BIAS;"));
  CHECK_THAT(kw.source, Catch::Contains("fz_combine(double a, double b)"));
}

TEST_CASE("ReductionKernel mistakes are typed errors", "[user][errors]") {
  CHECK_THROWS_WITH(fz::ReductionKernel("T x", "T y, T z", "x", "a + b", "y = a", "0", "r"),
                    Catch::Contains("exactly one"));
  CHECK_THROWS_WITH(fz::ReductionKernel("raw T x", "T y", "x", "a + b", "y = a", "0", "r"),
                    Catch::Contains("ElementwiseKernel only"));
  CHECK_THROWS_WITH(fz::ReductionKernel("T x", "T y", "x", "a + b", "y = a", "", "r"), Catch::Contains("identity"));
  CHECK_THROWS_WITH(fz::ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "r", {.reduce_type = "V"}),
                    Catch::Contains("reduce_type 'V'"));
  fz::ReductionKernel broken("T x", "T y", "x", "a +* b", "y = a", "0", "broken_reduce");
  auto v = fz::placeholder<float>({100});
  CHECK_THROWS_AS(broken.inspect(v), fz::CompileError);
  fz::ReductionKernel sum("T x", "T y", "x", "a + b", "y = a", "0", "plain_sum");
  CHECK_THROWS_WITH(sum.inspect(v, fz::Axes(1)), Catch::Contains("axis 1 is out of range"));
  CHECK_THROWS_WITH(sum.inspect(v, fz::placeholder<float>({3})),
                    Catch::Contains("the output 'y' has shape (3,) but the reduction gives ()"));
  CHECK_THROWS_WITH(sum.inspect(v, fz::placeholder<double>({})), Catch::Contains("the array for 'y' is float64"));
  CHECK_THROWS_WITH(sum.inspect(v, fz::Axes(0), v), Catch::Contains("axes after every array"));
}

TEST_CASE("RawKernel and RawModule compile through the same NVRTC path and disk cache", "[user][nvrtc]") {
  const char* square_src = R"(extern "C" __global__ void elementwise_square(const float* x, float* y, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i] * x[i];
})";
  fz::RawKernel square(square_src, "elementwise_square");
  const auto info = square.inspect();
  CHECK(info.name == "elementwise_square");
  CHECK(info.source == square_src);
  CHECK(info.registers > 0);
  if (fz::detail::DiskCache::instance().enabled()) {
    CHECK(std::filesystem::exists(info.cache_path));
    CHECK(fz::detail::DiskCache::read_file(info.cache_path)->key.kernel_name == "elementwise_square");
    const auto before = fz::stats().compiles;
    fz::RawKernel again(square_src, "elementwise_square");
    CHECK(again.inspect().cache_path == info.cache_path);
    CHECK(fz::stats().compiles == before);  // a disk-cache hit
  }
  // options are part of the key
  fz::RawKernel fast(square_src, "elementwise_square", {"--use_fast_math"});
  CHECK(fast.inspect().cache_path != info.cache_path);

  // a module of several kernels using the CUDA headers (half precision)
  fz::RawModule module(R"(#include <cuda_fp16.h>
extern "C" __global__ void to_half(const float* x, __half* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = __float2half(x[i]); }
extern "C" __global__ void scale(float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
)");
  CHECK_NOTHROW(module.inspect());
  CHECK(module.get_function("scale").name() == "scale");

  fz::RawKernel broken("extern \"C\" __global__ void k(float* x) { x[0] = undefined_name; }", "k");
  try {
    broken.inspect();
    FAIL("no CompileError");
  } catch (const fz::CompileError& e) {
    CHECK_THAT(e.log(), Catch::Contains("undefined_name"));
    CHECK_THAT(e.numbered_source(), Catch::Contains("   1 | extern \"C\""));
  }
  CHECK_THROWS_AS(fz::RawKernel(square_src, ""), fz::TypeError);
  CHECK_THROWS_AS(fz::RawKernel(square_src, "elementwise_square", {"-arch=sm_80"}), fz::TypeError);
}

TEST_CASE("fz::function is defined once per kernel and fuses with everything around it", "[user][function][nvrtc]") {
  auto sq_r = fz::function<float(float, float)>("sq_r", "(float x, float y) { return x * x + y * y; }");
  auto x = fz::placeholder<float>({4096}), y = fz::placeholder<float>({4096});
  const auto k = fz::inspect(fz::sqrt(sq_r(x, y)) + 1.f);
  CHECK(k.kernels == 1);
  CHECK(k.name.starts_with("fz_sq_r_sqrt_add_f32_"));
  CHECK_THAT(k.source,
             Catch::Contains("__device__ __forceinline__ float sq_r(float x, float y) { return x * x + y * y; }"));
  // called twice (and with a scalar, converted to the parameter's dtype): defined once
  const auto twice = fz::inspect(sq_r(x, y) - sq_r(y, 2));
  std::size_t defs = 0;
  for (std::size_t at = twice.source.find("float sq_r("); at != std::string::npos;
       at = twice.source.find("float sq_r(", at + 1))
    ++defs;
  CHECK(defs == 1);
  // the same definition made again is the same kernel (stable across objects and processes)
  auto again = fz::function<float(float, float)>("sq_r", "(float x, float y) { return x * x + y * y; }");
  CHECK(fz::inspect(fz::sqrt(again(x, y)) + 1.f).name == k.name);
  // another body under another name: another kernel, with a different hash
  auto cube = fz::function<float(float)>("cube", "(float v) { return v * v * v; }");
  CHECK(fz::inspect(fz::sqrt(cube(x)) + 1.f).name != k.name);
  // inside a reduction, 16-bit arrays and other dtypes convert to the parameters
  auto h = fz::placeholder<fz::half>({4096});
  const auto r = fz::inspect(fz::sum(sq_r(h, x)));
  CHECK(r.kernels == 1);
  CHECK_THAT(r.source, Catch::Contains("sq_r("));
  auto clampi = fz::function<std::int32_t(std::int32_t, std::int32_t, std::int32_t)>(
      "clampi", "(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }");
  auto i = fz::placeholder<std::int64_t>({100});
  CHECK_NOTHROW(fz::inspect(clampi(i, 0, 10) * 2));
}

TEST_CASE("fz::function mistakes are typed errors", "[user][function][errors]") {
  using F = fz::Function<float(float)>;
  CHECK_THROWS_AS(F("bad name", "(float v) { return v; }"), fz::TypeError);
  CHECK_THROWS_AS(F("fz_mine", "(float v) { return v; }"), fz::TypeError);
  CHECK_THROWS_WITH(F("f", "return v;"), Catch::Contains("starts with the parameter list"));
  // two different definitions of one name cannot meet in one kernel
  F a("twin", "(float v) { return v + 1; }"), b("twin", "(float v) { return v + 2; }");
  auto x = fz::placeholder<float>({8});
  CHECK_THROWS_WITH(fz::inspect(a(x) + b(x)), Catch::Contains("two different fz::functions named 'twin'"));
  // a body that does not compile: CompileError with the numbered source
  F broken("broken_fn", "(float v) { return v +* 1; }");
  CHECK_THROWS_AS(fz::inspect(broken(x)), fz::CompileError);
}

TEST_CASE("a generated ElementwiseKernel matches its golden file", "[user][golden]") {
  fz::ElementwiseKernel k("T x, raw T y, float32 s", "T z", "z = x * s + y[i % y.size()]", "scaled_plus_raw");
  auto x = fz::placeholder<fz::half>({64, 48}).transpose(), y = fz::placeholder<fz::half>({16}),
       z = fz::placeholder<fz::half>({48, 64});
  test::check_golden("elementwise_kernel", k.inspect(x, y, 2.5f, z).source);
}

TEST_CASE("ElementwiseKernel code that reads no index streams 16-byte vectors, as fused kernels do", "[user][nvrtc]") {
  using fz::codegen::reads_index;
  auto spec = [](const char* code) {
    return fz::codegen::make_elementwise_spec("float32 x", "float32 z", code, "k", "", {});
  };
  CHECK(reads_index(spec("z = x * i")));
  CHECK(reads_index(spec("z = x / _ind.size()")));
  CHECK(reads_index(spec("z = x; /* i */")));  // a comment counts: the rule is conservative
  CHECK_FALSE(reads_index(spec("z = xi + x_i + i2 * x")));
  CHECK_FALSE(reads_index(spec("z = sinf(x)")));

  auto x = fz::placeholder<float>({1001}), y = fz::placeholder<float>({1001});
  fz::ElementwiseKernel diff("float32 x, float32 y", "float32 z", "z = x - y", "diff");
  fz::ElementwiseKernel with_i("float32 x", "float32 z", "z = x * i", "with_i");
  fz::ElementwiseKernel acc("T x", "T z", "z += x", "acc");
  fz::ElementwiseKernel mixed("float32 x, float64 s", "float64 z", "z = x * s", "mixed");
  CHECK(with_i.inspect(x).variant == "linear, 32-bit index");
  const auto k = diff.inspect(x, y);  // 1,001 elements: 250 vectors and a tail of one
  CHECK(k.variant == "linear, 4-wide vectors, 32-bit index");
  CHECK(!k.arch.empty());
  CHECK_THAT(diff.inspect(x, fz::placeholder<float>({1})).variant, Catch::Contains("4-wide vectors"));  // a broadcast y
  CHECK_THAT(diff.inspect(fz::placeholder<float>({8, 1}), fz::placeholder<float>({5})).variant,
             Catch::Contains("strided"));
  const auto h = acc.inspect(fz::placeholder<fz::half>({4096}), fz::placeholder<fz::half>({4096}));  // reads its output
  CHECK(h.variant == "T=float16, linear, 8-wide vectors, 32-bit index");
  CHECK_THAT(h.source, Catch::Contains("float z = fz_half_to_float(_fz_w_z.v[_fz_k]);"));
  CHECK(!h.arch.empty());
  const auto m = mixed.inspect(x, 2.0);  // a float64 output: 2-wide vectors for every array
  CHECK(m.variant == "linear, 2-wide vectors, 32-bit index");
  CHECK(!m.arch.empty());
  CHECK(diff.inspect(fz::placeholder<float>({3}), fz::placeholder<float>({3})).variant ==
        "linear, 32-bit index");  // under one vector
}

TEST_CASE("a user kernel's scalar argument converts to its parameter's dtype, or is refused", "[user]") {
  using fz::DType;
  auto from_int = [](std::int64_t v) {
    fz::detail::ScalarArg a{0, DType::int64};
    std::memcpy(&a.bits, &v, 8);
    return a;
  };
  auto from_double = [](double v) {
    fz::detail::ScalarArg a{0, DType::float64};
    std::memcpy(&a.bits, &v, 8);
    return a;
  };
  auto bits = [](const fz::detail::ScalarArg& a, DType to) { return fz::detail::scalar_bits(a, to, "test"); };
  // every integer dtype takes what fits, in its own width, and refuses one past its range
  CHECK(bits(from_int(-128), DType::int8) == 0x80);
  CHECK_THROWS_WITH(bits(from_int(-129), DType::int8), Catch::Contains("-129 does not fit the parameter's dtype int8"));
  CHECK(bits(from_int(32767), DType::int16) == 0x7fff);
  CHECK_THROWS_AS(bits(from_int(32768), DType::int16), fz::TypeError);
  CHECK(bits(from_int(-1), DType::int32) == 0xffffffffu);
  CHECK(bits(from_int(-1), DType::int64) == ~std::uint64_t{0});
  CHECK(bits(from_int(255), DType::uint8) == 255);
  CHECK_THROWS_AS(bits(from_int(-1), DType::uint8), fz::TypeError);
  CHECK_THROWS_AS(bits(from_int(65536), DType::uint16), fz::TypeError);
  CHECK(bits(from_int(4294967295), DType::uint32) == 0xffffffffu);
  CHECK(bits(from_double(1e19), DType::uint64) == 10000000000000000000ull);
  // bool takes 0 and 1 only; a whole float converts to an integer, a fraction never does
  CHECK(bits(from_int(1), DType::bool_) == 1);
  CHECK_THROWS_AS(bits(from_int(2), DType::bool_), fz::TypeError);
  CHECK(bits(from_double(-3.0), DType::int8) == 0xfd);
  CHECK_THROWS_AS(bits(from_double(2.5), DType::int32), fz::TypeError);
  // floats: float64 as it is, every other floating dtype (16-bit ones too) travels as float32
  const std::uint64_t as_double = bits(from_int(3), DType::float64);
  double d;
  std::memcpy(&d, &as_double, 8);
  CHECK(d == 3.0);
  for (DType f : {DType::float32, DType::float16, DType::bfloat16}) {
    const std::uint64_t b = bits(from_double(0.5), f);
    float x;
    std::memcpy(&x, &b, 4);
    CHECK(x == 0.5f);
  }
}
