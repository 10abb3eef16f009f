// SPDX-License-Identifier: Apache-2.0
// Arrays on a GPU: transfers of every dtype, views reading the right elements, value semantics.
#include <bit>
#include <limits>
#include <numeric>

#include <sstream>

#include "support.hpp"

#include <fusion/fmt.hpp>

namespace {

template <class T> std::vector<T> sample_values(std::size_t n) {
  std::vector<T> v = test::random<T>(n, -100, 100, 11);
  if (n < 4) return v;
  if constexpr (std::is_same_v<T, fz::half> || std::is_same_v<T, fz::bfloat16>) {
    v[0] = T(std::numeric_limits<float>::infinity());
    v[1] = T(-0.0f);
    v[2] = T::from_bits(1);  // smallest subnormal
    v[3] = T(std::nanf(""));
  } else if constexpr (std::is_floating_point_v<T>) {
    v[0] = std::numeric_limits<T>::infinity();
    v[1] = -0.0;
    v[2] = std::numeric_limits<T>::denorm_min();
    v[3] = std::numeric_limits<T>::quiet_NaN();
  } else if constexpr (!std::is_same_v<T, bool>) {
    v[0] = std::numeric_limits<T>::max();
    v[1] = std::numeric_limits<T>::min();
  }
  return v;
}

template <class T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if constexpr (std::is_same_v<T, bool>) return a == b;
  else return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEMPLATE_TEST_CASE("transfers of every dtype round-trip exactly", "[gpu][arrays]", bool, std::int8_t, std::int16_t,
                   std::int32_t, std::int64_t, std::uint8_t, std::uint16_t, std::uint32_t, std::uint64_t, fz::half,
                   fz::bfloat16, float, double) {
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20}) {
    const std::vector<TestType> host = sample_values<TestType>(n);
    fz::Array<TestType> a = fz::asarray(host);
    CHECK(a.dtype() == fz::dtype_of<TestType>);
    CHECK(a.shape() == fz::Shape{static_cast<std::int64_t>(n)});
    CHECK(same_bits(a.to_host(), host));
    fz::Array<TestType> copy = a;  // deep copy through a kernel
    CHECK(copy.data_ptr() != a.data_ptr());
    CHECK(same_bits(copy.to_host(), host));
  }
}

TEST_CASE("views read the right elements", "[gpu][arrays]") {
  std::vector<int> h(24);
  std::iota(h.begin(), h.end(), 0);
  fz::Array<int> a = fz::asarray(h, {2, 3, 4});
  auto at = [&](int i, int j, int k) { return h[static_cast<std::size_t>(i * 12 + j * 4 + k)]; };

  {  // a[:, ::-1, 1::2]
    auto v = a.slice({{}, {std::nullopt, std::nullopt, -1}, {1, std::nullopt, 2}});
    CHECK(v.shape() == fz::Shape{2, 3, 2});
    std::vector<int> want;
    for (int i = 0; i < 2; ++i)
      for (int j = 2; j >= 0; --j)
        for (int k = 1; k < 4; k += 2) want.push_back(at(i, j, k));
    CHECK(v.to_host() == want);
  }
  {  // a.transpose((2, 0, 1))
    auto t = a.transpose({2, 0, 1});
    std::vector<int> want;
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) want.push_back(at(i, j, k));
    CHECK(t.to_host() == want);
    CHECK(t.reshape({-1}).to_host() == want);  // reshape of a non-contiguous view copies
  }
  {  // a[1, 2:3, :] broadcast to (2, 3, 4)
    auto row = a.slice({{1, 2}, {2, 3}}).broadcast_to({2, 3, 4});
    std::vector<int> want;
    for (int i = 0; i < 24; ++i) want.push_back(at(1, 2, i % 4));
    CHECK(row.to_host() == want);
  }
  CHECK(a.expand_dims(0).shape() == fz::Shape{1, 2, 3, 4});
  CHECK(a.reshape({4, 6}).to_host() == h);
  CHECK(a.slice({{1, 2}, {0, 1}, {3, 4}}).item() == at(1, 0, 3));
  CHECK_THROWS_AS(a.item(), fz::ShapeError);
}

TEST_CASE("assignment writes into same-shaped arrays, views included", "[gpu][arrays]") {
  fz::Array<float> a = fz::zeros<float>({4, 6});
  auto v = a.slice({{1, 3}, {0, 6, 2}});  // a[1:3, ::2]
  v = v + 5.f;                              // same shape: writes through to a
  const auto h = a.to_host();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j)
      CHECK(h[static_cast<std::size_t>(i * 6 + j)] == ((i == 1 || i == 2) && j % 2 == 0 ? 5.f : 0.f));

  fz::Array<float> b = fz::full<float>({3}, 2.f);
  const auto ptr = b.data_ptr();
  b = b * 3.f;  // same shape: in place
  CHECK(b.data_ptr() == ptr);
  b = fz::full<float>({5}, 1.f) + 1.f;  // another shape: b becomes a new array
  CHECK(b.shape() == fz::Shape{5});
  CHECK(b.to_host() == std::vector<float>(5, 2.f));

  fz::Array<float> c = b;  // deep copy
  c += 1.f;
  CHECK(b.to_host() == std::vector<float>(5, 2.f));
  CHECK(c.to_host() == std::vector<float>(5, 3.f));
  const auto cptr = c.data_ptr();
  fz::Array<float> d = std::move(c);  // cheap
  CHECK(d.data_ptr() == cptr);
  CHECK_THROWS_AS(d += fz::full<float>({2}, 1.f), fz::ShapeError);
  CHECK_THROWS_AS(a.broadcast_to({2, 4, 6}) = fz::zeros<float>({2, 4, 6}) + 1.f, fz::Error);  // read-only broadcast
}

TEST_CASE("assignment has one rule for every value category: a temporary of the same shape writes through a view",
          "[gpu][arrays]") {
  fz::Array<float> a = fz::zeros<float>({4, 6});
  auto row = a.slice({{2, 3}});  // a[2:3]
  row = fz::eval(row + 7.f);     // a temporary: still written into a
  auto make = [] { return fz::full<float>({1, 6}, 3.f); };
  auto col = a.slice({{}, {5, 6}});
  CHECK(col.shape() == fz::Shape{4, 1});
  auto first = a.slice({{0, 1}});
  first = make();                // a function's result: written into a too
  std::vector<float> want(24, 0.f);
  for (int j = 0; j < 6; ++j) want[static_cast<std::size_t>(2 * 6 + j)] = 7.f, want[static_cast<std::size_t>(j)] = 3.f;
  CHECK(a.to_host() == want);
  // the array a live view looks into: assigning the array a temporary writes its memory, the view sees it
  a = fz::eval(fz::full<float>({4, 6}, 1.f) * 2.f);
  for (float v : col.to_host()) CHECK(v == 2.f);
  // another shape: the view becomes a new array (and leaves a as it was)
  col = fz::full<float>({3}, 9.f);
  CHECK(col.shape() == fz::Shape{3});
  CHECK(a.to_host() == std::vector<float>(24, 2.f));
  // an array no one else sees takes a temporary's memory over: the same values, no copy
  fz::Array<float> b = fz::zeros<float>({1000});
  fz::Array<float> t = fz::eval(fz::full<float>({1000}, 4.f) + 1.f);
  const auto p = t.data_ptr();
  b = std::move(t);
  CHECK(b.data_ptr() == p);
  CHECK(b.to_host() == std::vector<float>(1000, 5.f));
  // memory from elsewhere (from_device) is written, never replaced
  fz::Array<float> owner = fz::zeros<float>({8});
  fz::Array<float> outside = fz::from_device(owner.data_ptr<float>(), fz::Shape{8});
  outside = fz::full<float>({8}, 6.f);
  CHECK(owner.to_host() == std::vector<float>(8, 6.f));
}

TEST_CASE("creation functions", "[gpu][arrays]") {
  CHECK(fz::zeros<std::int16_t>({3}).to_host() == std::vector<std::int16_t>{0, 0, 0});
  CHECK(fz::ones<double>({2, 2}).to_host() == std::vector<double>(4, 1.0));
  CHECK(fz::full<std::uint8_t>({2}, 200).to_host() == std::vector<std::uint8_t>{200, 200});
  CHECK(fz::arange<std::int32_t>(5).to_host() == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  CHECK(fz::arange<float>(1, 2, 0.25).to_host() == std::vector<float>{1.f, 1.25f, 1.5f, 1.75f});
  CHECK(fz::arange<std::int64_t>(10, 0, -3).to_host() == std::vector<std::int64_t>{10, 7, 4, 1});
  CHECK(fz::arange<float>(3, 1).size() == 0);
  CHECK(fz::empty<float>({0, 5}).size() == 0);
  CHECK(fz::full<fz::half>({1}, fz::half(1.5f)).item() == 1.5f);
  fz::Array<double> e;
  CHECK_FALSE(e.has_storage());
  CHECK_THROWS_AS(fz::eval(e + 1.0), fz::Error);
  CHECK_THROWS_AS(fz::eval(fz::placeholder<float>({3}) + 1.f), fz::Error);
  CHECK_THROWS_AS(fz::asarray(std::vector<float>{1, 2, 3}, {2, 2}), fz::ShapeError);
}

TEST_CASE("arrays print as NumPy prints them: values, views, 16-bit floats, summaries", "[gpu][arrays][print]") {
  const auto a = fz::asarray(std::vector<float>{1.5f, 2.f, 3.f, 4.f}, {2, 2});
  CHECK(fz::to_string(a) == "[[1.5 2. ]\n [3.  4. ]]");
  std::ostringstream os;
  os << a.transpose();  // a strided view prints its logical order
  CHECK(os.str() == "[[1.5 3. ]\n [2.  4. ]]");
  std::ostringstream value;
  value << a * 2.f;  // an expression prints its value
  CHECK(value.str() == "[[3. 4.]\n [6. 8.]]");
  CHECK(fmt::format("{}", a - 1.f) == "[[0.5 1. ]\n [2.  3. ]]");
  CHECK(fz::to_string(fz::asarray(std::vector<std::int32_t>{-1, 20, 300}, {3})) == "[ -1  20 300]");
  CHECK(fz::to_string(fz::asarray(std::vector<fz::half>{fz::half(0.1f), fz::half(-2.f)})) == "[ 0.1 -2. ]");
  CHECK(fz::to_string(fz::Array<bool>(fz::asarray(std::vector<float>{1.f, -1.f}) > 0.f)) == "[ True False]");
  CHECK(fz::to_string(fz::arange<std::int64_t>(2000)) == "[   0    1    2 ... 1997 1998 1999]");
  CHECK(fz::to_string(fz::full<double>({}, 0.25)) == "0.25");
  fz::PrintOptions options;
  options.precision = 2;
  options.threshold = 3;
  options.edge_items = 1;
  fz::ScopedPrintOptions scope(options);
  CHECK(fz::to_string(fz::asarray(std::vector<double>{1.0 / 3, 0.5, 2.0 / 3, 10.0})) == "[ 0.33 ... 10.  ]");
  CHECK(fmt::format("{}", fz::asarray(std::vector<float>{0.125f, 1.f})) == "[0.12 1.  ]");  // half to even, as NumPy
}

TEST_CASE("from_device: another owner's memory as an array, views, ordering after its stream, release once",
          "[gpu][arrays][external]") {
  const auto h = test::random<float>(12, -2, 2, 51);
  int released = 0;
  {
    // the "other library": a buffer it owns, written on its own stream
    fz::Stream theirs;
    std::shared_ptr<fz::Array<float>> buffer;
    {
      fz::StreamScope scope(theirs);
      buffer = std::make_shared<fz::Array<float>>(fz::asarray(h, {3, 4}));
      *buffer = *buffer * 2.f;  // pending on their stream
    }
    std::shared_ptr<void> owner(buffer.get(), [&released, buffer](void*) mutable { ++released; buffer.reset(); });
    const fz::Array<float> x = fz::from_device(buffer->data_ptr<float>(), {3, 4}, {}, owner,
                                               std::make_shared<const fz::Stream>(theirs));
    buffer.reset();
    owner.reset();  // fusion's array keeps the memory alive now
    CHECK(released == 0);
    std::vector<double> want;
    for (float v : h) want.push_back(2.0 * v + 1.0);
    fz::Array<float> y = x + 1.f;
    CHECK(test::mismatches(y.to_host(), want, fz::DType::float32) == 0);
    // a reversed view through byte strides, as DLPack or __cuda_array_interface__ describe one
    const fz::Array<float> rev =
        fz::from_device(x.data_ptr<float>() + 8, {3, 4}, fz::strides_from_bytes({-16, 4}, fz::DType::float32),
                        std::make_shared<fz::Array<float>>(x));
    const auto got = rev.to_host();
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c)
        CHECK(got[static_cast<std::size_t>(r * 4 + c)] == Approx(2.0 * h[static_cast<std::size_t>((2 - r) * 4 + c)]));
  }
  CHECK(released == 1);  // exactly once, when the last fusion array let go

  std::vector<float> host(16, 1.f);
  CHECK_THROWS_WITH(fz::from_device(host.data(), {16}), Catch::Contains("not memory CUDA knows"));
}

TEST_CASE("expressions read back directly; fill writes through views", "[gpu][arrays]") {
  const auto hx = test::random<float>(1000, -1, 1, 31), hy = test::random<float>(1000, -1, 1, 32);
  auto x = fz::asarray(hx), y = fz::asarray(hy);
  double dot = 0;
  for (std::size_t i = 0; i < hx.size(); ++i) dot += static_cast<double>(hx[i] * hy[i]);
  CHECK(std::abs(fz::sum(x * y).item() - dot) < 1e-4);  // one kernel, then one element read
  const std::vector<float> plus = (x + 1.f).to_host();
  REQUIRE(plus.size() == hx.size());
  for (std::size_t i = 0; i < hx.size(); ++i) CHECK(plus[i] == hx[i] + 1.f);
  CHECK_THROWS_AS((x + 1.f).item(), fz::ShapeError);  // 1,000 elements

  fz::Array<std::int32_t> m = fz::asarray(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  fz::Array<std::int32_t> col = m.slice({{}, fz::Slice{1, 2}});
  col.fill(-7);
  CHECK(m.to_host() == std::vector<std::int32_t>{1, -7, 3, 4, -7, 6});
  CHECK(m.fill(9).to_host() == std::vector<std::int32_t>(6, 9));
}

TEST_CASE("copies through pinned buffers run on the stream and return at once; views in C order",
          "[gpu][arrays][pinned]") {
  const auto hv = test::random<float>(6, -50, 50, 41);
  auto a = fz::asarray(hv, {2, 3});
  fz::PinnedBuffer<float> buffer(6);
  std::fill(buffer.begin(), buffer.end(), -1.f);  // poison
  a.copy_to(buffer);
  buffer.synchronize();
  CHECK(std::vector<float>(buffer.begin(), buffer.end()) == hv);

  fz::PinnedBuffer<float> transposed(6);
  a.transpose().copy_to(transposed);  // a transposed view: its elements in its own C order
  transposed.synchronize();
  CHECK(std::vector<float>(transposed.begin(), transposed.end()) ==
        std::vector<float>{hv[0], hv[3], hv[1], hv[4], hv[2], hv[5]});

  // host -> device into a fresh array, then into a strided view (every other column of a 2x6 array)
  fz::PinnedBuffer<float> in(6);
  for (std::size_t i = 0; i < 6; ++i) in[i] = static_cast<float>(i) + 0.5f;
  fz::Array<float> b = fz::full<float>({2, 3}, -9.f);
  b.copy_from(in);
  CHECK(b.to_host() == std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f});
  fz::Array<float> wide = fz::full<float>({2, 6}, 0.f);
  wide.slice({{}, fz::Slice{{}, {}, 2}}).copy_from(in);
  CHECK(wide.to_host() == std::vector<float>{0.5f, 0, 1.5f, 0, 2.5f, 0, 3.5f, 0, 4.5f, 0, 5.5f, 0});

  // a buffer dropped with its copy in flight: freed only after the copy (a large one, to be in flight)
  auto big = fz::full<float>({1 << 24}, 2.f);
  { fz::PinnedBuffer<float> gone(1 << 24); big.copy_to(gone); }
  fz::current_stream().synchronize();

  fz::PinnedBuffer<float> small(5);
  CHECK_THROWS_AS(a.copy_to(small), fz::ShapeError);
  CHECK_THROWS_AS(b.copy_from(small), fz::ShapeError);
  CHECK_THROWS_AS(fz::placeholder<float>({6}).copy_to(buffer), fz::Error);
}

TEST_CASE("DLPack: fusion arrays out and back without a copy; deleters run once, after the last use",
          "[gpu][arrays][dlpack]") {
  namespace dl = fz::dlpack;
  const auto hv = test::random<float>(12, -9, 9, 81);
  auto a = fz::asarray(hv, {3, 4});
  // out: the tensor points at the array's memory with its strides; a view keeps its own layout
  dl::ManagedTensorVersioned* t = dl::to_dlpack(a.transpose());
  REQUIRE(t->version.major == 1);
  CHECK(t->dl_tensor.data == reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.data_ptr())));
  CHECK(t->dl_tensor.device.device_type == dl::kCUDA);
  CHECK(t->dl_tensor.ndim == 2);
  CHECK((t->dl_tensor.shape[0] == 4 && t->dl_tensor.shape[1] == 3));
  CHECK((t->dl_tensor.strides[0] == 1 && t->dl_tensor.strides[1] == 4));
  // and back: the same memory, fusion owns the tensor and runs its deleter once
  {
    fz::Array<float> back(dl::from_dlpack(t));
    CHECK(back.data_ptr() == a.data_ptr());
    CHECK(back.shape() == fz::Shape{4, 3});
    CHECK(back.to_host() == a.transpose().to_host());  // (to_host reads a view in its own C order)
    back += 1.f;  // writes through to a's memory
  }
  fz::current_stream().synchronize();
  const auto after = a.to_host();
  for (std::size_t i = 0; i < hv.size(); ++i) CHECK(after[i] == hv[i] + 1.f);
  // the older, unversioned struct too (what "dltensor" capsules carry)
  dl::ManagedTensor* legacy = dl::to_dlpack_unversioned(a);
  CHECK(legacy->dl_tensor.data == reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.data_ptr())));
  CHECK(fz::Array<float>(dl::from_dlpack(legacy)).to_host() == after);

  // a producer's tensor (here memory of another fusion array) with a counting deleter: called once,
  // only after the array made from it and every view of it are gone and their work has finished
  static int deleted = 0;
  deleted = 0;
  auto keep = fz::full<std::int32_t>({5}, 7);
  std::int64_t shape[1] = {5};
  auto* mine = new dl::ManagedTensor{dl::Tensor{reinterpret_cast<void*>(static_cast<std::uintptr_t>(keep.data_ptr())),
                                                {dl::kCUDA, keep.device()},
                                                1,
                                                dl::to_dlpack_dtype(fz::DType::int32),
                                                shape,
                                                nullptr,
                                                0},
                                     nullptr, [](dl::ManagedTensor* self) {
                                       ++deleted;
                                       delete self;
                                     }};
  {
    fz::Array<std::int32_t> imported(dl::from_dlpack(mine));
    fz::Array<std::int32_t> view = imported.slice({fz::Slice{1, 4}});
    CHECK(fz::Array<std::int32_t>(view * 2).to_host() == std::vector<std::int32_t>{14, 14, 14});
    CHECK(deleted == 0);
  }
  fz::current_stream().synchronize();
  CHECK(deleted == 1);
}

TEST_CASE("NumPy's view functions, *_like, count_nonzero, isclose, allclose and array_equal against the host",
          "[gpu][arrays][views]") {
  const std::int64_t A = 3, B = 4, C = 5;
  const auto h = test::random<float>(static_cast<std::size_t>(A * B * C), -2, 2, 61);
  const auto x = fz::asarray(h, {A, B, C});
  auto at = [&](std::int64_t i, std::int64_t j, std::int64_t k) {
    return h[static_cast<std::size_t>((i * B + j) * C + k)];
  };
  // each view read through a kernel (+ 0) and copied back
  const auto flipped = fz::eval(x.flip(1) + 0.0f).to_host(), swapped = fz::eval(x.swapaxes(0, 2) + 0.0f).to_host();
  const auto moved = fz::eval(x.moveaxis(0, -1) + 0.0f).to_host(), raveled = x.transpose().ravel().to_host();
  for (std::int64_t i = 0; i < A; ++i)
    for (std::int64_t j = 0; j < B; ++j)
      for (std::int64_t k = 0; k < C; ++k) {
        REQUIRE(flipped[static_cast<std::size_t>((i * B + j) * C + k)] == at(i, B - 1 - j, k));
        REQUIRE(swapped[static_cast<std::size_t>((k * B + j) * A + i)] == at(i, j, k));
        REQUIRE(moved[static_cast<std::size_t>((j * C + k) * A + i)] == at(i, j, k));
        REQUIRE(raveled[static_cast<std::size_t>((k * B + j) * A + i)] == at(i, j, k));
      }
  CHECK(x.expand_dims(1).squeeze().to_host() == h);
  // *_like: x's shape and dtype, C-ordered
  const auto z = fz::zeros_like(x.transpose()), o = fz::ones_like(x), f = fz::full_like(x, 2.5f);
  CHECK(z.shape() == fz::Shape{C, B, A});
  for (float v : z.to_host()) REQUIRE(v == 0.0f);
  for (float v : o.to_host()) REQUIRE(v == 1.0f);
  for (float v : f.to_host()) REQUIRE(v == 2.5f);
  CHECK(fz::empty_like(x).shape() == x.shape());
  // count_nonzero: everywhere and per axis
  std::vector<float> hz = h;
  for (std::size_t i = 0; i < hz.size(); i += 3) hz[i] = 0.0f;
  const auto xz = fz::asarray(hz, {A, B, C});
  std::int64_t total = 0;
  std::vector<std::int64_t> per_row(static_cast<std::size_t>(A * B), 0);
  for (std::size_t i = 0; i < hz.size(); ++i) total += hz[i] != 0, per_row[i / C] += hz[i] != 0;
  CHECK(fz::eval(fz::count_nonzero(xz)).item() == total);
  CHECK(fz::eval(fz::count_nonzero(xz, -1)).to_host() == per_row);
  // isclose as NumPy: relative to b, equal infinities, NaN only with equal_nan
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const auto a = fz::asarray(std::vector<float>{1.0f, 1.0f, 100.0f, inf, inf, nan, 0.0f, 1e-9f});
  const auto b = fz::asarray(std::vector<float>{1.0f, 1.00002f, 100.0009f, inf, -inf, nan, 1e-9f, 0.0f});
  const std::vector<bool> want{true, false, true, true, false, false, true, true};
  CHECK(fz::eval(fz::isclose(a, b)).to_host() == want);
  std::vector<bool> with_nan = want;
  with_nan[5] = true;
  CHECK(fz::eval(fz::isclose(a, b, 1e-5, 1e-8, true)).to_host() == with_nan);
  CHECK(fz::eval(fz::isclose(a, b, 1e-4)).to_host()[1]);
  CHECK_FALSE(fz::allclose(a, b));
  CHECK(fz::allclose(x, x + 1e-7f));
  CHECK_FALSE(fz::allclose(x, x + 1e-3f));
  CHECK(fz::array_equal(x, fz::eval(x + 0.0f)));
  CHECK_FALSE(fz::array_equal(x, x.flip(0)));
  CHECK_FALSE(fz::array_equal(x, x.ravel()));  // another shape
}

TEST_CASE("linspace and eye as NumPy makes them", "[gpu][arrays]") {
  CHECK(fz::linspace<float>(0, 1, 5).to_host() == std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1});
  CHECK(fz::linspace<std::int32_t>(0, 10, 4).to_host() == std::vector<std::int32_t>{0, 3, 6, 10});  // truncated
  CHECK(fz::linspace<float>(2, 3, 1).to_host() == std::vector<float>{2});
  CHECK(fz::linspace<float>(2, 3, 0).size() == 0);
  const auto open = fz::linspace<double>(-1, 2, 7, false).to_host();
  REQUIRE(open.size() == 7);
  for (int i = 0; i < 7; ++i) CHECK(std::abs(open[static_cast<std::size_t>(i)] - (-1 + i * (3.0 / 7))) <= 1e-15);
  const auto closed = fz::linspace<double>(0.1, 0.7, 1000).to_host();
  CHECK(closed.back() == 0.7);  // the endpoint exactly, as NumPy sets it
  CHECK(std::abs(closed[500] - (0.1 + 500 * (0.6 / 999))) <= 1e-15);
  CHECK(fz::eye<float>(3).to_host() == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  CHECK(fz::eye<std::int32_t>(3, 5, 1).to_host() ==
        std::vector<std::int32_t>{0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0});
  CHECK(fz::eye<float>(4, 2, -1).to_host() == std::vector<float>{0, 0, 1, 0, 0, 1, 0, 0});
  CHECK(fz::eye<bool>(2).to_host() == std::vector<bool>{true, false, false, true});
  CHECK(fz::eye<float>(0).shape() == fz::Shape{0, 0});
}

TEST_CASE("nanmean, nanvar, nanstd and the vector norms against float64 on the host", "[gpu][arrays]") {
  const std::int64_t R = 7, C = 300;
  std::vector<float> h = test::random<float>(static_cast<std::size_t>(R * C), -3, 5, 71);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i < h.size(); i += 7) h[i] = nan;
  for (std::int64_t c = 0; c < C; ++c) h[static_cast<std::size_t>(2 * C + c)] = nan;  // row 2: every element NaN
  h[static_cast<std::size_t>(3 * C + 1)] = 0.0f;
  const auto x = fz::asarray(h, {R, C});
  std::vector<double> mean(R), var1(R), n1(R, 1), l1(R), l2(R), l3(R), hi(R), lo(R), nz(R);
  for (std::int64_t r = 0; r < R; ++r) {
    double s = 0, n = 0;
    for (std::int64_t c = 0; c < C; ++c)
      if (const double v = h[static_cast<std::size_t>(r * C + c)]; !std::isnan(v)) s += v, n += 1;
    mean[r] = s / n;
    double d = 0;
    for (std::int64_t c = 0; c < C; ++c)
      if (const double v = h[static_cast<std::size_t>(r * C + c)]; !std::isnan(v)) d += (v - mean[r]) * (v - mean[r]);
    var1[r] = d / (n - 1);
  }
  const auto y = fz::asarray(test::random<float>(static_cast<std::size_t>(R * C), -3, 5, 72), {R, C});
  const auto hy = y.to_host();
  for (std::int64_t r = 0; r < R; ++r) {
    hi[r] = 0, lo[r] = INFINITY;
    for (std::int64_t c = 0; c < C; ++c) {
      const double m = std::abs(static_cast<double>(hy[static_cast<std::size_t>(r * C + c)]));
      l1[r] += m, l2[r] += m * m, l3[r] += m * m * m, hi[r] = std::max(hi[r], m), lo[r] = std::min(lo[r], m), nz[r] += m != 0;
    }
    l2[r] = std::sqrt(l2[r]), l3[r] = std::cbrt(l3[r]);
  }
  CHECK(test::mismatches(fz::eval(fz::nanmean(x, 1)).to_host(), mean, fz::DType::float32) == 0);
  CHECK(test::mismatches(fz::eval(fz::nanvar(x, -1, false, 1)).to_host(), var1, fz::DType::float32) == 0);
  std::vector<double> sd(R);
  for (std::int64_t r = 0; r < R; ++r) sd[r] = std::sqrt(var1[r]);
  CHECK(test::mismatches(fz::eval(fz::nanstd(x, 1, true, 1)).to_host(), sd, fz::DType::float32) == 0);
  CHECK(std::isnan(fz::eval(fz::nanmean(x, 1)).to_host()[2]));
  CHECK(test::mismatches(fz::eval(fz::vector_norm<1>(y, 1)).to_host(), l1, fz::DType::float32) == 0);
  CHECK(test::mismatches(fz::eval(fz::norm(y, 1)).to_host(), l2, fz::DType::float32) == 0);
  CHECK(test::mismatches(fz::eval(fz::vector_norm<3>(y, -1)).to_host(), l3, fz::DType::float32) == 0);
  CHECK(test::mismatches(fz::eval(fz::vector_norm<INFINITY>(y, 1)).to_host(), hi, fz::DType::float32) == 0);
  CHECK(test::mismatches(fz::eval(fz::vector_norm<-INFINITY>(y, 1)).to_host(), lo, fz::DType::float32) == 0);
  CHECK(test::mismatches(fz::eval(fz::vector_norm<0>(y, 1)).to_host(), nz, fz::DType::float32) == 0);
  // the Frobenius norm of integers, in float64
  const auto m = fz::asarray(std::vector<std::int32_t>{3, -4, 12, 0}, {2, 2});
  CHECK(fz::eval(fz::norm(m)).item() == 13.0);
  CHECK(fz::eval(fz::nanmean(m, 0)).to_host() == std::vector<double>{7.5, -2});
}

TEST_CASE("dropout: zeros with probability p, the rest scaled by 1 / (1 - p), one mask per seed and offset",
          "[gpu][arrays]") {
  const std::int64_t N = 1 << 18;
  const auto hx = test::random<float>(static_cast<std::size_t>(N), 0.5, 2, 81);  // never 0
  const auto x = fz::asarray(hx, {N});
  const auto a = fz::eval(fz::dropout(x, 0.3, 42)).to_host();
  const float scale = static_cast<float>(1 / (1 - 0.3));
  std::int64_t zeros = 0, wrong = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    const float v = a[static_cast<std::size_t>(i)];
    if (v == 0) ++zeros;
    else if (v != hx[static_cast<std::size_t>(i)] * scale) ++wrong;
  }
  CHECK(wrong == 0);
  CHECK(std::abs(static_cast<double>(zeros) / N - 0.3) < 0.005);  // 0.3 within ~5 standard deviations
  CHECK(fz::eval(fz::dropout(x, 0.3, 42)).to_host() == a);        // the same mask again
  CHECK(fz::eval(fz::dropout(x, 0.3, 42, fz::random::Offset{N})).to_host() != a);
  CHECK(fz::eval(fz::dropout(x, 0.0, 7)).to_host() == hx);
  for (float v : fz::eval(fz::dropout(x, 1.0, 7)).to_host()) REQUIRE(v == 0.0f);
}

TEST_CASE("the README's first example prints what the README says it prints", "[gpu][arrays][print][docs]") {
  std::vector<float> hx{1, 2, 3, 4}, hy{0.5f, 1, 1.5f, 2};  // examples/hello.cpp's statements
  fz::Array<float> x = fz::asarray(hx, {2, 2}), y = fz::asarray(hy, {2, 2});
  fz::Array<float> out = fz::sin(x) + fz::cos(y) / fz::sqrt(x);
  fz::Array<float> p = fz::softmax(x * y);
  float d = fz::eval(fz::sum((x - y) * (x - y))).item();
  std::ostringstream printed;
  printed << out << "\n" << p << "\n" << d << "\n";
  std::string name = fz::inspect(fz::sin(x) + fz::cos(y) / fz::sqrt(x)).name;
  name = name.substr(0, name.size() - 16) + "<hash>";
  printed << name << "\n";
  const std::string readme = test::read_file(std::string(FUSION_GOLDEN_DIR) + "/../../README.md");
  const std::size_t block = readme.find("```\n", readme.find("\nprints")) + 4;
  CHECK(readme.substr(block, readme.find("```", block) - block) == printed.str());
}

TEST_CASE("NumPy's basic indexing reads and writes through views", "[gpu][arrays][views]") {
  const auto h = test::random<float>(4 * 5 * 6, -2, 2, 91);
  fz::Array<float> m = fz::asarray(h, {4, 5, 6});
  auto at = [&](int i, int j, int k) { return h[static_cast<std::size_t>((i * 5 + j) * 6 + k)]; };
  const auto row = m[2].to_host();
  for (int j = 0; j < 5; ++j)
    for (int k = 0; k < 6; ++k) REQUIRE(row[static_cast<std::size_t>(j * 6 + k)] == at(2, j, k));
  const auto odd = fz::eval(m(fz::_, -1, fz::from(1, 2)) + 0.0f).to_host();  // m[:, -1, 1::2]
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 3; ++k) REQUIRE(odd[static_cast<std::size_t>(i * 3 + k)] == at(i, 4, 1 + 2 * k));
  CHECK(m(1, 2, 3).item() == at(1, 2, 3));
  auto plane = m(fz::_, 0);  // m[:, 0] = 9
  plane = fz::full<float>({4, 6}, 9.f);
  const auto after = m.to_host();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 6; ++k)
        REQUIRE(after[static_cast<std::size_t>((i * 5 + j) * 6 + k)] == (j == 0 ? 9.f : at(i, j, k)));
}

TEST_CASE("transposed expressions read their arrays through the permutation, in one kernel with what reads them",
          "[gpu][arrays][views]") {
  const std::int64_t A = 4, B = 3, C = 5;
  const auto hx = test::random<float>(static_cast<std::size_t>(A * C), -2, 2, 91);  // x: (A, 1, C)
  const auto hy = test::random<float>(static_cast<std::size_t>(B * C), -2, 2, 92);  // y: (B, C)
  const auto hz = test::random<double>(static_cast<std::size_t>(C * B * A), -2, 2, 93);  // z: (C, B, A)
  const auto x = fz::asarray(hx, {A, 1, C}), y = fz::asarray(hy, {B, C});
  const auto z = fz::asarray(hz, {C, B, A});
  auto f = [&](std::int64_t i, std::int64_t j, std::int64_t k) {  // x * y + 1 at (i, j, k) of (A, B, C)
    return double(float(hx[static_cast<std::size_t>(i * C + k)] * hy[static_cast<std::size_t>(j * C + k)]) + 1.0f);
  };
  fz::Array<double> out = fz::full<double>({C, B, A}, std::nan(""));  // poisoned
  fz::reset_stats();
  out = fz::transpose(x * y + 1.0f) + z;
  CHECK(fz::stats().launches == 1);
  const auto got = out.to_host();
  const auto swapped = fz::eval(fz::swapaxes(x * y + 1.0f, 0, 1)).to_host();  // (B, A, C)
  const auto moved = fz::eval(fz::moveaxis(x * y + 1.0f, 2, 0)).to_host();    // (C, A, B)
  for (std::int64_t i = 0; i < A; ++i)
    for (std::int64_t j = 0; j < B; ++j)
      for (std::int64_t k = 0; k < C; ++k) {
        const std::size_t t = static_cast<std::size_t>((k * B + j) * A + i);
        REQUIRE(got[t] == f(i, j, k) + hz[t]);
        REQUIRE(swapped[static_cast<std::size_t>((j * A + i) * C + k)] == float(f(i, j, k)));
        REQUIRE(moved[static_cast<std::size_t>((k * A + i) * B + j)] == float(f(i, j, k)));
      }
  // a reduction is evaluated first, then read transposed: (C, B, A) summed over axis 0, then (A, B)
  const auto s = fz::eval(fz::transpose(fz::sum(z, 0)) * 2.0).to_host();
  for (std::int64_t i = 0; i < A; ++i)
    for (std::int64_t j = 0; j < B; ++j) {
      double want = 0;
      for (std::int64_t k = 0; k < C; ++k) want += hz[static_cast<std::size_t>((k * B + j) * A + i)];
      REQUIRE(std::abs(s[static_cast<std::size_t>(i * B + j)] - 2 * want) <= 1e-13);
    }
  // random values are drawn at the operand's own flat indices (evaluated first), then read transposed
  const auto zeros = fz::zeros<std::uint32_t>({3, 4});
  const auto drawn = fz::eval(fz::random::bits(5, fz::random::Offset{1}) + zeros).to_host();
  const auto turned = fz::eval(fz::transpose(fz::random::bits(5, fz::random::Offset{1}) + zeros)).to_host();
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 4; ++c) REQUIRE(turned[c * 3 + r] == drawn[r * 4 + c]);
  // flatten is a copy: writing it leaves the array alone
  auto flat = z.transpose().flatten();
  CHECK(flat.shape() == fz::Shape{C * B * A});
  flat += 1.0;
  CHECK(z.to_host() == hz);
}

TEST_CASE("var_mean and std_mean: one kernel, against float64 on the host", "[gpu][arrays]") {
  const std::int64_t R = 33, C = 1000;
  const auto h = test::random<float>(static_cast<std::size_t>(R * C), -3, 5, 94);
  const auto x = fz::asarray(h, {R, C});
  for (int axis : {0, 1}) {
    fz::reset_stats();
    auto [v, m] = fz::var_mean(x, axis, false, 1);
    CHECK(fz::stats().launches == 1);
    auto [s, m2] = fz::std_mean(x, axis, true);
    CHECK(s.shape() == (axis == 0 ? fz::Shape{1, C} : fz::Shape{R, 1}));
    const auto hv = v.to_host(), hm = m.to_host(), hs = s.to_host(), hm2 = m2.to_host();
    const std::int64_t groups = axis == 0 ? C : R, n = axis == 0 ? R : C;
    for (std::int64_t g = 0; g < groups; ++g) {
      auto at = [&](std::int64_t k) { return double(h[static_cast<std::size_t>(axis == 0 ? k * C + g : g * C + k)]); };
      double sum = 0, ss = 0;
      for (std::int64_t k = 0; k < n; ++k) sum += at(k);
      const double mean = sum / double(n);
      for (std::int64_t k = 0; k < n; ++k) ss += (at(k) - mean) * (at(k) - mean);
      const auto i = static_cast<std::size_t>(g);
      REQUIRE(std::abs(hm[i] - mean) <= 1e-5 * (1 + std::abs(mean)));
      REQUIRE(std::abs(hm2[i] - mean) <= 1e-5 * (1 + std::abs(mean)));
      REQUIRE(std::abs(hv[i] - ss / double(n - 1)) <= 1e-5 * ss / double(n - 1));
      REQUIRE(std::abs(hs[i] - std::sqrt(ss / double(n))) <= 1e-5 * std::sqrt(ss / double(n)));
    }
  }
}
