// SPDX-License-Identifier: Apache-2.0
// IR + product variant -> CUDA source of a matrix product whose epilogue is fusion's own expression. The
// main loop is the same text for every kernel (kProductLoop), shaped by the constants the variant writes
// before it; only the epilogue (fz_expr, its loads and the store) is generated from the graph.
#include "codegen/kernel_frame.hpp"
#include "codegen/emit_product.hpp"

#include <fmt/format.h>

#include <vector>

#include "codegen/emit_common.hpp"
#include "codegen/product_hopper.hpp"
#include "codegen/spell.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {
namespace {

/// The block's product tile, the same for every kernel. Operand tiles lie in shared memory as their
/// operand lies in memory (its contiguous dimension inner, padded by 8 elements so that ldmatrix's eight
/// rows of a piece fall in different banks); STAGES of them are in flight. Then the float accumulators
/// go to shared memory (over the pipeline's tiles) for the epilogue to read in row order.
constexpr const char* kProductLoop = R"(constexpr int FZ_THREADS = FZ_WARPS_M * FZ_WARPS_N * 32;
constexpr int FZ_WTM = FZ_BM / FZ_WARPS_M, FZ_WTN = FZ_BN / FZ_WARPS_N;  // one warp's tile
constexpr int FZ_FM = FZ_WTM / 16, FZ_FN = FZ_WTN / 16;                  // its 16x16 fragments
constexpr int FZ_A_OUTER = FZ_A_ROWS ? FZ_BM : FZ_BK, FZ_A_INNER = FZ_A_ROWS ? FZ_BK : FZ_BM;
constexpr int FZ_B_OUTER = FZ_B_ROWS ? FZ_BK : FZ_BN, FZ_B_INNER = FZ_B_ROWS ? FZ_BN : FZ_BK;
constexpr int FZ_A_LD = FZ_A_INNER + 8, FZ_B_LD = FZ_B_INNER + 8, FZ_C_LD = FZ_BN + 4;
constexpr int FZ_A_TILE = FZ_A_OUTER * FZ_A_LD, FZ_B_TILE = FZ_B_OUTER * FZ_B_LD;

// Tensor-core fragments of mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), loaded from the
// shared tiles by ldmatrix: a lane's four 8x8 pieces of A (rows 0-7 and 8-15, k 0-7 and 8-15) and two of B.
// `.trans` where the tile lies the other way (A by columns, B by rows): the pieces arrive transposed.
__device__ __forceinline__ void fz_ldmatrix4(unsigned (&r)[4], const unsigned short* p) {
  const unsigned at = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
}
__device__ __forceinline__ void fz_ldmatrix4_trans(unsigned (&r)[4], const unsigned short* p) {
  const unsigned at = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
}
__device__ __forceinline__ void fz_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." FZ_MMA_TYPE "." FZ_MMA_TYPE
               ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// OUTER x INNER elements of an operand (rows `ld` apart) from (outer0, inner0) into shared memory at `s`;
// what lies at or past (outer_end, inner_end) reads as zero.
template <int OUTER, int INNER, int LD>
__device__ __forceinline__ void fz_load_tile(unsigned short* s, const unsigned short* g, long long ld, long long outer0,
                                             long long inner0, long long outer_end, long long inner_end) {
  if constexpr (FZ_ASYNC) {  // 16 bytes a copy (inner_end is a multiple of 8): a chunk lies wholly in or out
    constexpr int CHUNKS = OUTER * INNER / 8;
#pragma unroll
    for (int c0 = 0; c0 < CHUNKS; c0 += FZ_THREADS) {
      const int c = c0 + threadIdx.x;
      if (CHUNKS % FZ_THREADS != 0 && c >= CHUNKS) break;
      const int o = c / (INNER / 8), i = c % (INNER / 8) * 8;
      const bool in = outer0 + o < outer_end && inner0 + i < inner_end;
      const unsigned short* from = in ? g + (outer0 + o) * ld + inner0 + i : g;
      const unsigned to = (unsigned)__cvta_generic_to_shared(s + o * LD + i);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from), "r"(in ? 16 : 0));
    }
  } else {
    for (int e = threadIdx.x; e < OUTER * INNER; e += FZ_THREADS) {
      const int o = e / INNER, i = e % INNER;
      s[o * LD + i] = outer0 + o < outer_end && inner0 + i < inner_end ? g[(outer0 + o) * ld + inner0 + i]
                                                                       : (unsigned short)0;
    }
  }
}
__device__ __forceinline__ void fz_commit() {
  if constexpr (FZ_ASYNC) asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void fz_wait() {
  if constexpr (FZ_ASYNC) asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The tile of a·b at (m0, n0) over k in [k_begin, k_end) into `cs` (float, FZ_C_LD apart), through the
// pipeline in `smem`.
__device__ __forceinline__ void fz_product_tile(float* cs, unsigned short* smem, const unsigned short* a,
                                                const unsigned short* b, long long M, long long N, long long k_begin,
                                                long long k_end, long long lda, long long ldb, long long m0,
                                                long long n0) {
  unsigned short* as = smem;
  unsigned short* bs = smem + FZ_STAGES * FZ_A_TILE;
  const int warp = threadIdx.x / 32, wm = warp / FZ_WARPS_N, wn = warp % FZ_WARPS_N, lane = threadIdx.x % 32;
  float acc[FZ_FM][FZ_FN * 2][4];  // per 16-row and 8-column piece of the warp's tile: mma's d fragment
#pragma unroll
  for (int i = 0; i < FZ_FM; ++i)
#pragma unroll
    for (int j = 0; j < FZ_FN * 2; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
  // Where this lane's row of each 8x8 piece starts, relative to a fragment's corner (ldmatrix: lanes 8q..8q+7
  // address piece q's rows). A pieces in order (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15);
  // B pieces (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15): two n8 fragments.
  const int q = lane / 8, row = lane % 8;
  const int a_at = FZ_A_ROWS ? (q % 2 * 8 + row) * FZ_A_LD + q / 2 * 8 : (q / 2 * 8 + row) * FZ_A_LD + q % 2 * 8;
  const int b_at = FZ_B_ROWS ? (q % 2 * 8 + row) * FZ_B_LD + q / 2 * 8 : (q / 2 * 8 + row) * FZ_B_LD + q % 2 * 8;
  const long long tiles = (k_end - k_begin + FZ_BK - 1) / FZ_BK;
  auto load = [&](long long t, int stage) {
    const long long k0 = k_begin + t * FZ_BK;
    if constexpr (FZ_A_ROWS)
      fz_load_tile<FZ_A_OUTER, FZ_A_INNER, FZ_A_LD>(as + stage * FZ_A_TILE, a, lda, m0, k0, M, k_end);
    else
      fz_load_tile<FZ_A_OUTER, FZ_A_INNER, FZ_A_LD>(as + stage * FZ_A_TILE, a, lda, k0, m0, k_end, M);
    if constexpr (FZ_B_ROWS)
      fz_load_tile<FZ_B_OUTER, FZ_B_INNER, FZ_B_LD>(bs + stage * FZ_B_TILE, b, ldb, k0, n0, k_end, N);
    else
      fz_load_tile<FZ_B_OUTER, FZ_B_INNER, FZ_B_LD>(bs + stage * FZ_B_TILE, b, ldb, n0, k0, N, k_end);
  };
#pragma unroll
  for (int s = 0; s < FZ_STAGES - 1; ++s) {
    if (s < tiles) load(s, s);
    fz_commit();
  }
  for (long long t = 0; t < tiles; ++t) {
    fz_wait<FZ_STAGES - 2>();  // tile t has landed
    __syncthreads();           // ... for every thread, and every warp is done with tile t - 1's stage
    if (t + FZ_STAGES - 1 < tiles) load(t + FZ_STAGES - 1, (int)((t + FZ_STAGES - 1) % FZ_STAGES));
    fz_commit();
    const int stage = (int)(t % FZ_STAGES);
    const unsigned short* at = as + stage * FZ_A_TILE;
    const unsigned short* bt = bs + stage * FZ_B_TILE;
#pragma unroll
    for (int kk = 0; kk < FZ_BK; kk += 16) {
      unsigned fa[FZ_FM][4], fb[FZ_FN][4];  // fb[j]: the b fragments of n8 pieces 2j and 2j + 1
#pragma unroll
      for (int i = 0; i < FZ_FM; ++i) {
        const int r = wm * FZ_WTM + i * 16;  // the fragment's corner: (r, kk)
        if constexpr (FZ_A_ROWS) fz_ldmatrix4(fa[i], at + r * FZ_A_LD + kk + a_at);
        else fz_ldmatrix4_trans(fa[i], at + kk * FZ_A_LD + r + a_at);
      }
#pragma unroll
      for (int j = 0; j < FZ_FN; ++j) {
        const int c = wn * FZ_WTN + j * 16;  // the corner: (kk, c)
        if constexpr (FZ_B_ROWS) fz_ldmatrix4_trans(fb[j], bt + kk * FZ_B_LD + c + b_at);
        else fz_ldmatrix4(fb[j], bt + c * FZ_B_LD + kk + b_at);
      }
#pragma unroll
      for (int i = 0; i < FZ_FM; ++i)
#pragma unroll
        for (int j = 0; j < FZ_FN; ++j) {
          fz_mma(acc[i][2 * j], fa[i], fb[j][0], fb[j][1]);
          fz_mma(acc[i][2 * j + 1], fa[i], fb[j][2], fb[j][3]);
        }
    }
  }
  fz_wait<0>();
  __syncthreads();  // the pipeline's memory becomes the result tile
  // d fragment: lane (g = lane / 4, c = lane % 4) holds rows g and g + 8, columns 2c and 2c + 1
#pragma unroll
  for (int i = 0; i < FZ_FM; ++i)
#pragma unroll
    for (int j = 0; j < FZ_FN * 2; ++j) {
      float* at = cs + (wm * FZ_WTM + i * 16 + lane / 4) * FZ_C_LD + wn * FZ_WTN + j * 8 + lane % 4 * 2;
      *reinterpret_cast<float2*>(at) = make_float2(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<float2*>(at + 8 * FZ_C_LD) = make_float2(acc[i][j][2], acc[i][j][3]);
    }
  __syncthreads();
}

// K split over `split` blocks per tile: this block's slice of the tile goes to `partials` (its tile's
// `split` slices side by side); the last block of the tile to arrive sums them in slice order into `cs` and
// returns true (and resets the tile's counter for the next launch); the others return false.
__device__ __forceinline__ bool fz_sum_slices(float* cs, float* partials, unsigned* counter, int split, int slice) {
  __shared__ bool fz_last;
  constexpr int QUADS = FZ_BM * FZ_BN / 4;  // 16-byte pieces of a tile (FZ_BN and FZ_C_LD are multiples of 4)
  float4* mine = reinterpret_cast<float4*>(partials + (long long)slice * FZ_BM * FZ_BN);
  for (int e = threadIdx.x; e < QUADS; e += FZ_THREADS)
    __stcg(mine + e, *reinterpret_cast<const float4*>(cs + e * 4 / FZ_BN * FZ_C_LD + e * 4 % FZ_BN));
  __threadfence();  // the slice is visible device-wide before the counter says so
  __syncthreads();
  if (threadIdx.x == 0) {
    fz_last = atomicAdd(counter, 1u) == (unsigned)split - 1;
    if (fz_last) *counter = 0;
  }
  __syncthreads();
  if (!fz_last) return false;
  __threadfence();
  const float4* all = reinterpret_cast<const float4*>(partials);
  for (int e = threadIdx.x; e < QUADS; e += FZ_THREADS) {
    float4 s = __ldcg(all + e);
#pragma unroll 4
    for (int q = 1; q < split; ++q) {  // (in slice order: the same sums every run)
      const float4 t = __ldcg(all + (long long)q * QUADS + e);
      s.x += t.x, s.y += t.y, s.z += t.z, s.w += t.w;
    }
    *reinterpret_cast<float4*>(cs + e * 4 / FZ_BN * FZ_C_LD + e * 4 % FZ_BN) = s;
  }
  __syncthreads();
  return true;
}
)";

/// The epilogue's 8 consecutive elements of a row in one access (or two, or four: 16 bytes at a time) where they
/// are aligned to it.
constexpr const char* kEpilogueCopies = R"(template <class T> __device__ __forceinline__ bool fz_aligned8(const T* p) {
  return (unsigned long long)p % (sizeof(T) * 8 < 16 ? sizeof(T) * 8 : 16) == 0;
}
template <class T> __device__ __forceinline__ void fz_copy8(T* to, const T* from) {
  if constexpr (sizeof(T) * 8 >= 16) {
#pragma unroll
    for (int i = 0; i < (int)(sizeof(T) * 8 / 16); ++i) reinterpret_cast<uint4*>(to)[i] = reinterpret_cast<const uint4*>(from)[i];
  } else {
    *reinterpret_cast<uint2*>(to) = *reinterpret_cast<const uint2*>(from);
  }
})";

}  // namespace

bool is_product_epilogue(const ir::Graph& g) {
  if (g.outputs.empty() || g.outputs.size() > static_cast<std::size_t>(kMaxOutputs)) return false;
  for (const ir::Node& n : g.nodes) {
    const bool ok = n.op == ir::Op::input || n.op == ir::Op::scalar || n.op == ir::Op::cast || n.op == ir::Op::call ||
                    (ir::is_elementwise(n.op) && n.op != ir::Op::leading && n.op != ir::Op::concatenate);
    if (!ok) return false;
  }
  return true;
}

GeneratedKernel emit_product(const ir::Graph& g, const ProductVariant& v, std::string_view name_given) {
  if (!is_product_epilogue(g) || static_cast<int>(g.outputs.size()) != v.n_outputs)
    throw Error("internal: a generated product's epilogue is elementwise, its outputs the variant's");
  if (v.operand != DType::float16 && v.operand != DType::bfloat16)
    throw Error("internal: generated products multiply float16 or bfloat16 operands");
  const int O = v.n_outputs;
  auto [k, pdt, scalars, ctx, heavy] = emit_context(g, v, name_given, std::span(v.out_dtype.data(), static_cast<std::size_t>(O)));
  if (name_given.empty()) k.name.insert(3, "matmul_");  // fz_matmul_<epilogue ops>_<dtype>_<hash>
  need_conversions(ctx, v.operand);
  const int P = v.n_params, pp = v.product_param;
  // output o: its array's dtype, the value's, and the names its array and its values go by (one output: `out`, `y`)
  const auto out = [&](int o) { return v.out_dtype[static_cast<std::size_t>(o)]; };
  const auto result = [&](int o) { return g.nodes[g.outputs[static_cast<std::size_t>(o)]].dtype; };
  const auto named = [&](const char* base, int o) { return O == 1 ? std::string(base) : fmt::format("{}{}", base, o); };

  // fz_expr: the epilogue of one element, from its loaded values (the product's among them) and the scalars: the
  // value, or with several outputs each into its reference.
  SourceWriter body;
  {
    std::vector<std::string> args;
    if (O > 1)
      for (int o = 0; o < O; ++o) args.push_back(fmt::format("{}& r{}", compute_type(result(o)), o));
    for (int p = 0; p < P; ++p) args.push_back(fmt::format("{} x{}", compute_type(pdt[p]), p));
    for (auto [slot, d] : scalars) args.push_back(fmt::format("{} s{}", compute_type(d), slot));
    auto fn = body.block("__device__ __forceinline__ {} fz_expr({})", O == 1 ? compute_type(result(0)) : std::string("void"),
                         fmt::join(args, ", "));
    std::vector<std::string> value(g.nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      if (n.op == ir::Op::input) value[i] = fmt::format("x{}", v.param_of_slot[n.slot]);
      if (n.op == ir::Op::scalar) value[i] = fmt::format("s{}", n.slot);
    }
    write_values(body, g, std::vector<bool>(g.nodes.size(), true), value, ctx);
    if (O == 1) body.line("return {};", stored_value(g, g.outputs[0], out(0), value));
    for (int o = 0; O > 1 && o < O; ++o)
      body.line("r{} = {};", o, stored_value(g, g.outputs[static_cast<std::size_t>(o)], out(o), value));
  }

  SourceWriter w;
  w.line("// Generated by fusion. Kernel {}: {}.", k.name, v.describe());
  write_prelude(w, ctx, heavy);
  w.line("{}", body.str());
  const ProductTiles& t = v.tiles;
  const bool hopper = t.warpgroups != 0;
  if (hopper) w.text(hopper_constants(v));
  else w.line("constexpr int FZ_BM = {}, FZ_BN = {}, FZ_BK = {}, FZ_WARPS_M = {}, FZ_WARPS_N = {}, FZ_STAGES = {}, "
              "FZ_AHEAD = {};", t.bm, t.bn, t.bk, t.warps_m, t.warps_n, t.stages, t.ahead);
  w.line("constexpr bool FZ_A_ROWS = {}, FZ_B_ROWS = {}, FZ_ASYNC = {};", v.a_rows, v.b_rows, v.async);
  w.line("#define FZ_MMA_TYPE \"{}\"", v.operand == DType::bfloat16 ? "bf16" : "f16");
  w.line("struct FzProduct {{ long long v[{}]; }};", kProductDims);
  w.line("struct FzStrides {{ long long v[3]; }};").blank();
  if (hopper) {
    w.text(wgmma_wrapper(t.bn));
    w.text(hopper_loop()).blank();
    k.arch_specific = true;
  } else {
    w.text(kProductLoop).blank();
  }

  w.text(kEpilogueCopies).blank();

  KernelSignature& sig = k.signature;
  if (hopper) {  // the operands reach the kernel as tensor maps (the copy engine reads them)
    sig.add(ArgSource::tensor_map, 0, "const __grid_constant__ FzTensorMap ta");
    sig.add(ArgSource::tensor_map, 1, "const __grid_constant__ FzTensorMap tb");
  } else {
    sig.add(ArgSource::pointer, 0, "const unsigned short* __restrict__ a");
    sig.add(ArgSource::pointer, 1, "const unsigned short* __restrict__ b");
  }
  for (int p = 0; p < P; ++p)
    if (p != pp) sig.add(ArgSource::pointer, 2 + p, fmt::format("const {}* in{}", storage_type(pdt[p]), p));
  for (int o = 0; o < O; ++o) sig.add(ArgSource::pointer, 2 + P + o, fmt::format("{}* {}", storage_type(out(o)), named("out", o)));
  for (auto [slot, d] : scalars) sig.add(ArgSource::scalar, slot, fmt::format("const {} s{}", compute_type(d), slot));
  sig.add(ArgSource::dims, 0, "const FzProduct shape");
  if (v.split) {
    sig.add(ArgSource::workspace, 0, "float* __restrict__ fz_partials");
    sig.add(ArgSource::workspace, 1, "unsigned* __restrict__ fz_counters");
  }
  for (int p = 0; p < P; ++p)
    if (p != pp) sig.add(ArgSource::dims, product_param_strides(p), fmt::format("const FzStrides st{}", p));

  // The epilogue over the block's staged tile `cs`: a thread takes 8 columns of a row, consecutive threads the next
  // 8, so that the reads and writes coalesce; FZ_AHEAD groups of 8 are read before any is written (the output may
  // be an epilogue array read in place, so the compiler could not move a read above an earlier write itself).
  // (H100, 8192^3 bfloat16 with a bias and a residual, the epilogue run by the consumers after the main loop: one
  // element a thread at a time 2.23 ms, 8 1.70 ms, 8 in vector accesses 1.48 ms; 4 groups of 8 ahead 1.50 ms.)
  // Each group's epilogue from its loaded values (x<p>[g], product[g] or the staged floats), its outputs written
  // (`m[g]`, `n8[g]`: its row and first column; `live[g]`: whether it lies in the result)
  const auto write_results = [&] {
    std::vector<std::string> in;
    for (int p = 0; p < P; ++p) {
      if (p != pp) in.push_back(load_conversion(pdt[p], fmt::format("x{}[g][u]", p)));
      else if (hopper) in.push_back(load_conversion(v.operand, "product[g][u]"));  // (staged already rounded)
      else  // the product as its step would have stored it: rounded to the operands' dtype
        in.push_back(load_conversion(v.operand, store_conversion(DType::float32, v.operand, "cs[at[g] + u]")));
    }
    for (auto [slot, d] : scalars) in.push_back(fmt::format("s{}", slot));
    w.line("#pragma unroll");
    auto writes = w.block("for (int g = 0; g < FZ_AHEAD; ++g)");
    w.line("if (!live[g]) continue;");
    for (int o = 0; o < O; ++o) w.line("alignas(16) {} {}[8];", storage_type(out(o)), named("y", o));
    w.line("#pragma unroll");
    if (O == 1) {
      w.line("for (int u = 0; u < 8; ++u) y[u] = {};", store_conversion(result(0), out(0), fmt::format("fz_expr({})", fmt::join(in, ", "))));
    } else {
      auto each = w.block("for (int u = 0; u < 8; ++u)");
      std::vector<std::string> refs;
      for (int o = 0; o < O; ++o) {
        w.line("{} r{};", compute_type(result(o)), o);
        refs.push_back(fmt::format("r{}", o));
      }
      w.line("fz_expr({}, {});", fmt::join(refs, ", "), fmt::join(in, ", "));
      for (int o = 0; o < O; ++o) w.line("y{}[u] = {};", o, store_conversion(result(o), out(o), fmt::format("r{}", o)));
    }
    for (int o = 0; o < O; ++o) {
      const std::string to = named("to", o), y = named("y", o);
      w.line("{}* {} = {} + (batch * M + m[g]) * N + n8[g];", storage_type(out(o)), to, named("out", o));
      w.line("if (n8[g] + 8 <= N && fz_aligned8({})) fz_copy8({}, {});", to, to, y);
      w.line("else for (int u = 0; u < 8 && n8[g] + u < N; ++u) {}[u] = {}[u];", to, y);
    }
  };
  // The loop's arrays: each group's row, first column, place in the staged tile, and loaded values
  const auto write_group_arrays = [&] {
    w.line("long long m[FZ_AHEAD], n8[FZ_AHEAD];  // each group's row and first column");
    w.line("int at[FZ_AHEAD];                    // ... and where it lies in the staged tile");
    w.line("bool live[FZ_AHEAD];");
    for (int p = 0; p < P; ++p)
      if (p != pp) w.line("alignas(16) {} x{}[FZ_AHEAD][8] = {{}};", storage_type(pdt[p]), p);
    if (hopper) w.line("alignas(16) unsigned short product[FZ_AHEAD][8];");
  };

  const auto write_epilogue = [&](std::string_view first, std::string_view step) {
    w.line("#pragma unroll 1");
    auto loop = w.block("for (int e0 = {}; e0 < FZ_BM * FZ_BN; e0 += {} * FZ_AHEAD)", first, step);
    write_group_arrays();
    w.line("#pragma unroll");
    {
      auto reads = w.block("for (int g = 0; g < FZ_AHEAD; ++g)");
      w.line("const int e = e0 + g * {}, r = e / FZ_BN, c0 = e % FZ_BN;", step);
      w.line("m[g] = m0 + r, n8[g] = n0 + c0, at[g] = r * FZ_C_LD + c0;");
      w.line("live[g] = e < FZ_BM * FZ_BN && m[g] < M;");
      w.line("if (!live[g]) continue;");
      w.line("const bool whole = n8[g] + 8 <= N;");
      if (hopper) w.line("*reinterpret_cast<uint4*>(product[g]) = *reinterpret_cast<const uint4*>(cs + at[g]);");
      for (int p = 0; p < P; ++p) {
        if (p == pp) continue;
        // contiguous along the row and aligned: one vector load of the 8 (a bias along the columns, a residual)
        w.line("const {0}* at{1} = in{1} + batch * st{1}.v[0] + m[g] * st{1}.v[1] + n8[g] * st{1}.v[2];",
               storage_type(pdt[p]), p);
        // (stored values: converted where they are used, so that no branch here waits for its loads)
        w.line("if (whole && st{0}.v[2] == 1 && fz_aligned8(at{0})) fz_copy8(x{0}[g], at{0});", p);
        w.line("else for (int u = 0; u < 8; ++u) if (n8[g] + u < N) x{0}[g][u] = at{0}[u * st{0}.v[2]];", p);
      }
    }
    write_results();
  };

  // The Hopper path's epilogue warps alone (every tile of a block but its last): their 96 x 8 elements are whole
  // rows of the tile, so each thread keeps one group of 8 columns through the tile, taking its column checks and
  // addresses, and the inputs the same in every row (a bias), once a tile, before the wait for the staged tile (so
  // that the bias's load passes while the consumers finish the tile's products: the first version, which loaded
  // it after the wait, put that latency in front of every tile's residual loads and was slower with a residual).
  // H200, 8192x14336x4096 on 128x192 tiles, batches of 10 calls against the bare cuBLASLt product: the generic
  // loop (27 instructions an element; the three warps in it 89% of the time) 1.017-1.022x with a scale alone for
  // the epilogue, 1.050-1.056x + bias, 1.103-1.114x + residual; this one 1.008x, 1.021-1.023x, 1.053-1.058x.
  const auto write_columns_setup = [&] {
    w.line("constexpr int FZ_ROW_STEP = FZ_EPILOGUE * 8 / FZ_BN;  // rows from one of a thread's groups to the next");
    w.line("static_assert(FZ_EPILOGUE * 8 % FZ_BN == 0, \"the epilogue warps' groups of 8 columns repeat every row\");");
    w.line("const int c0 = (threadIdx.x - 32) * 8 % FZ_BN, r_first = (threadIdx.x - 32) * 8 / FZ_BN;");
    w.line("const long long n8c = n0 + c0;");
    w.line("const bool whole = n8c + 8 <= N;");
    for (int p = 0; p < P; ++p) {
      if (p == pp) continue;
      const std::string T(storage_type(pdt[p]));
      w.line("const {0}* col{1} = in{1} + batch * st{1}.v[0] + n8c * st{1}.v[2];  // row 0 of this thread's columns", T, p);
      w.line("const bool vec{0} = whole && st{0}.v[2] == 1 && fz_aligned8(col{0}) && fz_aligned8(col{0} + st{0}.v[1]);", p);
      w.line("alignas(16) {} same{}[8] = {{}};  // the values where they are the same in every row", T, p);
      auto once = w.block("if (!last && st{}.v[1] == 0 && n8c < N)", p);
      w.line("if (vec{0}) fz_copy8(same{0}, col{0});", p);
      w.line("else for (int u = 0; u < 8; ++u) if (n8c + u < N) same{0}[u] = col{0}[u * st{0}.v[2]];", p);
    }
  };
  const auto write_columns_loop = [&] {
    w.line("#pragma unroll 1");
    auto loop = w.block("for (int r0 = r_first; r0 < FZ_BM && n8c < N; r0 += FZ_ROW_STEP * FZ_AHEAD)");
    write_group_arrays();
    w.line("#pragma unroll");
    {
      auto reads = w.block("for (int g = 0; g < FZ_AHEAD; ++g)");
      w.line("const int r = r0 + g * FZ_ROW_STEP;");
      w.line("m[g] = m0 + r, n8[g] = n8c, at[g] = r * FZ_C_LD + c0;");
      w.line("live[g] = r < FZ_BM && m[g] < M;");
      w.line("if (!live[g]) continue;");
      w.line("*reinterpret_cast<uint4*>(product[g]) = *reinterpret_cast<const uint4*>(cs + at[g]);");
      for (int p = 0; p < P; ++p) {
        if (p == pp) continue;
        w.line("if (st{0}.v[1] == 0) fz_copy8(x{0}[g], same{0});", p);
        w.line("else if (vec{0}) fz_copy8(x{0}[g], col{0} + m[g] * st{0}.v[1]);", p);
        w.line("else for (int u = 0; u < 8; ++u) if (n8c + u < N) x{0}[g][u] = col{0}[m[g] * st{0}.v[1] + u * st{0}.v[2]];", p);
      }
    }
    write_results();
  };

  // The kernel: its block closes (the `}` is written) when write_kernel returns.
  const auto write_kernel = [&] {
    const std::string cluster = v.cluster > 1 ? fmt::format(" __cluster_dims__({}, 1, 1)", v.cluster) : "";
    auto kernel = w.block("extern \"C\" __global__ void __launch_bounds__({}, 1){} {}({})", t.threads(), cluster, k.name,
                          sig.list());
    write_wait_for_previous_kernel(w);
    w.line("extern __shared__ __align__(128) unsigned char fz_smem[];");
    w.line("const long long M = shape.v[0], N = shape.v[1], K = shape.v[2];");
    if (hopper) {
      w.line("__shared__ __align__(8) unsigned long long fz_bars[2 * FZ_STAGES + 2];");
      w.line("__shared__ volatile int fz_flags[2];  // this unit is its tile's last; nothing staged");
      w.line("const unsigned base = (fz_shared(fz_smem) + 1023) & ~1023u;  // (the swizzle repeats every 1024 bytes)");
      w.line("unsigned short* cs = reinterpret_cast<unsigned short*>(fz_smem + (base - fz_shared(fz_smem)) + FZ_STAGES * FZ_STAGE);");
      w.line("const long long tiles_m = (M + FZ_BM - 1) / FZ_BM, tiles_n = (N + FZ_BN - 1) / FZ_BN;");
      w.line("const FzTiles tl{{tiles_m, tiles_n, tiles_m * tiles_n * shape.v[9] * shape.v[7], shape.v[8], (int)shape.v[7]}};");
      w.line("const int role = fz_hopper_role(fz_bars);");
      w.line("if (role == 0) fz_produce(base, fz_bars, &ta, &tb, K, tl, shape.v[5] != 0, shape.v[6] != 0);");
      w.line("if (role == 1) fz_consume(cs, base, fz_bars, M, K, tl, {}, fz_flags);",
             v.split ? "fz_partials, fz_counters" : "nullptr, nullptr");
      // (H100, 512x4096x4096 on 128 tiles of 128 x 128, a tile a block: 37.0 us with the epilogue warps alone, 32.5
      // with the consumers joining)
      const auto write_units = [&] {
        w.line("// The epilogue: warps 1-3 every unit, the consumers too the block's last one (nothing left to multiply)");
        w.line("const unsigned staged = fz_shared(fz_bars) + 16 * FZ_STAGES, drained = staged + 8;");
        w.line("unsigned j = 0;  // units");
        auto units = w.block("for (long long unit = blockIdx.x; unit < tl.count; unit += gridDim.x, ++j)");
        w.line("const bool last = unit + gridDim.x >= tl.count;");
        w.line("if (role == 1 && !last) continue;");
        w.line("const int helpers = last ? FZ_EPILOGUE + FZ_CONSUMERS : FZ_EPILOGUE;");
        w.line("int m0, n0, batch;");
        w.line("fz_tile_at(tl, unit, m0, n0, batch);");
        write_columns_setup();
        w.line("fz_bar_wait(staged, j & 1);");
        if (v.split) {  // a unit that was not its tile's last staged nothing
          auto skip = w.block("if (fz_flags[1])");
          w.line("if (role == 2) fz_bar_arrive(drained);");
          w.line("continue;");
        }
        {
          {
            auto alone = w.block("if (!last)");
            write_columns_loop();
          }
          auto joined = w.block("else");
          write_epilogue("(threadIdx.x - 32) * 8", "helpers * 8");
        }
        w.line("if (role == 2) fz_bar_arrive(drained);");
      };
      if (v.cluster == 1) {
        w.line("if (role <= 0) return;");
        write_units();
        return;
      }
      {  // in a cluster no block leaves while another may still copy into it or arrive at its barriers
        auto working = w.block("if (role > 0)");
        write_units();
      }
      w.line("fz_cluster_meet();");
      return;
    }
    w.line("const long long tiles_n = (N + FZ_BN - 1) / FZ_BN, batch = blockIdx.y;");
    if (v.split) {  // blocks of one tile are neighbours: blockIdx.x = tile * split + slice
      w.line("const int split = (int)shape.v[7], slice = (int)(blockIdx.x % split);");
      w.line("const long long tile = blockIdx.x / split, k_begin = slice * shape.v[8];");
      w.line("const long long k_end = k_begin + shape.v[8] < K ? k_begin + shape.v[8] : K;");
    } else {
      w.line("const long long tile = blockIdx.x, k_begin = 0, k_end = K;");
    }
    w.line("const long long m0 = tile / tiles_n * FZ_BM, n0 = tile % tiles_n * FZ_BN;");
    w.line("float* cs = reinterpret_cast<float*>(fz_smem);");
    w.line("fz_product_tile(cs, reinterpret_cast<unsigned short*>(fz_smem), a + batch * shape.v[5], b + batch * shape.v[6], "
           "M, N, k_begin, k_end, shape.v[3], shape.v[4], m0, n0);");
    if (v.split) {
      w.line("const long long tile_id = batch * (gridDim.x / split) + tile;  // (its counter and partials)");
      w.line("if (!fz_sum_slices(cs, fz_partials + tile_id * split * FZ_BM * FZ_BN, fz_counters + tile_id, split, slice)) return;");
    }
    write_epilogue("threadIdx.x * 8", "FZ_THREADS * 8");
  };
  write_kernel();
  k.source = w.str();
  return k;
}

}  // namespace fusion::codegen
