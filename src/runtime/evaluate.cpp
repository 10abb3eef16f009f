// SPDX-License-Identifier: Apache-2.0
// Running an expression: layout analysis (which variant), the per-expression kernel list (lock-free on
// the hot path), argument packing and launch; plus the unfused baseline and inspection.
#include <fmt/format.h>

#include <atomic>
#include <climits>
#include <map>
#include <mutex>

#include "codegen/emit_elementwise.hpp"
#include "fusion/error.hpp"
#include "fusion/inspect.hpp"
#include "runtime/device_state.hpp"
#include "runtime/driver.hpp"
#include "runtime/evaluate_internal.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/stats_counters.hpp"
#include "runtime/storage.hpp"

namespace fusion {
namespace detail {

using codegen::Access;
using codegen::kMaxParams;
using codegen::Variant;

namespace {

constexpr int kThreads = 256;

/// One compiled kernel of an expression type, for one variant, device and user name.
struct KernelSlot {
  Variant variant;
  int device;
  std::string name;
  const LoadedKernel* kernel;
  std::vector<std::uint32_t> scalar_slots;  // the scalars the kernel takes, in parameter order
  KernelSlot* next;
};

std::mutex& build_mutex() {
  static std::mutex mu;
  return mu;
}

thread_local bool tls_unfused = false;

/// The grid covers the work, one vector (or element) per thread: measured on an H100, this keeps more
/// loads in flight than a one-wave grid-stride launch (2^26 float32: 100-107% of the device-to-device
/// copy bandwidth against 90-97%; unrolling 2 or 4 vectors per thread did not help once the grid is
/// full). The kernels keep a grid-stride loop for work beyond the largest grid.
constexpr std::int64_t kMaxBlocks = 0x7fffffff;

}  // namespace

struct Lowered {
  ir::Graph graph;      // as lowered: one input slot per array leaf, in pack() order
  ir::Graph canonical;  // without merging inputs (the unfused path walks this)
  std::atomic<KernelSlot*> slots{nullptr};
};

const Lowered& register_lowered(ir::Graph g) {
  auto* l = new Lowered;  // one per expression type, alive for the process
  l->canonical = ir::canonicalize(g);
  l->graph = std::move(g);
  return *l;
}

namespace {

/// The layout facts of one call: the variant plus the run-time values that go with it.
struct Layout {
  Variant v;
  std::int64_t n = 0;
  Shape shape;                        // collapsed
  const ArrayBase* params[kMaxParams];
  Strides strides[kMaxParams + 1];    // collapsed; [0] is the output
};

bool same_view(const ArrayBase& a, const ArrayBase& b) {
  if (&a == &b) return true;
  if (!a.storage() || a.storage() != b.storage()) return false;  // placeholders are distinct unless identical
  return a.data_ptr() == b.data_ptr() && a.dtype() == b.dtype() && a.shape() == b.shape() && a.strides() == b.strides();
}

/// `a`'s strides when broadcast to `shape` (0 along broadcast dimensions).
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

std::int64_t max_offset(const Strides& st, const Shape& shape) {
  std::int64_t m = 0;
  for (int i = 0; i < shape.size(); ++i) m += (st[i] < 0 ? -st[i] : st[i]) * (shape[i] - 1);
  return m;
}

void analyze(const Call& c, const ArrayBase& out, Layout& L) {
  L.v = Variant{};
  L.v.out_dtype = out.dtype();
  const Shape& full = out.shape();
  L.n = numel(full);

  int np = 0;
  for (int s = 0; s < c.n_arrays; ++s) {
    const ArrayBase* a = c.arrays[s];
    int p = 0;
    while (p < np && !same_view(*L.params[p], *a)) ++p;
    if (p == np) {
      if (np == kMaxParams)
        throw Error(fmt::format("an expression may read at most {} distinct arrays in one kernel", kMaxParams));
      L.params[np++] = a;
    }
    L.v.param_of_slot[static_cast<std::size_t>(s)] = static_cast<std::uint8_t>(p);
  }
  L.v.n_params = static_cast<std::uint8_t>(np);

  // Operand 0 is the output; 1.. are the parameters. Collapse dimensions that every operand walks
  // contiguously, and drop extent-1 dimensions, so most calls become one linear loop.
  Strides st[kMaxParams + 1];
  st[0] = out.strides();
  for (int p = 0; p < np; ++p) st[p + 1] = broadcast_strides(*L.params[p], full);
  const int n_ops = np + 1;
  L.shape = Shape();
  for (int k = 0; k < n_ops; ++k) L.strides[k] = Strides();
  for (int d = 0; d < full.size(); ++d) {
    if (full[d] == 1) continue;
    bool merge = !L.shape.empty();
    for (int k = 0; merge && k < n_ops; ++k)
      merge = L.strides[k][L.shape.size() - 1] == st[k][d] * full[d];
    if (merge) {
      L.shape[L.shape.size() - 1] *= full[d];
      for (int k = 0; k < n_ops; ++k) L.strides[k][L.strides[k].size() - 1] = st[k][d];
    } else {
      L.shape.push_back(full[d]);
      for (int k = 0; k < n_ops; ++k) L.strides[k].push_back(st[k][d]);
    }
  }
  if (L.shape.empty()) {  // a single element
    L.shape.push_back(1);
    for (int k = 0; k < n_ops; ++k) L.strides[k].push_back(1);
  }
  L.v.rank = static_cast<std::uint8_t>(L.shape.size());

  const Strides dense = contiguous_strides(L.shape);
  auto classify = [&](const Strides& s) {
    bool zero = true;
    for (std::int64_t x : s) zero = zero && x == 0;
    if (zero && L.n > 1) return Access::broadcast;
    return s == dense ? Access::contiguous : Access::strided;
  };
  L.v.out_access = classify(L.strides[0]);  // never broadcast: prepare_output refuses such views
  for (int p = 0; p < np; ++p) L.v.access[static_cast<std::size_t>(p)] = classify(L.strides[p + 1]);

  bool wide = L.n > INT_MAX;
  for (int k = 0; k < n_ops && !wide; ++k) wide = max_offset(L.strides[k], L.shape) > INT_MAX;
  L.v.index64 = wide;

  for (int p = 0; p < np; ++p)
    if (L.params[p]->storage() && L.params[p]->storage() == out.storage()) L.v.out_aliases_input = true;

  if (!L.v.has_strided()) {
    std::size_t widest = itemsize(out.dtype());
    for (int p = 0; p < np; ++p)
      if (L.v.access[static_cast<std::size_t>(p)] == Access::contiguous)
        widest = std::max(widest, itemsize(L.params[p]->dtype()));
    const std::size_t V = 16 / widest;
    bool aligned = V > 1;
    auto ok = [&](const ArrayBase& a) { return a.data_ptr() % (V * itemsize(a.dtype())) == 0; };
    aligned = aligned && ok(out);
    for (int p = 0; p < np && aligned; ++p)
      if (L.v.access[static_cast<std::size_t>(p)] == Access::contiguous) aligned = ok(*L.params[p]);
    L.v.vector_width = static_cast<std::uint8_t>(aligned ? V : 1);
  }
}

codegen::GeneratedKernel generate(const Lowered& lw, const Variant& v, std::string_view name) {
  std::vector<std::uint32_t> representative(lw.graph.n_inputs);
  for (std::uint32_t s = 0; s < lw.graph.n_inputs; ++s) {
    std::uint32_t r = 0;
    while (v.param_of_slot[r] != v.param_of_slot[s]) ++r;
    representative[s] = r;
  }
  return codegen::emit_elementwise(ir::canonicalize(lw.graph, representative), v, name);
}

const KernelSlot& kernel_for(const Lowered& lw, const Variant& v, int device, std::string_view name) {
  for (KernelSlot* s = lw.slots.load(std::memory_order_acquire); s; s = s->next)
    if (s->device == device && s->variant == v && s->name == name) return *s;
  std::lock_guard lock(build_mutex());
  for (KernelSlot* s = lw.slots.load(std::memory_order_acquire); s; s = s->next)
    if (s->device == device && s->variant == v && s->name == name) return *s;
  codegen::GeneratedKernel k = generate(lw, v, name);
  const LoadedKernel& loaded = load_kernel(k, device);
  auto* slot = new KernelSlot{v, device, std::string(name), &loaded, {},
                              lw.slots.load(std::memory_order_relaxed)};
  for (const ir::Node& n : lw.graph.nodes)
    if (n.op == ir::Op::scalar) slot->scalar_slots.push_back(n.slot);
  std::sort(slot->scalar_slots.begin(), slot->scalar_slots.end());
  const_cast<Lowered&>(lw).slots.store(slot, std::memory_order_release);
  return *slot;
}

void launch(const KernelSlot& k, const Layout& L, const Call& c, const ArrayBase& out,
            const std::shared_ptr<StreamState>& stream) {
  void* args[2 * kMaxParams + 16 + 256];
  std::uint64_t ptrs[kMaxParams + 1];
  int na = 0;
  const int np = L.v.n_params;
  for (int p = 0; p < np; ++p) {
    ptrs[p] = L.params[p]->data_ptr();
    args[na++] = &ptrs[p];
  }
  ptrs[np] = out.data_ptr();
  args[na++] = &ptrs[np];
  if (k.scalar_slots.size() > 256) throw Error("an expression may use at most 256 scalars in one kernel");
  for (std::uint32_t s : k.scalar_slots) args[na++] = const_cast<std::uint64_t*>(&c.scalars[s].bits);
  std::int64_t n = L.n;
  args[na++] = &n;
  if (L.v.has_strided()) {
    args[na++] = const_cast<std::int64_t*>(L.shape.begin());
    for (int p = 0; p < np; ++p)
      if (L.v.access[static_cast<std::size_t>(p)] == Access::strided)
        args[na++] = const_cast<std::int64_t*>(L.strides[p + 1].begin());
    if (L.v.out_access == Access::strided) args[na++] = const_cast<std::int64_t*>(L.strides[0].begin());
  }
  const std::int64_t work = L.v.has_strided() ? L.n : (L.n + L.v.vector_width - 1) / L.v.vector_width;
  const std::int64_t blocks = std::min<std::int64_t>((work + kThreads - 1) / kThreads, kMaxBlocks);
  FUSION_CU(cuLaunchKernel, k.kernel->function, static_cast<unsigned>(blocks), 1, 1, kThreads, 1, 1, 0,
            stream->handle, args, nullptr);

  out.storage()->note_use(stream);
  std::uint64_t read = 0;
  for (int p = 0; p < np; ++p) {
    L.params[p]->storage()->note_use(stream);
    read += static_cast<std::uint64_t>(L.params[p]->size()) * itemsize(L.params[p]->dtype());
  }
  Counters& ctr = counters();
  ctr.launches.fetch_add(1, std::memory_order_relaxed);
  ctr.bytes_read.fetch_add(read, std::memory_order_relaxed);
  ctr.bytes_written.fetch_add(static_cast<std::uint64_t>(L.n) * itemsize(out.dtype()), std::memory_order_relaxed);
}

Shape result_shape(const Call& c) {
  Shape s;
  for (int i = 0; i < c.n_arrays; ++i) s = broadcast_shapes(s, c.arrays[i]->shape());
  return s;
}

DType result_dtype(const Call& c) { return c.lowered->graph.dtype(c.lowered->graph.outputs[0]); }

/// True when writing `out` could change an input before it is read: it shares memory with an input
/// that is not the very same view (x = x.slice(reversed) + 1, x += x.transpose()).
bool overlaps_harmfully(const Call& c, const ArrayBase& out) {
  for (int i = 0; i < c.n_arrays; ++i) {
    const ArrayBase& a = *c.arrays[i];
    if (a.storage() != out.storage() || a.size() == 0) continue;
    if (a.shape() == out.shape() && a.data_ptr() == out.data_ptr() &&
        broadcast_strides(a, out.shape()) == broadcast_strides(out, out.shape()))
      continue;
    const auto span = [](const ArrayBase& x) {
      std::int64_t lo = 0, hi = 0;
      for (int d = 0; d < x.ndim(); ++d) (x.strides()[d] < 0 ? lo : hi) += x.strides()[d] * (x.shape()[d] - 1);
      const auto base = static_cast<std::int64_t>(x.data_ptr());
      const auto w = static_cast<std::int64_t>(itemsize(x.dtype()));
      return std::pair{base + lo * w, base + (hi + 1) * w};
    };
    const auto [a0, a1] = span(a);
    const auto [o0, o1] = span(out);
    if (a0 < o1 && o0 < a1) return true;
  }
  return false;
}

/// Prepares `out` for the call: validates inputs, allocates when needed. False when nothing is to run.
bool prepare_output(const Call& c, ArrayBase& out, AssignMode mode, int device) {
  for (int i = 0; i < c.n_arrays; ++i) {
    const ArrayBase& a = *c.arrays[i];
    if (!a.has_storage())
      throw Error(a.is_placeholder() ? "a placeholder array has no memory: use fz::inspect(e) to see its kernel, "
                                       "or fz::empty / fz::asarray to make arrays that can run"
                                     : "an expression reads an empty Array (default-constructed, never assigned)");
    if (a.device() != device)
      throw Error(fmt::format("an array on device {} is used while device {} is current; use fz::DeviceScope",
                              a.device(), device));
  }
  const Shape shape = result_shape(c);
  if (mode == AssignMode::replace) mode = (out.has_storage() && out.shape() == shape) ? AssignMode::into : AssignMode::fresh;
  if (mode == AssignMode::into) {
    if (!out.has_storage()) throw Error("assigning into an Array that has no memory");
    if (broadcast_shapes(shape, out.shape()) != out.shape())
      throw ShapeError(fmt::format("cannot write a result of shape {} into an array of shape {}", to_string(shape),
                                   to_string(out.shape())));
    if (out.device() != device)
      throw Error(fmt::format("the output lives on device {} but device {} is current", out.device(), device));
    for (int d = 0; d < out.ndim(); ++d)
      if (out.strides()[d] == 0 && out.shape()[d] > 1)
        throw Error("cannot write into a broadcast view (several elements share memory); copy it first");
  } else {
    out = ArrayBase::make_empty(out.dtype(), shape);
  }
  return out.size() > 0;
}

void evaluate_fused(const Call& c, ArrayBase& out, AssignMode mode) {
  const auto& stream = current_stream_state();
  const int device = stream->device;
  if (!prepare_output(c, out, mode, device)) return;  // empty: no launch
  if (overlaps_harmfully(c, out)) {
    // NumPy's answer: every input is read before any output is written. Compute aside, then copy.
    ArrayBase tmp = ArrayBase::make_empty(out.dtype(), out.shape());
    evaluate_fused(c, tmp, AssignMode::into);
    copy_array(tmp, out, AssignMode::into);
    return;
  }
  Layout L;
  analyze(c, out, L);
  const KernelSlot& k = kernel_for(*c.lowered, L.v, device, c.name);
  launch(k, L, c, out, stream);
}

// ---- the unfused baseline ------------------------------------------------------------------------

const Lowered& lowered_for_graph(ir::Graph g) {
  static std::mutex mu;
  static std::multimap<std::uint64_t, const Lowered*> registry;
  const std::uint64_t h = ir::hash(g);
  std::lock_guard lock(mu);
  for (auto [it, end] = registry.equal_range(h); it != end; ++it)
    if (it->second->graph.nodes == g.nodes && it->second->graph.outputs == g.outputs) return *it->second;
  const Lowered& l = register_lowered(std::move(g));
  registry.emplace(h, &l);
  return l;
}

/// Each op node becomes its own kernel; the casts and leaves feeding it are folded into that kernel
/// (as NumPy's and CuPy's ufuncs convert inside their loops).
void evaluate_unfused(const Call& c, ArrayBase& out, AssignMode mode) {
  const ir::Graph& g = c.lowered->canonical;
  std::vector<std::optional<ArrayBase>> temps(g.nodes.size());
  auto is_op = [&](std::uint32_t i) { return ir::arity(g.nodes[i].op) != ir::Arity::leaf && g.nodes[i].op != ir::Op::cast; };
  const std::uint32_t root = g.outputs[0];
  for (std::uint32_t r = 0; r < g.nodes.size(); ++r) {
    if (!(is_op(r) || r == root)) continue;
    ir::Graph sub;
    std::vector<const ArrayBase*> arrays;
    std::vector<ScalarArg> scalars;
    auto build = [&](auto&& self, std::uint32_t i) -> std::uint32_t {
      const ir::Node& n = g.nodes[i];
      if (i != r && temps[i]) {
        arrays.push_back(&*temps[i]);
        return sub.input(n.dtype);
      }
      switch (n.op) {
        case ir::Op::input: arrays.push_back(c.arrays[n.slot]); return sub.input(n.dtype);
        case ir::Op::scalar: scalars.push_back(c.scalars[n.slot]); return sub.scalar(n.dtype);
        case ir::Op::iota: return sub.iota();
        case ir::Op::cast: return sub.cast(self(self, n.a), n.dtype);
        case ir::Op::where: {
          const std::uint32_t k = self(self, n.a), x = self(self, n.b), y = self(self, n.c);
          return sub.where(k, x, y);
        }
        default: break;
      }
      if (ir::arity(n.op) == ir::Arity::unary) return sub.unary(n.op, self(self, n.a));
      const std::uint32_t x = self(self, n.a);
      const std::uint32_t y = self(self, n.b);
      return sub.binary(n.op, x, y);
    };
    sub.outputs.push_back(build(build, r));
    const Lowered& lw = lowered_for_graph(std::move(sub));
    const Call sc{&lw, arrays.data(), scalars.data(), static_cast<int>(arrays.size()), static_cast<int>(scalars.size()), c.name};
    if (r == root) {
      evaluate_fused(sc, out, mode);
    } else {
      temps[r].emplace(g.nodes[r].dtype);
      evaluate_fused(sc, *temps[r], AssignMode::fresh);
    }
  }
}

const Lowered& identity_lowered(DType d) {
  static const Lowered* table[kNumDTypes] = {};
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < kNumDTypes; ++i) {
      ir::Graph g;
      g.outputs.push_back(g.input(static_cast<DType>(i)));
      table[i] = &register_lowered(std::move(g));
    }
  });
  return *table[static_cast<int>(d)];
}

}  // namespace

void evaluate(const Call& c, ArrayBase& out, AssignMode mode) {
  if (tls_unfused) evaluate_unfused(c, out, mode);
  else evaluate_fused(c, out, mode);
}

void copy_array(const ArrayBase& src, ArrayBase& dst, AssignMode mode) {
  const ArrayBase* arrays[1] = {&src};
  evaluate_fused(Call{&identity_lowered(src.dtype()), arrays, nullptr, 1, 0, {}}, dst, mode);
}

KernelInfo inspect(const Call& c) {
  const ArrayBase out = ArrayBase::make_placeholder(result_dtype(c), result_shape(c));
  Layout L;
  analyze(c, out, L);
  codegen::GeneratedKernel k = generate(*c.lowered, L.v, c.name);
  KernelInfo info;
  info.name = k.name;
  info.hash = k.hash;
  info.variant = L.v.describe();
  if (device_count() > 0) {
    const int device = enter_current_device();
    const LoadedKernel& lk = load_kernel(k, device);
    info.arch = lk.target;
    info.cache_path = lk.cache_path;
    info.registers = lk.registers;
  } else {
    const Artifact a = build_artifact(k, default_target());
    info.arch = a.target;
    info.cache_path = a.cache_path;
    info.registers = a.registers;
  }
  info.source = std::move(k.source);
  return info;
}

}  // namespace detail

Unfused::Unfused() : previous_(detail::tls_unfused) { detail::tls_unfused = true; }
Unfused::~Unfused() { detail::tls_unfused = previous_; }
bool Unfused::active() { return detail::tls_unfused; }

}  // namespace fusion
