// SPDX-License-Identifier: Apache-2.0
// Shapes and strides: small fixed-capacity vectors (at most 8 dimensions), cheap to copy on the hot path.
#pragma once
#include "fusion/cpp20.hpp"
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <string>
#include <type_traits>

namespace fusion {

inline constexpr int kMaxDims = 8;

/// A list of up to kMaxDims signed 64-bit extents or strides.
class Dims {
 public:
  /// One extent or stride of a braced list: any integer type converts, so `{v.size(), 3}` with a
  /// std::size_t is not a narrowing error (values past INT64_MAX are not extents anyone allocates).
  struct Extent {
    template <class I>
      requires std::is_integral_v<I>
    Extent(I v) : value(static_cast<std::int64_t>(v)) {}  // NOLINT: implicit by design
    std::int64_t value;
  };

  Dims() = default;
  Dims(std::initializer_list<Extent> v);
  template <class It>
  Dims(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }
  /// From a std::vector, std::array or std::span of integers.
  template <class R>
    requires(!std::is_same_v<std::remove_cvref_t<R>, Dims> &&
             requires(const R& r) { std::begin(r); std::end(r); requires std::is_integral_v<std::remove_cvref_t<decltype(*std::begin(r))>>; })
  Dims(const R& r) : Dims(std::begin(r), std::end(r)) {}  // NOLINT: implicit, as a braced list is

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  std::int64_t& operator[](int i) { return v_[i]; }
  std::int64_t operator[](int i) const { return v_[i]; }
  const std::int64_t* begin() const { return v_; }
  const std::int64_t* end() const { return v_ + n_; }
  std::int64_t* begin() { return v_; }
  std::int64_t* end() { return v_ + n_; }
  void push_back(std::int64_t x);
  void insert(int pos, std::int64_t x);
  void erase(int pos);
  void resize(int n, std::int64_t fill = 0);
  bool operator==(const Dims& o) const { return n_ == o.n_ && std::equal(begin(), end(), o.begin()); }

 private:
  std::int64_t v_[kMaxDims];  // only the first n_ are meaningful; left uninitialized for the hot path
  int n_ = 0;
};
using Shape = Dims;
using Strides = Dims;

/// Number of elements (1 for a 0-d shape).
std::int64_t numel(const Shape& s);
/// Row-major element strides for a shape.
Strides contiguous_strides(const Shape& s);
/// NumPy broadcasting of two shapes; throws ShapeError naming both when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);
/// "(3, 4)" like NumPy prints a shape.
std::string to_string(const Dims& d);

}  // namespace fusion
