// SPDX-License-Identifier: Apache-2.0
// The device pool's block cache (FUSION_BLOCK_CACHE; runtime/memory/block_cache.hpp), run under the null driver
// (build/null-driver, the ctest entry unit.null_driver; on by default): which freed blocks come back, on which stream, and when
// they are freed for good.
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/memory/block_cache.hpp"
#include "support.hpp"

namespace {

struct CacheOn {  // the cache emptied and on for one test, emptied again after it (turning it off frees what it holds)
  fz::MemoryPool& pool = fz::default_memory_pool();
  CacheOn() { fz::detail::set_block_cache(pool, false), fz::detail::set_block_cache(pool, true); }
  ~CacheOn() { fz::detail::set_block_cache(pool, false), fz::detail::set_block_cache(pool, true); }
};

}  // namespace

TEST_CASE("the block cache gives a freed block back to the next allocation of its size on its own stream",
          "[null-driver][memory]") {
  CacheOn on;
  fz::MemoryPool& pool = on.pool;
  const fz::Stream a = fz::current_stream(), b;
  const std::size_t used = pool.used_bytes();
  const std::uint64_t p = pool.allocate(1000, a.handle());
  pool.deallocate(p, 1000, a.handle());
  CHECK(fz::detail::cached_blocks(pool) == 1);
  CHECK(pool.used_bytes() == used);  // a cached block is not in use
  const std::uint64_t other_stream = pool.allocate(1000, b.handle());
  const std::uint64_t other_size = pool.allocate(1004, a.handle());
  CHECK(other_stream != p);
  CHECK(other_size != p);
  CHECK(fz::detail::cached_blocks(pool) == 1);
  const std::uint64_t q = pool.allocate(1000, a.handle());
  CHECK(q == p);
  CHECK(fz::detail::cached_blocks(pool) == 0);
  CHECK(pool.used_bytes() == used + 3004);
  for (auto [ptr, bytes, s] : {std::tuple{q, 1000, a.handle()}, {other_stream, 1000, b.handle()}, {other_size, 1004, a.handle()}})
    pool.deallocate(ptr, static_cast<std::size_t>(bytes), s);
  CHECK(fz::detail::cached_blocks(pool) == 3);
  pool.free_all_blocks();
  CHECK(fz::detail::cached_blocks(pool) == 0);
  CHECK(pool.used_bytes() == used);
}

TEST_CASE("arrays made and dropped in a loop reuse one block through the cache", "[null-driver][memory]") {
  CacheOn on;
  std::uint64_t first = 0;
  {
    fz::Array<float> x = fz::empty<float>({250});
    first = x.data_ptr();
  }
  for (int i = 0; i < 5; ++i) {
    const fz::Array<float> y = fz::empty<float>({250});
    CHECK(y.data_ptr() == first);
  }
  const fz::Array<float> held = fz::empty<float>({250}), other = fz::empty<float>({250});
  CHECK(held.data_ptr() == first);
  CHECK(other.data_ptr() != first);  // the one cached block is taken
}

TEST_CASE("the block cache keeps few, small blocks and frees a stream's when the stream goes", "[null-driver][memory]") {
  CacheOn on;
  fz::MemoryPool& pool = on.pool;
  const fz::Stream s = fz::current_stream();
  std::vector<std::uint64_t> blocks;
  for (int i = 0; i < 70; ++i) blocks.push_back(pool.allocate(256, s.handle()));
  for (std::uint64_t p : blocks) pool.deallocate(p, 256, s.handle());
  CHECK(fz::detail::cached_blocks(pool) == 64);  // the oldest 6 freed for good
  const std::uint64_t large = pool.allocate(std::size_t{8} << 20, s.handle());
  pool.deallocate(large, std::size_t{8} << 20, s.handle());
  CHECK(fz::detail::cached_blocks(pool) == 64);  // beyond 4 MiB: freed, not kept
  fz::detail::set_block_cache(pool, false);
  CHECK(fz::detail::cached_blocks(pool) == 0);
  fz::detail::set_block_cache(pool, true);
  {
    const fz::Stream gone;
    pool.deallocate(pool.allocate(512, gone.handle()), 512, gone.handle());
    pool.deallocate(pool.allocate(512, s.handle()), 512, s.handle());
    CHECK(fz::detail::cached_blocks(pool) == 2);
  }
  CHECK(fz::detail::cached_blocks(pool) == 1);  // the destroyed stream's block freed in its order first
}

TEST_CASE("the block cache keeps no block of another library's stream, whose end fusion cannot see",
          "[null-driver][memory]") {
  CacheOn on;
  fz::MemoryPool& pool = on.pool;
  CUstream foreign = nullptr;  // made straight through the driver, as another library would
  REQUIRE(fz::detail::driver().cuStreamCreateWithPriority(&foreign, CU_STREAM_NON_BLOCKING, 0) == CUDA_SUCCESS);
  CHECK_FALSE(fz::detail::stream_lifetime_known(foreign));
  {
    const fz::Stream taken = fz::Stream::from_external(foreign);
    pool.deallocate(pool.allocate(2048, taken.handle()), 2048, taken.handle());
    CHECK(fz::detail::cached_blocks(pool) == 0);  // freed for good: the handle may die and be reused unseen
    const fz::Stream own;
    CHECK(fz::detail::stream_lifetime_known(own.handle()));
    pool.deallocate(pool.allocate(2048, own.handle()), 2048, own.handle());
    CHECK(fz::detail::cached_blocks(pool) == 1);  // fusion's own stream: kept until it goes
  }
  CHECK(fz::detail::cached_blocks(pool) == 0);
  fz::detail::driver().cuStreamDestroy(foreign);
  CHECK(fz::detail::stream_lifetime_known(fz::Stream::null().handle()));  // built-in handles are never destroyed
}
