// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cuda.h>

#include "fusion/graph.hpp"

namespace fusion::detail {
/// Instantiates a captured graph; the returned Graph owns both the graph and its executable.
Graph instantiate_graph(CUgraph graph, int device);
}  // namespace fusion::detail
