// SPDX-License-Identifier: Apache-2.0
// Arrays over several GPUs in one process (issue 18): `Sharded<T>` holds one array per device, either the
// pieces of one array split along an axis or one whole array per device (a replica, or each device's
// partial result). `map_shards` runs a fused expression per device, each on that device's current stream,
// all enqueued before anything waits; `all_reduce` combines per-device results with NCCL. One GPU per
// process instead: fusion/process_group.hpp.
//
//   auto x = fz::Sharded<float>::from_host(host_x, {n}, {0, 1});          // halves on GPUs 0 and 1
//   auto y = fz::Sharded<float>::from_host(host_y, {n}, {0, 1});
//   auto z = fz::map_shards([](auto& x, auto& y) { return 2.5f * x + y; }, x, y);  // a kernel per GPU
//   auto w = fz::map_shards([](auto& x, auto& b) { return x * b; }, x, bias);     // bias: an Array, copied once
//   auto d = fz::map_shards([](auto& x, auto& y) { return fz::sum(x * y); }, x, y);  // a partial per GPU
//   fz::all_reduce(d);                                                    // NCCL: the total on each GPU
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fusion/array.hpp"
#include "fusion/device.hpp"
#include "fusion/distributed.hpp"
#include "fusion/error.hpp"
#include "fusion/inspect.hpp"
#include "fusion/transfer.hpp"
#include "fusion/detail/sharded_support.hpp"

namespace fusion {

template <Element T> class Sharded {
 public:
  using value_type = T;

  /// Adopts `pieces` (one per device, in order): split along `axis`, or one whole array per device when
  /// `axis` is -1.
  Sharded(std::vector<Array<T>> pieces, int axis) : pieces_(std::move(pieces)), axis_(axis) {
    std::vector<const ArrayBase*> p;
    for (const Array<T>& a : pieces_) p.push_back(&a);
    detail::check_pieces(p, axis_);
  }

  /// Splits host `data` (C order, `shape`) along `axis` over `devices`: `sizes` along the axis, or
  /// numpy.array_split's rule when empty (the first parts one larger; parts may be empty). A device may
  /// repeat (several pieces on one GPU).
  static Sharded from_host(std::span<const T> data, const Shape& shape, std::vector<int> devices, int axis = 0,
                           std::vector<std::int64_t> sizes = {}) {
    if (static_cast<std::int64_t>(data.size()) != numel(shape))
      throw ShapeError("Sharded::from_host: " + std::to_string(data.size()) + " elements for a shape of " +
                       to_string(shape));
    sizes = detail::split_plan("Sharded::from_host", shape, axis, devices.size(), std::move(sizes));
    std::vector<Array<T>> pieces;
    std::int64_t begin = 0;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      Shape piece = shape;
      piece[axis] = sizes[i];
      detail::HostSlab<T> slab(numel(piece));
      detail::extract_slab(data.data(), shape, axis, begin, sizes[i], sizeof(T), slab.data());
      DeviceScope on{Device(devices[i])};
      pieces.push_back(asarray(slab.span(), piece));
      begin += sizes[i];
    }
    return Sharded(std::move(pieces), axis);
  }
  static Sharded from_host(const std::vector<T>& data, const Shape& shape, std::vector<int> devices, int axis = 0,
                           std::vector<std::int64_t> sizes = {}) {
    std::optional<detail::HostSlab<T>> keep;
    return from_host(detail::host_span(data, keep), shape, std::move(devices), axis, std::move(sizes));
  }
  /// Splits a device array along `axis` over `devices` (the rule and `sizes` as from_host), each piece
  /// copied to its device with fz::to_device (peer or staged; see describe_copy_route).
  static Sharded scatter(const Array<T>& a, std::vector<int> devices, int axis = 0,
                         std::vector<std::int64_t> sizes = {}, CopyRoute route = CopyRoute::automatic) {
    const Shape& shape = a.shape();
    sizes = detail::split_plan("Sharded::scatter", shape, axis, devices.size(), std::move(sizes));
    std::vector<Array<T>> pieces;
    std::int64_t begin = 0;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      std::vector<Slice> take(static_cast<std::size_t>(shape.size()));
      take[static_cast<std::size_t>(axis)] = Slice{begin, begin + sizes[i]};
      pieces.push_back(to_device(a.slice(take), devices[i], route));
      begin += sizes[i];
    }
    return Sharded(std::move(pieces), axis);
  }
  /// The whole array on `device` (the pieces copied there and written side by side; axis >= 0), or a copy
  /// of the first device's array (axis -1).
  Array<T> gather(int device, CopyRoute route = CopyRoute::automatic) const {
    if (axis_ < 0) return to_device(pieces_.at(0), device, route);
    DeviceScope on{Device(device)};
    Array<T> whole = empty<T>(shape());
    std::int64_t begin = 0;
    for (const Array<T>& p : pieces_) {
      std::vector<Slice> take(static_cast<std::size_t>(whole.ndim()));
      take[static_cast<std::size_t>(axis_)] = Slice{begin, begin + p.shape()[axis_]};
      Array<T> part = whole.slice(take);
      if (p.size() > 0) copyto(part, p.device() == device ? p : to_device(p, device, route));
      begin += p.shape()[axis_];
    }
    return whole;
  }
  /// A copy of `a` on each of `devices` (fz::to_device: peer or staged, see describe_copy_route), e.g. a
  /// bias every piece broadcasts against, or a start value for all_reduce.
  static Sharded replicate(const Array<T>& a, const std::vector<int>& devices, CopyRoute route = CopyRoute::automatic) {
    std::vector<Array<T>> pieces;
    for (int d : devices) pieces.push_back(to_device(a, d, route));
    return Sharded(std::move(pieces), -1);
  }

  /// The whole array in C order (axis >= 0), or the first device's array (axis -1), waiting for each piece.
  std::vector<T> to_host() const {
    if (axis_ < 0) return pieces_.at(0).to_host();
    const Shape whole = shape();
    detail::HostSlab<T> out(numel(whole));
    std::int64_t begin = 0;
    for (const Array<T>& p : pieces_) {
      detail::HostSlab<T> slab(p.size());
      p.download(slab.data());
      detail::insert_slab(slab.data(), whole, axis_, begin, p.shape()[axis_], sizeof(T), out.data());
      begin += p.shape()[axis_];
    }
    return std::vector<T>(out.span().begin(), out.span().end());
  }

  /// The whole array's shape (axis >= 0) or each device's (axis -1).
  Shape shape() const {
    Shape s = pieces_.at(0).shape();
    if (axis_ >= 0) {
      s[axis_] = 0;
      for (const Array<T>& p : pieces_) s[axis_] += p.shape()[axis_];
    }
    return s;
  }
  int axis() const { return axis_; }
  int count() const { return static_cast<int>(pieces_.size()); }  ///< pieces, one per device
  const Array<T>& operator[](int i) const { return pieces_.at(static_cast<std::size_t>(i)); }
  Array<T>& operator[](int i) { return pieces_.at(static_cast<std::size_t>(i)); }
  int device(int i) const { return (*this)[i].device(); }
  std::vector<int> devices() const {
    std::vector<int> d;
    for (const Array<T>& p : pieces_) d.push_back(p.device());
    return d;
  }
  /// The same arrays read as the pieces of one array along `axis`, or as one array per device (-1): map_shards
  /// cannot tell row sums of a matrix split by rows from per-device partials, so `map_shards(row_sums,
  /// x).along(0)` says which. Checked as the constructor checks.
  Sharded along(int axis) && { return Sharded(std::move(pieces_), axis); }
  /// The pieces' extents along the axis (empty for axis -1).
  std::vector<std::int64_t> sizes() const {
    std::vector<std::int64_t> s;
    if (axis_ >= 0)
      for (const Array<T>& p : pieces_) s.push_back(p.shape()[axis_]);
    return s;
  }

 private:
  std::vector<Array<T>> pieces_;
  int axis_;
};

/// Drops every cached replica (map_shards' copies of unsplit arrays on other devices), freeing their memory;
/// returns how many there were. They are also dropped when their source array is freed.
std::size_t forget_replicas();

/// `f(piece_a, piece_b, ...)` for each device: one fused evaluation per device, under that device's scope
/// (its current stream, its memory pool), every device's kernels enqueued before any waits. Results shaped
/// as their split pieces form a Sharded along the same axis. Other results (reductions) are pieces along
/// the axis the split axis became (row sums of a matrix split by rows), or one partial per device where it
/// was reduced away (a sum over everything): `f`'s expression is built once more over placeholder pieces
/// one element longer along the split axis (never run) to tell which. `.along(axis)` overrides. An argument
/// may be a plain Array (a bias, a scale): every piece broadcasts against it, copied to each other device
/// once and reused while fusion sees no write to it (detail::replicas; forget_replicas frees the copies).
template <class F, class... X>
requires(sizeof...(X) > 0 &&
         (... || detail::is_sharded<X>)&&(... && (detail::is_sharded<X> ||
                                                  detail::is_array<X>))) auto map_shards(F&& f, const X&... x) {
  std::vector<int> devices;  // the first Sharded argument's: arrays are replicated over them
  (detail::take_devices(devices, x), ...);
  return detail::map_sharded(std::forward<F>(f), detail::as_shards(x, devices)...);
}

/// What map_shards(f, x, y, ...) runs on each device, in device order: fz::inspect of `f`'s expression over
/// that device's pieces, compiled for its device (not launched; placeholder pieces work without a GPU).
/// `f` must return an expression, as map_shards' functions usually do; plain arrays stand in as they are.
template <class F, class... X>
requires(sizeof...(X) > 0 && (... || detail::is_sharded<X>)&&(... && (detail::is_sharded<X> || detail::is_array<X>)))
    std::vector<KernelInfo> inspect_shards(F&& f, const X&... x) {
  std::vector<int> devices;
  (detail::take_devices(devices, x), ...);
  detail::check_shard_arguments({detail::devices_or(x, devices)...}, {detail::axis_of(x)...}, {detail::sizes_of(x)...});
  std::vector<KernelInfo> plans;
  const bool gpus = device_count() > 0;  // without one, inspect compiles for FUSION_ARCH
  for (int i = 0; i < static_cast<int>(devices.size()); ++i) {
    std::optional<DeviceScope> on;  // placeholders (device -1) compile for the current device
    if (gpus && devices[static_cast<std::size_t>(i)] >= 0) on.emplace(Device(devices[static_cast<std::size_t>(i)]));
    plans.push_back(inspect(f(detail::piece_for_inspect(x, i)...)));
  }
  return plans;
}

/// What all_reduce(s, how) runs, in words: the NCCL call, the element count and type, the devices.
template <Element T> std::string describe_all_reduce(const Sharded<T>& s, Combine how = Combine::sum) {
  return detail::describe_combine(s.devices(), numel(s.shape()), dtype_of<T>, how, -1);
}
/// What reduce_to(s, root, how) runs, in words.
template <Element T> std::string describe_reduce_to(const Sharded<T>& s, int root, Combine how = Combine::sum) {
  return detail::describe_combine(s.devices(), numel(s.shape()), dtype_of<T>, how, root);
}

/// Combines one array per device (e.g. map_shards' partial reductions) element by element with NCCL, in
/// place: afterwards every device holds the result. Deterministic for a fixed set of devices.
template <Element T>
void all_reduce(Sharded<T>& s, Combine how = Combine::sum) {
  detail::combine_shards(s, how, -1, "all_reduce");
}

/// The same combination written only into `s[root]` (NCCL's reduce: for a result one device needs, e.g. a
/// loss to print); the other devices' arrays are inputs only.
template <Element T> void reduce_to(Sharded<T>& s, int root, Combine how = Combine::sum) {
  if (root < 0) throw Error("reduce_to: root " + std::to_string(root) + " is not an index of the Sharded's arrays");
  detail::combine_shards(s, how, root, "reduce_to");
}

}  // namespace fusion
