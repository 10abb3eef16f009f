// SPDX-License-Identifier: Apache-2.0
// map_shards' replicas: an array that is not split, broadcast against every device's piece, is copied to
// each other device once and reused while fusion has seen no write to it (Storage::writes). Memory whose
// address escaped (a raw pointer, DLPack, memory made elsewhere) may change unseen: it is copied each time.
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "fusion/sharded.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/memory/device_copy.hpp"
#include "runtime/memory/storage.hpp"

namespace fusion {
namespace {

struct Replica {
  std::weak_ptr<detail::Storage> source;  // expired: the source is gone and so is the entry
  std::uint64_t writes = 0;               // the source's write count when copied
  ArrayBase copy{DType::float32};
  std::shared_ptr<detail::StreamState> stream;  // the copy was enqueued there
};
// a view of the source (its memory, offset, dtype, shape and strides) on one device
using Key = std::tuple<const detail::Storage*, std::int64_t, DType, std::vector<std::int64_t>, int>;
Key key_of(const ArrayBase& a, int device) {
  std::vector<std::int64_t> layout(a.shape().begin(), a.shape().end());
  layout.insert(layout.end(), a.strides().begin(), a.strides().end());
  return {a.storage().get(), a.offset(), a.dtype(), std::move(layout), device};
}

struct ReplicaCache {
  std::mutex mu;
  std::map<Key, Replica> entries;
};
ReplicaCache& cache() {
  static auto* c = new ReplicaCache;  // outlives static arrays
  return *c;
}

ArrayBase replica_on(const ArrayBase& a, int device) {
  const std::shared_ptr<detail::Storage>& storage = a.storage();
  if (!storage || storage->escaped || storage->external) return detail::copy_to_device(a, device, CopyRoute::automatic);
  ReplicaCache& c = cache();
  std::lock_guard lock(c.mu);
  for (auto it = c.entries.begin(); it != c.entries.end();)  // forget replicas of arrays that are gone
    it = it->second.source.expired() ? c.entries.erase(it) : std::next(it);
  const Key key = key_of(a, device);
  auto it = c.entries.find(key);
  const std::uint64_t writes = storage->writes.load(std::memory_order_relaxed);
  if (it != c.entries.end() && it->second.writes == writes) {
    DeviceScope on{Device(device)};
    detail::order_after(current_stream(), Stream(it->second.stream));  // the copy first, on any stream
    return it->second.copy;
  }
  Replica r{storage, writes, detail::copy_to_device(a, device, CopyRoute::automatic), nullptr};
  {
    DeviceScope on{Device(device)};
    r.stream = detail::current_stream_state();
  }
  ArrayBase copy = r.copy;
  c.entries.insert_or_assign(key, std::move(r));
  return copy;
}

}  // namespace

namespace detail {

std::vector<ArrayBase> replicas(const ArrayBase& a, const std::vector<int>& devices) {
  std::vector<ArrayBase> out;
  for (int d : devices) out.push_back(d == a.device() ? a : replica_on(a, d));
  return out;
}

}  // namespace detail

std::size_t forget_replicas() {
  ReplicaCache& c = cache();
  std::lock_guard lock(c.mu);
  const std::size_t n = c.entries.size();
  c.entries.clear();
  return n;
}

}  // namespace fusion
