// SPDX-License-Identifier: Apache-2.0
// The device pool's cache of freed blocks (detail::BlockCache in memory_pool.cpp): each kept for the next allocation of
// its size on the stream that freed it, so that allocation makes no driver call. On unless FUSION_BLOCK_CACHE=0.
#pragma once
#include <cstddef>

#include "fusion/memory.hpp"

namespace fusion::detail {

/// Turns `pool`'s block cache on or off (off frees what it holds, in each block's stream order).
void set_block_cache(MemoryPool& pool, bool on);
/// Blocks `pool` holds for reuse.
std::size_t cached_blocks(const MemoryPool& pool);
/// Frees the blocks device `device`'s pool holds for `stream` (about to be destroyed: the stream release hook).
void forget_stream_blocks(int device, CUstream_st* stream);

}  // namespace fusion::detail
