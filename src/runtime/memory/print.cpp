// SPDX-License-Identifier: Apache-2.0
#include "fusion/print.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <ostream>
#include <vector>

#include "fusion/error.hpp"
#include "fusion/half.hpp"

namespace fusion {
namespace detail {

namespace {

/// The shortest text of `v` that reads back to `v` once rounded to a 16-bit float by `round`.
template <class Round> std::string shortest_16bit(float v, Round&& round) {
  for (int digits = 1; digits < 9; ++digits) {
    std::string s = fmt::format("{:.{}g}", v, digits);
    if (round(std::strtof(s.c_str(), nullptr)) == round(v)) return s;
  }
  return fmt::format("{}", v);
}

/// `s` (the shortest text of `v`) with at most `precision` digits after the point (or in a scientific
/// mantissa), rounded, and trailing zeros dropped: NumPy's floatmode "maxprec".
std::string at_most(double v, std::string s, int precision) {
  if (precision < 0) return s;
  const std::size_t point = s.find('.'), exponent = s.find_first_of("eE");
  if (exponent != std::string::npos) {
    const std::size_t digits = point == std::string::npos ? 0 : exponent - point - 1;
    if (digits <= static_cast<std::size_t>(precision)) return s;
    s = fmt::format("{:.{}e}", v, precision);
    const std::size_t e = s.find('e');
    std::size_t end = e;
    while (end > 0 && s[end - 1] == '0') --end;
    if (end > 0 && s[end - 1] == '.') --end;
    return s.substr(0, end) + s.substr(e);
  }
  if (point == std::string::npos || s.size() - point - 1 <= static_cast<std::size_t>(precision)) return s;
  s = fmt::format("{:.{}f}", v, precision);
  if (s.find('.') != std::string::npos)
    while (s.back() == '0') s.pop_back();  // "2." stays; "{:.0f}" has no point, float_text adds it
  return s;
}

std::string float_text(double v, std::string s, int precision) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  s = at_most(v, std::move(s), precision);
  // NumPy writes an integral float with a trailing point: 2. rather than 2
  if (s.find_first_of(".eEn") == std::string::npos) s += '.';
  return s;
}

}  // namespace

std::string element_text(DType d, const void* bytes, int precision) {
  auto as = [&]<class T>(T) {
    T v;
    std::memcpy(&v, bytes, sizeof v);
    return v;
  };
  return visit_dtype(d, [&]<class T>(T) -> std::string {
    if constexpr (std::is_same_v<T, bool>) {
      return as(std::uint8_t{}) ? "True" : "False";  // (read as a byte: any nonzero byte is True)
    } else if constexpr (std::is_integral_v<T>) {
      return fmt::format("{}", as(T{}));
    } else if constexpr (NarrowFloat<T>) {
      const float v = T::from_bits(as(std::uint16_t{}));
      return float_text(v, shortest_16bit(v, [](float x) { return T(x).bits; }), precision);
    } else {
      const T v = as(T{});
      return float_text(v, fmt::format("{}", v), precision);  // fmt's shortest round trip
    }
  });
}

std::string format_array(const Shape& shape, const std::function<std::string(std::int64_t)>& cell,
                         const PrintOptions& options) {
  const std::int64_t edge = std::max<std::int64_t>(options.edge_items, 0);
  const int rank = shape.size();
  if (rank == 0) return cell(0);
  const std::int64_t total = numel(shape);
  if (total == 0) return "[]";
  const bool summarize = total > options.threshold;
  // The indices shown along an axis; -1 stands for the "..." between the two ends.
  auto shown = [&](std::int64_t n) {
    std::vector<std::int64_t> at;
    if (summarize && n > 2 * edge) {
      for (std::int64_t i = 0; i < edge; ++i) at.push_back(i);
      at.push_back(-1);
      for (std::int64_t i = n - edge; i < n; ++i) at.push_back(i);
    } else {
      for (std::int64_t i = 0; i < n; ++i) at.push_back(i);
    }
    return at;
  };
  std::vector<std::int64_t> stride(static_cast<std::size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d)
    stride[static_cast<std::size_t>(d)] = stride[static_cast<std::size_t>(d) + 1] * shape[d + 1];

  // Every shown element's text first: columns align to the widest.
  std::vector<std::pair<std::int64_t, std::string>> texts;
  std::size_t width = 0;
  auto collect = [&](auto& self, int axis, std::int64_t base) -> void {
    for (std::int64_t i : shown(shape[axis])) {
      if (i < 0) continue;
      const std::int64_t at = base + i * stride[static_cast<std::size_t>(axis)];
      if (axis == rank - 1) {
        texts.emplace_back(at, cell(at));
        width = std::max(width, texts.back().second.size());
      } else {
        self(self, axis + 1, at);
      }
    }
  };
  collect(collect, 0, 0);
  // Decimal numbers align on their points, as NumPy's (1.5 over 2.), the rest to the right.
  bool points = true;
  for (const auto& [at, t] : texts)
    points = points && t.find('.') != std::string::npos && t.find_first_of("en") == std::string::npos;
  if (points) {
    std::size_t whole = 0, fraction = 0;
    for (const auto& [at, t] : texts)
      whole = std::max(whole, t.find('.')), fraction = std::max(fraction, t.size() - t.find('.'));
    for (auto& [at, t] : texts)
      t = std::string(whole - t.find('.'), ' ') + t + std::string(fraction - (t.size() - t.find('.')), ' ');
    width = whole + fraction;
  }
  std::size_t next = 0;  // texts are consumed in the order they were collected
  auto write = [&](auto& self, int axis, std::int64_t base) -> std::string {
    std::string s = "[";
    bool first = true;
    // rows of the last axis are separated by a newline, blocks of higher axes by blank lines
    const std::string between = axis == rank - 1 ? " " : std::string(static_cast<std::size_t>(rank - 1 - axis), '\n') +
                                                           std::string(static_cast<std::size_t>(axis + 1), ' ');
    for (std::int64_t i : shown(shape[axis])) {
      if (!first) s += between;
      first = false;
      if (i < 0) {
        s += "...";
      } else if (axis == rank - 1) {
        const std::string& t = texts[next++].second;
        s += std::string(width - t.size(), ' ') + t;
      } else {
        s += self(self, axis + 1, base + i * stride[static_cast<std::size_t>(axis)]);
      }
    }
    return s + "]";
  };
  return write(write, 0, 0);
}

}  // namespace detail

namespace {
std::mutex options_mutex;
PrintOptions options_now;
}  // namespace

PrintOptions print_options() {
  std::lock_guard lock(options_mutex);
  return options_now;
}

void set_print_options(const PrintOptions& options) {
  if (options.precision < -1)
    throw Error(fmt::format("print precision {}: give -1 (shortest) or digits >= 0", options.precision));
  if (options.threshold < 0 || options.edge_items < 0)
    throw Error("print threshold and edge_items must not be negative");
  std::lock_guard lock(options_mutex);
  options_now = options;
}

std::string to_string(const ArrayBase& a) {
  const PrintOptions options = print_options();
  if (a.is_placeholder() || !a.has_storage())
    return fmt::format("<{} array of shape {}{}>", dtype_name(a.dtype()), to_string(a.shape()),
                       a.is_placeholder() ? ", a placeholder" : ", no memory");
  std::vector<unsigned char> bytes(a.nbytes());
  a.download(bytes.data());
  const std::size_t w = itemsize(a.dtype());
  return detail::format_array(
      a.shape(),
      [&](std::int64_t i) {
        return detail::element_text(a.dtype(), bytes.data() + static_cast<std::size_t>(i) * w, options.precision);
      },
      options);
}

std::ostream& operator<<(std::ostream& os, const ArrayBase& a) { return os << to_string(a); }

}  // namespace fusion
