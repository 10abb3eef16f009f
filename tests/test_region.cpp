// SPDX-License-Identifier: Apache-2.0
// fz::Lazy without a GPU: which statements become one kernel, which results stay in registers, where
// and why a region splits, and the generated source (over placeholder arrays, inspected, never run).
#include <sstream>

#include "support.hpp"

namespace {

/// The region's plan entries, one line each (name [hash] (variant): statements ...).
std::string plan_of(const fz::KernelInfo& k) {
  std::string s;
  for (const std::string& e : k.plan) s += e + "\n";
  return s;
}

}  // namespace

TEST_CASE("a region of same-shape statements is one kernel with several outputs", "[region]") {
  auto p = fz::placeholder<float>({1 << 20}), g = fz::placeholder<float>({1 << 20});
  auto m = fz::placeholder<float>({1 << 20}), v = fz::placeholder<float>({1 << 20});
  const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f, eps = 1e-8f;
  fz::Lazy step("adam");
  CHECK(fz::Lazy::active());
  m = b1 * m + (1 - b1) * g;
  v = b2 * v + (1 - b2) * g * g;
  p -= lr * m / (fz::sqrt(v) + eps);
  CHECK(step.pending() == 3);
  const fz::KernelInfo k = fz::inspect(step);
  INFO(plan_of(k));
  CHECK(k.kernels == 1);
  CHECK(k.name.rfind("adam_", 0) == 0);
  CHECK(k.plan[0].find("statements 1-3") != std::string::npos);
  // m and v are read back as values (m's and v's new contents), and all three arrays are written once.
  CHECK(k.source.find("out2") != std::string::npos);
  CHECK(k.source.find("out3") == std::string::npos);
  test::check_golden("region_adam", k.source);
  step.discard();
  CHECK(step.pending() == 0);
}

TEST_CASE("a region's temporaries and scratch arrays are never written", "[region]") {
  auto x = fz::placeholder<float>({4096}), y = fz::placeholder<float>({4096});
  fz::Array<float> out = fz::placeholder<float>({4096}), kept = fz::placeholder<float>({4096});
  fz::Lazy region;
  {
    fz::Array<float> t = x * y;  // dies before the region runs
    out = t + 1.0f;
  }
  kept = x - y;
  region.scratch(kept);
  out += kept;
  const fz::KernelInfo k = fz::inspect(region);
  INFO(plan_of(k));
  CHECK(k.kernels == 1);
  CHECK(k.plan[0].find("not written: float32 (4096,), float32 (4096,)") != std::string::npos);
  CHECK(k.source.find("out1") == std::string::npos);  // one output: `out`
  std::ostringstream printed;  // printing one kernel says the statements it covers, as a list of several does
  printed << k;
  CHECK(printed.str().find("\n  statements 1-4; not written: float32 (4096,), float32 (4096,)\n") != std::string::npos);
  region.discard();
}

TEST_CASE("a product passed to the next statement is rounded on its own, never contracted", "[region][codegen]") {
  auto a = fz::placeholder<double>({1000}), b = fz::placeholder<double>({1000}), c = fz::placeholder<double>({1000});
  fz::Array<double> t = fz::placeholder<double>({1000}), u = fz::placeholder<double>({1000});
  fz::Lazy region;
  t = a * b;   // stored and read: t + c must not become fma(a, b, c)
  u = t + c;
  const fz::KernelInfo k = fz::inspect(region);
  CHECK(k.kernels == 1);
  CHECK(k.source.find("__dmul_rn(") != std::string::npos);
  CHECK(k.source.find("__dadd_rn(") != std::string::npos);
  region.discard();
  // Inside one statement too, as NumPy rounds: the same bits in every kernel and every lane of one
  // (ptxas fused some products into the next add and not others, by its schedule).
  const std::string one = fz::inspect(a * b + c).source;
  CHECK(one.find("__dmul_rn(") != std::string::npos);
  CHECK(one.find("fma") == std::string::npos);
  auto x = fz::placeholder<float>({1000}), y = fz::placeholder<float>({1000});
  const std::string f32 = fz::inspect(x * y - x * x).source;
  CHECK(f32.find("__fmul_rn(") != std::string::npos);
  CHECK(f32.find("__fsub_rn(") != std::string::npos);
}

TEST_CASE("a region splits at another shape and at a different view of written memory", "[region]") {
  auto x = fz::placeholder<float>({64, 64});
  auto row = fz::placeholder<float>({64});
  fz::Array<float> a = fz::placeholder<float>({64, 64}), b = fz::placeholder<float>({64, 64});
  fz::Array<float> r = fz::placeholder<float>({64}), c = fz::placeholder<float>({64, 64});
  fz::Lazy region;
  a = x + 1.0f;
  b = a * 2.0f;                        // joins: reads a as a value
  r = row * 3.0f;                      // another shape
  c = a.transpose() + r;               // reads a in another layout: from memory, after a is written
  const fz::KernelInfo k = fz::inspect(region);
  INFO(plan_of(k));
  REQUIRE(k.kernels == 3);
  CHECK(k.plan[0].find("statements 1-2") != std::string::npos);
  CHECK(k.plan[1].find(
            "statement 3; a kernel of its own because its results have shape (64,), the kernel before (64, 64)") !=
        std::string::npos);
  CHECK(k.plan[2].find(
            "statement 4; a kernel of its own because its results have shape (64, 64), the kernel before (64,)") !=
        std::string::npos);
  region.discard();

  fz::Lazy transposed;
  a = x + 1.0f;
  c = a.transpose() + 1.0f;  // same shape, another view of a
  const fz::KernelInfo t = fz::inspect(transposed);
  INFO(plan_of(t));
  REQUIRE(t.kernels == 2);
  CHECK(t.plan[1].find("it reads a float32 (64, 64) view of memory the kernel before writes") != std::string::npos);
  transposed.discard();

  fz::Lazy war;
  b = a.transpose() * 2.0f;  // reads a transposed...
  a = x + 1.0f;              // ...then writes a: the transposed read would see new values in one kernel
  const fz::KernelInfo w = fz::inspect(war);
  INFO(plan_of(w));
  REQUIRE(w.kernels == 2);
  CHECK(w.plan[1].find("it writes float32 (64, 64) over memory the kernel before reads as") != std::string::npos);
  war.discard();
}

TEST_CASE("an array written twice in one region kernel is stored once, with the last value", "[region]") {
  auto x = fz::placeholder<float>({256});
  fz::Array<float> a = fz::placeholder<float>({256});
  fz::Lazy region;
  a = x + 1.0f;
  a = a * a;
  a += x;
  const fz::KernelInfo k = fz::inspect(region);
  CHECK(k.kernels == 1);
  CHECK(k.source.find("out1") == std::string::npos);
  region.discard();
}

TEST_CASE("region misuse and edges: placeholders cannot run, inspecting nothing, nesting", "[region]") {
  auto x = fz::placeholder<float>({16});
  fz::Array<float> a = fz::placeholder<float>({16});
  {
    fz::Lazy region;
    CHECK_THROWS_AS(fz::inspect(region), fz::Error);  // nothing recorded
    a = x + 1.0f;
    {
      fz::Lazy inner;  // part of the outer region
      a = a * 2.0f;
      CHECK(inner.pending() == 2);
    }
    CHECK(region.pending() == 2);
    CHECK_THROWS_WITH(region.run(), Catch::Contains("placeholder"));
    CHECK(region.pending() == 2);  // nothing ran, nothing dropped
    region.discard();
  }
  CHECK_FALSE(fz::Lazy::active());
  // A shape error is thrown at the statement, which is not recorded.
  fz::Lazy region;
  auto y = fz::placeholder<float>({3});
  CHECK_THROWS_AS(a += y, fz::ShapeError);
  CHECK(region.pending() == 0);
}

TEST_CASE("ten statements with eight temporaries are one kernel writing two arrays", "[region]") {
  fz::Array<float> x = fz::placeholder<float>({1024}), y = fz::placeholder<float>({1024}),
                   z = fz::placeholder<float>({1024});
  fz::Lazy region;
  {
    fz::Array<float> a = x * 1.1f + y;
    fz::Array<float> b = a * a - z;
    fz::Array<float> c = fz::sin(b) + x;
    fz::Array<float> d = c * 0.5f + a;
    fz::Array<float> e = d - b * 0.25f;
    fz::Array<float> f = e * e + 1.0f;
    fz::Array<float> g = fz::sqrt(f) * c;
    fz::Array<float> h = g + d;
    y = h * 0.9f + y * 0.1f;
    z = z * 0.99f + g * 0.01f;
  }
  const fz::KernelInfo k = fz::inspect(region);
  INFO(plan_of(k));
  CHECK(k.kernels == 1);
  CHECK(k.plan[0].find("statements 1-10") != std::string::npos);
  region.discard();
}
