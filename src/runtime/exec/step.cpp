// SPDX-License-Identifier: Apache-2.0
// fz::Step: a body recorded as kernel launches (and library calls, captured into graphs of their own),
// built once into a CUDA graph of kernel and child-graph nodes (a chain, in launch order), then kept
// current by writing changed parameters into the executable graph.
#include "fusion/step.hpp"

#include <fmt/format.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "fusion/error.hpp"
#include "fusion/lazy.hpp"
#include "fusion/stream.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/exec/region_hook.hpp"
#include "runtime/exec/step_hook.hpp"
#include "runtime/memory/storage.hpp"

namespace fusion {
namespace detail {

namespace {

/// A kernel's parameter layout (offset and size of each), asked of the driver once per function.
struct ParamLayout {
  std::vector<std::size_t> offset, size;
};

// (the count comes from the kernel's signature: asking the driver past the last parameter fails, a failing API
// call that compute-sanitizer reports)
const ParamLayout& layout_of(CUfunction f, std::size_t count) {
  static std::mutex mu;
  static auto& layouts = *new std::unordered_map<CUfunction, ParamLayout>;  // functions live for the process
  std::lock_guard lock(mu);
  auto it = layouts.find(f);
  if (it != layouts.end()) return it->second;
  ParamLayout l;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t off = 0, size = 0;
    FUSION_CU(cuFuncGetParamInfo, f, i, &off, &size);
    l.offset.push_back(off);
    l.size.push_back(size);
  }
  return layouts.emplace(f, std::move(l)).first->second;
}

}  // namespace

void record_launch(StepRecorder& rec, CUfunction f, void** argv, std::size_t count, unsigned grid_x, unsigned grid_y,
                   unsigned block, unsigned shared_bytes) {
  const ParamLayout& l = layout_of(f, count);
  RecordedLaunch r;
  r.function = f, r.grid_x = grid_x, r.grid_y = grid_y, r.block = block, r.shared_bytes = shared_bytes;
  for (std::size_t i = 0; i < l.size.size(); ++i) {
    r.offsets.push_back(r.bytes.size());
    const auto* p = static_cast<const unsigned char*>(argv[i]);
    r.bytes.insert(r.bytes.end(), p, p + l.size[i]);
  }
  rec.launches.push_back(std::move(r));
}

namespace {

/// The calling thread's stream for capturing library calls on device `device`: capture records, runs
/// nothing, so one stream per thread and device serves every step. (Kept for the thread: a stream is a
/// few bytes of driver state, and destroying it at thread exit could outlive the driver.)
CUstream capture_stream(int device) {
  thread_local CUstream streams[kMaxDevices] = {};
  thread_local unsigned generations[kMaxDevices] = {};
  CUstream& s = streams[device];
  if (!s || is_stale(generations[device], device)) {
    FUSION_CU(cuStreamCreateWithPriority, &s, CU_STREAM_NON_BLOCKING, 0);
    generations[device] = context_generation(device);
  }
  return s;
}

}  // namespace

void record_library_call(std::vector<unsigned char> kind, std::vector<unsigned char> arguments,
                         std::vector<std::shared_ptr<Storage>> memory, const std::function<void(CUstream)>& launch) {
  StepRecorder& rec = *tls_step;
  const CUstream s = capture_stream(current_stream_state()->device);
  // Thread-local capture: other threads' driver calls go on as usual while this one records.
  FUSION_CU(cuStreamBeginCapture, s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  CUgraph graph = nullptr;
  try {
    launch(s);
  } catch (...) {
    if (driver().cuStreamEndCapture(s, &graph) == CUDA_SUCCESS && graph) driver().cuGraphDestroy(graph);
    throw;
  }
  FUSION_CU(cuStreamEndCapture, s, &graph);
  RecordedLaunch r;
  r.library = std::shared_ptr<CUgraph_st>(graph, [](CUgraph g) { driver().cuGraphDestroy(g); });
  r.library_kind = std::move(kind);
  r.bytes = std::move(arguments);
  rec.launches.push_back(std::move(r));
  for (auto& m : memory) rec.memory.push_back(std::move(m));
}

}  // namespace detail

struct Step::State {
  std::function<void()> body;
  detail::StepRecorder current;  // what the graph holds: its launches and the memory they use
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  std::vector<CUgraphNode> nodes;
  int device = -1;
  unsigned generation = 0;
  int builds = 0;

  void release() {
    if (!detail::context_for_release(device) || detail::is_stale(generation, device)) return;
    if (exec) detail::driver().cuGraphExecDestroy(exec);
    if (graph) detail::driver().cuGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
  ~State() {
    if (device >= 0) release();
  }
};

namespace {

CUDA_KERNEL_NODE_PARAMS node_params(const detail::RecordedLaunch& r, std::vector<void*>& argv) {
  argv.clear();
  for (std::size_t off : r.offsets) argv.push_back(const_cast<unsigned char*>(r.bytes.data() + off));
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = r.function;
  p.gridDimX = r.grid_x;
  p.gridDimY = r.grid_y;
  p.gridDimZ = 1;
  p.blockDimX = r.block;
  p.blockDimY = 1;
  p.blockDimZ = 1;
  p.sharedMemBytes = r.shared_bytes;
  p.kernelParams = argv.data();
  return p;
}

bool same_kernels(const std::vector<detail::RecordedLaunch>& a, const std::vector<detail::RecordedLaunch>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].function != b[i].function || a[i].grid_x != b[i].grid_x || a[i].grid_y != b[i].grid_y ||
        a[i].block != b[i].block || a[i].shared_bytes != b[i].shared_bytes || a[i].library_kind != b[i].library_kind)
      return false;
  return true;
}

/// Writes launch `r`'s parameters into `node` of `exec`; false when the driver cannot (a library call
/// whose captured graph changed shape: the caller rebuilds).
bool update_node(CUgraphExec exec, CUgraphNode node, const detail::RecordedLaunch& r, std::vector<void*>& argv) {
  if (r.library)
    return detail::driver().cuGraphExecChildGraphNodeSetParams(exec, node, r.library.get()) == CUDA_SUCCESS;
  const CUDA_KERNEL_NODE_PARAMS p = node_params(r, argv);
  FUSION_CU(cuGraphExecKernelNodeSetParams, exec, node, &p);
  return true;
}

}  // namespace

Step::Step(std::function<void()> body) : state_(std::make_unique<State>()) {
  if (!body) throw Error("fz::Step needs a body to record");
  state_->body = std::move(body);
}
Step::~Step() = default;
Step::Step(Step&&) noexcept = default;
Step& Step::operator=(Step&&) noexcept = default;

void Step::operator()() {
  State& s = *state_;
  detail::outside_step("a step");
  detail::region_barrier();  // what a region around the step recorded runs before, not inside the graph
  const auto& stream = detail::current_stream_state();
  detail::StepRecorder rec;
  detail::tls_step = &rec;
  try {
    Lazy region;
    s.body();
    region.run();
  } catch (...) {
    detail::tls_step = nullptr;
    throw;  // the graph and the memory it uses stay as they were
  }
  detail::tls_step = nullptr;
  std::vector<void*> argv;
  bool updated = s.exec && s.device == stream->device && !detail::is_stale(s.generation, s.device) &&
                 same_kernels(rec.launches, s.current.launches);
  // The same kernels: write what changed (scalars, addresses, sizes) into the executable graph.
  for (std::size_t i = 0; updated && i < rec.launches.size(); ++i)
    if (rec.launches[i].bytes != s.current.launches[i].bytes)
      updated = update_node(s.exec, s.nodes[i], rec.launches[i], argv);
  if (!updated) {
    if (s.device >= 0) s.release();
    s.nodes.clear();
    s.device = stream->device;
    s.generation = detail::context_generation(s.device);
    FUSION_CU(cuGraphCreate, &s.graph, 0);
    for (const detail::RecordedLaunch& r : rec.launches) {
      CUgraphNode node = nullptr;
      const CUgraphNode* after = s.nodes.empty() ? nullptr : &s.nodes.back();
      const std::size_t n_after = s.nodes.empty() ? 0 : 1;
      if (r.library) {
        FUSION_CU(cuGraphAddChildGraphNode, &node, s.graph, after, n_after, r.library.get());  // (a copy of it)
      } else {
        const CUDA_KERNEL_NODE_PARAMS p = node_params(r, argv);
        FUSION_CU(cuGraphAddKernelNode, &node, s.graph, after, n_after, &p);
      }
      s.nodes.push_back(node);
    }
    FUSION_CU(cuGraphInstantiateWithFlags, &s.exec, s.graph, 0);
    ++s.builds;
  }
  s.current = std::move(rec);  // the memory the graph now uses; what it used before is released in stream order
  if (!s.nodes.empty()) FUSION_CU(cuGraphLaunch, s.exec, stream->handle);
}

void Step::replay() const { replay(current_stream()); }

void Step::replay(const Stream& stream) const {
  const State& s = *state_;
  detail::outside_step("a step's replay");
  if (s.builds == 0) throw Error("Step::replay before the first step(): nothing is recorded yet");
  const CUstream h = detail::live(*stream.state()).handle;
  detail::check_not_reset(s.generation, s.device, "this step's graph");
  if (stream.state()->device != s.device)
    throw Error(
        fmt::format("Step::replay on device {}: the step was recorded on device {}", stream.state()->device, s.device));
  if (!s.nodes.empty()) FUSION_CU(cuGraphLaunch, s.exec, h);
  for (const auto& m : s.current.memory) m->note_write();  // the graph may write any of them: cached copies are stale
}

int Step::builds() const { return state_->builds; }
int Step::kernels() const { return static_cast<int>(state_->nodes.size()); }

}  // namespace fusion
