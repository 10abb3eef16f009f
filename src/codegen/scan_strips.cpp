// SPDX-License-Identifier: Apache-2.0
#include "codegen/scan_strips.hpp"

#include <fmt/format.h>

namespace fusion::codegen {

void write_strip_scan(SourceWriter& w, const ScanVariant& v, const std::string& acc, const std::string& identity,
                      const ElementCall& call, const std::function<void(const char*, const char*, bool)>& decode,
                      const std::function<std::string(const std::string&)>& stored) {
  const int W = kScanBlock / 32, I = v.items;
  w.line("const {} fz_none = {};", acc, identity);
  w.line("__shared__ {} fz_runs[{}][33];  // each thread's run total of the tile, by warp and lane", acc, W);
  w.line("const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;");
  w.line("const long long row = (long long)blockIdx.x * 32 + lane;  // the lane's row of the strip");
  w.line("const bool fz_live = row < n_rows;");
  w.line("const long long fz_r = fz_live ? row : n_rows - 1;  // (a lane past the last row reads a row, writes none)");
  decode("fz_r", "k", true);
  w.line("{} carry = fz_none;  // the strip's elements before the tile, for this lane's row", acc);
  // A thread's run of positions [first, first + I) into the array x (past the axis's end: fz_none).
  const auto load_run = [&](const char* x, const char* first, const char* q0) {
    {
      auto whole = w.block("if (fz_live && {} + {} <= n)", first, I);
      w.line("// The whole run: each operand from one pointer, stepping along the axis (no tests, few registers).");
      for (int p = 0; p < v.n_params; ++p)
        w.line("const auto* const fz_p{0} = in{0} + (k{0} + {2} * ast{0});  const long long fz_s{0} = {1}ast{0};", p,
               v.reverse ? "-" : "", q0);
      w.line("#pragma unroll");
      w.line("for (int k = 0; k < {}; ++k) {}[k] = {};", I, x,
             call([](int p) { return fmt::format("fz_p{0}[k * fz_s{0}]", p); }));
    }
    auto part = w.block("else");
    w.line("#pragma unroll");
    auto loads = w.block("for (int k = 0; k < {}; ++k)", I);
    w.line("const long long j = {} + k, q = {};", first, v.reverse ? "n - 1 - j" : "j");
    w.line("{}[k] = fz_live && j < n ? {} : fz_none;", x, call([](int p) { return fmt::format("in{0}[k{0} + q * ast{0}]", p); }));
  };
  const char* const step = v.reverse ? "n - 1 - " : "";
  if (v.ahead) {
    w.line("{} fz_x[{}];  // the thread's run of the tile being scanned", acc, I);
    auto scope = w.block("");
    w.line("const long long first = warp * {}, q0 = {}first;", I, step);
    load_run("fz_x", "first", "q0");
  }
  auto tiles = w.block("for (long long base = 0; base < n; base += {})", W * I);
  w.line("const long long first = base + warp * {};  // the thread's run: positions [first, first + {})", I, I);
  if (!v.ahead) w.line("{} fz_x[{}];", acc, I);
  w.line("const long long q0 = {}first;  // the run's first element's place along the axis", step);
  if (v.ahead) {
    w.line("// The next tile's run, its loads in flight while this tile is scanned and stored");
    w.line("{} fz_y[{}];", acc, I);
    auto scope = w.block("");
    w.line("const long long first_y = first + {}, q_y = {}first_y;", W * I, step);
    load_run("fz_y", "first_y", "q_y");
  } else {
    load_run("fz_x", "first", "q0");
  }
  w.line("{} run = fz_none;", acc);
  w.line("#pragma unroll");
  w.line("for (int k = 0; k < {}; ++k) fz_x[k] = run = fz_combine(run, fz_x[k]);", I);
  w.line("fz_runs[warp][lane] = run;");
  w.line("__syncthreads();");
  w.line("// In a fixed order: the carry, then the runs of the warps before this one (pre), then the rest.");
  w.line("{} pre = fz_none;", acc);
  w.line("#pragma unroll");
  w.line("for (int u = 0; u < {}; ++u) {{ if (u == warp) pre = carry; carry = fz_combine(carry, fz_runs[u][lane]); }}", W);
  w.line("__syncthreads();  // fz_runs read before the next tile writes it");
  const auto result = [&] {
    if (v.exclusive) w.line("const {} r = k == 0 ? pre : fz_combine(pre, fz_x[k > 0 ? k - 1 : 0]);", acc);
    else w.line("const {} r = fz_combine(pre, fz_x[k]);", acc);
  };
  {
    auto whole = w.block("if (fz_live && first + {} <= n)", I);
    w.line("auto* const fz_po = out + (k_out + q0 * ast_out);");
    w.line("const long long fz_so = {}ast_out;", v.reverse ? "-" : "");
    w.line("#pragma unroll");
    auto stores = w.block("for (int k = 0; k < {}; ++k)", I);
    result();
    w.line("fz_po[k * fz_so] = {};", stored("r"));
  }
  {
    auto part = w.block("else");
    w.line("#pragma unroll");
    auto stores = w.block("for (int k = 0; k < {}; ++k)", I);
    w.line("const long long j = first + k, q = {};", v.reverse ? "n - 1 - j" : "j");
    result();
    w.line("if (fz_live && j < n) out[k_out + q * ast_out] = {};", stored("r"));
  }
  if (v.ahead) {
    w.line("#pragma unroll");
    w.line("for (int k = 0; k < {}; ++k) fz_x[k] = fz_y[k];", I);
  }
}

}  // namespace fusion::codegen
