// SPDX-License-Identifier: Apache-2.0
// NVTX's memory extension (header-only, from the CUDA toolkit): a no-op unless a tool injects itself.
#include "runtime/blas/written_marks.hpp"

#include <nvtx3/nvToolsExtMemCudaRt.h>

#include <algorithm>

namespace fusion::detail {

void mark_written_by_library(CUstream h, const ArrayBase& out) {
  if (out.size() == 0) return;
  // The span from the lowest to the highest element address (a view's strides may run backwards).
  std::int64_t low = 0, high = 0;
  for (int ax = 0; ax < out.shape().size(); ++ax) {
    const std::int64_t reach = (out.shape()[ax] - 1) * out.strides()[ax];
    (reach < 0 ? low : high) += reach;
  }
  const std::size_t item = itemsize(out.dtype());
  nvtxMemVirtualRangeDesc_t range{};
  range.ptr = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(out.data_ptr() + low * static_cast<std::int64_t>(item)));
  range.size = static_cast<std::size_t>(high - low + 1) * item;
  nvtxMemMarkInitializedBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof batch;
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.regionDescCount = 1;
  batch.regionDescElementSize = sizeof range;
  batch.regionDescElements = &range;
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("fusion");
  nvtxMemCudaMarkInitialized(domain, reinterpret_cast<cudaStream_t>(h), 0, &batch);
}

}  // namespace fusion::detail
