// SPDX-License-Identifier: Apache-2.0
// Sharp edges of the public API, without a GPU: inspecting ties and plans shows every kernel, typed
// device pointers check their type, CUDA's 16-bit host types convert bit for bit.
#include <bit>
#include <limits>
#include <sstream>
#include <thread>
#include <type_traits>

#include "fusion/cuda_types.hpp"
#include "fusion/region.hpp"  // fz::Lazy's header under its earlier name still works
#include "reference.hpp"
#include "support.hpp"

TEST_CASE("inspect shows every kernel of a tie and of a plan, with its hash and strategy", "[api][plan]") {
  auto x = fz::placeholder<float>({1 << 20}), y = fz::placeholder<float>({1 << 20});
  auto m = fz::placeholder<float>({256, 1000});

  const fz::KernelInfo pair = fz::inspect(x + y, x * y);  // fz::tie(a, b) = (x + y, x * y)
  CHECK(pair.kernels == 1);
  REQUIRE(pair.plan.size() == 1);
  CHECK_THAT(pair.plan[0], Catch::Contains(pair.name) && Catch::Contains(fmt::format("[{:016x}]", pair.hash)));
  CHECK_THAT(pair.source, Catch::Contains("out1"));

  const fz::KernelInfo rows = fz::inspect(fz::sum(m, -1), fz::sum(m * m, -1));  // one pass over each row
  CHECK(rows.kernels == 1);
  CHECK_THAT(rows.variant, Catch::StartsWith("layer") && Catch::Contains("1 reduction pass"));

  const fz::KernelInfo two = fz::inspect(fz::sum(m, 0), fz::max(m, 1));  // other axes: a kernel each
  CHECK(two.kernels == 2);
  REQUIRE(two.plan.size() == 2);
  CHECK_THAT(two.plan[0], Catch::Contains("fz_sum"));
  CHECK_THAT(two.plan[1], Catch::Contains("fz_max"));
  std::ostringstream printed;
  printed << two;
  CHECK_THAT(printed.str(), Catch::StartsWith("2 kernels, in launch order:"));
  for (const std::string& p : two.plan) CHECK_THAT(printed.str(), Catch::Contains(p));

  const fz::KernelInfo single = fz::inspect(fz::sin(x));
  REQUIRE(single.plan.size() == 1);
  std::ostringstream one;
  one << single;
  CHECK_THAT(one.str(), Catch::StartsWith("kernel " + single.name));
}

TEST_CASE("data_ptr<T>() gives a typed device pointer and refuses another element type", "[api]") {
  const fz::Array<float> f = fz::placeholder<float>({8});
  const fz::Array<fz::half> h = fz::placeholder<fz::half>({8});
  CHECK(reinterpret_cast<std::uintptr_t>(f.data_ptr<float>()) == f.data_ptr());
  CHECK(f.data_ptr<const float>() == f.data_ptr<float>());
  CHECK_THROWS_AS(f.data_ptr<double>(), fz::TypeError);
  CHECK_THROWS_WITH(f.data_ptr<std::int32_t>(), Catch::Contains("data_ptr<int32>() of an array of float32"));
  CHECK(reinterpret_cast<std::uintptr_t>(h.data_ptr<__half>()) == h.data_ptr());  // CUDA's own type: the same two bytes
  CHECK_THROWS_AS(h.data_ptr<float2>(), fz::TypeError);
  CHECK(reinterpret_cast<std::uintptr_t>(f.data_ptr<void>()) == f.data_ptr());
}

TEST_CASE("CUDA's __half and __nv_bfloat16 host data convert to fusion's types bit for bit", "[api]") {
  const std::vector<__half> h{__float2half(1.5f), __float2half(-0.25f), __float2half(65504.f)};
  const auto as_fz = fz::detail::copy_bits<fz::half>(std::span<const __half>(h));
  REQUIRE(as_fz.size() == 3);
  CHECK(static_cast<float>(as_fz[0]) == 1.5f);
  CHECK(static_cast<float>(as_fz[1]) == -0.25f);
  CHECK(static_cast<float>(as_fz[2]) == 65504.f);
  const std::vector<__nv_bfloat16> b{__float2bfloat16(3.0f), __float2bfloat16(-1e30f)};
  const auto back = fz::detail::copy_bits<__nv_bfloat16>(
      std::span<const fz::bfloat16>(fz::detail::copy_bits<fz::bfloat16>(std::span<const __nv_bfloat16>(b))));
  CHECK(__bfloat162float(back[0]) == 3.0f);
  CHECK(__bfloat162float(back[1]) == __bfloat162float(b[1]));
  STATIC_REQUIRE(std::is_same_v<decltype(fz::asarray(h)), fz::Array<fz::half>>);
  STATIC_REQUIRE(std::is_same_v<decltype(fz::asarray(b, {2})), fz::Array<fz::bfloat16>>);
}

namespace {
// An expression built from temporaries owns them: it can leave the function that built it.
auto scaled_temporary() { return fz::placeholder<float>({64}) * 2.f + fz::placeholder<float>({64}); }
}  // namespace

TEST_CASE("an expression built from temporaries holds them and can be returned", "[api]") {
  const auto e = scaled_temporary();  // (under AddressSanitizer a dangling reference here would be caught)
  const fz::KernelInfo k = fz::inspect(e);
  CHECK(k.kernels == 1);
  CHECK_THAT(k.name, Catch::StartsWith("fz_mul_add_f32_"));
  STATIC_REQUIRE(
      std::is_same_v<decltype(fz::detail::to_node(fz::placeholder<float>({1}))), fz::expr::ArrayOwned<float>>);
}

TEST_CASE("inspect_into shows the copy step when the output overlaps an input in another layout", "[api][plan]") {
  fz::Array<float> x = fz::placeholder<float>({64, 64}), y = fz::placeholder<float>({64, 64});
  const fz::KernelInfo same = fz::inspect_into(x, x + 1.f);  // element for element: in place
  CHECK(same.kernels == 1);
  const fz::KernelInfo turned = fz::inspect_into(x, x.transpose() + 1.f);  // x = x.T + 1 reads what it writes
  CHECK(turned.kernels == 2);
  REQUIRE(turned.plan.size() == 2);
  CHECK_THAT(turned.plan[1], Catch::StartsWith("fz_copy_f32_") && Catch::Contains("computed aside and copied"));
  CHECK(fz::inspect_into(y, x.transpose() + 1.f).kernels == 1);  // other memory
  CHECK(fz::inspect_into(x.slice({fz::Slice{0, 32}}), x.slice({fz::Slice{32, 64}}) * 2.f).kernels ==
        1);  // disjoint halves
  CHECK(fz::inspect_into(x.slice({fz::Slice{1, 64}}), x.slice({fz::Slice{0, 63}}) * 2.f).kernels ==
        2);  // shifted: overlaps
  // a reduction into a view of its own input: computed aside
  CHECK(fz::inspect_into(x.slice({fz::Slice{0, 1}}).reshape({64}), fz::sum(x, 0)).kernels == 2);
  // a result of another shape replaces the array: nothing to copy
  CHECK(fz::inspect_into(x, fz::sum(x, 0)).kernels == 1);
}

TEST_CASE("expressions read back as arrays do: to_host() and item() types", "[api]") {
  auto p = fz::placeholder<float>({3});
  auto i = fz::placeholder<std::int32_t>({3});
  STATIC_REQUIRE(std::is_same_v<decltype((p + 1.f).to_host()), std::vector<float>>);
  STATIC_REQUIRE(std::is_same_v<decltype(fz::sum(i).item()), std::int64_t>);  // NumPy's sum of int32
  STATIC_REQUIRE(std::is_same_v<decltype(fz::mean(i).item()), double>);
  // a placeholder has no data: evaluating it is an error, with or without a GPU
  CHECK_THROWS_AS((p + 1.f).to_host(), fz::Error);
}

TEST_CASE("modes are per-thread switches that nest, one type for all (fz::ScopedMode)", "[api]") {
  static_assert(std::is_same_v<fz::Unfused, fz::ScopedMode<fz::detail::Mode::unfused>>);
  CHECK_FALSE(fz::Unfused::active());
  {
    const fz::Unfused outer;
    CHECK(fz::Unfused::active());
    CHECK_FALSE(fz::FastMath::active());  // each mode its own switch
    CHECK_FALSE(fz::SeparateReductions::active());
    {
      const fz::Unfused inner;
      const fz::FastMath fast;
      CHECK(fz::FastMath::active());
    }
    CHECK(fz::Unfused::active());  // the inner one restored what it found
    CHECK_FALSE(fz::FastMath::active());
    bool elsewhere = true;
    std::thread([&] { elsewhere = fz::Unfused::active(); }).join();
    CHECK_FALSE(elsewhere);  // another thread's switch is its own
  }
  CHECK_FALSE(fz::Unfused::active());
}

TEST_CASE("NumPy's view functions: squeeze, flip, swapaxes, moveaxis, ravel; *_like; checks before the GPU",
          "[api][views]") {
  const auto x = fz::placeholder<float>({2, 1, 3, 1});
  CHECK(x.squeeze().shape() == fz::Shape{2, 3});
  CHECK(x.squeeze(1).shape() == fz::Shape{2, 3, 1});
  CHECK(x.squeeze(-1).shape() == fz::Shape{2, 1, 3});
  CHECK_THROWS_WITH(x.squeeze(0), Catch::Contains("axis 0") && Catch::Contains("extent 2, not 1"));
  const auto m = fz::placeholder<float>({4, 5, 6});
  const auto f = m.flip(1);
  CHECK(f.shape() == m.shape());
  CHECK(f.strides()[1] == -m.strides()[1]);
  CHECK(f.offset() == m.offset() + 4 * m.strides()[1]);  // starts at the last row of axis 1
  CHECK(m.flip().strides() == fz::Strides{-30, -6, -1});
  CHECK_THROWS_AS(m.flip(3), fz::ShapeError);
  CHECK(m.swapaxes(0, -1).shape() == fz::Shape{6, 5, 4});
  CHECK(m.swapaxes(0, -1).strides() == fz::Strides{1, 6, 30});
  CHECK(m.moveaxis(0, -1).shape() == fz::Shape{5, 6, 4});
  CHECK(m.moveaxis(2, 0).shape() == fz::Shape{6, 4, 5});
  CHECK_THROWS_AS(m.moveaxis(3, 0), fz::ShapeError);
  CHECK(m.ravel().shape() == fz::Shape{120});
  CHECK(fz::placeholder<double>({3, 4}).transpose().ravel().shape() == fz::Shape{12});
  // dtypes of the new reductions and comparisons
  STATIC_REQUIRE(decltype(fz::count_nonzero(m))::dtype == fz::DType::int64);
  STATIC_REQUIRE(decltype(fz::isclose(m, 1.0))::dtype == fz::DType::bool_);
  CHECK(fz::inspect(fz::isclose(m, m.flip(0), 1e-3)).kernels == 1);
  // a size that does not match the data is a ShapeError before anything needs a GPU
  const std::vector<float> three{1, 2, 3};
  CHECK_THROWS_WITH(fz::asarray(three, {2, 2}), Catch::Contains("3 elements for a shape of (2, 2)"));
}

TEST_CASE("NumPy's basic indexing: m[i], m(i, fz::_), slices spelled fz::slice / from / to / step", "[api][views]") {
  const auto m = fz::placeholder<float>({4, 5, 6});  // strides (30, 6, 1)
  CHECK(m[1].shape() == fz::Shape{5, 6});
  CHECK(m[1].offset() == 30);
  CHECK(m[-1].offset() == 90);
  const auto col = m(fz::_, 2);  // m[:, 2]
  CHECK(col.shape() == fz::Shape{4, 6});
  CHECK(col.strides() == fz::Strides{30, 1});
  CHECK(col.offset() == 12);
  const auto e = m(3, -2, 5);  // one element: a 0-d view
  CHECK(e.shape() == fz::Shape{});
  CHECK(e.offset() == 3 * 30 + 3 * 6 + 5);
  const auto every = m(fz::_, fz::step(2));  // m[:, ::2]
  CHECK(every.shape() == fz::Shape{4, 3, 6});
  CHECK(every.strides() == fz::Strides{30, 12, 1});
  const auto mixed = m(fz::slice(1, 3), 0, fz::from(-2));  // m[1:3, 0, -2:]
  CHECK(mixed.shape() == fz::Shape{2, 2});
  CHECK(mixed.offset() == 30 + 4);
  CHECK(m(fz::to(2), fz::_, fz::step(-1)).shape() == fz::Shape{2, 5, 6});
  CHECK(m(fz::to(2), fz::_, fz::step(-1)).offset() == 5);  // ::-1 starts at the last element
  CHECK_THROWS_WITH(m[4], Catch::Contains("index 4 is out of bounds for axis 0 with size 4"));
  CHECK_THROWS_AS(m(0, -6), fz::IndexError);
  CHECK_THROWS_WITH(m(0, 0, 0, 0), Catch::Contains("too many indices: 4"));
  CHECK(fz::inspect(m(fz::_, 1) * 2.f).kernels == 1);
}

TEST_CASE("isclose's graph on the host interpreter gives NumPy's answers at the edges", "[api][views]") {
  const auto a = fz::placeholder<float>({1}), b = fz::placeholder<float>({1});
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto close = [&](float x, float y, bool equal_nan) {
    const auto e = fz::isclose(a, b, 1e-5, 1e-8, equal_nan);
    fz::ir::Graph g;
    g.outputs.push_back(decltype(e)::lower(g));
    const fz::ArrayBase* arrays[16];
    fz::detail::ScalarArg scalars[16];
    fz::detail::ArgSink sink{arrays, scalars, nullptr, nullptr};
    e.pack(sink);
    std::vector<test::Scalar> in, sc;
    for (int i = 0; i < sink.n_arrays; ++i) in.push_back({arrays[i] == &a ? x : y, 0});
    for (int i = 0; i < sink.n_scalars; ++i) {
      const fz::detail::ScalarArg& s = scalars[i];
      if (s.dtype == fz::DType::bool_) sc.push_back({0, static_cast<std::int64_t>(s.bits)});
      else sc.push_back({std::bit_cast<float>(static_cast<std::uint32_t>(s.bits)), 0});
    }
    return test::interpret(g, in, sc, 0).i != 0;
  };
  CHECK(close(1, 1, false));
  CHECK_FALSE(close(1, 1.0001f, false));
  CHECK(close(inf, inf, false));
  CHECK_FALSE(close(inf, -inf, false));  // |inf - -inf| <= inf would say yes: the tolerance needs finite values
  CHECK_FALSE(close(inf, 1, false));
  CHECK_FALSE(close(nan, nan, false));
  CHECK(close(nan, nan, true));
  CHECK(close(0, 1e-9f, false));
}

TEST_CASE("arguments are checked before anything runs: empty arrays, axes no array has", "[api]") {
  fz::Array<float> empty;  // default-constructed, never assigned
  CHECK_THROWS_WITH(fz::inspect(empty + 1.f), Catch::Contains("reads an empty Array"));
  const auto m = fz::placeholder<float>({4, 5});
  CHECK_THROWS_WITH(fz::inspect(m + empty), Catch::Contains("fz::placeholder"));
  fz::Array<float> target = fz::placeholder<float>({4, 5});
  CHECK_THROWS_WITH(fz::inspect_into(target, empty * 2.f), Catch::Contains("reads an empty Array"));
  CHECK_THROWS_WITH(fz::sum(m, 200), Catch::Contains("at most 8 dimensions"));
  CHECK_THROWS_WITH(fz::inspect(fz::sum(m, 2)), Catch::Contains("rank 2 (valid: -2 to 1)"));
}

TEST_CASE("NumPy's everyday names build one kernel each and check their arguments first", "[api]") {
  const auto x = fz::placeholder<float>({64, 100});
  CHECK(fz::inspect(fz::nanmean(x, 1)).kernels == 1);
  CHECK(fz::inspect(fz::nanvar(x, 1)).kernels == 1);  // a layer kernel: the nanmean, then the deviations
  CHECK(fz::inspect(fz::nanstd(x)).kernels <= 2);
  CHECK(fz::inspect(fz::norm(x, 1)).kernels == 1);
  CHECK(fz::inspect(fz::vector_norm<INFINITY>(x)).kernels == 1);
  CHECK(fz::inspect(fz::dropout(x * 2.f, 0.5, 3) + 1.f).kernels == 1);
  static_assert(decltype(fz::norm(fz::placeholder<std::int32_t>({4})))::dtype == fz::DType::float64);
  static_assert(decltype(fz::nanmean(fz::placeholder<fz::half>({4})))::dtype == fz::DType::float16);
  CHECK_THROWS_WITH(fz::dropout(x, 1.5, 3), Catch::Contains("[0, 1]"));
  CHECK_THROWS_WITH(fz::linspace<float>(0, 1, -2), Catch::Contains("negative"));
  CHECK_THROWS_AS(fz::eye<float>(-1), fz::ShapeError);
}

TEST_CASE("transpose, swapaxes and moveaxis of an expression fuse; shape_of and result_type ask without running",
          "[api][views]") {
  const auto x = fz::placeholder<float>({4, 1, 5}), y = fz::placeholder<float>({3, 5});
  const auto z = fz::placeholder<double>({5, 3, 4});
  // the query: a result's shape and dtype, no kernel run (nor a GPU needed)
  CHECK(fz::shape_of(x * y) == fz::Shape{4, 3, 5});
  CHECK(fz::shape_of(fz::sum(x * y, 1)) == fz::Shape{4, 5});
  CHECK(fz::shape_of(y) == fz::Shape{3, 5});
  CHECK(fz::result_type(x * y) == fz::DType::float32);
  CHECK(fz::result_type(x + z.transpose()) == fz::DType::float64);
  CHECK(fz::result_type(fz::mean(fz::placeholder<std::int32_t>({4}))) == fz::DType::float64);
  CHECK(fz::result_type(z) == fz::DType::float64);
  // transposed math is one kernel with what reads it: the operand's arrays are read through the permutation
  const auto t = fz::transpose(x * y + 1.0f);
  CHECK(fz::shape_of(t) == fz::Shape{5, 3, 4});
  const fz::KernelInfo k = fz::inspect(t + z);
  CHECK(k.kernels == 1);
  CHECK(fz::shape_of(fz::transpose(x * y, {1, 0, 2})) == fz::Shape{3, 4, 5});
  CHECK(fz::shape_of(fz::swapaxes(x * y, 0, -1)) == fz::Shape{5, 3, 4});
  CHECK(fz::shape_of(fz::moveaxis(x * y, 0, -1)) == fz::Shape{3, 5, 4});
  CHECK(fz::shape_of(fz::transpose(fz::exp(y))) == fz::Shape{5, 3});
  // on an array each is the member's view
  CHECK(fz::transpose(z).strides() == z.transpose().strides());
  CHECK(fz::swapaxes(z, 0, 2).shape() == fz::Shape{4, 3, 5});
  // a bad permutation is the same ShapeError an array gives, before anything runs
  CHECK_THROWS_AS(fz::transpose(x * y, {0, 1}), fz::ShapeError);
  CHECK_THROWS_AS(fz::transpose(x * y, {0, 1, 1}), fz::ShapeError);
  CHECK_THROWS_WITH(fz::swapaxes(x * y, 0, 3), Catch::Contains("swapaxes: axis 3 is out of range for 3 dimensions"));
  CHECK_THROWS_AS(fz::moveaxis(x * y, -4, 0), fz::ShapeError);
  // var_mean's pair is one plan: a tie of var and mean over the same axes is one kernel
  CHECK(fz::inspect(fz::var(y, 1), fz::mean(y, 1)).kernels == 1);
  CHECK(x.flatten().shape() == fz::Shape{20});
}
