// SPDX-License-Identifier: Apache-2.0
#include "fusion/shape.hpp"

#include <fmt/format.h>

#include "fusion/error.hpp"

namespace fusion {

Dims::Dims(std::initializer_list<Extent> v) {
  for (const Extent& x : v) push_back(x.value);
}

void Dims::push_back(std::int64_t x) {
  if (n_ == kMaxDims) throw ShapeError(fmt::format("arrays have at most {} dimensions", kMaxDims));
  v_[n_++] = x;
}

void Dims::insert(int pos, std::int64_t x) {
  push_back(0);
  for (int i = n_ - 1; i > pos; --i) v_[i] = v_[i - 1];
  v_[pos] = x;
}

void Dims::erase(int pos) {
  for (int i = pos; i + 1 < n_; ++i) v_[i] = v_[i + 1];
  --n_;
}

void Dims::resize(int n, std::int64_t fill) {
  if (n > kMaxDims) throw ShapeError(fmt::format("arrays have at most {} dimensions", kMaxDims));
  for (int i = n_; i < n; ++i) v_[i] = fill;
  n_ = n;
}

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t e : s) n *= e;
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st;
  st.resize(s.size());
  std::int64_t acc = 1;
  for (int i = s.size() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<std::int64_t>(s[i], 1);
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  if (a.empty() || a == b) return b;  // the common cases on the hot path (a 0-d shape broadcasts as a scalar)
  const int n = std::max(a.size(), b.size());
  Shape out;
  out.resize(n);
  for (int i = 0; i < n; ++i) {
    const int ia = a.size() - n + i, ib = b.size() - n + i;
    const std::int64_t x = ia >= 0 ? a[ia] : 1, y = ib >= 0 ? b[ib] : 1;
    if (x != y && x != 1 && y != 1)
      throw ShapeError(fmt::format("shapes {} and {} do not broadcast: dimension {} is {} in one and {} in the other",
                                   to_string(a), to_string(b), i, x, y));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::string to_string(const Dims& d) {
  if (d.size() == 1) return fmt::format("({},)", d[0]);
  return fmt::format("({})", fmt::join(d.begin(), d.end(), ", "));
}

}  // namespace fusion
