// SPDX-License-Identifier: Apache-2.0
// fz::Lazy: statements recorded on a thread, then run as groups, each group one graph of several outputs.
//
// Which statements share a graph is decided in region_grouping.cpp (memory order: what each statement
// reads and writes); this file records, plans once per pattern, and runs. Each graph goes to the same
// scheduler as any fz::tie, which picks the kernel.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <future>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "fusion/error.hpp"
#include "fusion/stream.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "schedule/layout.hpp"
#include "runtime/exec/region_grouping.hpp"
#include "runtime/exec/region_hook.hpp"
#include "runtime/exec/launch.hpp"
#include "runtime/measure/stats_counters.hpp"

namespace fusion {
namespace detail {
namespace {

struct Guard {
  bool previous = tls_region_busy;
  Guard() { tls_region_busy = true; }
  ~Guard() { tls_region_busy = previous; }
};

}  // namespace

struct RegionState {
  std::string name;
  std::vector<Statement> pending;
  std::vector<ArrayBase> scratch;  // memory whose contents after the region do not matter
  std::shared_ptr<StreamState> stream;
  bool placeholders = false;  // recorded over placeholder arrays: can be inspected, not run
};

}  // namespace detail

struct Lazy::State : detail::RegionState {};

namespace detail {
namespace {

/// What tells one group's graph from another's: the statements' expression types, where each input
/// comes from, which outputs are stored, the output dtypes.
std::vector<std::uintptr_t> key_of(const std::vector<Statement>& all, const Group& g) {
  std::vector<std::uintptr_t> key;
  std::size_t v = 0;
  for (int i = g.first; i < g.last; ++i) {
    const Statement& s = all[static_cast<std::size_t>(i)];
    key.push_back(reinterpret_cast<std::uintptr_t>(s.lowered));
    for (int from : g.source[static_cast<std::size_t>(i - g.first)])
      key.push_back(static_cast<std::uintptr_t>(from + 1));
    for (const ArrayBase& o : s.outs) {
      const Value& val = g.values[v++];
      key.push_back(static_cast<std::uintptr_t>(o.dtype()) << 1 | (val.stored ? 1u : 0u));
    }
  }
  return key;
}

struct KeyHash {
  // FNV-1a in four independent lanes: a signature is a few hundred words, and one lane's chain of dependent
  // multiplies was a tenth of a small region's host time
  std::size_t operator()(const std::vector<std::uintptr_t>& k) const {
    constexpr std::uint64_t prime = 1099511628211ull;
    std::uint64_t h[4] = {1469598103934665603ull, 1469598103934665603ull ^ 1, 1469598103934665603ull ^ 2,
                          1469598103934665603ull ^ 3};
    std::size_t i = 0;
    for (; i + 4 <= k.size(); i += 4)
      for (std::size_t l = 0; l < 4; ++l) h[l] = (h[l] ^ k[i + l]) * prime;
    for (; i < k.size(); ++i) h[0] = (h[0] ^ k[i]) * prime;
    return static_cast<std::size_t>((((h[0] * prime) ^ h[1]) * prime ^ h[2]) * prime ^ h[3]);
  }
};

/// A group ready to run: its graph, its arguments in the graph's order, its stored outputs.
struct Prepared {
  Call call{};
  std::vector<const ArrayBase*> arrays;
  std::vector<ScalarArg> scalars;
  std::vector<ArrayBase*> outs;
};

/// Group g's graph: the statement's own for a statement alone that writes all it computes, else the
/// merged graph (made once per thread and pattern; a repeated region only looks it up). Null when the
/// group writes nothing.
const Lowered* group_graph(const std::vector<Statement>& all, const Group& g) {
  bool merged = g.last - g.first > 1, stores = false;
  for (const Value& v : g.values) {
    stores = stores || v.stored;
    merged = merged || !v.stored;  // a statement of its own that writes less than it computes
  }
  if (!stores) return nullptr;
  const Lowered* head = all[static_cast<std::size_t>(g.first)].lowered;
  if (!merged) return head;
  thread_local std::unordered_map<std::vector<std::uintptr_t>, const Lowered*, KeyHash> graphs;
  std::vector<std::uintptr_t> key = key_of(all, g);
  auto it = graphs.find(key);
  if (it == graphs.end()) it = graphs.emplace(std::move(key), lowered_for_graph(merge(all, g))).first;
  return it->second;
}

/// Fills `p` to run group g as `graph`: the arrays it reads from memory, its scalars, its stored outputs.
void bind_group(std::vector<Statement>& all, std::string_view region_name, const Group& g, const Lowered* graph,
                Prepared& p) {
  p.outs.clear();
  p.arrays.clear();
  p.scalars.clear();
  std::size_t v = 0;
  for (int i = g.first; i < g.last; ++i) {
    Statement& s = all[static_cast<std::size_t>(i)];
    const auto& source = g.source[static_cast<std::size_t>(i - g.first)];
    for (std::size_t slot = 0; slot < s.args.size(); ++slot)
      if (source[slot] == kFromMemory) p.arrays.push_back(&s.args[slot]);
    p.scalars.insert(p.scalars.end(), s.scalars.begin(), s.scalars.end());
    for (std::size_t o = 0; o < s.outs.size(); ++o)
      if (g.values[v++].stored) p.outs.push_back(&s.outs[o]);
  }
  const Statement& head = all[static_cast<std::size_t>(g.first)];
  const std::string_view name = region_name.empty() ? std::string_view(head.name) : region_name;
  p.call = Call{graph, p.arrays.data(), p.scalars.data(), nullptr, static_cast<int>(p.arrays.size()),
                static_cast<int>(p.scalars.size()), 0, name};
}

/// The outputs group g computes and does not write (for fz::inspect).
std::vector<std::string> kept_in_registers(const std::vector<Statement>& all, const Group& g) {
  std::vector<std::string> kept;
  std::size_t v = 0;
  for (int i = g.first; i < g.last; ++i)
    for (const ArrayBase& o : all[static_cast<std::size_t>(i)].outs) {
      const Value& val = g.values[v++];
      if (!val.stored && !val.superseded) kept.push_back(describe(o));
    }
  return kept;
}

/// How a region's statements run: the groups, each group's graph, and whether its kernels were compiled.
struct RegionPlan {
  std::vector<Group> groups;
  std::vector<const Lowered*> graphs;  // per group; null: it writes nothing
  bool compiled = false;
};

/// Everything group() and the graphs depend on, as numbers. Per statement its expression and, for each
/// array it reads or writes (then each scratch array), which memory (numbered by first appearance), the
/// view within it (bytes from that memory's first view, dtype, shape, strides); per memory at the end,
/// whether the program still holds it. Regions with one signature group alike and run the same graphs, so
/// a loop body recorded again finds its plan without grouping again.
void signature(const std::vector<Statement>& all, const std::vector<ArrayBase>& scratch,
               std::vector<std::uint64_t>& sig) {
  struct Memory {
    const void* id;
    const ArrayBase* any;
    std::int64_t first_offset;
    long held;
  };
  thread_local std::vector<Memory> memories;
  memories.clear();
  sig.clear();
  auto add = [&](const ArrayBase& a) {
    const void* id = a.memory_identity();
    const std::int64_t offset = a.offset() * static_cast<std::int64_t>(itemsize(a.dtype()));
    std::size_t m = 0;
    while (m < memories.size() && (memories[m].id != id || id == nullptr)) ++m;
    if (m == memories.size()) memories.push_back({id, &a, offset, 0});
    ++memories[m].held;
    sig.push_back(m);
    sig.push_back(static_cast<std::uint64_t>(offset - memories[m].first_offset));
    sig.push_back(static_cast<std::uint64_t>(a.dtype()) << 8 | static_cast<std::uint64_t>(a.ndim()));
    for (int d = 0; d < a.ndim(); ++d) {
      sig.push_back(static_cast<std::uint64_t>(a.shape()[d]));
      sig.push_back(static_cast<std::uint64_t>(a.strides()[d]));
    }
  };
  for (const Statement& s : all) {
    sig.push_back(reinterpret_cast<std::uintptr_t>(s.lowered));
    sig.push_back(s.args.size() << 8 | s.outs.size());
    for (const ArrayBase& a : s.args) add(a);
    for (const ArrayBase& a : s.outs) add(a);
  }
  sig.push_back(scratch.size());
  for (const ArrayBase& a : scratch) add(a);
  for (const Memory& m : memories) sig.push_back(m.id != nullptr && m.any->memory_references() > m.held);
}

/// The plan for these statements: from this thread's plans when their signature was seen before.
RegionPlan& plan_for(const std::vector<Statement>& all, const std::vector<ArrayBase>& scratch) {
  thread_local std::unordered_map<std::vector<std::uint64_t>, RegionPlan, KeyHash> plans;
  thread_local std::vector<std::uint64_t> sig;
  signature(all, scratch, sig);
  if (auto it = plans.find(sig); it != plans.end()) return it->second;
  // Bounded: a program whose regions never repeat (offsets that move, shapes that grow) would otherwise
  // fill it; starting over costs one grouping per region.
  if (plans.size() >= 256) plans.clear();
  RegionPlan plan;
  plan.groups = group(all, scratch);
  for (const Group& g : plan.groups) plan.graphs.push_back(group_graph(all, g));
  return plans.emplace(sig, std::move(plan)).first->second;
}

/// Statements that ran, their handles released, their vectors kept: the next statements recorded on the
/// thread reuse them instead of allocating (a region in a loop records the same statements every time).
thread_local std::vector<Statement> spare_statements;

void recycle(std::vector<Statement>& ran) {
  for (Statement& s : ran) {
    if (spare_statements.size() >= 64) break;
    s.args.clear();
    s.outs.clear();
    s.scalars.clear();
    spare_statements.push_back(std::move(s));
  }
  ran.clear();
}

void record(std::vector<Statement>& pending, const Call& c, ArrayBase* const* outs, int K) {
  if (!spare_statements.empty()) {
    pending.push_back(std::move(spare_statements.back()));
    spare_statements.pop_back();
  } else {
    pending.emplace_back();
  }
  Statement& s = pending.back();
  s.lowered = c.lowered;
  for (int i = 0; i < c.n_arrays; ++i) s.args.push_back(*c.arrays[i]);
  s.scalars.assign(c.scalars, c.scalars + c.n_scalars);
  for (int k = 0; k < K; ++k) s.outs.push_back(*outs[k]);
  s.name.assign(c.name);
  s.space = index_space(outs, K);
}

/// Prepares placeholder outputs as prepare_output prepares arrays (no memory, no device).
bool prepare_placeholder_output(ArrayBase& out, AssignMode mode, const Shape& shape) {
  if (mode == AssignMode::replace)
    mode = out.shape() == shape && (out.is_placeholder() || out.has_storage()) ? AssignMode::into : AssignMode::fresh;
  if (mode == AssignMode::into && broadcast_shapes(shape, out.shape()) != out.shape())
    throw ShapeError(fmt::format("cannot write a result of shape {} into an array of shape {}", to_string(shape),
                                 to_string(out.shape())));
  if (mode != AssignMode::into) out = ArrayBase::make_placeholder(out.dtype(), shape);
  return out.size() > 0;
}

}  // namespace

bool record_in_region(const Call& call, ArrayBase* const* outs, int K, AssignMode mode) {
  Lazy::State& st = *tls_region;
  if (Unfused::active()) {
    region_barrier();  // the baseline runs statement by statement
    return false;
  }
  const Call c = as_asked(call);
  if (c.lowered->has_reduction || c.lowered->has_product || c.lowered->has_scan) {
    region_barrier();  // a reduction (or a product, a scan) reads what the region wrote before it
    return false;
  }
  Guard busy;
  bool placeholders = false;
  for (int i = 0; i < c.n_arrays; ++i) placeholders = placeholders || c.arrays[i]->is_placeholder();
  for (int k = 0; k < K; ++k) placeholders = placeholders || outs[k]->is_placeholder();
  check_distinct_outputs(outs, K, mode);
  bool any = false;
  if (placeholders) {
    for (int k = 0; k < K; ++k) any = prepare_placeholder_output(*outs[k], mode, output_shape(c, k)) || any;
    st.placeholders = true;
  } else {
    const auto& stream = current_stream_state();
    if (!st.pending.empty() && st.stream && st.stream != stream)
      run_region(st);  // another stream: what came before runs first
    st.stream = stream;
    for (int k = 0; k < K; ++k)
      any = prepare_output(c, *outs[k], mode, stream->device, output_shape(c, k), true) || any;
  }
  if (any) record(st.pending, c, outs, K);
  return true;
}

void run_region(Lazy::State& st) {
  if (st.pending.empty()) return;
  if (st.placeholders)
    throw Error("this region recorded placeholder arrays: it can be inspected (fz::inspect(region)) but not run; "
                "call discard() before it ends");
  Guard busy;
  // The statements leave the region before they run: an error in one drops the rest (they read its results).
  std::vector<Statement> statements;
  statements.swap(st.pending);
  struct Recycle {  // their vectors serve the next statements recorded
    std::vector<Statement>& ran;
    std::vector<Statement>& pending;
    ~Recycle() {
      recycle(ran);
      if (pending.empty()) pending.swap(ran);  // and the list's capacity too
    }
  } recycle_after{statements, st.pending};
  RegionPlan& plan = plan_for(statements, st.scratch);
  std::optional<StreamScope> on;
  if (st.stream && st.stream != current_stream_state()) on.emplace(Stream(st.stream));
  thread_local std::vector<Prepared> prepared;
  if (prepared.size() < plan.groups.size()) prepared.resize(plan.groups.size());
  int kernels = 0;
  for (std::size_t i = 0; i < plan.groups.size(); ++i)
    if (plan.graphs[i]) {
      bind_group(statements, st.name, plan.groups[i], plan.graphs[i], prepared[i]);
      ++kernels;
    }
  // The first time this thread runs a region of this plan, its kernels compile in parallel before any
  // runs: a compile error then leaves every array as it was.
  if (kernels > 1 && !plan.compiled) {
    std::vector<std::future<KernelInfo>> builds;
    for (std::size_t i = 0; i < plan.groups.size(); ++i)
      if (plan.graphs[i])
        builds.push_back(std::async(std::launch::async, [&p = prepared[i]] { return inspect(p.call); }));
    for (auto& b : builds) b.wait();
    for (auto& b : builds) b.get();  // the first error, if any
  }
  plan.compiled = true;
  for (std::size_t i = 0; i < plan.groups.size(); ++i) {
    if (!plan.graphs[i]) continue;
    const Prepared& p = prepared[i];
    evaluate_prepared(p.call, p.outs.data(), static_cast<int>(p.outs.size()));
    note_minimum({p.call.arrays, static_cast<std::size_t>(p.call.n_arrays)}, {p.outs.data(), p.outs.size()});
  }
}

KernelInfo inspect_region(Lazy::State& st) {
  Guard busy;
  if (st.pending.empty()) throw Error("fz::inspect: the region has recorded nothing to run");
  const std::vector<Group> groups = group(st.pending, st.scratch);
  std::vector<KernelInfo> steps;
  std::vector<std::string> notes;
  Prepared p;
  for (const Group& g : groups) {
    const Lowered* graph = group_graph(st.pending, g);
    if (!graph) continue;  // nothing it computes is needed: no kernel (said in the next entry's note)
    std::string note = fmt::format(": statement{} {}{}", g.last - g.first > 1 ? "s" : "", g.first + 1,
                                   g.last - g.first > 1 ? fmt::format("-{}", g.last) : "");
    if (const auto kept = kept_in_registers(st.pending, g); !kept.empty())
      note += fmt::format("; not written: {}", fmt::join(kept, ", "));
    if (g.first > 0) note += fmt::format("; a kernel of its own because {}", g.reason);
    bind_group(st.pending, st.name, g, graph, p);
    steps.push_back(inspect(p.call));
    notes.push_back(std::move(note));
  }
  if (steps.empty()) throw Error("fz::inspect: nothing the region computes is used after it: it runs no kernel");
  return assemble(std::move(steps), notes);
}

}  // namespace detail

Lazy::Lazy() : Lazy(std::string_view{}) {}

namespace detail {
namespace {

/// The state of the last region that ended on this thread, emptied: the next region takes it with the
/// capacity of its lists.
thread_local std::unique_ptr<Lazy::State> spare_state;

}  // namespace
}  // namespace detail

Lazy::Lazy(std::string_view name)
    : state_(nullptr), previous_(detail::tls_region), uncaught_(std::uncaught_exceptions()) {
  if (previous_ != nullptr) return;  // nested: part of the region outside
  state_ = detail::spare_state ? detail::spare_state.release() : new State;
  state_->name.assign(name);
  detail::tls_region = state_;
}

Lazy::~Lazy() noexcept(false) {
  if (state_ == nullptr) return;
  detail::tls_region = previous_;
  struct Return {  // the state goes back to the thread, emptied, however the region ends
    State* s;
    ~Return() {
      s->pending.clear();
      s->scratch.clear();
      s->stream.reset();
      s->placeholders = false;
      detail::spare_state.reset(s);
    }
  } give_back{state_};
  // Leaving by an exception: nothing recorded runs, so nothing is half-written.
  if (std::uncaught_exceptions() > uncaught_ || state_->placeholders) return;
  detail::run_region(*state_);
}

void Lazy::run() {
  if (State* s = state_ ? state_ : previous_) detail::run_region(*s);
}

void Lazy::discard() {
  if (State* s = state_ ? state_ : previous_) {
    detail::recycle(s->pending);
    s->placeholders = false;
  }
}

void Lazy::scratch(const ArrayBase& a) {
  if (State* s = state_ ? state_ : previous_) s->scratch.push_back(a);
}

int Lazy::pending() const {
  const State* s = state_ ? state_ : previous_;
  return s ? static_cast<int>(s->pending.size()) : 0;
}

bool Lazy::active() { return detail::tls_region != nullptr; }

KernelInfo inspect(const Lazy& region) {
  Lazy::State* s = region.state_ ? region.state_ : region.previous_;
  if (s == nullptr) throw Error("fz::inspect: this region records nothing");
  return detail::inspect_region(*s);
}

}  // namespace fusion
