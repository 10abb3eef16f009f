// SPDX-License-Identifier: Apache-2.0
// Machinery behind fz::Sharded and fz::ProcessGroup, not part of the API: host slabs and how an array splits
// into them, the checks of a split, the NCCL combine over devices.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "fusion/array.hpp"
#include "fusion/distributed.hpp"

namespace fusion {

namespace detail {
/// The slab [begin, begin + size) along `axis` of a C-ordered host array of `shape` (elements of `item`
/// bytes), copied out of the whole into a C-ordered `slab` (extract) or back into the whole (insert).
void extract_slab(const void* whole, const Shape& shape, int axis, std::int64_t begin, std::int64_t size,
                  std::size_t item, void* slab);
void insert_slab(const void* slab, const Shape& shape, int axis, std::int64_t begin, std::int64_t size,
                 std::size_t item, void* whole);
/// The extents of the pieces of `shape` split along `axis` over `n_devices`: `sizes` checked (a ShapeError
/// or Error, naming `who`, says what is wrong with the axis, the device list or the sizes), or when empty
/// numpy.array_split's.
std::vector<std::int64_t> split_plan(const char* who, const Shape& shape, int axis, std::size_t n_devices,
                                     std::vector<std::int64_t> sizes);
/// Checks pieces for a Sharded: a piece per device, equal shapes off `axis` (every shape equal for axis -1);
/// `axis` in range. A ShapeError or Error says what differs.
void check_pieces(std::span<const ArrayBase* const> pieces, int axis);
/// Combines `arrays` (one per device, distinct devices, equal shapes and dtypes, contiguous) in place with
/// NCCL, each on its device's current stream: into every array (`root` -1, all-reduce) or into arrays[root]
/// (reduce). Communicators are made once per device list.
void combine(std::span<ArrayBase* const> arrays, Combine how, int root);
/// Host memory for `n` elements with a pointer to them, bool included (std::vector<bool> packs bits).
template <Element T> class HostSlab {
 public:
  explicit HostSlab(std::int64_t n) : n_(static_cast<std::size_t>(n)), p_(new T[n_]()) {}
  T* data() { return p_.get(); }
  std::span<const T> span() const { return {p_.get(), n_}; }

 private:
  std::size_t n_;
  std::unique_ptr<T[]> p_;
};
/// `v` as a span; for std::vector<bool> through a HostSlab kept in `keep`.
template <Element T> std::span<const T> host_span(const std::vector<T>& v, std::optional<HostSlab<T>>& keep) {
  if constexpr (std::is_same_v<T, bool>) {
    keep.emplace(static_cast<std::int64_t>(v.size()));
    std::copy(v.begin(), v.end(), keep->data());
    return keep->span();
  } else {
    return std::span<const T>(v);
  }
}
template <class X> auto as_array(X&& x) {
  if constexpr (requires {
                  typename std::decay_t<X>::value_type;
                  x.to_host();
                  x.data_ptr();
                })
    return std::forward<X>(x);
  else return fusion::eval(x);
}
}  // namespace detail

}  // namespace fusion
