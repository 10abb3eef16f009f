// SPDX-License-Identifier: Apache-2.0
#include "schedule/stepped.hpp"

#include <vector>

#include "codegen/emit_common.hpp"
#include "schedule/call_graph.hpp"

namespace fusion::detail {

using codegen::Access;

std::int64_t common_step(const Call& c, int K, const Layout& L, int d) {
  const int np = L.v.n_params;
  std::vector<bool> gathered;  // (walked for only a call with an input at another stride: not every rows kernel's)
  std::int64_t step = 0;
  for (int p = 0; p < np; ++p) {
    const std::int64_t s = L.strides[K + p][d];
    if (L.v.access[static_cast<std::size_t>(p)] == Access::broadcast || s == 0 || s == 1) continue;
    if (gathered.empty()) gathered = codegen::gathered_params(graph_of(c), L.v.param_of_slot, np);
    if (gathered[p] || s < 2 || s > 4 || s * static_cast<std::int64_t>(itemsize(L.params[p]->dtype())) > 16 ||
        (step != 0 && s != step))
      return -1;
    step = s;
  }
  return step;
}

bool stepped_phase(const ArrayBase& a, std::int64_t width, std::int64_t step, std::uint8_t& phase) {
  const std::uint64_t size = itemsize(a.dtype()), at = a.data_ptr() / size % static_cast<std::uint64_t>(width);
  phase = static_cast<std::uint8_t>(at);
  return a.data_ptr() % size == 0 && at < static_cast<std::uint64_t>(step);
}

void try_stepped(const Call& c, int K, Layout& L) {
  if (L.v.rank != 1) return;
  for (int k = 0; k < K; ++k)
    if (L.v.out_access[k] != Access::contiguous) return;
  const std::int64_t step = common_step(c, K, L, 0);
  if (step <= 0) return;
  for (int p = 0; p < L.v.n_params; ++p)
    if (L.v.access[static_cast<std::size_t>(p)] == Access::strided) L.v.access[static_cast<std::size_t>(p)] = Access::stepped;
  L.v.step = static_cast<std::uint8_t>(step);
}

}  // namespace fusion::detail
