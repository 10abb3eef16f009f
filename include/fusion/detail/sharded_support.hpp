// SPDX-License-Identifier: Apache-2.0
// Machinery behind fz::Sharded and fz::ProcessGroup, not part of the API: host slabs and how an array splits
// into them, the checks of a split, the NCCL combine over devices, and what map_shards, inspect_shards and
// the collectives run over a Sharded (replicas of plain arrays, the probe for the split axis of results).
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
#include "fusion/device.hpp"
#include "fusion/error.hpp"
#include "fusion/inspect.hpp"
#include "fusion/matmul.hpp"
#include "fusion/transfer.hpp"

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

// ---- map_shards, inspect_shards and the collectives over a Sharded (sharded.hpp) ----------------------
template <Element T> class Sharded;

namespace detail {
/// Checks that map_shards' arguments line up with the first split one: the same devices in order and, for
/// split arguments, the same axis and sizes. One whole array per device (axis -1) broadcasts as it is.
void check_shard_arguments(const std::vector<std::vector<int>>& devices, const std::vector<int>& axes,
                           const std::vector<std::vector<std::int64_t>>& sizes);

/// `a` on each of `devices`: itself on its own device, elsewhere a copy made once and reused while fusion
/// has seen no write to `a` (one per view and device; memory whose address escaped is copied each time).
std::vector<ArrayBase> replicas(const ArrayBase& a, const std::vector<int>& devices);
template <class X> inline constexpr bool is_sharded = false;
template <Element T> inline constexpr bool is_sharded<Sharded<T>> = true;
template <class X> inline constexpr bool is_array = false;
template <Element T> inline constexpr bool is_array<Array<T>> = true;
template <class X> const X& as_shards(const X& x, const std::vector<int>&) requires is_sharded<X> { return x; }
template <Element T> Sharded<T> as_shards(const Array<T>& a, const std::vector<int>& devices) {
  std::vector<Array<T>> pieces;
  for (ArrayBase& r : replicas(a, devices)) pieces.push_back(Array<T>(std::move(r)));
  return Sharded<T>(std::move(pieces), -1);
}
template <class X> void take_devices(std::vector<int>& devices, const X& x) {
  if constexpr (is_sharded<X>)
    if (devices.empty()) devices = x.devices();
}
template <class F, class A, class... B> auto map_sharded(F&& f, const Sharded<A>& a, const Sharded<B>&... b);

/// The shape of a reduction's result (ShapeError for a bad axis), as the evaluator computes it.
Shape reduced_shape(const Shape& in, const ReduceArg& arg);
/// The shape of a matrix product of arrays of shapes `a` and `b` (NumPy's matmul; a ShapeError as fz::matmul's).
Shape product_shape(const Shape& a, const Shape& b);
template <class E> inline constexpr bool is_product_node = false;
template <class A, class B, DType D> inline constexpr bool is_product_node<expr::MatMul<A, B, D>> = true;
/// The shape an expression (or array) evaluates to, computed from its arrays' shapes without running it.
template <class E> Shape structural_shape(const E& e) {
  if constexpr (is_product_node<E>) return product_shape(structural_shape(e.a), structural_shape(e.b));
  else if constexpr (requires { e.shape(); }) return e.shape();               // an Array
  else if constexpr (requires { e.array->shape(); }) return e.array->shape();  // an array by reference
  else if constexpr (requires { e.array.shape(); }) return e.array.shape();    // an array held
  else if constexpr (requires { e.arg; e.a; }) return reduced_shape(structural_shape(e.a), e.arg);
  else if constexpr (requires {
                       e.c;
                       e.a;
                       e.b;
                     })
    return broadcast_shapes(structural_shape(e.c), broadcast_shapes(structural_shape(e.a), structural_shape(e.b)));
  else if constexpr (requires { e.a; e.b; }) return broadcast_shapes(structural_shape(e.a), structural_shape(e.b));
  else if constexpr (requires { e.args; })
    return std::apply(
        [](const auto&... x) {
          Shape s;
          ((s = broadcast_shapes(s, structural_shape(x))), ...);
          return s;
        },
        e.args);
  else if constexpr (requires { e.a; }) return structural_shape(e.a);  // casts, unary ops, names
  else return Shape{};                                          // scalars
}
/// A piece for map_shards' probe: one element longer along its split axis (a placeholder: no memory).
template <Element T> Array<T> longer_piece(const Sharded<T>& s) {
  if (s.axis() < 0) return s[0];
  Shape shape = s[0].shape();
  shape[s.axis()] += 1;
  return placeholder<T>(shape);
}
/// Which axis of map_shards' results is split: `probe` is the result's shape over pieces one element
/// longer along the split axis (nullopt when `f` could not be probed), `results` the real results' shapes.
/// The axis where they differ, or -1 when none does (the split axis was reduced away: per-device partials).
int result_split_axis(const std::optional<Shape>& probe, const std::vector<Shape>& results);

template <class F, class A, class... B> auto map_sharded(F&& f, const Sharded<A>& a, const Sharded<B>&... b) {
  const std::vector<int> axes = {a.axis(), b.axis()...};
  detail::check_shard_arguments({a.devices(), b.devices()...}, axes, {a.sizes(), b.sizes()...});
  int split = -1;  // the first argument split along an axis: results shaped as its pieces are split alike
  for (std::size_t k = 0; k < axes.size() && split < 0; ++k)
    if (axes[k] >= 0) split = static_cast<int>(k);
  using R = typename decltype(detail::as_array(f(a[0], b[0]...)))::value_type;
  std::vector<Array<R>> out;
  std::vector<Shape> shapes;
  bool pieces = split >= 0;
  for (int i = 0; i < a.count(); ++i) {
    DeviceScope on{Device(a.device(i))};
    out.push_back(detail::as_array(f(a[i], b[i]...)));
    shapes.push_back(out.back().shape());
    const std::vector<Shape> in = {a[i].shape(), b[i].shape()...};
    pieces = pieces && shapes.back() == in[static_cast<std::size_t>(split)];
  }
  if (split < 0 || pieces) return Sharded<R>(std::move(out), pieces ? axes[static_cast<std::size_t>(split)] : -1);
  // A result shaped otherwise (a reduction): f once more over placeholder pieces one element longer along
  // the split axis tells whether the axis survives, and where (row sums of rows split: pieces along 0;
  // a sum over everything: one partial per device). f's expression is built, never run.
  std::optional<Shape> probe;
  try {
    probe = detail::structural_shape(f(detail::longer_piece(a), detail::longer_piece(b)...));
  } catch (const Error&) {  // f evaluates inside (placeholders cannot run): judge by the results' shapes
  }
  return Sharded<R>(std::move(out), detail::result_split_axis(probe, shapes));
}

/// An argument of inspect_shards as device i sees it: its piece, or a plain array as it is (not copied:
/// compiling needs no data on the device).
template <class X> const auto& piece_for_inspect(const X& x, int i) {
  if constexpr (is_sharded<X>) return x[i];
  else return x;
}
template <class X> std::vector<int> devices_or(const X& x, const std::vector<int>& others) {
  if constexpr (is_sharded<X>) return x.devices();
  else return others;
}
template <class X> int axis_of(const X& x) {
  if constexpr (is_sharded<X>) return x.axis();
  else return -1;
}
template <class X> std::vector<std::int64_t> sizes_of(const X& x) {
  if constexpr (is_sharded<X>) return x.sizes();
  else return {};
}

/// The NCCL call of all_reduce (root -1) or reduce_to in words.
std::string describe_combine(const std::vector<int>& devices, std::int64_t count, DType dtype, Combine how, int root);

template <Element T> void combine_shards(Sharded<T>& s, Combine how, int root, const char* who) {
  if (s.axis() >= 0)
    throw ShapeError(std::string(who) +
                     " combines one array per device (map_shards' results of a reduction, or replicas); this "
                     "Sharded holds the pieces of one array along axis " +
                     std::to_string(s.axis()));
  std::vector<ArrayBase*> arrays;
  for (int i = 0; i < s.count(); ++i) arrays.push_back(&s[i]);
  combine(arrays, how, root);
}
}  // namespace detail

}  // namespace fusion
