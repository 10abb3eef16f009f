// SPDX-License-Identifier: Apache-2.0
#include "runtime/memory/storage.hpp"

#include "runtime/cuda/driver.hpp"

namespace fusion::detail {

Storage::Storage(std::size_t n, const std::shared_ptr<StreamState>& stream)
    : bytes(n), device(stream->device), home(stream) {
  ptr = memory_pool(device).allocate(n, stream->handle);
  generation = context_generation(device);
}

void Storage::note_foreign_use(const std::shared_ptr<StreamState>& stream) {
  std::lock_guard lock(mu_);
  for (ForeignUse& u : foreign_uses_) {
    if (u.stream.lock() == stream) {
      FUSION_CU(cuEventRecord, u.last_use, stream->handle);
      return;
    }
  }
  CUevent ev;
  FUSION_CU(cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING);
  FUSION_CU(cuEventRecord, ev, stream->handle);
  foreign_uses_.push_back({stream, ev});
}

Storage::~Storage() {
  if (!ptr && foreign_uses_.empty()) return;
  try {
    ensure_context(device);
    if (is_stale(generation, device)) return;  // the reset freed the memory and the events already
    // The free is ordered on the home stream; work other streams did with this memory must finish first.
    for (const ForeignUse& u : foreign_uses_) {
      driver().cuStreamWaitEvent(home->handle, u.last_use, 0);
      driver().cuEventDestroy(u.last_use);
    }
    memory_pool(device).deallocate(ptr, bytes, home->handle);
  } catch (...) {
    // A destructor cannot report; the pool's counters already reflect the release.
  }
}

}  // namespace fusion::detail
