// SPDX-License-Identifier: Apache-2.0
// Sharded arrays (issue 18): host slabs along an axis, the checks on pieces and map_shards' arguments, and
// all_reduce through NCCL with a communicator per device list, made once.
#include "fusion/sharded.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "runtime/distributed/nccl.hpp"
#include "runtime/distributed/collective.hpp"
#include "schedule/matmul_layout.hpp"
#include "schedule/reduce_layout.hpp"
#include "runtime/cuda/stream_state.hpp"

namespace fusion::detail {

namespace {

/// Walks the slab [begin, begin + size) along `axis` of a C-ordered `shape` as contiguous runs: `outer`
/// runs of `size * inner` elements, each `extent * inner` apart in the whole.
template <class Copy>
void for_each_run(const Shape& shape, int axis, std::int64_t begin, std::int64_t size, Copy&& copy) {
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (int d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const std::int64_t run = size * inner, stride = shape[axis] * inner;
  if (run == 0) return;  // an empty slab: nothing to copy (and its buffer may be null)
  for (std::int64_t o = 0; o < outer; ++o) copy(o * stride + begin * inner, o * run, run);
}

/// One communicator per device, for a list of distinct devices: made on first use, kept for the process.
const std::vector<nccl::Comm>& communicators(const std::vector<int>& devices) {
  static std::mutex mu;
  static std::map<std::vector<int>, std::vector<nccl::Comm>> made;
  std::lock_guard lock(mu);
  auto it = made.find(devices);
  if (it != made.end()) return it->second;
  const nccl::Api& api = nccl::api();
  std::vector<nccl::Comm> comms(devices.size());
  nccl::check(api.ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()), "ncclCommInitAll");
  return made.emplace(devices, std::move(comms)).first->second;
}

}  // namespace

void extract_slab(const void* whole, const Shape& shape, int axis, std::int64_t begin, std::int64_t size,
                  std::size_t item, void* slab) {
  for_each_run(shape, axis, begin, size, [&](std::int64_t from, std::int64_t to, std::int64_t n) {
    std::memcpy(static_cast<char*>(slab) + to * static_cast<std::int64_t>(item),
                static_cast<const char*>(whole) + from * static_cast<std::int64_t>(item),
                static_cast<std::size_t>(n) * item);
  });
}

void insert_slab(const void* slab, const Shape& shape, int axis, std::int64_t begin, std::int64_t size,
                 std::size_t item, void* whole) {
  for_each_run(shape, axis, begin, size, [&](std::int64_t to, std::int64_t from, std::int64_t n) {
    std::memcpy(static_cast<char*>(whole) + to * static_cast<std::int64_t>(item),
                static_cast<const char*>(slab) + from * static_cast<std::int64_t>(item),
                static_cast<std::size_t>(n) * item);
  });
}

void check_pieces(std::span<const ArrayBase* const> pieces, int axis) {
  if (pieces.empty()) throw Error("Sharded: no pieces (one array per device is needed)");
  const Shape& first = pieces[0]->shape();
  if (axis < -1 || axis >= first.size())
    throw ShapeError(fmt::format(
        "Sharded: axis {} is out of range for pieces of rank {} (-1: one whole array per device)", axis, first.size()));
  for (std::size_t i = 1; i < pieces.size(); ++i) {
    const Shape& s = pieces[i]->shape();
    bool same = s.size() == first.size();
    for (int d = 0; same && d < s.size(); ++d) same = d == axis || s[d] == first[d];
    if (!same)
      throw ShapeError(fmt::format(
          "Sharded: piece {} has shape {} where piece 0 has {}: {}", i, to_string(s), to_string(first),
          axis < 0 ? "one array per device needs equal shapes" : fmt::format("only axis {} may differ", axis)));
  }
}

void check_shard_arguments(const std::vector<std::vector<int>>& devices, const std::vector<int>& axes,
                           const std::vector<std::vector<std::int64_t>>& sizes) {
  int split = -1;
  for (std::size_t k = 0; k < axes.size(); ++k) {
    if (devices[k] != devices[0])
      throw Error(fmt::format(
          "map_shards: argument {} lives on devices ({}), argument 0 on ({}): pieces must pair up device by device", k,
          fmt::join(devices[k], ", "), fmt::join(devices[0], ", ")));
    if (axes[k] < 0) continue;
    if (split < 0) {
      split = static_cast<int>(k);
      continue;
    }
    if (axes[k] != axes[static_cast<std::size_t>(split)] || sizes[k] != sizes[static_cast<std::size_t>(split)])
      throw ShapeError(
          fmt::format("map_shards: argument {} is split along axis {} into ({}), argument {} along axis {} into ({}): "
                      "split both alike",
                      k, axes[k], fmt::join(sizes[k], ", "), split, axes[static_cast<std::size_t>(split)],
                      fmt::join(sizes[static_cast<std::size_t>(split)], ", ")));
  }
}

void combine(std::span<ArrayBase* const> arrays, Combine how, int root) {
  const char* who = root < 0 ? "all_reduce" : "reduce_to";
  std::vector<int> devices;
  for (const ArrayBase* a : arrays) devices.push_back(a->device());
  if (root >= static_cast<int>(arrays.size()))
    throw Error(fmt::format("reduce_to: root {} is not one of the {} arrays' indices", root, arrays.size()));
  if (std::set<int>(devices.begin(), devices.end()).size() != devices.size())
    throw Error(fmt::format("{}: devices ({}) repeat: NCCL takes one rank per GPU; combine pieces on one GPU with an "
                            "ordinary reduction first", who, fmt::join(devices, ", ")));
  for (const ArrayBase* a : arrays) {
    if (a->shape() != arrays[0]->shape() || a->dtype() != arrays[0]->dtype())
      throw ShapeError(fmt::format("{}: {} {} on device {} and {} {} on device {} differ", who, dtype_name(a->dtype()),
                                   to_string(a->shape()), a->device(), dtype_name(arrays[0]->dtype()),
                                   to_string(arrays[0]->shape()), arrays[0]->device()));
    if (!a->is_contiguous())
      throw Error(fmt::format("{}: the arrays must be contiguous (a view is not: copy it first)", who));
  }
  nccl::data_type(arrays[0]->dtype());  // a TypeError for a dtype NCCL lacks, before any communicator is made
  const nccl::Api& api = nccl::api();
  const std::vector<nccl::Comm>& comms = communicators(devices);
  // One group: NCCL launches every device's part before any waits (a single host thread drives them all).
  nccl::check(api.ncclGroupStart(), "ncclGroupStart");
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const nccl::Result r = enqueue_collective(*arrays[i], comms[i], how, root, who);
    if (r != 0) {
      api.ncclGroupEnd();
      nccl::check(r, root < 0 ? "ncclAllReduce" : "ncclReduce");
    }
  }
  nccl::check(api.ncclGroupEnd(), "ncclGroupEnd");
}

nccl::Result enqueue_collective(ArrayBase& a, nccl::Comm comm, Combine how, int root, const char* who) {
  if (!a.is_contiguous())
    throw Error(fmt::format("{}: the arrays must be contiguous (a view is not: copy it first)", who));
  DeviceScope on{Device(a.device())};
  void* data = reinterpret_cast<void*>(a.data_ptr());
  const auto count = static_cast<std::size_t>(a.size());
  const CUstream stream = current_stream_state()->handle;
  make_context_current(a.device());  // last: a default stream's handle means the current context's
  if (root < 0)
    return nccl::api().ncclAllReduce(data, data, count, nccl::data_type(a.dtype()), nccl::red_op(how), comm, stream);
  return nccl::api().ncclReduce(data, data, count, nccl::data_type(a.dtype()), nccl::red_op(how), root, comm, stream);
}

}  // namespace fusion::detail

namespace fusion::detail {

Shape reduced_shape(const Shape& in, const ReduceArg& arg) { return reduced_shapes(in, arg).out; }
Shape product_shape(const Shape& a, const Shape& b) { return matmul_shape(a, b); }

int result_split_axis(const std::optional<Shape>& probe, const std::vector<Shape>& results) {
  auto differing = [](const Shape& x, const Shape& y) {  // the one axis where two shapes of one rank differ, else -1
    if (x.size() != y.size()) return -1;
    int axis = -1;
    for (int d = 0; d < x.size(); ++d)
      if (x[d] != y[d]) {
        if (axis >= 0) return -1;
        axis = d;
      }
    return axis;
  };
  if (probe) return differing(*probe, results.at(0));
  // f evaluated inside: results of different shapes differ along the split axis; equal ones are partials
  for (const Shape& r : results)
    if (const int axis = differing(r, results.at(0)); axis >= 0) return axis;
  return -1;
}

}  // namespace fusion::detail

namespace fusion::detail {

std::vector<std::int64_t> split_plan(const char* who, const Shape& shape, int axis, std::size_t n_devices,
                                     std::vector<std::int64_t> sizes) {
  if (axis < 0 || axis >= shape.size())
    throw ShapeError(fmt::format("{}: axis {} is out of range for shape {}", who, axis, to_string(shape)));
  if (n_devices == 0) throw Error(fmt::format("{}: no devices given", who));
  if (sizes.empty()) sizes = split_sizes(shape[axis], static_cast<int>(n_devices));
  if (sizes.size() != n_devices)
    throw ShapeError(fmt::format("{}: {} sizes for {} devices", who, sizes.size(), n_devices));
  check_split(shape[axis], sizes);
  return sizes;
}

}  // namespace fusion::detail

namespace fusion::detail {

std::string describe_combine(const std::vector<int>& devices, std::int64_t count, DType dtype, Combine how, int root) {
  const char* names[] = {"sum", "prod", "max", "min"};
  if (root >= static_cast<int>(devices.size()))
    throw Error(fmt::format("reduce_to: root {} is not one of the {} arrays' indices", root, devices.size()));
  const std::string call =
      root < 0 ? "ncclAllReduce"
               : fmt::format("ncclReduce to device {} (index {})", devices.at(static_cast<std::size_t>(root)), root);
  return fmt::format("{} ({}) in place, {} {} per device, devices ({}), one NCCL group call", call,
                     names[static_cast<int>(how)], count, dtype_name(dtype), fmt::join(devices, ", "));
}

}  // namespace fusion::detail
