// SPDX-License-Identifier: Apache-2.0
#include "runtime/cuda/held_work.hpp"

#include <fmt/format.h>

#include "fusion/error.hpp"

namespace fusion::detail {

thread_local Lazy::State* tls_region = nullptr;
thread_local bool tls_region_busy = false;
thread_local StepRecorder* tls_step = nullptr;

void outside_step(const char* what) {
  if (tls_step != nullptr)
    throw Error(fmt::format("{} inside an fz::Step body: a step becomes a CUDA graph of fusion's kernels; do it "
                            "before or after the step", what));
}

}  // namespace fusion::detail
