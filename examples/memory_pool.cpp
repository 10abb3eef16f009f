// SPDX-License-Identifier: Apache-2.0
// The memory pool's statistics as an array is created, dropped and the pool emptied: the same sequence
// as CuPy's memory-pool tutorial.
#include <fusion/fusion.hpp>

#include <cstdio>

namespace fz = fusion;

int main() {
  if (fz::device_count() == 0) {
    std::printf("This example needs a GPU: %s\n", fz::no_device_reason().c_str());
    return 0;
  }
  fz::MemoryPool& pool = fz::default_memory_pool();
  fz::PinnedMemoryPool& pinned = fz::default_pinned_memory_pool();

  std::vector<float> host(3 * 1024 * 1024, 1.f);  // 12 MiB
  fz::Array<float> a = fz::asarray(host);
  std::printf("after asarray:       used %zu bytes, held %zu bytes, pinned free blocks %zu\n", pool.used_bytes(),
              pool.total_bytes(), pinned.n_free_blocks());
  a = fz::Array<float>();  // drop it: the memory goes back to the pool, which keeps it cached
  std::printf("after dropping it:   used %zu bytes, held %zu bytes\n", pool.used_bytes(), pool.total_bytes());
  pool.free_all_blocks();
  pinned.free_all_blocks();
  std::printf("after free_all_blocks: used %zu bytes, held %zu bytes, pinned free blocks %zu\n", pool.used_bytes(),
              pool.total_bytes(), pinned.n_free_blocks());

  pool.set_limit(8 * 1024 * 1024);
  try {
    fz::Array<float> big = fz::asarray(host);
  } catch (const fz::OutOfMemoryError& e) {
    std::printf("with an 8 MiB limit: %s\n", e.what());
  }
  return 0;
}
