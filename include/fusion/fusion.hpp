// SPDX-License-Identifier: Apache-2.0
// The umbrella header: everything fusion offers.
#pragma once
#include "fusion/array.hpp"
#include "fusion/benchmark.hpp"
#include "fusion/device.hpp"
#include "fusion/dtype.hpp"
#include "fusion/error.hpp"
#include "fusion/event.hpp"
#include "fusion/graph.hpp"
#include "fusion/inspect.hpp"
#include "fusion/memory.hpp"
#include "fusion/ops.hpp"
#include "fusion/raw_kernel.hpp"
#include "fusion/reductions.hpp"
#include "fusion/tie.hpp"
#include "fusion/user_kernels.hpp"
#include "fusion/shape.hpp"
#include "fusion/stream.hpp"
