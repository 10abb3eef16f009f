// SPDX-License-Identifier: Apache-2.0
#include "codegen/scan_tiles.hpp"

#include <fmt/format.h>

#include "codegen/spell.hpp"

namespace fusion::codegen {

namespace {

/// The element-by-element move of a tile, each tested against the row part's end: every tile of a strided
/// or reversed row, and a contiguous row's last tile. `each` writes the move of element k of the lane's
/// span (fz_span[33 k]: the tile's element fz_e, at j along the row part, q along the axis).
template <class Each> void write_checked(SourceWriter& w, const ScanVariant& v, const std::string& acc, Each&& each) {
  auto scope = w.block("");  // (a tile's loads and stores each declare their span)
  w.line("{}* const fz_span = fz_tile + warp * {} + lane;  // the warp's span, from this lane", acc, 33 * v.items);
  // (a contiguous row's last tile only: unrolled in full beside the whole-tile path, its 64-bit addresses
  // spilled registers, H100 rows of 8192 f32)
  w.text(v.contiguous ? "#pragma unroll 4" : "#pragma unroll");
  auto loop = w.block("for (int k = 0; k < {}; ++k)", v.items);
  w.line("const int fz_e = warp * {} + k * 32 + lane;  // the tile's element", 32 * v.items);
  w.line("const long long j = base + fz_e, q = {};  // its place along the axis", v.reverse ? "n - 1 - j" : "j");
  each();
}

/// The whole-tile move of a contiguous row: each operand addressed from one pointer (`pointers` declares
/// them from fz_at, this lane's first element), `each` writing the move of the lane's k-th element (or
/// vector, its elements fz_span[132 k + u]).
template <class Pointers, class Each>
void write_whole(SourceWriter& w, const ScanVariant& v, const std::string& acc, Pointers&& pointers, Each&& each) {
  const int V = v.vector, I = v.items;
  w.line("const long long fz_at = base + warp * {} + lane * {};", 32 * I, V);
  if (V == 1) w.line("{}* const fz_span = fz_tile + warp * {} + lane;  // the warp's span, from this lane", acc, 33 * I);
  else w.line("{}* const fz_span = fz_tile + warp * {} + lane * 4 + (lane >> 3);  // the warp's span, from this lane", acc, 33 * I);
  pointers();
  w.line("#pragma unroll");
  auto loop = w.block("for (int k = 0; k < {}; ++k)", I / V);
  each();
}

}  // namespace

void write_vector_helpers(SourceWriter& w) {
  w.line("// Four 4-byte elements in one 16-byte access (the address 16-byte aligned).");
  w.line("template <class T> __device__ __forceinline__ void fz_load4(T (&v)[4], const T* p) {{");
  w.line("  const uint4 r = *(const uint4*)p;");
  w.line("  memcpy(v, &r, 16);");
  w.line("}}");
  w.line("template <class T> __device__ __forceinline__ void fz_store4(T* p, const T (&v)[4]) {{");
  w.line("  uint4 r;");
  w.line("  memcpy(&r, v, 16);");
  w.line("  *(uint4*)p = r;");
  w.line("}}").blank();
}

void write_tile_loads(SourceWriter& w, const ScanVariant& v, std::span<const DType> pdt, const std::string& acc,
                      const ElementCall& call) {
  const int np = v.n_params;
  auto checked = [&] {
    w.line("// Each warp loads its span of the tile coalesced into shared memory (a pad word per 32: a thread's {} "
           "consecutive elements are conflict-free).", v.items);
    write_checked(w, v, acc, [&] {
      w.line("{} x = fz_none;", acc);
      w.line("if (j < hi) x = {};", call([](int p) { return fmt::format("in{0}[k{0} + q * ast{0}]", p); }));
      w.line("fz_span[k * 33] = x;");
    });
  };
  if (!v.contiguous) return checked();
  {
    auto whole = w.block("if (base + {} <= hi)", v.tile());
    w.line("// A whole tile: each warp's span loaded coalesced{}, no bounds tests.", v.vector > 1 ? " in 16-byte vectors" : "");
    write_whole(w, v, acc, [&] {
      for (int p = 0; p < np; ++p)
        w.line("const {0}* const fz_p{1} = in{1} + (k{1} + fz_at);", storage_type(pdt[p]), p);
    }, [&] {
      if (v.vector == 1) {
        w.line("fz_span[k * 33] = {};", call([](int p) { return fmt::format("fz_p{}[k * 32]", p); }));
        return;
      }
      for (int p = 0; p < np; ++p)
        w.line("{0} fz_v{1}[4];  fz_load4(fz_v{1}, fz_p{1} + k * 128);", storage_type(pdt[p]), p);
      w.line("#pragma unroll");
      w.line("for (int u = 0; u < 4; ++u) fz_span[k * 132 + u] = {};", call([](int p) { return fmt::format("fz_v{}[u]", p); }));
    });
  }
  auto tail = w.block("else");
  checked();
}

void write_tile_stores(SourceWriter& w, const ScanVariant& v, const std::string& acc,
                       const std::function<std::string(const std::string&)>& stored) {
  auto checked = [&] {
    write_checked(w, v, acc, [&] { w.line("if (j < hi) out[k_out + q * ast_out] = {};", stored("fz_span[k * 33]")); });
  };
  if (!v.contiguous) return checked();
  {
    auto whole = w.block("if (base + {} <= hi)", v.tile());
    write_whole(w, v, acc, [&] { w.line("{}* const fz_po = out + (k_out + fz_at);", storage_type(v.out_dtype)); }, [&] {
      if (v.vector == 1) {
        w.line("fz_po[k * 32] = {};", stored("fz_span[k * 33]"));
        return;
      }
      w.line("{} fz_o[4];", storage_type(v.out_dtype));
      w.line("#pragma unroll");
      w.line("for (int u = 0; u < 4; ++u) fz_o[u] = {};", stored("fz_span[k * 132 + u]"));
      w.line("fz_store4(fz_po + k * 128, fz_o);");
    });
  }
  auto tail = w.block("else");
  checked();
}

void write_next_tile_prefetch(SourceWriter& w, const ScanVariant& v,
                              const std::function<void(const char*, const char*)>& decode) {
  w.line("// Meanwhile warps 1.. pull a partition about to be claimed into L2 (as many ahead as {}/16 of the blocks):",
         static_cast<int>(v.prefetch));
  w.line("// the block that takes it then waits on L2, not on memory, and memory is busy through the look-back.");
  w.line("const long long fz_nb = b + (long long)gridDim.x * {} / 16;", static_cast<int>(v.prefetch));
  auto next = w.block("if (warp > 0 && fz_nb < n_rows * chunks)");
  w.line("const long long fz_nrow = fz_nb / chunks, fz_nc = fz_nb - fz_nrow * chunks;");
  w.line("const long long fz_nlo = fz_nc * chunk, fz_nhi = fz_nlo + chunk < n ? fz_nlo + chunk : n;");
  decode("fz_nrow", "fz_nk");
  for (int p = 0; p < v.n_params; ++p) {
    auto operand = w.block("");
    w.line("const char* const fz_end = (const char*)(in{0} + fz_nk{0} + fz_nhi);", p);
    w.line("const char* fz_line = (const char*)((unsigned long long)(in{0} + fz_nk{0} + fz_nlo) & ~127ull);", p);
    w.line("for (fz_line += (threadIdx.x - 32) * 128; fz_line < fz_end; fz_line += {} * 128)", kScanBlock - 32);
    w.line("  asm volatile(\"prefetch.global.L2 [%0];\" :: \"l\"(fz_line));");
  }
}

void write_thread_results(SourceWriter& w, const std::string& acc, int items, bool exclusive, const std::string& last_init,
                          const std::string& first, const std::function<std::string(const char*)>& value) {
  if (exclusive) w.line("{} last = {};  // the thread's elements before k", acc, last_init);
  w.line("#pragma unroll");
  if (!exclusive) {
    w.line("for (int k = 0; k < {}; ++k) fz_mine[k] = {};", items, value("fz_r[k]"));
    return;
  }
  auto results = w.block("for (int k = 0; k < {}; ++k)", items);
  w.line("const {} here = fz_r[k];  // the thread's elements to k", acc);
  w.line("fz_mine[k] = {};", first.empty() ? value("last") : fmt::format("k == 0 ? {} : {}", first, value("last")));
  w.line("last = here;");
}

}  // namespace fusion::codegen
