// SPDX-License-Identifier: Apache-2.0
// Scans without a GPU: their result dtypes (NumPy's), what they compile to (a kernel of their own with the
// prologue inside; partitions in one pass for a few long rows; the reading math in the next kernel), and the hash's parts.
#include "schedule/tuning.hpp"
#include "support.hpp"

TEST_CASE("scans: result dtypes follow NumPy's cumsum", "[scans]") {
  using fz::ir::Op;
  CHECK(fz::ir::scan_result_dtype(Op::cumsum, fz::DType::int32) == fz::DType::int64);
  CHECK(fz::ir::scan_result_dtype(Op::cumsum, fz::DType::bool_) == fz::DType::int64);
  CHECK(fz::ir::scan_result_dtype(Op::cumsum, fz::DType::uint8) == fz::DType::uint64);
  CHECK(fz::ir::scan_result_dtype(Op::cumsum, fz::DType::float16) == fz::DType::float16);
  CHECK(fz::ir::scan_result_dtype(Op::cummax, fz::DType::int8) == fz::DType::int8);
  CHECK(fz::ir::scan_result_dtype(Op::logcumsumexp, fz::DType::int32) == fz::DType::float64);
  static_assert(decltype(fz::cumsum(fz::placeholder<std::int16_t>({4}), 0))::dtype == fz::DType::int64);
}

TEST_CASE("scans compile to a kernel of their own with the prologue inside", "[scans][plan]") {
  const auto x = fz::placeholder<float>({64, 3000});
  const auto k = fz::inspect(fz::cumsum(fz::placeholder<float>({64, 2000}) > 0.25f, 1));
  CHECK(k.kernels == 1);
  CHECK(k.name.rfind("fz_gt_cumsum_i64_", 0) == 0);
  CHECK(k.variant.find("a block per row") != std::string::npos);
  CHECK(fz::inspect(x - fz::cumsum(x, 1) / 3000.f).kernels == 2);
  CHECK(fz::inspect(fz::sum(fz::cumsum(x, 1), 0)).kernels == 2);  // the scan, then the sum
  // one long row: partitions of a tile over blocks, in one pass
  const auto row = fz::inspect(fz::cumsum(fz::placeholder<float>({1 << 24}), 0, {.reverse = true}));
  CHECK(row.kernels == 1);
  CHECK(row.variant.find("in one pass") != std::string::npos);
  CHECK(row.source.find("fz_state") != std::string::npos);
  // forward and contiguous, its idle warps prefetch a partition about to be claimed; reversed, not
  CHECK(row.variant.find("prefetched") == std::string::npos);
  const auto forward = fz::inspect(fz::cumsum(fz::placeholder<float>({1 << 24}), 0));
  CHECK(forward.variant.find("partitions 4/16 of the blocks ahead prefetched into L2") != std::string::npos);
  CHECK(forward.source.find("prefetch.global.L2") != std::string::npos);
  CHECK(fz::inspect(fz::cumsum(x > 0.f, 1)).variant.find("in one pass") != std::string::npos);  // int64 tiles of 2048
  // options and ops are part of the kernel; the axis and sizes are not
  const auto plain = fz::inspect(fz::cumsum(x, 1)), other_axis = fz::inspect(fz::cumsum(x, 0));
  CHECK(plain.hash == fz::inspect(fz::cumsum(fz::placeholder<float>({9, 3000}), 1)).hash);
  CHECK(plain.hash != fz::inspect(fz::cumsum(x, 1, {.exclusive = true})).hash);
  CHECK(plain.hash != fz::inspect(fz::cumprod(x, 1)).hash);
  // along a non-contiguous axis: a thread per row (coalesced), the axis in chunks of their own totals
  CHECK(other_axis.kernels == 2);
  CHECK(other_axis.variant.find("a thread per row") != std::string::npos);
  // over enough rows for a strip of 32 per SM (H100: 4224): one pass, a block per strip
  const auto strips = fz::inspect(fz::cumsum(fz::placeholder<float>({64, 5000}), 0));
  CHECK(strips.kernels == 1);
  CHECK(strips.variant.find("a block per 32 neighbouring rows") != std::string::npos);
  CHECK(strips.registers > 0);
  CHECK(strips.variant.find("each run of the next tile loaded before this one is scanned") != std::string::npos);
  {  // scan_ahead=0: each run loaded after the tile before it is stored, a kernel of its own
    const fz::detail::Tuning saved = fz::detail::tuning();
    fz::detail::set_tuning("scan_ahead=0");
    const auto after = fz::inspect(fz::cumsum(fz::placeholder<float>({64, 5000}), 0));
    fz::detail::tuning() = saved;
    CHECK(after.variant.find("next tile") == std::string::npos);
    CHECK(after.hash != strips.hash);
    CHECK(after.source.find("fz_y[") == std::string::npos);
    CHECK(strips.source.find("fz_y[") != std::string::npos);
  }
  {  // 8-byte accumulators load after the stores, in runs of 16 (two runs of 16 spilled at 4 blocks an SM); ahead
     // where tuned to runs of 8
    const auto wide = fz::inspect(fz::cumsum(fz::placeholder<double>({64, 5000}), 0)).variant;
    CHECK(wide.find("each warp a run of 16") != std::string::npos);
    CHECK(wide.find("next tile") == std::string::npos);
    const fz::detail::Tuning saved = fz::detail::tuning();
    fz::detail::set_tuning("scan_items=8");
    const auto eight = fz::inspect(fz::cumsum(fz::placeholder<double>({64, 5000}), 0)).variant;
    fz::detail::tuning() = saved;
    CHECK(eight.find("each warp a run of 8") != std::string::npos);
    CHECK(eight.find("next tile") != std::string::npos);
  }
  {  // tuned to 2, few rows take the strips too (the fuzzer's shapes); the blocks per SM tuning reaches them
    const fz::detail::Tuning saved = fz::detail::tuning();
    fz::detail::set_tuning("scan_strips=2");
    fz::detail::set_tuning("scan_min_blocks=2");
    const auto few = fz::inspect(fz::cumsum(x, 0));
    fz::detail::tuning() = saved;
    CHECK(few.kernels == 1);
    CHECK(few.variant.find("a block per 32 neighbouring rows") != std::string::npos);
    CHECK(few.source.find("__launch_bounds__(256, 2)") != std::string::npos);
  }
  // 5 blocks an SM for 4-byte accumulators along contiguous rows, each thread's items in registers until their
  // results; 4 for 8-byte ones, rows walked element by element and logcumsumexp in one pass (they spill at 48)
  const auto blocks = [](const fz::KernelInfo& info, int n) {
    return info.source.find(fmt::format("__launch_bounds__(256, {})", n)) != std::string::npos;
  };
  const auto rows = fz::placeholder<float>({8192, 8192});
  const auto lse_rows = fz::inspect(fz::logcumsumexp(rows, 1));
  CHECK(blocks(lse_rows, 5));
  CHECK(lse_rows.variant.find("each thread's items in registers") != std::string::npos);
  CHECK(lse_rows.source.find("fz_r[16];") != std::string::npos);
  CHECK(blocks(fz::inspect(fz::cumsum(rows, 1)), 5));
  // one pass, float: a warp of its own looking back (9 warps), two tiles a block in dynamic shared memory, 3 an
  // SM; with the look-back in warp 0 between barriers, 5 blocks of 8 warps
  CHECK(forward.variant.find("a warp looking back while the others load the next partition") != std::string::npos);
  CHECK(forward.source.find("__launch_bounds__(288, 3)") != std::string::npos);
  CHECK(forward.source.find("extern __shared__") != std::string::npos);
  // 8-byte accumulators: as many blocks as their registers fit unspilled (their shared memory fits 6)
  const auto wide = fz::placeholder<std::int64_t>({1 << 24});
  const auto wide_scan = fz::inspect(fz::cumsum(wide, 0));
  CHECK(wide_scan.source.find("__launch_bounds__(288, 3)") != std::string::npos);
  CHECK(wide_scan.variant.find("4096 per tile") != std::string::npos);  // (16 items a thread)
  CHECK(fz::inspect(fz::logcumsumexp(fz::placeholder<double>({1 << 24}), 0)).source.find("__launch_bounds__(288, 2)") !=
        std::string::npos);
  {
    const fz::detail::Tuning saved = fz::detail::tuning();
    fz::detail::set_tuning("scan_pipelined=0");
    const auto between_barriers = fz::inspect(fz::cumsum(fz::placeholder<float>({1 << 24}), 0));
    fz::detail::tuning() = saved;
    CHECK(blocks(between_barriers, 5));
    CHECK(between_barriers.variant.find("a warp looking back") == std::string::npos);
    CHECK(between_barriers.hash != forward.hash);
    // logcumsumexp in one pass likewise, its tiles' prefixes as pairs, its look-back's folds in one exponential
    // and one log (fz_fold_pair)
    const auto lse_row = fz::placeholder<float>({1 << 24});
    fz::detail::set_tuning("scan_pipelined=0");
    const auto lse_between = fz::inspect(fz::logcumsumexp(lse_row, 0));
    fz::detail::tuning() = saved;
    CHECK(blocks(lse_between, 4));
    CHECK(lse_between.variant.find("a warp looking back") == std::string::npos);
    const auto lse_piped = fz::inspect(fz::logcumsumexp(lse_row, 0));
    CHECK(lse_piped.variant.find("a warp looking back") != std::string::npos);
    CHECK(lse_piped.source.find("__launch_bounds__(288, 3)") != std::string::npos);
    for (const auto* lse : {&lse_between, &lse_piped}) {
      CHECK(lse->source.find("fz_fold_pair(lane < 8 ? fz_warp[") != std::string::npos);
      CHECK(lse->source.find("fz_pair(pm, ps, before_m, before_s)") != std::string::npos);
      CHECK(lse->registers > 0);  // compiled by NVRTC
    }
  }
  CHECK(blocks(fz::inspect(fz::cumsum(rows, 1, {.reverse = true})), 4));
  const auto lse_double = fz::inspect(fz::logcumsumexp(fz::placeholder<double>({8192, 8192}), 1));
  CHECK(blocks(lse_double, 4));
  CHECK(lse_double.variant.find("in registers") == std::string::npos);  // (they spilled)
  CHECK(blocks(fz::inspect(fz::cumsum(fz::placeholder<std::int64_t>({8192, 8192}), 1)), 4));
  for (const auto& info : {fz::inspect(fz::cummax(fz::placeholder<std::int8_t>({8, 100}), -1)),
                           fz::inspect(fz::logcumsumexp(fz::placeholder<fz::half>({8, 100}), 0)),
                           fz::inspect(fz::cumprod(fz::placeholder<bool>({8, 100}), 1))})
    CHECK(info.registers > 0);  // compiled by NVRTC
}
