// SPDX-License-Identifier: Apache-2.0
// Array<T>: an N-d GPU array with value semantics. Copies are deep; moves and views are cheap; a view
// keeps its storage alive. Assigning an expression evaluates it as one fused kernel.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "fusion/evaluate.hpp"
#include "fusion/pinned.hpp"
#include "fusion/ops.hpp"

namespace fusion {

template <class T> class Array : public ArrayBase {
  static_assert(
      Element<T>,
      "fz::Array<T>: T must be bool, std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t, "
      "std::uint16_t, std::uint32_t, std::uint64_t, fz::half, fz::bfloat16, float or double (long long, char and "
      "long double are other types; CUDA's __half and __nv_bfloat16 convert through <fusion/cuda_types.hpp>)");

 public:
  using value_type = T;
  static constexpr DType dtype_v = detail::dtype_or_float<T>();

  /// An empty array without memory; assigning to it allocates.
  Array() : ArrayBase(dtype_v) {}
  Array(const Array& o) : ArrayBase(o.contiguous_copy()) {}
  Array(Array&&) noexcept = default;
  /// Evaluates an expression into a new array of its shape (converting to T on store).
  template <Expression E>
  Array(const E& e) : ArrayBase(dtype_v) {
    detail::assign(*this, e, detail::AssignMode::fresh);
  }
  template <Element U> requires(!std::is_same_v<U, T>) explicit Array(const Array<U>& o) : ArrayBase(dtype_v) {
    detail::assign(*this, detail::to_node(o), detail::AssignMode::fresh);
  }

  /// Arrays are values: a copy copies the elements (`Array b = a;` is new memory; so is an Array put into
  /// std::make_tuple), and views (slice, transpose, ...) are the only way to share memory.
  /// Assignment, whatever the right-hand side (an array, a temporary such as `fz::eval(e)` or `f()`, an
  /// expression): of the same shape, it writes into this array's memory, so a view writes through to its
  /// base, like NumPy's `a[...] = b`; of another shape, this array becomes a new one of that shape.
  /// (A temporary's memory is taken over instead of copied where no one else can see this array's memory:
  /// the same result, no kernel.)
  Array& operator=(const Array& o) {
    if (this != &o) detail::assign(*this, detail::to_node(o), detail::AssignMode::replace);
    return *this;
  }
  Array& operator=(Array&& o) {
    if (this == &o) return *this;
    if (!memory_is_private() && o.has_storage() && o.shape() == shape())
      detail::assign(*this, detail::to_node(o), detail::AssignMode::replace);  // a view: write through
    else
      ArrayBase::operator=(std::move(o));
    return *this;
  }
  template <Expression E> Array& operator=(const E& e) {
    detail::assign(*this, e, detail::AssignMode::replace);
    return *this;
  }
  /// In place; the right-hand side broadcasts to this array's shape. One kernel.
  template <class E>
  requires(Operand<E> || CppScalar<E>) Array& operator+=(const E& e) { return update<ir::Op::add>(e); }
  template <class E>
  requires(Operand<E> || CppScalar<E>) Array& operator-=(const E& e) { return update<ir::Op::sub>(e); }
  template <class E>
  requires(Operand<E> || CppScalar<E>) Array& operator*=(const E& e) { return update<ir::Op::mul>(e); }
  template <class E>
  requires(Operand<E> || CppScalar<E>) Array& operator/=(const E& e) { return update<ir::Op::div>(e); }

  /// Elements in C order, after the work on the current stream of the array's device completes.
  std::vector<T> to_host() const {
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits: stage through bytes
      std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size()));
      download(bytes.data());
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      std::vector<T> v(static_cast<std::size_t>(size()));
      download(v.data());
      return v;
    }
  }
  /// Enqueues a copy of the elements, in C order, into `dst` on the current stream and returns at once;
  /// read `dst` after `dst.synchronize()` (or the stream's). ShapeError when the sizes differ.
  void copy_to(const PinnedBuffer<T>& dst) const { download_async(dst.memory()); }
  /// Enqueues a copy of `src` (C order) into this array (a view writes through) and returns at once;
  /// `src` must not change until the copy completed (`src.synchronize()`).
  void copy_from(const PinnedBuffer<T>& src) { upload_async(src.memory()); }
  /// Every element set to `value`, in place (views write through); one kernel on the current stream.
  Array& fill(T value) {
    detail::assign(*this, expr::Scalar<T>{{}, value}, detail::AssignMode::into);
    return *this;
  }
  /// The single element of a size-1 array (synchronizes).
  T item() const {
    if (size() != 1)
      throw ShapeError("item() needs an array of exactly one element; this one has shape " + to_string(shape()));
    T v;
    download(&v);
    return v;
  }

  Array reshape(Shape s) const { return Array(reshaped(s)); }
  Array transpose(std::vector<int> axes = {}) const { return Array(transposed(std::move(axes))); }
  /// NumPy's `a.take(indices, axis)`: fz::take (fusion/indexing.hpp), an expression reading this array at
  /// `indices` along `axis` (`table.take(ids, 0)`: a row per id); checked indices (IndexMode::raise).
  template <class I> auto take(I&& indices, int axis) const;
  Array slice(const std::vector<Slice>& per_axis) const { return Array(sliced(per_axis)); }
  /// NumPy's `a[i]`: the view of element i along the first axis, that axis dropped (negative i from the end).
  Array operator[](std::int64_t i) const { return Array(indexed({i})); }
  /// NumPy's `a[i, 1:3, ::2]` as `a(i, fz::slice(1, 3), fz::step(2))`: per leading axis an integer (dropped)
  /// or a slice (`fz::_` the whole axis); a view.
  template <class... A>
    requires(sizeof...(A) >= 1 && ((std::is_integral_v<A> || std::is_same_v<A, Slice>) && ...))
  Array operator()(const A&... per_axis) const {
    std::vector<std::variant<std::int64_t, Slice>> v;
    (v.push_back(index_argument(per_axis)), ...);
    return Array(indexed(v));
  }
  Array broadcast_to(const Shape& s) const { return Array(broadcast(s)); }

 private:
  template <class A> static std::variant<std::int64_t, Slice> index_argument(const A& a) {
    if constexpr (std::is_same_v<A, Slice>) return a;
    else return static_cast<std::int64_t>(a);
  }
  std::vector<int> identity_axes() const {
    std::vector<int> p;
    for (int i = 0; i < this->ndim(); ++i) p.push_back(i);
    return p;
  }
  int axis_index(int axis, const char* what) const {
    if (axis < -this->ndim() || axis >= this->ndim())
      throw ShapeError(std::string(what) + ": axis " + std::to_string(axis) + " is out of range for " +
                       std::to_string(this->ndim()) + " dimensions");
    return axis < 0 ? axis + this->ndim() : axis;
  }

 public:
  Array expand_dims(int axis) const { return Array(expanded(axis)); }
  /// NumPy's squeeze: a view without the axes of extent 1 (`axis`: only that one, which must have extent 1).
  Array squeeze(std::optional<int> axis = std::nullopt) const { return Array(squeezed(axis)); }
  /// NumPy's flip: a view with `axis` reversed (every axis when none is given).
  Array flip(std::optional<int> axis = std::nullopt) const {
    std::vector<Slice> s(static_cast<std::size_t>(this->ndim()));
    const int only = axis ? axis_index(*axis, "flip") : -1;
    for (int i = 0; i < this->ndim(); ++i)
      if (!axis || i == only) s[static_cast<std::size_t>(i)].step = -1;
    return slice(s);
  }
  /// NumPy's swapaxes and moveaxis: views with the axes permuted.
  Array swapaxes(int a, int b) const {
    std::vector<int> p = identity_axes();
    std::swap(p.at(static_cast<std::size_t>(axis_index(a, "swapaxes"))),
              p.at(static_cast<std::size_t>(axis_index(b, "swapaxes"))));
    return transpose(p);
  }
  Array moveaxis(int source, int destination) const {
    std::vector<int> p = identity_axes();
    const int s = axis_index(source, "moveaxis"), d = axis_index(destination, "moveaxis");
    p.erase(p.begin() + s);
    p.insert(p.begin() + d, s);
    return transpose(p);
  }
  /// NumPy's ravel: the elements in C order as one axis (a view when the array is C-ordered, else a copy).
  Array ravel() const { return reshape({this->size()}); }
  /// NumPy's flatten: the elements in C order as one axis, always a copy.
  Array flatten() const { return Array(*this).reshape({this->size()}); }
  template <Element U> auto astype() const { return cast<U>(*this); }

  explicit Array(ArrayBase base) : ArrayBase(std::move(base)) {
    if (dtype_ != dtype_v) throw TypeError("internal: array dtype mismatch");
  }

 private:
  template <ir::Op OP, class E> Array& update(const E& e) {
    detail::assign(*this, detail::make_binary<OP>(*this, e), detail::AssignMode::into);
    return *this;
  }
};

// ---- creation ----------------------------------------------------------------------------------
template <Element T> Array<T> empty(const Shape& shape) { return Array<T>(ArrayBase::make_empty(dtype_of<T>, shape)); }
/// A placeholder: shape and dtype without memory, for fz::inspect on a machine without a GPU.
template <Element T> Array<T> placeholder(const Shape& shape) {
  return Array<T>(ArrayBase::make_placeholder(dtype_of<T>, shape));
}
/// Writes `e` into `dst`, broadcasting (NumPy's copyto). One kernel.
template <Element T, class E> requires(Operand<E> || CppScalar<E>) void copyto(Array<T>& dst, const E& e) {
  if constexpr (CppScalar<E>) detail::assign(dst, expr::Scalar<T>::make(e), detail::AssignMode::into);
  else detail::assign(dst, detail::to_node(e), detail::AssignMode::into);
}
template <Element T>
void copyto(Array<T>& dst, T value) {
  detail::assign(dst, expr::Scalar<T>{{}, value}, detail::AssignMode::into);
}
template <Element T> Array<T> full(const Shape& shape, T value) {
  Array<T> a = empty<T>(shape);
  copyto(a, value);
  return a;
}
template <Element T> Array<T> zeros(const Shape& shape) { return full<T>(shape, T(0)); }
template <Element T> Array<T> ones(const Shape& shape) { return full<T>(shape, T(1)); }
/// New arrays of `a`'s shape and dtype (NumPy's *_like; C-ordered whatever `a`'s layout).
template <Element T> Array<T> empty_like(const Array<T>& a) { return empty<T>(a.shape()); }
template <Element T> Array<T> zeros_like(const Array<T>& a) { return zeros<T>(a.shape()); }
template <Element T> Array<T> ones_like(const Array<T>& a) { return ones<T>(a.shape()); }
template <Element T> Array<T> full_like(const Array<T>& a, T value) { return full<T>(a.shape(), value); }
/// start, start + step, ... below stop (NumPy's arange; values computed as start + i * step).
template <Element T> Array<T> arange(double start, double stop, double step = 1) {
  if (step == 0) throw Error("arange: step must not be zero");
  const double n = std::ceil((stop - start) / step);
  Array<T> a = empty<T>({n > 0 ? static_cast<std::int64_t>(n) : 0});
  detail::assign(a, cast<T>(expr::Scalar<double>{{}, start} + expr::Iota{} * step), detail::AssignMode::into);
  return a;
}
template <Element T> Array<T> arange(std::int64_t n) { return arange<T>(0.0, static_cast<double>(n)); }
/// `num` evenly spaced values from start to stop (NumPy's linspace: start + i * step in float64, then
/// converted; with `endpoint` the last value is stop exactly, without it stop is left out).
template <Element T> Array<T> linspace(double start, double stop, std::int64_t num, bool endpoint = true) {
  if (num < 0) throw Error("linspace: num must not be negative; it is " + std::to_string(num));
  const std::int64_t div = endpoint ? num - 1 : num;
  const double step = div > 0 ? (stop - start) / static_cast<double>(div) : 0;
  Array<T> a = empty<T>({num});
  const auto i = expr::Iota{};
  const auto value = expr::Scalar<double>{{}, start} + i * step;
  if (endpoint && num > 1) detail::assign(a, cast<T>(where(i == num - 1, stop, value)), detail::AssignMode::into);
  else detail::assign(a, cast<T>(value), detail::AssignMode::into);
  return a;
}
/// An n x m array with ones on diagonal k (above the main one for k > 0) and zeros elsewhere (NumPy's eye).
template <Element T> Array<T> eye(std::int64_t n, std::optional<std::int64_t> m = std::nullopt, std::int64_t k = 0) {
  const std::int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0) throw ShapeError("eye: negative extents " + std::to_string(n) + " x " + std::to_string(cols));
  Array<T> a = empty<T>({n, cols});
  if (a.size() == 0) return a;
  const auto i = expr::Iota{};
  detail::assign(a, cast<T>(remainder(i, cols) - floor_divide(i, cols) == k), detail::AssignMode::into);
  return a;
}
/// Copies host data to a new device array of `shape` (C order); the copy is ordered on the current stream.
template <Element T> Array<T> asarray(std::span<const T> host, const Shape& shape) {
  if (static_cast<std::int64_t>(host.size()) != numel(shape))  // (before any GPU is needed)
    throw ShapeError("asarray: " + std::to_string(host.size()) + " elements for a shape of " + to_string(shape) +
                     " (" + std::to_string(numel(shape)) + " elements)");
  Array<T> a = empty<T>(shape);
  a.upload(host.data(), host.size());
  return a;
}
template <Element T> Array<T> asarray(const std::vector<T>& host, const Shape& shape) {
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits: stage through bytes
    const std::vector<std::uint8_t> bytes(host.begin(), host.end());
    if (static_cast<std::int64_t>(bytes.size()) != numel(shape))
      throw ShapeError("asarray: " + std::to_string(bytes.size()) + " elements for a shape of " + to_string(shape));
    Array<T> a = empty<T>(shape);
    a.upload(bytes.data(), bytes.size());
    return a;
  } else {
    return asarray(std::span<const T>(host), shape);
  }
}
template <Element T> Array<T> asarray(const std::vector<T>& host) {
  return asarray(host, Shape{static_cast<std::int64_t>(host.size())});
}

/// Evaluates an expression into an Array of its own (promoted) type.
template <Expression E> auto eval(const E& e) { return Array<TypeOf<std::decay_t<E>::dtype>>(e); }

/// The shape an array or expression has (an expression's result, found without running it: placeholder arrays
/// and a machine without a GPU will do).
template <Operand E> Shape shape_of(const E& e) {
  if constexpr (ArrayLike<E>) return e.shape();
  else return detail::with_call(e, [](const detail::Call& c) { return detail::expression_shape(c); });
}
/// The dtype an array or expression has (NumPy's result_type of one operand), known at compile time.
template <Operand E> constexpr DType result_type(const E&) {
  if constexpr (ArrayLike<E>) return std::decay_t<E>::dtype_v;
  else return std::decay_t<E>::dtype;
}

template <class Derived>
auto expr::Node<Derived>::to_host() const {
  return eval(static_cast<const Derived&>(*this)).to_host();
}
template <class Derived>
auto expr::Node<Derived>::item() const {
  return eval(static_cast<const Derived&>(*this)).item();
}

}  // namespace fusion
