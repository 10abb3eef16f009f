// SPDX-License-Identifier: Apache-2.0
// A product step and the elementwise step reading it, as one generated kernel (codegen/emit_product), while
// fz::GeneratedProducts is on. Everything the kernel does not cover declines (false, nothing written) and
// the plan runs the two steps as before (cuBLASLt, then the fused epilogue kernel).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <array>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "fusion/modes.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/exec/kernel_for.hpp"
#include "runtime/cuda/held_work.hpp"
#include "runtime/exec/launch.hpp"
#include "runtime/exec/product_race.hpp"
#include "schedule/call_graph.hpp"
#include "schedule/matmul_layout.hpp"
#include "schedule/product_layout.hpp"
#include "schedule/reduce_layout.hpp"

namespace fusion::detail {

using codegen::ProductTiles;
using codegen::ProductVariant;

namespace {

/// How one call runs as a generated product: the variant and the values its launch takes.
struct ProductLaunch {
  ProductOperands operands;
  ProductVariant v;
  Shape shape;                      // the result's
  std::int64_t dims[codegen::kProductDims] = {};
  std::vector<std::array<std::int64_t, 3>> strides;  // per epilogue parameter: batch, row, column
  std::vector<const ArrayBase*> params;               // per epilogue parameter (the product's null)
  std::int64_t batch = 1, tiles = 0, blocks = 0;  // (blocks: ProductLayout's)
  bool raced = false;                              // ... whether the default route races it (else why not)
  const char* unraced = "";
  std::vector<ProductLayout> layouts;              // the candidates, the planned one (taken above) first
};

/// `v` laid out as `lay`.
ProductVariant laid_out(ProductVariant v, const ProductLayout& lay) {
  v.tiles = lay.tiles;
  v.async = lay.async;
  v.split = lay.split > 1;
  v.cluster = static_cast<std::uint8_t>(lay.cluster);
  return v;
}

/// `P` laid out as `lay`.
void take_layout(ProductLaunch& P, const ProductLayout& lay) {
  P.v = laid_out(P.v, lay);
  P.tiles = lay.tile_count;
  P.blocks = lay.blocks;
  P.raced = lay.raced;
  P.unraced = lay.unraced;
  P.dims[7] = lay.split;
  P.dims[8] = lay.slice;
}

bool aligned16(const ArrayBase& a) { return a.data_ptr() % 16 == 0; }

/// Whether `x` broadcasts to `shape` unchanged.
bool broadcasts_into(const Shape& x, const Shape& shape) {
  if (x.size() > shape.size()) return false;
  for (int d = 1; d <= x.size(); ++d)
    if (x[x.size() - d] != 1 && x[x.size() - d] != shape[shape.size() - d]) return false;
  return true;
}

/// `x`'s strides over the result {batch, row, column}, its batch axes collapsed into one stride as the
/// result's C order numbers its batch items; false where they do not collapse.
bool epilogue_strides(const ArrayBase& x, const Shape& shape, std::array<std::int64_t, 3>& s) {
  const Strides st = broadcast_strides(x, shape);
  const int R = shape.size();
  s = {0, st[R - 2], st[R - 1]};
  std::int64_t inner = 0;  // batch items the batch axes after axis d number (0: none of them is longer than 1)
  for (int d = R - 3; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (inner == 0) {
      s[0] = st[d];
    } else if (st[d] != s[0] * inner) {
      return false;
    }
    inner = (inner == 0 ? 1 : inner) * shape[d];
  }
  return true;
}

/// The launch of product call `pc` with epilogue call `ec` (the product read through the slots marked in
/// `product_slot`), or false where the generated kernel does not cover it. `running`: the arrays hold memory
/// on `device` (fz::inspect's placeholders hold none).
bool plan_launch(const Call& pc, const Call& ec, const std::vector<bool>& product_slot, int device, bool running,
                 ProductLaunch& P) {
  const ProductOperands& o = P.operands = product_operands(pc);
  const ArrayBase &a = *o.a, &b = *o.b;
  const DType d = a.dtype();
  if ((d != DType::float16 && d != DType::bfloat16) || b.dtype() != d || o.scale != 1) return false;
  if (planned_device(device).compute_major < 8 || a.ndim() < 2 || b.ndim() < 2) return false;
  const MatmulLayout L = matmul_layout(a.shape(), a.strides(), b.shape(), b.strides());
  if (L.copy_a || L.copy_b || !L.outer_shape.empty() || L.m == 0 || L.n == 0 || L.k == 0 || L.batch == 0 || L.batch > 65535) return false;
  const ir::Graph& g = graph_of(ec);
  if (!codegen::is_product_epilogue(g)) return false;
  P.shape = L.out_shape;
  P.batch = L.batch;
  ProductVariant& v = P.v;
  v.operand = d;
  v.a_rows = !L.second.transpose;  // (cuBLASLt's second operand is ours a, its first ours b)
  v.b_rows = !L.first.transpose;
  const std::int64_t lda = L.second.ld, ldb = L.first.ld;
  const std::int64_t sa = L.second.batch_stride, sb = L.first.batch_stride;
  const std::int64_t dims[] = {L.m, L.n, L.k, lda, ldb, sa, sb, 1, L.k, L.batch};
  std::copy(std::begin(dims), std::end(dims), P.dims);
  // The epilogue's arrays: the product's slots one parameter, the others one per distinct view.
  int product_param = -1;
  for (int s = 0; s < ec.n_arrays; ++s) {
    int p = -1;
    if (product_slot[static_cast<std::size_t>(s)]) {
      p = product_param;
    } else {
      const ArrayBase& x = *ec.arrays[s];
      if (running && (!x.has_storage() || x.device() != device)) return false;  // (the two steps report it)
      if (!broadcasts_into(x.shape(), P.shape)) return false;  // the epilogue's result is larger, or no result
      for (std::size_t q = 0; q < P.params.size() && p < 0; ++q)
        if (P.params[q] && same_view(*P.params[q], x)) p = static_cast<int>(q);
    }
    if (p < 0) {
      p = static_cast<int>(P.params.size());
      P.params.push_back(product_slot[static_cast<std::size_t>(s)] ? nullptr : ec.arrays[s]);
      P.strides.push_back({});
      if (P.params.back() && !epilogue_strides(*P.params.back(), P.shape, P.strides.back())) return false;
      if (!P.params.back()) product_param = p;
    }
    v.param_of_slot[static_cast<std::size_t>(s)] = static_cast<std::uint8_t>(p);
  }
  if (product_param < 0 || P.params.size() > codegen::kMaxParams) return false;
  v.product_param = static_cast<std::uint8_t>(product_param);
  v.n_params = static_cast<std::uint8_t>(P.params.size());
  P.layouts = product_layouts(L, aligned16(a) && aligned16(b), planned_device(device));
  take_layout(P, P.layouts.front());
  return true;
}

/// The tensor map the Hopper path copies operand `x` through: an `outer` x `inner` matrix (rows `ld` elements
/// apart) of an operand whose other extent is `mn` and whose reduced extent is `k` (`k_inner`: K is the
/// contiguous extent), `batches` of them `batch_stride` apart (0: one, broadcast); boxes of 64 contiguous elements
/// (128 bytes, the swizzle's width) by `box_outer` rows, 128-byte swizzled as wgmma's descriptors read them.
CUtensorMap operand_map(const ArrayBase& x, bool k_inner, std::int64_t mn, std::int64_t k, std::int64_t ld,
                        std::int64_t batch_stride, std::int64_t batches, int box_outer) {
  const std::int64_t inner = k_inner ? k : mn, outer = k_inner ? mn : k;
  const std::uint64_t elem = 2;
  cuuint64_t dims[3] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer),
                        static_cast<cuuint64_t>(batch_stride ? batches : 1)};
  // (a single batch's stride is never used, but it must be a valid one)
  cuuint64_t strides[2] = {static_cast<cuuint64_t>(ld) * elem,
                           static_cast<cuuint64_t>(batch_stride ? batch_stride : ld * outer) * elem};
  cuuint32_t box[3] = {codegen::kHopperBoxInner, static_cast<cuuint32_t>(box_outer), 1};
  cuuint32_t steps[3] = {1, 1, 1};
  CUtensorMap map;
  const auto type = x.dtype() == DType::bfloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  FUSION_CU(cuTensorMapEncodeTiled, &map, type, 3, reinterpret_cast<void*>(x.data_ptr()), dims, strides, box, steps,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return map;
}

/// The clusters of `f`'s `cluster` blocks (`threads`, `shared` bytes each) the device holds at once, asked once per kernel:
/// a persistent grid of more would leave some waiting for others to finish.
std::int64_t resident_clusters(CUfunction f, unsigned cluster, unsigned threads, unsigned shared, CUstream stream) {
  static std::mutex mutex;
  static std::unordered_map<CUfunction, int> known;
  const std::lock_guard lock(mutex);
  if (const auto at = known.find(f); at != known.end()) return at->second;
  CUlaunchConfig c{};
  c.gridDimX = cluster;  // (a whole cluster; the kernel's own dims give its size)
  c.gridDimY = c.gridDimZ = c.blockDimY = c.blockDimZ = 1;
  c.blockDimX = threads;
  c.sharedMemBytes = shared;
  c.hStream = stream;
  int n = 0;
  FUSION_CU(cuOccupancyMaxActiveClusters, &n, f, &c);
  return known[f] = std::max(n, 1);
}

ProductsMode products_mode() {
  static const ProductsMode process = products_mode_by_environment();
  if (mode_flag(Mode::generated_products)) return ProductsMode::generated;
  if (mode_flag(Mode::cublas_products)) return ProductsMode::library;
  if (process == ProductsMode::race && mode_flag(Mode::deterministic)) return ProductsMode::library;
  return process;
}

}  // namespace

ProductsMode products_mode_by_environment() {
  const char* v = std::getenv("FUSION_GENERATED_PRODUCTS");
  std::string s = v ? v : "";
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.empty() || s == "auto") return ProductsMode::race;
  if (s == "1" || s == "on" || s == "yes" || s == "true") return ProductsMode::generated;
  if (s == "0" || s == "off" || s == "no" || s == "false") return ProductsMode::library;
  throw Error(fmt::format("FUSION_GENERATED_PRODUCTS='{}': give auto (time both routes and keep the faster, the "
                          "default), 1 (always the generated kernel) or 0 (always cuBLASLt)", v));
}

namespace {

/// The race's view of `P`'s class: a variant per candidate layout.
RaceClass race_class(const Call& ec, const ProductLaunch& P, int device) {
  RaceClass c{ec.lowered, {}, std::string(ec.name), device, P.dims[0], P.dims[1], P.dims[2], P.batch};
  for (const ProductLayout& lay : P.layouts) c.variants.push_back(laid_out(P.v, lay));
  return c;
}

std::string describe_tiles(const ProductTiles& t, bool split) {
  return fmt::format("{}x{}x{} tiles, {}{}", t.bm, t.bn, t.bk, t.warpgroups ? "Hopper" : "mma.sync", split ? ", K split" : "");
}

}  // namespace

bool generated_products_on(int device) {
  switch (products_mode()) {
    case ProductsMode::generated: return true;
    case ProductsMode::library: return false;
    case ProductsMode::race: break;
  }
  const codegen::TargetDevice d = planned_device(device);  // (only the Hopper path is raced)
  return d.compute_major == 9 && d.compute_minor == 0;
}

bool evaluate_generated_product(const Call& pc, const Call& ec, const std::vector<bool>& product_slot,
                                ArrayBase* const* outs, int n_outs, AssignMode mode, RaceSample& library_timing) {
  const ProductsMode how = products_mode();
  if (how == ProductsMode::library) return false;
  const auto& stream = current_stream_state();
  ProductLaunch P;
  if (!plan_launch(pc, ec, product_slot, stream->device, true, P)) return false;
  if (how == ProductsMode::race && !P.raced) return false;
  const ProductOperands& o = P.operands;
  // Each result is written once, in place: a new array, or an existing C-ordered one of its shape that shares
  // no memory with the operands or the other results (an epilogue array may be a result itself: each element is
  // read by the thread that writes it).
  if (n_outs != static_cast<int>(graph_of(ec).outputs.size())) return false;
  for (int r = 0; r < n_outs; ++r) {
    const ArrayBase& out = *outs[r];
    P.v.out_dtype[static_cast<std::size_t>(r)] = out.dtype();
    if (mode == AssignMode::fresh || !out.has_storage()) continue;
    if (out.shape() != P.shape || !out.is_contiguous() || shares_memory(out, *o.a) || shares_memory(out, *o.b))
      return false;
    for (const ArrayBase* x : P.params)
      if (x && shares_memory(*x, out) && !same_view(*x, out)) return false;
    for (int q = 0; q < r; ++q)
      if (outs[q]->has_storage() && shares_memory(*outs[q], out)) return false;
  }
  P.v.n_outputs = static_cast<std::uint8_t>(n_outs);
  const KernelSlot<ProductVariant>* slot = nullptr;
  RaceSample sample;
  if (how == ProductsMode::race) {
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    FUSION_CU(cuStreamIsCapturing, stream->handle, &capturing);
    RaceCall call = race_call(race_class(ec, P, stream->device), tls_step == nullptr && capturing == CU_STREAM_CAPTURE_STATUS_NONE);
    if (!call.kernel) {
      library_timing = std::move(call.sample);  // (the plan times its two steps into it, where it asks)
      return false;
    }
    slot = call.kernel;
    take_layout(P, P.layouts[static_cast<std::size_t>(call.candidate)]);
    sample = std::move(call.sample);
  }
  bool work = true;
  for (int r = 0; r < n_outs; ++r) work = prepare_output(pc, *outs[r], mode, stream->device, P.shape) && work;
  if (!work) return true;
  const auto& k = slot ? *slot : kernel_for(*ec.lowered, P.v, stream->device, ec.name);
  const int np = P.v.n_params;
  std::vector<std::uint64_t> ptrs(static_cast<std::size_t>(np + 2 + n_outs), 0);
  std::vector<const std::int64_t*> dims(static_cast<std::size_t>(np + 1), P.dims);
  ptrs[0] = o.a->data_ptr();
  ptrs[1] = o.b->data_ptr();
  std::vector<const ArrayBase*> read = {o.a, o.b};
  for (int p = 0; p < np; ++p) {
    if (const ArrayBase* x = P.params[static_cast<std::size_t>(p)]) {
      ptrs[static_cast<std::size_t>(2 + p)] = x->data_ptr();
      read.push_back(x);
    }
    dims[codegen::product_param_strides(p)] = P.strides[static_cast<std::size_t>(p)].data();
  }
  std::vector<const ArrayBase*> written;
  for (int r = 0; r < n_outs; ++r) {
    ptrs[static_cast<std::size_t>(2 + np + r)] = outs[r]->data_ptr();
    written.push_back(outs[r]);
  }
  LaunchArgs args;
  args.pointers = ptrs;
  args.scalars = {ec.scalars, static_cast<std::size_t>(ec.n_scalars)};
  args.dims = dims;
  if (P.v.split) {
    const CUdeviceptr ws = reduction_workspace(*stream);  // (counters at zero, reset by the kernels that use them)
    args.workspace = {ws + kCounterBytes, ws};          // partials, counters
  }
  CUtensorMap maps[2];
  if (P.v.tiles.warpgroups) {
    maps[0] = operand_map(*o.a, P.v.a_rows, P.dims[0], P.dims[2], P.dims[3], P.dims[5], P.batch,
                          P.v.a_rows ? P.v.tiles.bm : P.v.tiles.bk);
    maps[1] = operand_map(*o.b, !P.v.b_rows, P.dims[1], P.dims[2], P.dims[4], P.dims[6], P.batch,
                          P.v.b_rows ? P.v.tiles.bk : P.v.tiles.bn / P.v.cluster);  // (a cluster's share)
    args.tensor_maps = maps;
  }
  std::int64_t blocks = P.blocks;
  if (P.v.cluster > 1)
    blocks = std::min(blocks, P.v.cluster * resident_clusters(k.kernel->function, P.v.cluster, P.v.tiles.threads(), P.v.shared_bytes(),
                                                              stream->handle));
  const Grid grid = P.blocks ? Grid{blocks, 1, static_cast<unsigned>(P.v.tiles.threads()), P.v.shared_bytes()}
                             : Grid{P.tiles * P.dims[7], P.batch, static_cast<unsigned>(P.v.tiles.threads()), P.v.shared_bytes()};
  sample.begin(stream->handle);
  launch_kernel(k.kernel->function, k.signature, args, grid, *stream);
  sample.end(stream->handle);
  note_launch(read, written, stream);
  return true;
}

std::optional<KernelInfo> inspect_generated_product(const Call& pc, const Call& ec, const std::vector<bool>& product_slot,
                                                    std::span<const DType> out_dtypes, std::string& declined) {
  const ProductsMode how = products_mode();
  if (how == ProductsMode::library) return {};
  const int device = device_count() > 0 ? enter_current_device() : -1;
  ProductLaunch P;
  if (!plan_launch(pc, ec, product_slot, device, false, P)) return {};
  if (out_dtypes.size() != graph_of(ec).outputs.size()) return {};
  std::copy(out_dtypes.begin(), out_dtypes.end(), P.v.out_dtype.begin());
  P.v.n_outputs = static_cast<std::uint8_t>(out_dtypes.size());
  const std::string kind = describe_tiles(P.v.tiles, P.v.split);
  std::string why = "chosen by fz::GeneratedProducts";
  if (how == ProductsMode::race) {
    int kept = -1;
    if (!P.raced) {
      declined = fmt::format("the generated kernel ({}) is not raced: {}", kind, P.unraced);
    } else if (device < 0) {
      declined = fmt::format("on a GPU the generated kernel ({}) is timed against cuBLASLt on the first calls", kind);
    } else {
      why = race_words(race_class(ec, P, device), kept);
      if (kept < 0) declined = fmt::format("the generated kernel ({}): {}", kind, why);
    }
    if (kept < 0) return {};
    take_layout(P, P.layouts[static_cast<std::size_t>(kept)]);
  }
  return finish_inspect(generate(*ec.lowered, P.v, ec.name), P.v.describe() + "; " + why);
}

}  // namespace fusion::detail
