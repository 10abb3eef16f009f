// SPDX-License-Identifier: Apache-2.0
#include "fusion/graph.hpp"

#include "fusion/error.hpp"
#include "fusion/stream.hpp"
#include "runtime/cuda/held_work.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/graph_state.hpp"
#include "runtime/cuda/stream_state.hpp"

namespace fusion {

struct Graph::State {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  int device = 0;
  unsigned generation = 0;
  ~State() {
    if (!detail::context_for_release(device) || detail::is_stale(generation, device))
      return;  // gone with a device reset
    if (exec) detail::driver().cuGraphExecDestroy(exec);
    if (graph) detail::driver().cuGraphDestroy(graph);
  }
};

namespace detail {
Graph instantiate_graph(CUgraph graph, int device) {
  auto s = std::make_shared<Graph::State>();
  s->graph = graph;
  s->device = device;
  s->generation = context_generation(device);
  // Graphs that allocate (arrays created during capture) must free in the same graph or on launch.
  FUSION_CU(cuGraphInstantiateWithFlags, &s->exec, graph, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
  return Graph(std::move(s));
}
}  // namespace detail

void Graph::launch() const { launch(current_stream()); }

void Graph::launch(const Stream& stream) const {
  detail::region_barrier();
  detail::outside_step("a graph launch");
  if (!state_) throw Error("launching an empty Graph: obtain one from Stream::end_capture()");
  const CUstream s = detail::live(*stream.state()).handle;
  detail::check_not_reset(state_->generation, state_->device, "this graph");
  FUSION_CU(cuGraphLaunch, state_->exec, s);
}

}  // namespace fusion
