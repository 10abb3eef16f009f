// SPDX-License-Identifier: Apache-2.0
#include "schedule/layout.hpp"

#include "schedule/matmul_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <new>

#include "codegen/emit_common.hpp"
#include "codegen/join_tests.hpp"
#include "codegen/launch_shape.hpp"
#include "fusion/error.hpp"
#include "schedule/call_graph.hpp"
#include "schedule/graph_walk.hpp"
#include "schedule/pieces.hpp"
#include "schedule/stepped.hpp"
#include "schedule/reduce_layout.hpp"
#include "schedule/tuning.hpp"

namespace fusion::detail {

using codegen::Access;
using codegen::kMaxOutputs;
using codegen::kMaxParams;
using codegen::Variant;

std::int64_t max_offset(const Strides& st, const Shape& shape) {
  std::int64_t m = 0;
  for (int i = 0; i < shape.size(); ++i) m += (st[i] < 0 ? -st[i] : st[i]) * (shape[i] - 1);
  return m;
}

void collapse_dims(const Shape& full, const Strides* st, int n_ops, Shape& shape, Strides* out) {
  shape = Shape();
  for (int k = 0; k < n_ops; ++k) new (&out[k]) Strides();
  for (int d = 0; d < full.size(); ++d) {
    if (full[d] == 1) continue;
    bool merge = !shape.empty();
    for (int k = 0; merge && k < n_ops; ++k) merge = out[k][shape.size() - 1] == st[k][d] * full[d];
    if (merge) {
      shape[shape.size() - 1] *= full[d];
      for (int k = 0; k < n_ops; ++k) out[k][out[k].size() - 1] = st[k][d];
    } else {
      shape.push_back(full[d]);
      for (int k = 0; k < n_ops; ++k) out[k].push_back(st[k][d]);
    }
  }
  if (shape.empty()) {  // a single element
    shape.push_back(1);
    for (int k = 0; k < n_ops; ++k) out[k].push_back(1);
  }
}

void check_operand_count(const Call& c) {
  if (c.n_arrays > kMaxParams)
    throw Error(fmt::format("an expression may have at most {} array operands in one kernel (it has {}; an array "
                            "used twice counts twice): evaluate a part first with fz::eval",
                            kMaxParams, c.n_arrays));
}

int distinct_params(const Call& c, const ArrayBase** params, std::array<std::uint8_t, kMaxParams>& param_of_slot) {
  check_operand_count(
      c);  // param_of_slot has one entry per array operand: more would write past it (found by the fuzzer)
  // A gather's source is read through a pointer, never loaded per element: it shares a parameter only
  // with other gathers' sources.
  // (every assignment passes here: without a gather, nothing is allocated)
  const std::vector<bool> gathered = gather_sources(c);
  auto is_gathered = [&](int s) { return !gathered.empty() && gathered[static_cast<std::size_t>(s)]; };
  std::array<bool, kMaxParams> param_gathered{};
  int np = 0;
  for (int s = 0; s < c.n_arrays; ++s) {
    int p = 0;
    while (p < np && !(same_view(*params[p], *c.arrays[s]) && param_gathered[static_cast<std::size_t>(p)] == is_gathered(s))) ++p;
    if (p == np) {
      if (np == kMaxParams)
        throw Error(fmt::format("an expression may read at most {} distinct arrays in one kernel", kMaxParams));
      params[np++] = c.arrays[s];
      param_gathered[static_cast<std::size_t>(np - 1)] = is_gathered(s);
    }
    param_of_slot[static_cast<std::size_t>(s)] = static_cast<std::uint8_t>(p);
  }
  return np;
}

std::vector<bool> gather_sources(const Call& c) {
  std::vector<bool> gathered;
  const ir::Graph& g = graph_of(c);
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::gather) {
      gathered.resize(static_cast<std::size_t>(c.n_arrays), false);
      gathered[g.nodes[n.b].slot] = true;
    }
  return gathered;
}

bool same_view(const ArrayBase& a, const ArrayBase& b) {
  if (&a == &b) return true;
  if (!a.memory_identity() || a.memory_identity() != b.memory_identity()) return false;
  // The same memory: the offsets tell the addresses apart (without asking for them: a region's deferred
  // memory is not allocated to be compared).
  return a.offset() * static_cast<std::int64_t>(itemsize(a.dtype())) ==
             b.offset() * static_cast<std::int64_t>(itemsize(b.dtype())) &&
         a.dtype() == b.dtype() && a.shape() == b.shape() && a.strides() == b.strides();
}

Strides broadcast_strides(const ArrayBase& a, const Shape& shape) {
  Strides st;
  st.resize(shape.size());
  const int lead = shape.size() - a.ndim();
  for (int i = 0; i < shape.size(); ++i) {
    const int j = i - lead;
    st[i] = (j < 0 || a.shape()[j] == 1) ? 0 : a.strides()[j];
  }
  return st;
}

Shape broadcast_shape_of(const Call& c) {
  Shape s;
  for (int i = 0; i < c.n_arrays; ++i) s = broadcast_shapes(s, c.arrays[i]->shape());
  return s;
}

bool shares_memory(const ArrayBase& a, const ArrayBase& b) {
  if (a.memory_identity() != b.memory_identity() || !a.memory_identity() || a.size() == 0 || b.size() == 0)
    return false;
  const auto span = [](const ArrayBase& x) {
    std::int64_t lo = 0, hi = 0;
    for (int d = 0; d < x.ndim(); ++d) (x.strides()[d] < 0 ? lo : hi) += x.strides()[d] * (x.shape()[d] - 1);
    const auto base = x.offset() * static_cast<std::int64_t>(itemsize(x.dtype()));  // same memory: offsets suffice
    const auto w = static_cast<std::int64_t>(itemsize(x.dtype()));
    return std::pair{base + lo * w, base + (hi + 1) * w};
  };
  const auto [a0, a1] = span(a);
  const auto [b0, b1] = span(b);
  return a0 < b1 && b0 < a1;
}

Shape index_space(const ArrayBase* const* outs, int K) {
  Shape s;
  for (int k = 0; k < K; ++k) s = broadcast_shapes(s, outs[k]->shape());
  return s;
}

namespace {

/// Whether parameter `p` is read only through a pointer, element by element (a gather's source), so that its
/// alignment does not matter: asked only of a parameter off the vector boundary, not on every launch; the answer
/// for all parameters is kept in `pointer` for the rest of the call.
bool read_through_pointer(const Call& c, const Layout& L, int p, std::vector<bool>& pointer) {
  if (pointer.empty()) pointer = codegen::gathered_params(graph_of(c), L.v.param_of_slot, L.v.n_params);
  return pointer[static_cast<std::size_t>(p)];
}

/// A rows kernel instead of N-d indexing, when every output is contiguous and every input walks the last
/// dimension contiguously (a bias row, a view of rows) or not at all (a per-row scale): offsets are then
/// computed once per row and the last dimension streams, in 16-byte vectors where every pointer allows.
void try_rows(const Call& c, const ArrayBase* const* outs, int K, Layout& L) {
  const int R = L.v.rank, np = L.v.n_params;
  if (R < 2) return;
  for (int k = 0; k < K; ++k)
    if (L.v.out_access[k] != Access::contiguous) return;
  // (an input stepping along the rows at 2 to 4 elements, `q[..., ::2]` of a view of wider rows: whole vectors of the
  // rows it steps through, as a linear kernel reads Access::stepped)
  const std::int64_t step = common_step(c, K, L, R - 1);
  if (step < 0) return;
  // (a join's tests of where an element lies: each along whole rows, so that the kernel finds an element's
  // position from its row's and its column, as emit_elementwise writes a rows kernel)
  if (joins(c) && !periods_whole_rows(c, L.space, L.shape[R - 1])) return;
  L.v.rows = true;
  L.v.step = static_cast<std::uint8_t>(step);
  std::size_t widest = 1;
  for (int k = 0; k < K; ++k) widest = std::max(widest, itemsize(outs[k]->dtype()));
  for (int p = 0; p < np; ++p) {
    Access& a = L.v.access[static_cast<std::size_t>(p)];
    if (a == Access::broadcast) continue;
    const std::int64_t inner = L.strides[K + p][R - 1];
    a = inner == 0 ? Access::row : inner == 1 ? Access::along : Access::stepped;
    if (a != Access::row) widest = std::max(widest, itemsize(L.params[p]->dtype()));
  }
  // Vectors need whole vectors per row, aligned pointers and rows that start on a vector boundary.
  const std::int64_t V = static_cast<std::int64_t>(codegen::kVectorBytes / widest);
  bool ok = V > 1 && L.shape[R - 1] % V == 0;
  for (int k = 0; k < K && ok; ++k) ok = vector_aligned(*outs[k], V);
  std::vector<bool> pointer;
  bool pointers_fit = true;  // (every array read through a pointer along the rows is aligned for vectors too)
  for (int p = 0; p < np && ok; ++p) {
    const Access a = L.v.access[static_cast<std::size_t>(p)];
    if (a == Access::stepped) {
      // Every row as far past a vector boundary, by less than the step; rows at increasing addresses (no row read
      // twice: a stride of 0 would repeat one row), so that a row's last vector, which may reach past its last
      // element, reaches into the next row's span, and only the last row's is read element by element
      // (codegen/emit_elementwise.cpp).
      ok = stepped_phase(*L.params[p], V, L.v.step, L.v.step_phase[static_cast<std::size_t>(p)]);
      for (int d = 0; d < R - 1 && ok; ++d) ok = L.strides[K + p][d] % V == 0 && L.strides[K + p][d] > 0;
      continue;
    }
    if (a != Access::along) continue;
    bool fits = vector_aligned(*L.params[p], V);
    for (int d = 0; d < R - 1 && fits; ++d) fits = L.strides[K + p][d] % V == 0;
    if (!fits) ok = read_through_pointer(c, L, p, pointer);  // (a padded operand may sit off the boundary)
    pointers_fit = pointers_fit && fits;
  }
  L.v.vector_width = static_cast<std::uint8_t>(ok ? V : 1);
  if (!ok) L.v.step_phase = {};
  // A join whose pieces begin and end on vector boundaries, in arrays aligned for vectors: fz_expr computes a
  // vector at once, its piece chosen once and loaded as vectors (an 8-piece join of rows of 4,096 float32 on an
  // H200: 82.6% of the copy limit tested and loaded per element, 96.7% so).
  L.v.vector_joins = ok && pointers_fit && step == 0 && joins(c) && codegen::lanes_alike(graph_of(c)) &&
                     bounds_whole_vectors(c, L.space, V);
  // 32-bit row and column indices need room past the last row and column for the grid-stride steps.
  if (L.n > INT_MAX / 2) L.v.index64 = true;
}

/// A tiles kernel instead of N-d indexing, when every output is contiguous and some input walks the
/// second-to-last dimension contiguously (`x + x.T`, `a.transpose() * b`): blocks take kTile x kTile
/// tiles of the last two dimensions, such inputs are read along their own contiguous axis into shared
/// memory and the outputs written along theirs; other inputs are read at row and column offsets (two
/// multiplications per element, no div/mod). Both extents must hold half a tile at least.
void try_tiles(const Call& c, int K, Layout& L) {
  const int R = L.v.rank, np = L.v.n_params;
  if (R < 2 || L.shape[R - 1] < codegen::kTile / 2 || L.shape[R - 2] < codegen::kTile / 2) return;
  for (int k = 0; k < K; ++k)
    if (L.v.out_access[k] != Access::contiguous) return;
  int shared = 0;
  bool any = false;
  const std::vector<bool> gathered = codegen::gathered_params(graph_of(c), L.v.param_of_slot, np);
  for (int p = 0; p < np; ++p) {
    Access& a = L.v.access[static_cast<std::size_t>(p)];
    if (a != Access::strided || gathered[p]) continue;  // a gather's source is read where its index says
    const Strides& st = L.strides[K + p];
    const int bytes = codegen::kTile * (codegen::kTile + 1) * static_cast<int>(itemsize(L.params[p]->dtype()));
    if (st[R - 2] == 1 && st[R - 1] != 1 && shared + bytes <= codegen::kTileSharedBytes) {
      a = Access::across;
      shared += bytes;
      any = true;
    }
  }
  if (!any) return;
  L.v.tiles = true;
  for (int p = 0; p < np; ++p) {  // the rest are read at their row and column offsets
    Access& a = L.v.access[static_cast<std::size_t>(p)];
    if (a == Access::contiguous) a = Access::strided;
  }
}

/// A scatter whose target view is one element for every element of the index space (all strides 0: the offset
/// alone addresses the target), with unit stride along the axis and at most kPrivateBinBytes of 4- or 8-byte
/// elements: each block adds into its own copy in shared memory. The extent and the stride are the scalars
/// fz::index_add passes (the offset is take_index(i, extent) * stride).
void try_private_bins(const Call& c, const ArrayBase& out, Layout& L) {
  constexpr std::int64_t kPrivateBinBytes = 32 * 1024;
  for (std::int64_t s : L.strides[0])
    if (s != 0) return;
  const std::size_t width = itemsize(out.dtype());
  if (width < 4 || is_16bit_float(out.dtype())) return;
  const ir::Graph& g = graph_of(c);
  const ir::Node& scatter = g.nodes[g.outputs[0]];
  const ir::Node& offset = g.nodes[scatter.a];
  if (offset.op != ir::Op::mul) return;
  const ir::Node& index = g.nodes[offset.a], &stride = g.nodes[offset.b];
  if (index.op != ir::Op::take_index || stride.op != ir::Op::scalar || g.nodes[index.b].op != ir::Op::scalar) return;
  const std::int64_t step = static_cast<std::int64_t>(c.scalars[stride.slot].bits);
  const std::int64_t extent = static_cast<std::int64_t>(c.scalars[g.nodes[index.b].slot].bits);
  if (step != 1 || extent <= 0 || extent * static_cast<std::int64_t>(width) > kPrivateBinBytes) return;
  L.v.private_bins = true;
  L.bins = extent;
}

}  // namespace

void analyze(const Call& c, const ArrayBase* const* outs, int K, Layout& L) {
  L.v = Variant{};
  L.v.n_outputs = static_cast<std::uint8_t>(K);
  for (int k = 0; k < K; ++k) L.v.out_dtype[k] = outs[k]->dtype();
  const Shape full = index_space(outs, K);
  L.n = numel(full);
  L.space = full;

  const int np = distinct_params(c, L.params, L.v.param_of_slot);
  L.v.n_params = static_cast<std::uint8_t>(np);

  // Operands 0..K-1 are the outputs; K.. are the parameters. Collapse dimensions that every operand
  // walks contiguously, and drop extent-1 dimensions, so most calls become one linear loop.
  StridesSlots<kMaxParams + kMaxOutputs> st;
  for (int k = 0; k < K; ++k) new (&st[k]) Strides(broadcast_strides(*outs[k], full));
  for (int p = 0; p < np; ++p) new (&st[K + p]) Strides(broadcast_strides(*L.params[p], full));
  const int n_ops = np + K;
  collapse_dims(full, st.data(), n_ops, L.shape, L.strides.data());
  L.v.rank = static_cast<std::uint8_t>(L.shape.size());

  const Strides dense = contiguous_strides(L.shape);
  auto classify = [&](const Strides& s, bool output) {
    bool zero = !output, some_zero = false;
    for (int d = 0; d < s.size(); ++d) {
      zero = zero && s[d] == 0;
      some_zero = some_zero || (s[d] == 0 && L.shape[d] > 1);
    }
    if (zero && L.n > 1) return Access::broadcast;
    if (output && some_zero) return Access::broadcast;  // a smaller output of fz::tie
    return s == dense ? Access::contiguous : Access::strided;
  };
  for (int k = 0; k < K; ++k) L.v.out_access[k] = classify(L.strides[k], true);
  // A scatter's target (fz::index_add) is addressed by its strides, 0 along the index's axes: every element
  // adds into it, none is skipped as a smaller output's broadcast copies are.
  const ir::Graph& graph = graph_of(c);
  if (K == 1 && ir::is_scatter(graph.nodes[graph.outputs[0]].op)) {
    L.v.out_access[0] = Access::strided;
    try_private_bins(c, *outs[0], L);
  }
  for (int p = 0; p < np; ++p) L.v.access[static_cast<std::size_t>(p)] = classify(L.strides[K + p], false);

  bool wide = L.n > INT_MAX;
  for (int k = 0; k < n_ops && !wide; ++k) wide = max_offset(L.strides[k], L.shape) > INT_MAX;
  L.v.index64 = wide;

  for (int p = 0; p < np; ++p)
    for (int k = 0; k < K; ++k)
      if (L.params[p]->storage() && L.params[p]->storage() == outs[k]->storage()) L.v.out_aliases_input = true;

  if (L.v.has_strided()) try_stepped(c, K, L);
  if (L.v.has_strided()) try_rows(c, outs, K, L);
  if (L.v.has_strided()) try_tiles(c, K, L);

  if (!L.v.has_strided() && !L.v.rows && !L.v.tiles) {  // linear: 16-byte vectors when every pointer allows
    std::size_t widest = 1;
    for (int k = 0; k < K; ++k) widest = std::max(widest, itemsize(outs[k]->dtype()));
    const auto streamed = [&](int p) {  // (read as vectors: a stepped input's are of the array it steps through)
      const Access a = L.v.access[static_cast<std::size_t>(p)];
      return a == Access::contiguous || a == Access::stepped;
    };
    for (int p = 0; p < np; ++p)
      if (streamed(p)) widest = std::max(widest, itemsize(L.params[p]->dtype()));
    const std::size_t V = codegen::kVectorBytes / widest;
    bool aligned = V > 1;
    for (int k = 0; k < K && aligned; ++k) aligned = vector_aligned(*outs[k], static_cast<std::int64_t>(V));
    std::vector<bool> pointer;
    for (int p = 0; p < np && aligned; ++p) {
      if (!streamed(p) || vector_aligned(*L.params[p], static_cast<std::int64_t>(V))) continue;
      if (L.v.access[static_cast<std::size_t>(p)] == Access::contiguous) {
        aligned = read_through_pointer(c, L, p, pointer);
        continue;
      }
      aligned = stepped_phase(*L.params[p], static_cast<std::int64_t>(V), L.v.step, L.v.step_phase[static_cast<std::size_t>(p)]);
    }
    L.v.vector_width = static_cast<std::uint8_t>(aligned ? V : 1);
    if (!aligned) L.v.step_phase = {};
  }
}

std::vector<Shape> node_shapes(const Call& c) {
  const ir::Graph& g = graph_of(c);
  std::vector<Shape> shape(g.nodes.size()), iota(g.nodes.size());
  const auto pass = [&] {
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      shape[i] = Shape();
      if (n.op == ir::Op::input) shape[i] = c.arrays[n.slot]->shape();
      else if (n.op == ir::Op::iota) shape[i] = iota[i];
      else if (ir::is_reduction(n.op)) shape[i] = reduced_shapes(shape[n.a], c.reductions[n.slot]).out;
      else if (ir::is_scan(n.op)) shape[i] = shape[n.a];  // (its axis is checked where it runs)
      else if (ir::is_product(n.op)) shape[i] = matmul_shape(shape[n.a], shape[n.b]);
      else if (n.op != ir::Op::scalar)
        for (std::uint32_t o : {n.a, n.b, n.c})
          if (o != ir::kNone) shape[i] = broadcast_shapes(shape[i], shape[o]);
    }
  };
  pass();  // (an index as a scalar first)
  // The index (fz::random) is the element's in its region: the elementwise tree below an output or a reduction's,
  // scan's or product's operand, whose shape the first pass found. (Not the whole call's broadcast: in
  // `sum(x != matmul(a, b)) + random::bits(s)` that took in x and the product, found by fusion-fuzz, case 95000598.)
  bool any = false;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) any = any || g.nodes[i].op == ir::Op::iota;
  if (!any) return shape;
  std::vector<std::uint32_t> tops(g.outputs.begin(), g.outputs.end());
  for (const ir::Node& n : g.nodes) {
    if (ir::is_reduction(n.op) || ir::is_scan(n.op) || ir::is_product(n.op)) tops.push_back(n.a);
    if (ir::is_product(n.op)) tops.push_back(n.b);
  }
  for (std::uint32_t top : tops)
    walk_below(g, top, [&](std::uint32_t i) {
      const ir::Node& n = g.nodes[i];
      if (n.op == ir::Op::iota) iota[i] = broadcast_shapes(iota[i], shape[top]);
      return !ir::is_reduction(n.op) && !ir::is_scan(n.op) && !ir::is_product(n.op);
    });
  pass();
  return shape;
}

void plan_exact_scatter(int words, const codegen::TargetDevice& device, Layout& L) {
  L.v.exact_words = static_cast<std::uint8_t>(words);
  if (L.v.private_bins && L.bins * words * 8 * 2 > static_cast<std::int64_t>(device.max_shared_per_sm))
    L.v.private_bins = false;
}

bool loops_over_vectors(const ir::Graph& g) {
  bool narrow = false;
  int ops = 0;
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::call) return true;
    narrow = narrow || is_16bit_float(n.dtype);
    ops += ir::op_info(n.op).arity != ir::Arity::leaf && n.op != ir::Op::cast;
  }
  return narrow && ops >= kLoopingMathOps;
}

std::int64_t linear_grid(std::int64_t work, bool loops, int sms) {
  std::int64_t blocks = std::min<std::int64_t>((work + codegen::kBlockThreads - 1) / codegen::kBlockThreads, codegen::kMaxGridX);
  // H200, 2^26 float32 (fusion-bench --random --tune linear_blocks_per_sm=N, bench/results/random/): uniform a thread a
  // vector 91.2 us, 16 / 32 blocks an SM looping 67.3 / 64.4 us; dropout 147.3 -> 140.0 us at 32. 16-bit math: above.
  if (loops && tuning().linear_call_blocks_per_sm > 0)
    blocks = std::min<std::int64_t>(blocks, std::int64_t{sms} * tuning().linear_call_blocks_per_sm);
  if (const int cap = tuning().linear_blocks_per_sm; cap > 0) blocks = std::min<std::int64_t>(blocks, std::int64_t{sms} * cap);
  return blocks;
}

}  // namespace fusion::detail
