// SPDX-License-Identifier: Apache-2.0
// Matrix products without a GPU: NumPy's shape rules and how each operand's memory reaches cuBLASLt
// (transpose flags, leading dimensions, batch strides, copies), the errors, describe_matmul, and loading
// cuBLASLt at run time (a missing library is a clear error; the toolkit's one loads).
#include "runtime/blas/cublaslt.hpp"
#include "schedule/matmul_layout.hpp"
#include "support.hpp"

namespace {
fz::detail::MatmulLayout layout(const fz::ArrayBase& a, const fz::ArrayBase& b) {
  return fz::detail::matmul_layout(a.shape(), a.strides(), b.shape(), b.strides());
}
}  // namespace

TEST_CASE("matmul layout: row-major operands reach cuBLASLt as they lie, as the transposed product", "[matmul]") {
  const auto a = fz::placeholder<float>({64, 32}), b = fz::placeholder<float>({32, 16});
  const auto L = layout(a, b);
  CHECK(L.out_shape == fz::Shape{64, 16});
  CHECK((L.m == 64 && L.n == 16 && L.k == 32 && L.batch == 1));
  CHECK(L.outer_shape.empty());
  // cuBLASLt computes Cᵀ = Bᵀ·Aᵀ column-major: its first operand is b's memory (n × k, ld n), its second a's
  CHECK((!L.first.transpose && L.first.rows == 16 && L.first.cols == 32 && L.first.ld == 16));
  CHECK((!L.second.transpose && L.second.rows == 32 && L.second.cols == 64 && L.second.ld == 32));
  CHECK((L.out.rows == 16 && L.out.cols == 64 && L.out.ld == 16));
  CHECK_FALSE((L.copy_a || L.copy_b));
}

TEST_CASE("matmul layout: transposed views take a transpose flag, not a copy; gapped ones are copied", "[matmul]") {
  const auto at = fz::placeholder<float>({32, 64}).transpose(), bt = fz::placeholder<float>({16, 32}).transpose();
  const auto L = layout(at, bt);  // (64, 32) @ (32, 16), both column-major in memory
  CHECK(L.out_shape == fz::Shape{64, 16});
  CHECK((L.second.transpose && L.second.rows == 64 && L.second.cols == 32 && L.second.ld == 64));
  CHECK((L.first.transpose && L.first.rows == 32 && L.first.cols == 16 && L.first.ld == 32));
  CHECK_FALSE((L.copy_a || L.copy_b));
  // a slice of a wider matrix keeps its row stride as the leading dimension
  const auto wide = fz::placeholder<float>({64, 100}).slice({fz::Slice{}, fz::Slice{0, 32}});
  const auto Ls = layout(wide, fz::placeholder<float>({32, 16}));
  CHECK((!Ls.copy_a && Ls.second.ld == 100));
  // every other column: no matrix layout describes it
  const auto gapped = fz::placeholder<float>({64, 64}).slice({fz::Slice{}, fz::Slice{0, 64, 2}});
  CHECK(layout(gapped, fz::placeholder<float>({32, 16})).copy_a);
  // a broadcast matrix (stride 0 inside it) is copied too
  CHECK(layout(fz::placeholder<float>({32}).broadcast_to({64, 32}), fz::placeholder<float>({32, 16})).copy_a);
}

TEST_CASE("matmul layout: 1-D operands are a row on the left, a column on the right, and leave the result", "[matmul]") {
  const auto v = fz::placeholder<float>({32}), m = fz::placeholder<float>({32, 16}), w = fz::placeholder<float>({16});
  CHECK(layout(v, m).out_shape == fz::Shape{16});
  CHECK(layout(m, w).out_shape == fz::Shape{32});
  CHECK(layout(v, fz::placeholder<float>({32})).out_shape == fz::Shape{});
  CHECK((layout(v, m).m == 1 && layout(m, w).n == 1));
  CHECK(layout(fz::placeholder<float>({5, 4, 16}), w).out_shape == fz::Shape{5, 4});  // batched matrix · vector
}

TEST_CASE("matmul layout: batch axes broadcast; the innermost ones that share a stride become one batched call",
          "[matmul]") {
  const auto a = fz::placeholder<float>({6, 5, 8, 4}), b = fz::placeholder<float>({4, 3});
  const auto L = layout(a, b);  // b broadcast over every batch item
  CHECK(L.out_shape == fz::Shape{6, 5, 8, 3});
  CHECK((L.batch == 30 && L.outer_shape.empty()));
  CHECK(L.second.batch_stride == 32);
  CHECK(L.first.batch_stride == 0);
  CHECK(L.out.batch_stride == 24);
  // a batch axis broadcast in the middle cannot join its neighbour: one call per outer index
  const auto L2 = layout(fz::placeholder<float>({6, 1, 8, 4}), fz::placeholder<float>({5, 4, 3}));
  CHECK(L2.out_shape == fz::Shape{6, 5, 8, 3});
  CHECK((L2.batch == 5 && L2.outer_shape == fz::Shape{6}));
  CHECK((L2.second.batch_stride == 0 && L2.first.batch_stride == 12 && L2.outer_a == fz::Strides{32}));
}

TEST_CASE("matmul: shapes that do not line up are ShapeErrors naming both", "[matmul][errors]") {
  const auto a = fz::placeholder<float>({2, 3}), b = fz::placeholder<float>({4, 5});
  CHECK_THROWS_WITH(layout(a, b), Catch::Contains("(2, 3)") && Catch::Contains("(4, 5)") &&
                                      Catch::Contains("a's last axis (3) must equal b's second to last (4)"));
  CHECK_THROWS_AS(layout(fz::placeholder<float>({3, 2, 4}), fz::placeholder<float>({2, 4, 5})), fz::ShapeError);
  CHECK_THROWS_WITH(layout(fz::placeholder<float>({3, 2, 4}), fz::placeholder<float>({2, 4, 5})),
                    Catch::Contains("batch axes (3,) and (2,) do not broadcast"));
  CHECK_THROWS_WITH(layout(fz::placeholder<float>({}), b), Catch::Contains("0-d operand"));
  CHECK_THROWS_AS(fz::detail::matmul(fz::placeholder<float>({2, 3}), fz::placeholder<double>({3, 2})), fz::TypeError);
  CHECK_THROWS_WITH(fz::detail::matmul(fz::placeholder<int>({2, 3}), fz::placeholder<int>({3, 2})),
                    Catch::Contains("not int32"));
}

TEST_CASE("describe_matmul says what runs, without a GPU", "[matmul]") {
  const auto x = fz::placeholder<fz::bfloat16>({8, 64, 32}), w = fz::placeholder<fz::bfloat16>({16, 32});
  const std::string d = fz::describe_matmul(x, w.transpose());
  CHECK_THAT(d, Catch::Contains("-> bfloat16 (8, 64, 16)") && Catch::Contains("(m, n, k) = (64, 16, 32)") &&
                    Catch::Contains("8 batch(es) per call, 1 call(s)") && Catch::Contains("b transposed") &&
                    Catch::Contains("float32 compute"));
  CHECK_THAT(fz::describe_matmul(fz::placeholder<float>({4, 4}), fz::placeholder<fz::half>({4, 4})),
             Catch::Contains("b cast to float32 first"));
  fz::TF32Products tf32;
  CHECK_THAT(fz::describe_matmul(fz::placeholder<float>({4, 4}), fz::placeholder<float>({4, 4})),
             Catch::Contains("TF32"));
}

TEST_CASE("cuBLASLt loads at run time: a missing library is a clear error", "[matmul]") {
  namespace lt = fz::detail::cublaslt;
  const lt::Loaded missing = lt::load({"/nonexistent/libcublasLt.so.13"});
  CHECK_THAT(missing.error, Catch::Contains("/nonexistent/libcublasLt.so.13") &&
                                Catch::Contains("FUSION_CUBLASLT_LIBRARY") && Catch::Contains("matrix products"));
  const lt::Loaded wrong = lt::load({"libm.so.6"});
  CHECK_THAT(wrong.error, Catch::Contains("not a usable cuBLASLt") && Catch::Contains("cublasLtMatmul"));
  setenv("FUSION_CUBLASLT_LIBRARY", "/opt/mine/libcublasLt.so.13", 1);
  CHECK(lt::default_candidates() == std::vector<std::string>{"/opt/mine/libcublasLt.so.13"});
  unsetenv("FUSION_CUBLASLT_LIBRARY");
  const lt::Loaded real = lt::load(lt::default_candidates());
  if (real.error.empty()) {
    CHECK(real.api.version / 10000 == CUBLAS_VER_MAJOR);
  } else {
    WARN("no cuBLASLt on this machine: " << real.error);
  }
}

TEST_CASE("a product in an expression is a plan: its library call, then fused kernels around it", "[matmul]") {
  const auto x = fz::placeholder<fz::bfloat16>({64, 32}), w = fz::placeholder<fz::bfloat16>({32, 16});
  const auto b = fz::placeholder<fz::bfloat16>({16});
  const auto gelu_like = fz::inspect(fz::tanh(fz::matmul(x, w) + b) * 0.5f);
  REQUIRE(gelu_like.kernels == 2);
  CHECK_THAT(gelu_like.plan[0], Catch::Contains("cublasLtMatmul") && Catch::Contains("(m, n, k) = (64, 16, 32)"));
  CHECK_THAT(gelu_like.plan[1], Catch::Contains("fz_"));
  CHECK(fz::inspect(fz::matmul(x, w)).kernels == 1);
  CHECK(fz::inspect(fz::matmul(x.astype<float>(), w)).kernels == 3);  // two casts (w promoted too), the product
  CHECK_THROWS_AS(fz::inspect(fz::matmul(x, x)), fz::ShapeError);
  // the same product used several times (a GELU of it) is computed once
  const auto h = fz::matmul(x, w) + b;
  CHECK(fz::inspect(0.5f * h * (1.0f + fz::tanh(0.79788456f * (h + 0.044715f * h * h * h)))).kernels == 2);
  using R = decltype(fz::matmul(x, fz::placeholder<float>({32, 16})));
  STATIC_REQUIRE(R::dtype == fz::DType::float32);
}

TEST_CASE("the math reading a product is one kernel of its own kind: a layer, several outputs, a generator",
          "[matmul]") {
  const auto x = fz::placeholder<fz::bfloat16>({64, 32}), w = fz::placeholder<fz::bfloat16>({32, 16});
  const auto p = fz::matmul(x, w);
  auto after_product = [](const fz::KernelInfo& k, const char* kind) {
    INFO(k);
    REQUIRE(k.kernels == 2);
    CHECK_THAT(k.plan[0], Catch::Contains("cublasLtMatmul"));
    CHECK_THAT(k.plan[1], Catch::Contains(kind));
  };
  // a row softmax and a logsumexp of the product: one layer kernel reading it once
  const auto row_max = fz::max(p, -1, true);
  after_product(fz::inspect(fz::exp(p - row_max) / fz::sum(fz::exp(p - row_max), -1, true)), "(layer,");
  after_product(fz::inspect(fz::max(p, -1) + fz::log(fz::sum(fz::exp(p - row_max), -1))), "(layer,");
  // a tie with a second output: one kernel writing both
  after_product(fz::inspect(p + 1.0f, fz::maximum(p, 0.0f)), "2 outputs");
  // a dropout mask from fz::random, a cast to float64
  after_product(fz::inspect(fz::where(fz::random::uniform<float>(7) < 0.1f, 0.0f, p / 0.9f)), "fz_random");
  after_product(fz::inspect(p.astype<double>()), "fz_copy_f64");
  // scalar factors of the operands are cuBLASLt's alpha; other expression operands a kernel first
  const auto scaled = fz::inspect(fz::matmul(x * 2.0f, 0.25f * w));
  REQUIRE(scaled.kernels == 1);
  CHECK_THAT(scaled.plan[0], Catch::Contains("alpha = 0.5"));
  CHECK(fz::inspect(fz::matmul(x * x, w)).kernels == 2);
  CHECK(fz::inspect(fz::matmul(x.astype<float>() * 2.0f, w)).kernels == 3);  // casts first (w promoted too)
  // an operand that is a layer of its own: its kernel, then the product
  const auto softmax_x = fz::inspect(fz::matmul(fz::exp(x - fz::max(x, -1, true)), w));
  REQUIRE(softmax_x.kernels == 2);
  CHECK_THAT(softmax_x.plan[0], Catch::Contains("(layer,"));
  CHECK_THAT(softmax_x.plan[1], Catch::Contains("cublasLtMatmul"));
  // a product of products: each its own call, the sum between them one kernel
  const auto chain = fz::inspect(fz::matmul(fz::matmul(x, w) + 1.0f, fz::placeholder<fz::bfloat16>({16, 8})));
  CHECK(chain.kernels == 3);
  // a generator after a reduction of the product: its index is the result's element, not the reduced operand's
  // (fusion-fuzz case 95000598: the whole step broadcast (2,) with the operand's (1, 2, 5) and refused it)
  const auto y = fz::placeholder<std::int64_t>({1, 2, 1});
  const auto a = fz::placeholder<float>({2, 1}), b = fz::placeholder<float>({1, 5});
  const auto reduced = fz::inspect(fz::sum(y != fz::matmul(a, b), {-3, -1}, false) + fz::random::bits(62461ull));
  INFO(reduced);
  CHECK_THAT(reduced.plan.back(), Catch::StartsWith("fz_random_bits_add_"));
}

TEST_CASE("bias, residual, ReLU and GELU after a product run inside its cuBLASLt call", "[matmul]") {
  const auto x = fz::placeholder<fz::bfloat16>({64, 32}), w = fz::placeholder<fz::bfloat16>({32, 16});
  const auto b = fz::placeholder<fz::bfloat16>({16}), r = fz::placeholder<fz::bfloat16>({64, 16});
  auto one_call = [](const fz::KernelInfo& k, const char* epilogue) {
    INFO(k);
    CHECK(k.kernels == 1);
    CHECK_THAT(k.plan[0], Catch::Contains("cublasLtMatmul") && Catch::Contains(epilogue));
  };
  const auto p = fz::matmul(x, w);
  one_call(fz::inspect(p + b), "with cuBLASLt's bias epilogue");
  one_call(fz::inspect(b + p), "with cuBLASLt's bias epilogue");
  one_call(fz::inspect(fz::maximum(p + b, 0.0f)), "with cuBLASLt's bias+relu epilogue");
  one_call(fz::inspect(fz::maximum(p, 0.0f)), "with cuBLASLt's relu epilogue");
  one_call(fz::inspect(fz::gelu_tanh(p + b)), "with cuBLASLt's bias+gelu_tanh epilogue");
  one_call(fz::inspect(fz::gelu_tanh(p)), "with cuBLASLt's gelu_tanh epilogue");
  // a residual of the result's shape is cuBLASLt's C (beta = 1), with or without a bias, in any order
  one_call(fz::inspect(p + r), "with cuBLASLt's residual epilogue");
  one_call(fz::inspect(p + b + r), "with cuBLASLt's residual+bias epilogue");
  one_call(fz::inspect(r + (b + p)), "with cuBLASLt's residual+bias epilogue");
  one_call(fz::inspect(fz::maximum(r + p + b, 0.0f)), "with cuBLASLt's residual+bias+relu epilogue");
  // what cuBLASLt's epilogues do not express stays the product plus one fused kernel
  CHECK(fz::inspect(fz::maximum(p + b, 1.0f)).kernels == 2);                    // not a ReLU
  CHECK(fz::inspect(fz::gelu(p + b)).kernels == 2);                             // GELU through erf
  CHECK(fz::inspect(p + fz::placeholder<fz::bfloat16>({1, 16})).kernels == 2);  // neither bias nor residual
  CHECK(fz::inspect(p + fz::placeholder<fz::bfloat16>({64, 1})).kernels == 2);  // a bias along the rows
  CHECK(fz::inspect(p + r + r).kernels == 2);                                   // two residuals
  CHECK(fz::inspect(p + b + b).kernels == 2);                                   // the same bias twice
  // a float32 result of 16-bit operands: cuBLASLt writes it (a cast epilogue), with the rest in float32
  const auto bias32 = fz::placeholder<float>({16});
  one_call(fz::inspect(p.astype<float>()), "the result written as float32");
  one_call(fz::inspect(p + bias32), "bias epilogue, the result written as float32");
  one_call(fz::inspect(fz::gelu_tanh(p + bias32 + fz::placeholder<float>({64, 16}))),
           "residual+bias+gelu_tanh epilogue");
  CHECK(fz::inspect(p.astype<float>() + p.astype<float>()).kernels == 2);  // the product twice
  CHECK(fz::inspect(p + b.astype<float>()).kernels == 2);                  // a cast that is not the product's
  CHECK(fz::inspect(p.astype<double>()).kernels == 2);                     // cuBLASLt writes no float64 of bfloat16
  const auto f32 = fz::matmul(fz::placeholder<float>({8, 4}), fz::placeholder<float>({4, 2}));
  CHECK(fz::inspect(f32.astype<fz::bfloat16>()).kernels == 2);  // nor bfloat16 of float32
  CHECK(fz::inspect(p * 2.0f + b).kernels == 2);
  CHECK(fz::inspect(p + p).kernels == 2);                 // the product twice
  CHECK(fz::inspect(fz::gelu_tanh(p) + b).kernels == 2);  // bias after the GELU
  // the MLP layer's two statements: each one cuBLASLt call
  const auto w2 = fz::placeholder<fz::bfloat16>({16, 32}), b2 = fz::placeholder<fz::bfloat16>({32});
  one_call(fz::inspect(fz::gelu_tanh(p + b)), "bias+gelu_tanh");
  one_call(fz::inspect(fz::matmul(fz::placeholder<fz::bfloat16>({64, 16}), w2) + b2 + x), "residual+bias");
}
