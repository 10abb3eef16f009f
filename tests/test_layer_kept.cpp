// SPDX-License-Identifier: Apache-2.0
// Layer kernels that keep a value for a later pass (softmax's exp(x - max), computed by the sum's pass and read
// by the output's): which kernels do, and that the results are the bits of the kernel computing it again.
#include <cstring>
#include <limits>

#include "schedule/tuning.hpp"
#include "support.hpp"

namespace {

/// Occurrences of `what` in `s`.
std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

/// The softmax of 16-bit rows in float math, a float32 result: its exp is precise (a cast to 16 bits at the end would
/// make it an approximation, cheaper to compute again than to keep: spell.cpp's approximated()).
template <class T> auto softmax16(const fz::Array<T>& x) {
  auto xf = fz::cast<float>(x);
  return fz::exp(xf - fz::max(xf, -1, true)) / fz::sum(fz::exp(xf - fz::max(xf, -1, true)), -1, true);
}

/// Softmax over each of the R rows of D elements of `hx`, in float64.
std::vector<double> softmax_rows(const std::vector<fz::bfloat16>& hx, std::int64_t R, std::int64_t D) {
  std::vector<double> want(hx.size());
  for (std::int64_t r = 0; r < R; ++r) {
    const auto at = [&](std::int64_t j) { return static_cast<std::size_t>(r * D + j); };
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (std::int64_t j = 0; j < D; ++j) m = std::max(m, test::as_double(hx[at(j)]));
    for (std::int64_t j = 0; j < D; ++j) sum += std::exp(test::as_double(hx[at(j)]) - m);
    for (std::int64_t j = 0; j < D; ++j) want[at(j)] = std::exp(test::as_double(hx[at(j)]) - m) / sum;
  }
  return want;
}

/// Restores the layout thresholds a test changed.
struct SavedTuning {
  fz::detail::Tuning saved = fz::detail::tuning();
  ~SavedTuning() { fz::detail::tuning() = saved; }
};

}  // namespace

TEST_CASE("a later pass reads the value an earlier pass kept, where shared memory still holds enough blocks",
          "[layer]") {
  SavedTuning restore;
  const auto x = fz::placeholder<fz::bfloat16>({16384, 4096});
  // Rows of 4,096 hold their part of the row and the kept exps in registers: the sum's pass computes exp once,
  // the output's pass reads it (no tail loop: the row is whole vectors)
  const fz::KernelInfo in_registers = fz::inspect(softmax16(x));
  CHECK_THAT(in_registers.variant, Catch::Contains("the row held in registers (8 vectors a thread)"));
  CHECK_THAT(in_registers.variant, Catch::Contains("kept beside it"));
  CHECK(count(in_registers.source, "exp(") == 1);
  CHECK(count(in_registers.source, "fz_kept") == 3);  // declared, stored, read
  fz::detail::set_tuning("layer_keep_values=0");
  CHECK(count(fz::inspect(softmax16(x)).source, "exp(") == 2);
  fz::detail::tuning() = restore.saved;
  // In shared memory (rows too long for registers, or with them turned off), beside the row
  fz::detail::set_tuning("layer_registers=0");
  const fz::KernelInfo kept = fz::inspect(softmax16(x));
  CHECK_THAT(kept.variant, Catch::Contains("values later passes need kept beside it"));
  CHECK(count(kept.source, "exp(") == 2);  // the sum's pass only: its vector loop and its tail
  CHECK(count(kept.source, "fz_kept") >= 5);
  fz::detail::set_tuning("layer_keep_values=0");
  const fz::KernelInfo again = fz::inspect(softmax16(x));
  CHECK_THAT(again.variant, !Catch::Contains("kept beside it"));
  CHECK(count(again.source, "exp(") == 4);
  CHECK(again.name != kept.name);  // another variant, another hash
  fz::detail::tuning() = restore.saved;

  // Nothing to keep: log-softmax's last pass computes no math call of the element (its log is the row's).
  CHECK_THAT(fz::inspect(fz::log_softmax(fz::placeholder<float>({4096, 4096}))).variant, !Catch::Contains("kept beside"));
  // A float32 row of 65,536 split over a cluster of 4: kept values would double each block's 64 KB slice and
  // leave one block of 512 threads per SM.
  const auto y = fz::placeholder<float>({1024, 65536});
  CHECK_THAT(fz::inspect(fz::exp(y - fz::max(y, -1, true)) / fz::sum(fz::exp(y - fz::max(y, -1, true)), -1, true)).variant,
             !Catch::Contains("kept beside"));
  // Short 16-bit rows, eight to a block of warps, keep a precise float exp; not a 16-bit node's, nor one whose value
  // only reaches 16-bit roundings: approximations, computed again.
  const auto s = fz::placeholder<fz::half>({4096, 100});
  CHECK_THAT(fz::inspect(softmax16(s)).variant, Catch::Contains("kept beside"));
  CHECK_THAT(fz::inspect(fz::exp(s - fz::max(s, -1, true)) / fz::sum(fz::exp(s - fz::max(s, -1, true)), -1, true)).variant,
             !Catch::Contains("kept beside"));
  CHECK_THAT(fz::inspect(fz::cast<fz::half>(softmax16(s))).variant, !Catch::Contains("kept beside"));
}

TEST_CASE("short rows of whole vectors are held in registers where few enough registers hold them; rows of up to "
          "16,384 where values are kept", "[layer]") {
  auto variant = [](const auto& e) { return fz::inspect(e).variant; };
  const auto b1k = fz::placeholder<fz::bfloat16>({4096, 1024});
  const auto f1k = fz::placeholder<float>({4096, 1024});
  const auto w = fz::placeholder<float>({1024});
  // bfloat16 softmax: 4 vectors of 8 a lane, the row (2 bytes an element) and its exps (4): 48 registers
  CHECK_THAT(variant(fz::softmax(b1k)), Catch::Contains("held in registers (4 vectors a thread), values later passes need kept"));
  // float32 layer norm: 8 vectors of 4 a lane, nothing to keep: 32 registers
  CHECK_THAT(variant(fz::layer_norm(f1k, w, w, 1e-5f)), Catch::Contains("held in registers (8 vectors a thread)"));
  // float32 softmax: the row and its exps, 64 registers; float64's would take 128: shared memory
  CHECK_THAT(variant(fz::softmax(f1k)), Catch::Contains("held in registers (8 vectors a thread), values later passes need kept"));
  CHECK_THAT(variant(fz::softmax(fz::placeholder<double>({4096, 1024}))), Catch::Contains("the row kept in shared memory"));
  // float64 layer norm: 16 vectors of 2 a lane would fit 64 registers, but a thread holds at most 8 vectors
  const auto d1k = fz::placeholder<double>({4096, 1024});
  CHECK_THAT(variant(fz::layer_norm(d1k, 1e-5)), Catch::Contains("the row kept in shared memory"));
  CHECK_THAT(variant(fz::layer_norm(fz::placeholder<double>({4096, 512}), 1e-5)), Catch::Contains("held in registers (8 vectors"));
  // rows of 4,097 to 16,384 whose exps a later pass needs: the smallest block of 256 or 512 threads whose part of the
  // row and the exps fits 64 registers holds them (bfloat16: 4 vectors of 8, 2 + 4 bytes an element: 48)
  const auto b16k = fz::placeholder<fz::bfloat16>({1024, 16384});
  CHECK_THAT(variant(fz::softmax(b16k)), Catch::Contains("a block per row (512 threads per block), the row held in registers (4 "
                                                         "vectors a thread), values later passes need kept"));
  CHECK_THAT(variant(fz::softmax(fz::placeholder<fz::bfloat16>({1024, 8192}))),
             Catch::Contains("(256 threads per block), the row held in registers (4 vectors"));
  CHECK_THAT(variant(fz::softmax(fz::placeholder<float>({1024, 16384}))),
             Catch::Contains("(512 threads per block), the row held in registers (8 vectors"));
  CHECK_THAT(variant(fz::softmax(fz::placeholder<float>({1024, 8192}))),
             Catch::Contains("(256 threads per block), the row held in registers (8 vectors"));
  // ... not rows with nothing to keep (but float32 rows of up to 8,192: by 1,024 threads), longer rows, or rows that
  // are not whole vectors: shared memory
  CHECK_THAT(variant(fz::layer_norm(b16k, 1e-5f)), Catch::Contains("the row kept in shared memory"));
  CHECK_THAT(variant(fz::rms_norm(fz::placeholder<float>({1024, 8192}), 1e-5f)),
             Catch::Contains("(1024 threads per block), the row held in registers (2 vectors"));
  CHECK_THAT(variant(fz::rms_norm(fz::placeholder<float>({1024, 16384}), 1e-5f)), Catch::Contains("the row kept in shared memory"));
  CHECK_THAT(variant(fz::softmax(fz::placeholder<fz::bfloat16>({1024, 32768}))), !Catch::Contains("registers ("));
  CHECK_THAT(variant(fz::softmax(fz::placeholder<fz::bfloat16>({1024, 1020}))), Catch::Contains("the row kept in shared memory"));
  {
    SavedTuning restore;  // without registers the block stays, so the threads combine the same elements
    fz::detail::set_tuning("layer_registers=0");
    CHECK_THAT(variant(fz::softmax(b16k)), Catch::Contains("(512 threads per block)") && Catch::Contains("the row kept in shared memory"));
  }
  // a row read once needs nothing held
  CHECK_THAT(variant(fz::sum(b1k, -1)), !Catch::Contains("registers"));
}

TEST_CASE("a row in registers that fills every thread's vectors spells their count as a constant", "[layer]") {
  const auto full = [](const fz::KernelInfo& k, long long vectors) {
    INFO(k.variant);
    const bool said = k.variant.find("every vector a thread holds in the row (no bound tests)") != std::string::npos;
    CHECK(said == (vectors > 0));
    CHECK((k.source.find(fmt::format("constexpr long long n_vec = {};", vectors)) != std::string::npos) == (vectors > 0));
  };
  const auto b4k = fz::placeholder<fz::bfloat16>({64, 4096});
  full(fz::inspect(fz::softmax(b4k)), 4096);                                   // 128 threads x 4 vectors of 8
  full(fz::inspect(fz::layer_norm(fz::placeholder<float>({64, 128}), 1e-5f)), 128);  // 8 lanes x 4 vectors of 4
  full(fz::inspect(fz::softmax(fz::placeholder<fz::bfloat16>({64, 16384}))), 16384);  // 512 threads, exps kept
  full(fz::inspect(fz::softmax(fz::placeholder<float>({64, 4000}))), 0);        // the last vectors are past the row
  full(fz::inspect(fz::softmax(fz::placeholder<float>({64, 1000}))), 0);
  // an embedding's RMSNorm: the gathered row and pos
  const auto table = fz::placeholder<fz::bfloat16>({1000, 4096});
  const auto ids = fz::placeholder<std::int32_t>({64});
  full(fz::inspect(fz::rms_norm(fz::take<fz::IndexMode::clip>(table, ids, 0) + b4k, 1e-6f)), 4096);
  const fz::detail::Tuning saved = fz::detail::tuning();
  fz::detail::set_tuning("layer_full_parts=0");  // the count as a kernel argument, as before (a measurement's switch)
  full(fz::inspect(fz::softmax(b4k)), 0);
  fz::detail::tuning() = saved;
}

TEST_CASE("a row in registers that two passes read from memory: each pass its own arrays", "[layer]") {
  // (fuzz case 7000038: an int32 row compared with a float64 one, its nanmax over the row added back; the
  // float64 row is not kept, so the reduction's pass and the outputs' pass both load it, and both declared m1)
  const auto x = fz::placeholder<std::int32_t>({2, 2048});
  const auto y = fz::placeholder<double>({1, 2048});
  const fz::KernelInfo k = fz::inspect(fz::nanmax(x <= y, {1}, true) + (x <= y));
  INFO(k.source);
  CHECK_THAT(k.variant, Catch::Contains("the row held in registers"));
  CHECK_THAT(k.source, Catch::Contains("FzVec<double, 2> m1_1[8];") && Catch::Contains("FzVec<double, 2> m1_2[8];"));
}

TEST_CASE("rows that fill every thread's vectors: the same bits with their count a constant or an argument",
          "[gpu][layers]") {
  SavedTuning restore;
  for (const auto [R, D] : {std::pair<std::int64_t, std::int64_t>{300, 4096}, {1000, 128}, {97, 16384}}) {
    INFO("rows " << R << " x " << D);
    const auto hx = test::random<fz::bfloat16>(static_cast<std::size_t>(R * D), -6, 6, static_cast<unsigned>(D + 1));
    const auto hp = test::random<fz::bfloat16>(static_cast<std::size_t>(2 * R * D), -1, 1, static_cast<unsigned>(D + 2));
    const auto x = fz::asarray(hx, {R, D});
    const auto table = fz::asarray(hp, {2 * R, D});
    std::vector<std::int32_t> hi(static_cast<std::size_t>(R));
    for (std::size_t i = 0; i < hi.size(); ++i) hi[i] = static_cast<std::int32_t>((i * 7919) % hi.size() * 2);
    const auto ids = fz::asarray(hi, {R});
    auto run = [&](bool constant) {
      fz::detail::set_tuning(constant ? "layer_full_parts=1" : "layer_full_parts=0");
      const auto softmax = [&] { return fz::softmax(x); };
      const auto embedding = [&] { return fz::rms_norm(fz::take(table, ids, 0) + x, 1e-6f); };
      CHECK((fz::inspect(softmax()).variant.find("no bound tests") != std::string::npos) == constant);
      fz::Array<fz::bfloat16> s = fz::full<fz::bfloat16>({R, D}, fz::bfloat16(-7.f));  // poisoned
      fz::Array<fz::bfloat16> e = fz::full<fz::bfloat16>({R, D}, fz::bfloat16(-7.f));
      fz::reset_stats();
      s = softmax();
      e = embedding();
      CHECK(fz::stats().launches == 2);
      return std::make_pair(s.to_host(), e.to_host());
    };
    const auto [s1, e1] = run(true);
    const auto [s0, e0] = run(false);
    CHECK(test::mismatches(s1, softmax_rows(hx, R, D), fz::DType::bfloat16) == 0);
    CHECK(std::memcmp(s1.data(), s0.data(), s1.size() * sizeof(fz::bfloat16)) == 0);
    CHECK(std::memcmp(e1.data(), e0.data(), e1.size() * sizeof(fz::bfloat16)) == 0);
    std::vector<double> want(static_cast<std::size_t>(R * D));  // the embedding's RMSNorm in float64
    for (std::int64_t r = 0; r < R; ++r) {
      double ms = 0;
      const auto v = [&](std::int64_t d) {
        return test::as_double(hp[static_cast<std::size_t>(hi[static_cast<std::size_t>(r)] * D + d)]) +
               test::as_double(hx[static_cast<std::size_t>(r * D + d)]);
      };
      for (std::int64_t d = 0; d < D; ++d) ms += v(d) * v(d);
      for (std::int64_t d = 0; d < D; ++d) want[static_cast<std::size_t>(r * D + d)] = v(d) / std::sqrt(ms / D + 1e-6);
    }
    CHECK(test::mismatches(e1, want, fz::DType::bfloat16) == 0);
  }
}

TEST_CASE("kept values are counted on the kernel's own graph, where an array read twice is one input", "[layer]") {
  // The fuzzer's: `w` appears twice, so its two copies are one value in the generated kernel, which keeps two
  // values for later passes (log(a) and w); the layout counted on the graph before the merge, found one, and
  // launched 16 rows x 64 x 24 bytes of shared memory for a kernel using 16 x 64 x 32 (an illegal address).
  const auto a = fz::placeholder<std::int64_t>({6, 54});
  const auto b = fz::placeholder<double>({54, 6}).transpose();
  const auto w = fz::where(fz::log(a), fz::ceil(b), (3.75 == a));
  const fz::KernelInfo k = fz::inspect(fz::var(w, {1}, true) / w + fz::cast<double>(a));
  INFO(k.plan.back());
  CHECK_THAT(k.variant, Catch::Contains("kept beside it"));
  CHECK(count(k.source, "fz_kept") >= 4);
  CHECK_THAT(k.plan.back() + k.variant, Catch::Contains("(32768 bytes a block)"));
}

TEST_CASE("kept values give the bits of the kernel computing them again, in registers or shared memory, against "
          "float64", "[gpu][layers]") {
  SavedTuning restore;
  for (const auto [R, D] : {std::pair<std::int64_t, std::int64_t>{300, 4096}, {257, 4100}, {1000, 100}, {40, 1000}, {3000, 24}}) {
    // (a block per row in 16-byte vectors, a block per unaligned row, a warp per row, a part of a warp per row)
    INFO("rows " << R << " x " << D);
    const auto hx = test::random<fz::bfloat16>(static_cast<std::size_t>(R * D), -6, 6, static_cast<unsigned>(D));
    const auto x = fz::asarray(hx, {R, D});
    const std::vector<double> want = softmax_rows(hx, R, D);
    auto run = [&](bool keep, bool registers = true) {
      fz::detail::set_tuning(keep ? "layer_keep_values=1" : "layer_keep_values=0");
      fz::detail::set_tuning(registers ? "layer_registers=64" : "layer_registers=0");
      const std::string variant = fz::inspect(softmax16(x)).variant;
      INFO(variant);
      CHECK((variant.find("kept beside") != std::string::npos) == keep);
      // rows of whole vectors (of 4: the float32 result) up to 4,096 are held in registers where they may be, and up
      // to 16,384 where a later pass needs kept values (by blocks of 512 threads, with registers or without)
      CHECK((variant.find("held in registers") != std::string::npos) == (registers && D % 4 == 0 && D <= 16384));
      fz::Array<float> y = fz::full<float>({R, D}, -7.f);  // poisoned
      fz::reset_stats();
      y = softmax16(x);
      CHECK(fz::stats().launches == 1);
      return y.to_host();
    };
    const auto kept = run(true), again = run(false), kept_shared = run(true, false), again_shared = run(false, false);
    CHECK(test::mismatches(kept, want, fz::DType::float32) == 0);
    CHECK(std::memcmp(kept.data(), again.data(), kept.size() * sizeof(float)) == 0);
    // the same order of operations in each thread, wherever the row is held
    CHECK(std::memcmp(kept.data(), kept_shared.data(), kept.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(kept.data(), again_shared.data(), kept.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("kept values read by two later passes, by a tie's outputs and in float64: the bits of computing them again",
          "[gpu][layers]") {
  SavedTuning restore;
  const std::int64_t R = 200, D = 300;  // (eight rows of a block of warps fit with their kept values)
  const auto x = fz::asarray(test::random<float>(static_cast<std::size_t>(R * D), -4, 4, 31), {R, D});
  // (float64 rows of 150: two kept values of 8 bytes beside the row still leave room for 7 blocks per SM)
  const auto xd = fz::asarray(test::random<double>(static_cast<std::size_t>(R * 150), -4, 4, 32), {R, 150});
  // e = exp(x - max) is computed by the first sum's pass and read by the second sum's and by the outputs' pass.
  auto three_waves = [](const auto& a) {
    auto e = fz::exp(a - fz::max(a, -1, true));
    auto p = e / fz::sum(e, -1, true);
    return p * fz::rsqrt(fz::sum(p * p, -1, true));
  };
  auto both = [&](bool keep, auto&& run) {
    fz::detail::set_tuning(keep ? "layer_keep_values=1" : "layer_keep_values=0");
    fz::reset_stats();
    auto r = run();
    CHECK(fz::stats().launches == 1);
    return r;
  };
  CHECK_THAT(fz::inspect(three_waves(x)).variant, Catch::Contains("kept beside"));
  CHECK_THAT(fz::inspect(three_waves(xd)).variant, Catch::Contains("kept beside"));
  const auto f_kept = both(true, [&] { return fz::Array<float>(three_waves(x)).to_host(); });
  const auto f_again = both(false, [&] { return fz::Array<float>(three_waves(x)).to_host(); });
  CHECK(std::memcmp(f_kept.data(), f_again.data(), f_kept.size() * sizeof(float)) == 0);
  const auto d_kept = both(true, [&] { return fz::Array<double>(three_waves(xd)).to_host(); });
  const auto d_again = both(false, [&] { return fz::Array<double>(three_waves(xd)).to_host(); });
  CHECK(std::memcmp(d_kept.data(), d_again.data(), d_kept.size() * sizeof(double)) == 0);
  // against float64 on the host
  const auto hx = fz::Array<double>(fz::cast<double>(x)).to_host();
  std::vector<double> want(hx.size());
  for (std::int64_t r = 0; r < R; ++r) {
    const double* a = &hx[static_cast<std::size_t>(r * D)];
    double m = -std::numeric_limits<double>::infinity(), s = 0, q = 0;
    for (std::int64_t j = 0; j < D; ++j) m = std::max(m, a[j]);
    for (std::int64_t j = 0; j < D; ++j) s += std::exp(a[j] - m);
    for (std::int64_t j = 0; j < D; ++j) q += (std::exp(a[j] - m) / s) * (std::exp(a[j] - m) / s);
    for (std::int64_t j = 0; j < D; ++j) want[static_cast<std::size_t>(r * D + j)] = std::exp(a[j] - m) / s / std::sqrt(q);
  }
  CHECK(test::mismatches(f_kept, want, fz::DType::float32) == 0);
  // a tie: the softmax and its log, both from the kept exp, and the row sums
  auto tie_run = [&](bool keep) {
    fz::detail::set_tuning(keep ? "layer_keep_values=1" : "layer_keep_values=0");
    fz::Array<float> p = fz::full<float>({R, D}, 7.f), lp = fz::full<float>({R, D}, 7.f), s = fz::full<float>({R, 1}, 7.f);
    auto e = fz::exp(x - fz::max(x, -1, true));
    fz::reset_stats();
    fz::tie(p, lp, s) = std::make_tuple(e / fz::sum(e, -1, true), fz::log(e / fz::sum(e, -1, true)), fz::sum(e, -1, true));
    CHECK(fz::stats().launches == 1);
    std::vector<float> all = p.to_host(), l = lp.to_host(), t = s.to_host();
    all.insert(all.end(), l.begin(), l.end());
    all.insert(all.end(), t.begin(), t.end());
    return all;
  };
  const auto t_kept = tie_run(true), t_again = tie_run(false);
  CHECK(std::memcmp(t_kept.data(), t_again.data(), t_kept.size() * sizeof(float)) == 0);
  for (std::size_t i = 0; i < want.size(); i += 997) CHECK(std::isfinite(t_kept[i]));
}

TEST_CASE("long rows held in registers with their kept exps, against float64 and against shared memory", "[gpu][layers]") {
  SavedTuning restore;
  for (const auto [R, D] : {std::pair<std::int64_t, std::int64_t>{40, 16384}, {33, 8192}}) {
    INFO("rows " << R << " x " << D);
    const auto hx = test::random<fz::bfloat16>(static_cast<std::size_t>(R * D), -6, 6, static_cast<unsigned>(D + 1));
    const auto x = fz::asarray(hx, {R, D});
    const std::vector<double> want = softmax_rows(hx, R, D);
    // float32 results, then bfloat16 ones (approximations where the 16-bit rounding follows)
    auto run = [&](bool registers, bool sixteen) {
      fz::detail::set_tuning(registers ? "layer_registers=64" : "layer_registers=0");
      const auto e = softmax16(x);
      const std::string variant = sixteen ? fz::inspect(fz::cast<fz::bfloat16>(e)).variant : fz::inspect(e).variant;
      INFO(variant);
      CHECK((variant.find("held in registers") != std::string::npos) == registers);
      std::vector<double> got;
      if (sixteen) {
        fz::Array<fz::bfloat16> y = fz::full<fz::bfloat16>({R, D}, fz::bfloat16(-7.f));  // poisoned
        fz::reset_stats();
        y = fz::cast<fz::bfloat16>(e);
        CHECK(fz::stats().launches == 1);
        for (fz::bfloat16 v : y.to_host()) got.push_back(test::as_double(v));
      } else {
        fz::Array<float> y = fz::full<float>({R, D}, -7.f);
        fz::reset_stats();
        y = e;
        CHECK(fz::stats().launches == 1);
        for (float v : y.to_host()) got.push_back(v);
      }
      return got;
    };
    for (bool sixteen : {false, true}) {
      const auto held = run(true, sixteen), shared = run(false, sixteen);
      const fz::DType d = sixteen ? fz::DType::bfloat16 : fz::DType::float32;
      CHECK(test::mismatches(held, want, d) == 0);
      CHECK(test::mismatches(shared, want, d) == 0);
    }
  }
}
