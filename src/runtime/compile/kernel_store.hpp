// SPDX-License-Identifier: Apache-2.0
// Where compiled kernels persist between processes. The disk cache is one store; a chain puts a shared
// read-only store (FUSION_CACHE_READONLY_DIR: a directory shipped with an application, or a team's
// prebuilt cache) in front of the writable one. The memory cache above them is per process.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "runtime/compile/cache_entry.hpp"

namespace fusion::detail {

class KernelStore {
 public:
  virtual ~KernelStore() = default;
  /// The entry for `key`, or nothing when absent or unusable (corrupt, another key): a miss, never an error.
  virtual std::optional<CacheEntry> load(const CacheKey& key) const = 0;
  /// Keeps a freshly compiled entry where it can; a store that cannot write ignores it.
  virtual void store(const CacheEntry& e) = 0;
  /// Where `key`'s entry is stored when this store writes it (for fz::inspect); empty when nowhere.
  virtual std::string location(const CacheKey& key) const = 0;
};

/// Looks in `first`, then in `second`; stores into `second` (first: read-only, second: writable).
class ChainedStore final : public KernelStore {
 public:
  ChainedStore(std::shared_ptr<const KernelStore> read_only, std::shared_ptr<KernelStore> writable)
      : first_(std::move(read_only)), second_(std::move(writable)) {}
  std::optional<CacheEntry> load(const CacheKey& key) const override {
    if (auto e = first_->load(key)) return e;
    return second_->load(key);
  }
  void store(const CacheEntry& e) override { second_->store(e); }
  /// Where a new entry for `key` goes (an entry found says where it was found: CacheEntry::location).
  std::string location(const CacheKey& key) const override { return second_->location(key); }

 private:
  std::shared_ptr<const KernelStore> first_;
  std::shared_ptr<KernelStore> second_;
};

/// The process's store: FUSION_CACHE_READONLY_DIR (if set) in front of the disk cache (DiskCache::instance()).
KernelStore& kernel_store();

}  // namespace fusion::detail
