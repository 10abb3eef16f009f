// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "fusion/error.hpp"
#include "fusion/memory.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/memory/block_cache.hpp"

namespace fusion {

namespace detail {
// (a named namespace's type, not an anonymous one's: MemoryPool::State holds them, and a unity build, where this
// file is included into another, warns of a member whose type has internal linkage)
struct CachedBlock {
  CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
  CUstream stream = nullptr;  // freed in this stream's order: only its own allocations may take it back
};
}  // namespace detail

struct MemoryPool::State {
  std::atomic<std::size_t> used{0};
  std::atomic<std::size_t> limit{0};
  std::atomic<CUmemoryPool> pool{nullptr};
  std::atomic<unsigned> generation{0};  // of the device context the pool's memory belongs to
  std::uint64_t peers = 0;  // bit d: device d may reach the pool's memory (under renew_mu; kept over resets)
  std::mutex renew_mu;
  // The block cache (detail::BlockCache): on unless FUSION_BLOCK_CACHE=0 or set_block_cache(pool, false).
  std::atomic<bool> cache_on{true};
  std::mutex cache_mu;
  std::vector<detail::CachedBlock> cached;  // oldest first
  std::size_t cached_bytes = 0;
};

namespace detail {

/// Freed blocks of up to kCachedBlockBytes kept on the host, each for the next allocation of its exact size on the
/// stream that freed it: that allocation needs no driver call, where cuMemAllocFromPoolAsync and cuMemFreeAsync took
/// about 1.1 us of host time a new array (H200, 2^20 `2.5 * x + w` into a new array a call: 4.4 us a statement
/// against 3.5 into one array; bench/results/layouts/h200-2026-12-02-column-sums.txt). Stream order keeps it safe: the
/// block's earlier uses all precede its free on that stream, and the new use follows. Never during a stream capture
/// (the graph's memory nodes own those), flushed (freed in each block's stream order) on free_all_blocks, on an
/// allocation the driver refuses and when the stream is destroyed; dropped with the memory on a device reset. Only for
/// streams whose end fusion sees (stream_lifetime_known: not another library's, whose handle may be destroyed and
/// reused unseen). On by default (FUSION_BLOCK_CACHE=0 turns it off): H200, fusion-bench --host-loop eager 2000, ten
/// statements each into a new array, 41.8 / 42.0 / 59.8 us a step without, 35.9 / 44.7 / 32.9 with; fusion-soak's 4
/// processes passed 90 s with it.
struct BlockCache {
  static constexpr std::size_t kCachedBlocks = 64;
  static constexpr std::size_t kCachedBlockBytes = std::size_t{4} << 20;
  static constexpr std::size_t kCachedBytes = std::size_t{64} << 20;

  static bool capturing(CUstream s) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    return driver().cuStreamIsCapturing(s, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
  }
  static bool usable(MemoryPool::State& st, std::size_t bytes, CUstream s) {
    return st.cache_on.load(std::memory_order_relaxed) && bytes <= kCachedBlockBytes && stream_lifetime_known(s) &&
           !capturing(s);
  }
  /// A block of `bytes` freed on `s`, or 0.
  static CUdeviceptr take(MemoryPool::State& st, std::size_t bytes, CUstream s) {
    std::lock_guard lock(st.cache_mu);
    for (auto it = st.cached.rbegin(); it != st.cached.rend(); ++it) {
      if (it->bytes != bytes || it->stream != s) continue;
      const CUdeviceptr p = it->ptr;
      st.cached.erase(std::next(it).base());
      st.cached_bytes -= bytes;
      return p;
    }
    return 0;
  }
  /// Keeps a freed block, freeing the oldest beyond the cache's bounds.
  static void keep(MemoryPool::State& st, CUdeviceptr p, std::size_t bytes, CUstream s) {
    std::lock_guard lock(st.cache_mu);
    st.cached.push_back({p, bytes, s});
    st.cached_bytes += bytes;
    while (st.cached.size() > kCachedBlocks || st.cached_bytes > kCachedBytes) {
      const CachedBlock old = st.cached.front();
      st.cached.erase(st.cached.begin());
      st.cached_bytes -= old.bytes;
      driver().cuMemFreeAsync(old.ptr, old.stream);
    }
  }
  static void set(MemoryPool& pool, bool on) {
    pool.live_pool();
    pool.state_->cache_on = on;
    if (!on) flush(*pool.state_, nullptr, true);
  }
  static std::size_t count(const MemoryPool& pool) {
    std::lock_guard lock(pool.state_->cache_mu);
    return pool.state_->cached.size();
  }
  static void forget(MemoryPool& pool, CUstream s) { flush(*pool.state_, s, false); }
  /// Frees the cached blocks of stream `s` (every stream's where `every`), each in its stream's order.
  static void flush(MemoryPool::State& st, CUstream s, bool every) {
    std::lock_guard lock(st.cache_mu);
    const auto gone = std::stable_partition(st.cached.begin(), st.cached.end(),
                                            [&](const CachedBlock& b) { return !every && b.stream != s; });
    for (auto it = gone; it != st.cached.end(); ++it) {
      st.cached_bytes -= it->bytes;
      driver().cuMemFreeAsync(it->ptr, it->stream);
    }
    st.cached.erase(gone, st.cached.end());
  }
};

}  // namespace detail

namespace {

CUmemoryPool create_pool(int device) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  CUmemoryPool pool;
  FUSION_CU(cuMemPoolCreate, &pool, &props);
  // Keep freed memory cached in the pool (CuPy's behaviour) instead of returning it at each sync.
  cuuint64_t keep = std::numeric_limits<cuuint64_t>::max();
  FUSION_CU(cuMemPoolSetAttribute, pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
  return pool;
}

/// Maps `pool`'s blocks, present and future, into `peer`'s address space for reading and writing.
void grant_access(CUmemoryPool pool, int peer) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = peer;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  FUSION_CU(cuMemPoolSetAccess, pool, &access, 1);
}

}  // namespace

// The driver pool survives a device reset, but the allocations in it died with the context (and it
// would hand out addresses alongside them): after a reset it is replaced by a new, empty one. Arrays
// from before the reset never free into either (their storage knows its generation).
CUmemoryPool MemoryPool::live_pool() const {
  detail::ensure_context(device_);
  const unsigned g = detail::context_generation(device_);
  if (state_->generation.load(std::memory_order_acquire) != g) {
    std::lock_guard lock(state_->renew_mu);
    if (state_->generation.load() != g) {
      CUmemoryPool fresh = create_pool(device_);
      for (int peer = 0; peer < 64; ++peer)
        if (state_->peers >> peer & 1) grant_access(fresh, peer);
      if (CUmemoryPool old = state_->pool.exchange(fresh)) detail::driver().cuMemPoolDestroy(old);
      {  // the cached blocks died with the context
        std::lock_guard cache(state_->cache_mu);
        state_->cached.clear();
        state_->cached_bytes = 0;
      }
      state_->used = 0;
      state_->generation.store(g, std::memory_order_release);
    }
  }
  return state_->pool.load(std::memory_order_acquire);
}

std::size_t parse_memory_limit(const std::string& text, std::size_t device_total) {
  auto fail = [&] {
    return Error(fmt::format("FUSION_GPU_MEMORY_LIMIT='{}' is not a byte count or a percentage like '50%'", text));
  };
  if (text.empty()) return 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0) throw fail();
  if (*end == '%' && end[1] == '\0') {
    if (v > 100) throw fail();
    return static_cast<std::size_t>(static_cast<double>(device_total) * v / 100.0);
  }
  if (*end != '\0') throw fail();
  return static_cast<std::size_t>(v);
}

MemoryPool::MemoryPool(int device) : device_(device), state_(new State) {
  live_pool();
  if (const char* env = std::getenv("FUSION_BLOCK_CACHE")) state_->cache_on = std::string(env) != "0";
  detail::set_stream_release_hook(&detail::forget_stream_blocks);  // a stream's cached blocks go before it does
  if (const char* env = std::getenv("FUSION_GPU_MEMORY_LIMIT"))
    state_->limit = parse_memory_limit(env, detail::properties_of(device).total_memory);
}

MemoryPool::~MemoryPool() { delete state_; }  // the driver pool lives until process exit

std::size_t MemoryPool::used_bytes() const {
  live_pool();  // a reset since the last call empties the pool
  return state_->used;
}

std::size_t MemoryPool::total_bytes() const {
  const CUmemoryPool pool = live_pool();
  cuuint64_t v = 0;
  FUSION_CU(cuMemPoolGetAttribute, pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v);
  return v;
}

void MemoryPool::free_all_blocks() {
  const CUmemoryPool pool = live_pool();
  detail::BlockCache::flush(*state_, nullptr, true);
  FUSION_CU(cuCtxSynchronize);  // pending stream-ordered frees must complete before their blocks can go back
  FUSION_CU(cuMemPoolTrimTo, pool, 0);
}

void MemoryPool::allow_access_from(int device) {
  detail::checked_device(device);
  if (device == device_) return;  // its own memory
  live_pool();  // renewed first after a reset, so the grant lands on the pool in use
  std::lock_guard lock(state_->renew_mu);
  if (state_->peers >> device & 1) return;
  CUdevice accessor, owner;
  FUSION_CU(cuDeviceGet, &accessor, device);
  FUSION_CU(cuDeviceGet, &owner, device_);
  int can = 0;
  FUSION_CU(cuDeviceCanAccessPeer, &can, accessor, owner);
  if (!can)
    throw Error(
        fmt::format("MemoryPool::allow_access_from: device {} cannot reach device {}'s memory (no peer access "
                    "between them); copy through the host instead (fz::to_device picks that route itself)",
                    device, device_));
  grant_access(state_->pool.load(), device);
  state_->peers |= std::uint64_t{1} << device;
}

void MemoryPool::set_limit(std::size_t bytes) { state_->limit = bytes; }
std::size_t MemoryPool::limit() const { return state_->limit; }

std::uint64_t MemoryPool::allocate(std::size_t bytes, void* stream) {
  if (bytes == 0) return 0;
  const CUmemoryPool pool = live_pool();
  const std::size_t limit = state_->limit;
  // Reserve the bytes only if they fit: a refused request never counts as in use, so that one past the limit
  // cannot fail other threads' allocations while it is being refused (fusion-soak found that).
  std::size_t before = state_->used.load();
  do {
    if (limit && before + bytes > limit)
      throw OutOfMemoryError(fmt::format(
          "allocating {} bytes on device {} would exceed the memory limit of {} bytes ({} bytes in use). Free arrays, "
          "or raise the limit with default_memory_pool().set_limit() or FUSION_GPU_MEMORY_LIMIT.",
          bytes, device_, limit, before));
  } while (!state_->used.compare_exchange_weak(before, before + bytes));
  CUdeviceptr p = 0;
  auto s = static_cast<CUstream>(stream);
  if (detail::BlockCache::usable(*state_, bytes, s))
    if ((p = detail::BlockCache::take(*state_, bytes, s)) != 0) return p;
  CUresult r = detail::driver().cuMemAllocFromPoolAsync(&p, bytes, pool, s);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {  // cached blocks may be what is missing: release them and retry once
    detail::BlockCache::flush(*state_, nullptr, true);
    detail::driver().cuCtxSynchronize();
    detail::driver().cuMemPoolTrimTo(pool, 0);
    r = detail::driver().cuMemAllocFromPoolAsync(&p, bytes, pool, s);
  }
  if (r != CUDA_SUCCESS) {
    state_->used -= bytes;
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
      throw OutOfMemoryError(fmt::format("out of memory on device {} allocating {} bytes ({} bytes in use by fusion, "
                                         "device total {}).", device_, bytes, before,
                                         detail::properties_of(device_).total_memory));
    detail::check(r, "cuMemAllocFromPoolAsync");
  }
  return p;
}

void MemoryPool::deallocate(std::uint64_t ptr, std::size_t bytes, void* stream) {
  if (!ptr) return;
  detail::ensure_context(device_);
  const auto s = static_cast<CUstream>(stream);
  state_->used -= bytes;
  if (detail::BlockCache::usable(*state_, bytes, s)) return detail::BlockCache::keep(*state_, ptr, bytes, s);
  CUresult r = detail::driver().cuMemFreeAsync(ptr, s);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED) detail::check(r, "cuMemFreeAsync");
}

namespace {
struct Pools {
  std::mutex mu;
  MemoryPool* by_device[64] = {};  // never destroyed: frees may run at exit
};
Pools& pools() {
  static Pools p;
  return p;
}
}  // namespace

MemoryPool& memory_pool(int device) {
  detail::checked_device(device);
  Pools& all = pools();
  std::lock_guard lock(all.mu);
  if (!all.by_device[device]) all.by_device[device] = new MemoryPool(device);
  return *all.by_device[device];
}

namespace detail {

void set_block_cache(MemoryPool& pool, bool on) { BlockCache::set(pool, on); }
std::size_t cached_blocks(const MemoryPool& pool) { return BlockCache::count(pool); }

void forget_stream_blocks(int device, CUstream_st* stream) {
  if (device < 0 || device >= 64) return;
  MemoryPool* pool = nullptr;
  {
    std::lock_guard lock(pools().mu);
    pool = pools().by_device[device];
  }
  if (pool) BlockCache::forget(*pool, stream);
}

}  // namespace detail

MemoryPool& default_memory_pool() { return memory_pool(detail::enter_current_device()); }

}  // namespace fusion
