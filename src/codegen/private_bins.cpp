// SPDX-License-Identifier: Apache-2.0
#include "codegen/private_bins.hpp"

#include "codegen/spell.hpp"

namespace fusion::codegen {

void write_bins_open(SourceWriter& w, const std::string& bins_t, const std::string& words, const std::string& identity) {
  w.line("// This block's copy of the target's bins, in shared memory: added into the target once, at the end.");
  w.line("extern __shared__ __align__(16) unsigned char fz_shared[];");
  w.line("{0}* const fz_bins = reinterpret_cast<{0}*>(fz_shared);", bins_t);
  w.line("for (long long b = threadIdx.x; b < {}; b += blockDim.x) fz_bins[b] = {};", words, identity);
  w.line("__syncthreads();");
}

void write_bins_flush(SourceWriter& w, int exact_words, const std::string& bins_t, const std::string& words,
                      ir::Op op, DType d) {
  w.line("__syncthreads();");
  if (exact_words) {  // word k of bin b: each digit adds, the flags (the last word) or
    auto flush = w.block("for (long long b = threadIdx.x; b < {}; b += blockDim.x)", words);
    w.line("if (fz_bins[b] == 0) continue;");
    w.line("const long long d = b / fz_nbins;");
    w.line("unsigned long long* const to = (unsigned long long*)out + d * fz_plane + (b - d * fz_nbins);");
    w.line("if (d == {}) atomicOr(to, (unsigned long long)fz_bins[b]);", exact_words - 1);
    w.line("else atomicAdd(to, (unsigned long long)fz_bins[b]);");
  } else {
    w.line("for (long long b = threadIdx.x; b < {}; b += blockDim.x)", words);
    w.line("  if (fz_bins[b] != ({}){}) {}(out + b, fz_bins[b]);", bins_t, scatter_identity(op, d), scatter_function(op));
  }
}

}  // namespace fusion::codegen
