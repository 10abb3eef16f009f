// SPDX-License-Identifier: Apache-2.0
// Device memory behind arrays: allocated on a stream from the device pool, freed in that stream's order
// after every other stream that used it has finished with it.
#pragma once
#include <cuda.h>

#include <memory>
#include <mutex>
#include <vector>

#include "fusion/memory.hpp"
#include "runtime/stream_state.hpp"

namespace fusion::detail {

struct Storage {
  CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
  int device = 0;
  std::shared_ptr<StreamState> home;  // allocation stream: kept alive until the memory is freed

  Storage(std::size_t bytes, const std::shared_ptr<StreamState>& stream);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// Called when work on `stream` touches this memory: remembers it if it is not the home stream.
  void note_use(StreamState* stream) {
    if (stream != home.get()) note_foreign_use(stream);
  }

 private:
  void note_foreign_use(StreamState* stream);
  std::mutex mu_;
  std::vector<CUevent> foreign_uses_;  // recorded on other streams after their use
};

}  // namespace fusion::detail
