// SPDX-License-Identifier: Apache-2.0
// What the evaluators share: an expression type's lowered IR with its kernel lists and plans, and the
// layout helpers that elementwise and reduction launches both use.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "codegen/emit_common.hpp"
#include "codegen/layer_variant.hpp"
#include "codegen/product_variant.hpp"
#include "codegen/reduce_variant.hpp"
#include "codegen/scan_variant.hpp"
#include "fusion/evaluate.hpp"
#include "fusion/inspect.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "schedule/layout.hpp"
#include "runtime/blas/matmul.hpp"
#include "schedule/product_epilogue.hpp"
#include "runtime/compile/kernel_cache.hpp"
#include "runtime/memory/array_copy.hpp"

namespace fusion::detail {

struct Plan;  // several kernels (plan.hpp)
class RaceSample;  // a call timed for a product race (product_race.hpp)

/// A compiled kernel for one layout variant, device and user name: a node of a lock-free list
/// (find_or_build) kept per expression type or user kernel. One kind for fused, reduction and user kernels.
template <class V> struct KernelSlot {
  V variant;
  int device;
  std::string name;
  const LoadedKernel* kernel;
  codegen::KernelSignature signature;  // how its arguments are packed
  KernelSlot* next = nullptr;
  unsigned generation = 0;  // of the device context the kernel was loaded in
};

/// Compiles (through the caches) and loads `k` on `device` as a new slot for find_or_build.
template <class V> KernelSlot<V>* new_slot(const V& v, int device, std::string_view name, codegen::GeneratedKernel k) {
  const LoadedKernel& loaded = load_kernel(k, device);
  return new KernelSlot<V>{v, device, std::string(name), &loaded, std::move(k.signature)};
}

/// Frees a slot list (of an object that is destroyed; expression types' lists live for the process).
template <class V> void delete_slots(std::atomic<KernelSlot<V>*>& head) {
  for (KernelSlot<V>* s = head.exchange(nullptr); s;) delete std::exchange(s, s->next);
}

/// A Lowered derived from another for a run-time pattern (its fz::function ids, its equal reductions).
struct Derived {
  std::vector<std::uint32_t> key;  // the kind first, then the pattern
  const Lowered* lowered;
  Derived* next;
};

struct Lowered {
  ir::Graph graph;      // as lowered: one input slot per array leaf, in pack() order
  ir::Graph canonical;  // without merging inputs (plans walk this)
  bool has_reduction = false;
  bool has_product = false;  // a matrix product (a library call): runs as a plan of steps
  bool has_scan = false;     // a scan (a kernel of its own): runs as a plan of steps
  bool has_gather = false;   // fz::take: equal scalars merge (with_shared_reductions), so one gather reads once
  bool has_join = false;     // fz::concatenate: its launches resolve where the pieces lie (schedule/pieces.hpp)
  bool loops = false;        // its linear kernels loop over vectors (schedule/layout.hpp, loops_over_vectors)
  // Its compiled kernels, a lock-free list per kind of kernel (kernel_for.hpp).
  std::tuple<std::atomic<KernelSlot<codegen::Variant>*>, std::atomic<KernelSlot<codegen::ReduceVariant>*>,
             std::atomic<KernelSlot<codegen::LayerVariant>*>, std::atomic<KernelSlot<codegen::ScanVariant>*>,
             std::atomic<KernelSlot<codegen::ProductVariant>*>>
      slots{nullptr, nullptr, nullptr, nullptr, nullptr};
  // How the expression runs when it is more than one elementwise kernel.
  mutable std::once_flag plan_once[3];
  mutable std::unique_ptr<Plan> plans[3];  // by PartitionMode
  // Graphs derived from this one per run-time pattern (see derived()): found without a lock.
  mutable std::atomic<Derived*> derived{nullptr};
};


/// fz::precompile's architecture on this thread (0: compile for the current device and load).
extern thread_local int tls_precompile_arch;

/// The device the layout decisions plan for: `device` as it is (-1: an H100), with the compute capability
/// of the architecture fz::precompile compiles for, when it does.
inline codegen::TargetDevice planned_device(int device) {
  codegen::TargetDevice t = target_device(device);
  if (tls_precompile_arch > 0) t.compute_major = tls_precompile_arch / 10, t.compute_minor = tls_precompile_arch % 10;
  return t;
}

/// The Lowered of a graph built at run time (plans, the unfused path): one per distinct graph.
const Lowered* lowered_for_graph(ir::Graph g);

/// The canonical graph a variant compiles: input slots read through one parameter become one input.
ir::Graph merged_graph(const Lowered& lw, const std::array<std::uint8_t, codegen::kMaxParams>& param_of_slot);

/// Serializes publishing new kernel slots (lookups stay lock-free; compiling happens outside it).
std::mutex& build_mutex();

/// The Lowered derived from `lw` for `key`: found lock-free when a call with the same pattern came
/// before, else made by `make()` (a graph for lowered_for_graph) and kept for the process.
template <class Make> const Lowered& derived(const Lowered& lw, const std::vector<std::uint32_t>& key, Make&& make) {
  auto find = [&]() -> const Lowered* {
    for (Derived* d = lw.derived.load(std::memory_order_acquire); d; d = d->next)
      if (d->key == key) return d->lowered;
    return nullptr;
  };
  if (const Lowered* l = find()) return *l;
  const Lowered& made = *lowered_for_graph(make());
  std::lock_guard lock(build_mutex());
  if (const Lowered* l = find()) return *l;
  lw.derived.store(new Derived{key, &made, lw.derived.load(std::memory_order_relaxed)}, std::memory_order_release);
  return made;
}

/// The kernel slot for (variant, device, name) in a lock-free list: found without a lock on the hot
/// path, else built (outside any lock) and published under build_mutex(). `build()` returns a new Slot (its `next`
/// unset).
template <class Slot, class V>
const Slot* find_slot(const std::atomic<Slot*>& head, const V& v, int device, std::string_view name,
                      unsigned generation) {
  for (Slot* s = head.load(std::memory_order_acquire); s; s = s->next)
    if (s->device == device && s->generation == generation && s->variant == v && s->name == name) return s;
  return nullptr;
}

template <class Slot, class V, class Build>
const Slot& find_or_build(const std::atomic<Slot*>& head, const V& v, int device, std::string_view name,
                          Build&& build) {
  // Slots of an earlier context generation hold functions a device reset destroyed: they stay in the
  // list, unused, and the kernel is loaded again for the new generation.
  const unsigned generation = context_generation(device);
  auto find = [&] { return find_slot(head, v, device, name, generation); };
  if (const Slot* s = find()) return *s;
  // Generate and compile outside the lock, so that threads building different kernels run NVRTC in
  // parallel; only publishing is serialized. A thread that lost the race for the same slot drops its copy.
  std::unique_ptr<Slot> built(build());
  built->generation = generation;
  std::lock_guard lock(build_mutex());
  if (const Slot* s = find()) return *s;
  Slot* slot = built.release();
  slot->next = head.load(std::memory_order_relaxed);
  const_cast<std::atomic<Slot*>&>(head).store(slot, std::memory_order_release);
  return *slot;
}

/// Validates inputs and prepares `out` for a result of `shape`; false when there is nothing to compute.
/// `deferred`: a new output's memory is allocated when first used (a region's results).
bool prepare_output(const Call& c, ArrayBase& out, AssignMode mode, int device, const Shape& shape,
                    bool deferred = false);

/// One elementwise kernel (every output of the call's graph, which has no reduction).
void evaluate_elementwise(const Call& c, ArrayBase* const* outs, int n_outs, AssignMode mode);
/// evaluate_elementwise for outputs already prepared (shapes final, memory allocated or deferred, none
/// empty), as a region prepares them when it records its statements.
void evaluate_prepared(const Call& c, ArrayBase* const* outs, int n_outs);
/// One reduction kernel (the call's graph holds exactly one reduction with a scalar-only epilogue).
void evaluate_reduction(const Call& c, ArrayBase& out, AssignMode mode);
/// Whether every reduction of the call reads the whole index space of its arrays, so that one layout
/// serves them all (the reductions of a plan's grouped step share their axes by construction).
bool reductions_share_space(const Call& c);
/// Several reductions over the same axes in one kernel (a plan's grouped step: the graph's outputs are
/// reductions with scalar-only epilogues). False, with nothing written, when they cannot run together
/// (operands of other shapes, existing outputs of other layouts or overlapping the inputs).
bool evaluate_reductions(const Call& c, ArrayBase* const* outs, int K, AssignMode mode);
/// The kernel evaluate_reductions runs (reductions_share_space(c) must hold).
KernelInfo inspect_reductions(const Call& c);
/// The output shape of such a reduction call (checks the axes).
Shape reduction_output_shape(const Call& c);
KernelInfo inspect_elementwise(const Call& c);
/// A generated kernel compiled through the caches (not launched; no GPU needed) and described.
KernelInfo finish_inspect(codegen::GeneratedKernel k, std::string variant);
KernelInfo inspect_reduction(const Call& c);
/// A plan's product step (its graph: matmul of its two arrays): cuBLASLt into `out` (exec/product.cpp).
/// `epilogue`: the math of the next step, run inside the same cuBLASLt call (plan.cpp decides); false
/// when cuBLASLt has none for these types (nothing written: the caller runs the step itself).
[[nodiscard]] bool evaluate_product(const Call& c, ArrayBase& out, AssignMode mode, const Epilogue& epilogue = {});
/// A product step's two arrays and the product's scale: the partition makes matmul(x, y) where each operand
/// is an input or an input times a scalar (schedule/product_epilogue's product_operand).
struct ProductOperands {
  const ArrayBase* a;
  const ArrayBase* b;
  double scale = 1;
};
ProductOperands product_operands(const Call& c);
/// Whether a product with an epilogue on `device` may run as a generated kernel (fz::modes.hpp): fz::GeneratedProducts
/// (or FUSION_GENERATED_PRODUCTS=1) on, or the default route on a device whose products are raced.
bool generated_products_on(int device);
/// Product step `product` and the elementwise step `epilogue` that reads it (through the slots marked in
/// `product_slot`) as one generated kernel writing `outs` (one per output of the epilogue: fz::tie) (generated_product.cpp), where fz::GeneratedProducts asks
/// for it or the product race takes it (product_race.hpp). False, with nothing written, where the plan runs the
/// steps instead: then, where `library_timing` is handed a sample, the plan records the two steps into it.
[[nodiscard]] bool evaluate_generated_product(const Call& product, const Call& epilogue,
                                              const std::vector<bool>& product_slot, ArrayBase* const* outs, int n_outs,
                                              AssignMode mode, RaceSample& library_timing);
/// The kernel evaluate_generated_product would run, if any; if none, `declined` says why the generated kernel is
/// not taken where it could be (a verdict, or a race not run yet).
std::optional<KernelInfo> inspect_generated_product(const Call& product, const Call& epilogue,
                                                    const std::vector<bool>& product_slot,
                                                    std::span<const DType> out_dtypes, std::string& declined);
/// A floating scalar argument's value (16-bit floats travel as float32 bits).
double floating_value(const ScalarArg& s);
/// A call evaluated as the front end's assignments are (one elementwise kernel, one reduction, or a plan;
/// no region recording): also a plan's whole steps (schedule/partition).
void evaluate_call(const Call& c, ArrayBase* const* outs, int K, AssignMode mode);
/// Every kernel evaluate_call runs for `c` into new outputs, in launch order, described.
std::vector<KernelInfo> kernels_of(const Call& c);
/// The shape such a step writes (ShapeError for operands that do not line up).
Shape product_output_shape(const Call& c);
/// The cuBLASLt call such a step makes, described (nothing compiled or launched).
KernelInfo inspect_product(const Call& c);
/// A plan's scan step (its graph: one scan of an elementwise prologue) into `out` (exec/scan.cpp): one
/// kernel, or two for a few long rows (each row's chunks reduced, then scanned from their carries).
void evaluate_scan(const Call& c, ArrayBase& out, AssignMode mode);
/// Its kernels, described (two for a few long rows).
std::vector<KernelInfo> inspect_scan(const Call& c);
/// One layer kernel for the whole call (see schedule/layer_layout.hpp); false when it does not
/// apply (nothing written then: a plan runs instead); row statistics with a variance only as
/// schedule/layer_layout.hpp's statistics_layer says.
bool evaluate_layer(const Call& c, ArrayBase* const* outs, int K, AssignMode mode);
bool inspect_layer(const Call& c, KernelInfo& info);

/// The shape of output k of a call: the broadcast of the arrays it reads (all of them for one output).
Shape output_shape(const Call& c, int k);
/// Throws when the outputs of a multi-output assignment are distinct memory.
void check_distinct_outputs(ArrayBase* const* outs, int K, AssignMode mode);
/// The call as this thread asks for it: fz::function calls resolved, the fast-math twin inside fz::FastMath.
Call as_asked(const Call& call);
struct StreamState;  // (runtime/cuda/stream_state.hpp)
/// The per-stream workspace of kernels split over blocks (schedule/reduce_layout.hpp: kCounterBytes of
/// counters, zeroed when made and left at zero by every kernel using them, then kPartialBytes of partials).
CUdeviceptr reduction_workspace(StreamState& s);
/// Packs the arguments of elementwise kernel `k` in layout `L` and launches it on `stream` (evaluate.cpp).
void launch_elementwise(const KernelSlot<codegen::Variant>& k, const Layout& L, const Call& c, ArrayBase* const* outs,
                        int K, const std::shared_ptr<StreamState>& stream);
/// One KernelInfo for several kernels: the last one's fields, every one in `plan` (with `notes[i]`
/// appended to entry i), every source.
KernelInfo assemble(std::vector<KernelInfo> steps, const std::vector<std::string>& notes = {});

}  // namespace fusion::detail
