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

/// Whether text `s` reads back as `v` in floating dtype `d`.
bool reads_back(const std::string& s, double v, DType d) {
  switch (d) {
    case DType::float64: return std::strtod(s.c_str(), nullptr) == v;
    case DType::float32: return std::strtof(s.c_str(), nullptr) == static_cast<float>(v);
    case DType::float16: return half(std::strtof(s.c_str(), nullptr)).bits == half(static_cast<float>(v)).bits;
    default: return bfloat16(std::strtof(s.c_str(), nullptr)).bits == bfloat16(static_cast<float>(v)).bits;
  }
}

/// A number in scientific notation split at its 'e': the mantissa ("-1.25", "3") and the exponent.
struct Scientific {
  std::string mantissa;
  int exponent = 0;
  int fraction_digits() const {
    const std::size_t point = mantissa.find('.');
    return point == std::string::npos ? 0 : static_cast<int>(mantissa.size() - point - 1);
  }
};

Scientific split(const std::string& s) {
  const std::size_t e = s.find('e');
  return {s.substr(0, e), std::atoi(s.c_str() + e + 1)};
}

/// The fewest significant digits that read back as `v` in `d` (correctly rounded: the closest such).
Scientific shortest(double v, DType d) {
  for (int digits = 0; digits < 17; ++digits) {
    std::string s = fmt::format("{:.{}e}", v, digits);
    if (reads_back(s, v, d)) return split(s);
  }
  return split(fmt::format("{:.16e}", v));
}

void drop_trailing_zeros(std::string& fraction_holder, std::size_t from) {
  while (fraction_holder.size() > from && fraction_holder.back() == '0') fraction_holder.pop_back();
}

/// The shortest digits of `s` written out with a point: "65500." for 6.55e+04 (the digits a reader needs,
/// zeros past them, as NumPy's Dragon4 writes them; not the exact 65504).
std::string with_point(const Scientific& s) {
  const bool negative = s.mantissa[0] == '-';
  std::string digits;
  for (char c : s.mantissa)
    if (c >= '0' && c <= '9') digits += c;
  std::string whole = "0", fraction;
  if (s.exponent >= 0) {
    const auto cut = static_cast<std::size_t>(s.exponent) + 1;
    whole = digits.substr(0, std::min(cut, digits.size())) + std::string(cut - std::min(cut, digits.size()), '0');
    fraction = digits.size() > cut ? digits.substr(cut) : "";
  } else {
    fraction = std::string(static_cast<std::size_t>(-s.exponent - 1), '0') + digits;
  }
  return (negative ? "-" : "") + whole + "." + fraction;
}

/// NumPy's dragon4_positional with unique digits: the shortest text, or `cap` digits after the point when
/// it needs more (the exact value rounded there, trailing zeros dropped); always a point ("2.").
std::string positional(double v, DType d, int cap) {
  const Scientific s = shortest(v, d);
  if (cap < 0 || s.fraction_digits() - s.exponent <= cap) return with_point(s);
  std::string t = fmt::format("{:.{}f}", v, cap);
  if (t.find('.') == std::string::npos) return t + '.';
  drop_trailing_zeros(t, t.find('.') + 1);
  return t;
}

/// NumPy's dragon4_scientific with unique digits: at most `cap` digits after the mantissa's point
/// (trailing zeros dropped), at least `min_digits` (more digits of the exact value, the last rounded);
/// the exponent at least `exp_digits` digits, and 2.
std::string scientific(double v, DType d, int cap, int min_digits, int exp_digits) {
  Scientific s = shortest(v, d);
  if (cap >= 0 && s.fraction_digits() > cap) {
    s = split(fmt::format("{:.{}e}", v, cap));
    if (s.mantissa.find('.') != std::string::npos) drop_trailing_zeros(s.mantissa, s.mantissa.find('.') + 1);
  }
  if (s.fraction_digits() < min_digits) s = split(fmt::format("{:.{}e}", v, min_digits));
  if (s.mantissa.find('.') == std::string::npos) s.mantissa += '.';
  const std::string digits = std::to_string(std::abs(s.exponent));
  const std::size_t width = static_cast<std::size_t>(std::max(2, exp_digits));
  return s.mantissa + (s.exponent < 0 ? "e-" : "e+") + std::string(width - std::min(width, digits.size()), '0') + digits;
}

/// Decimal digits a dtype keeps (NumPy's finfo(d).precision; bfloat16 as ml_dtypes says).
int decimal_digits(DType d) {
  switch (d) {
    case DType::float64: return 15;
    case DType::float32: return 6;
    case DType::float16: return 3;
    default: return 2;
  }
}

std::string non_finite(double v) { return std::isnan(v) ? "nan" : v < 0 ? "-inf" : "inf"; }

/// NumPy's FloatingFormat: one format for every shown element of an array (fillFormat), each element
/// padded to it (points aligned, or mantissas of equal length in scientific notation).
class FloatFormat {
 public:
  FloatFormat(DType d, const std::vector<double>& shown, int precision) : d_(d), precision_(precision) {
    std::vector<double> finite;
    double largest = 0, smallest = INFINITY;
    for (double v : shown) {
      if (!std::isfinite(v)) continue;
      finite.push_back(v);
      if (v != 0) largest = std::max(largest, std::abs(v)), smallest = std::min(smallest, std::abs(v));
    }
    // scientific notation when the nonzero magnitudes reach 10^digits the dtype keeps (1e8 at most), fall
    // below 1e-4, or span more than 1e3 (NumPy 2's rule)
    const double huge = std::pow(10.0, std::min(8, decimal_digits(d)));
    if (largest > 0) exponential_ = largest >= huge || smallest < 1e-4 || largest / smallest > 1e3;
    if (finite.empty()) {
      pad_left_ = pad_right_ = 0;
    } else if (exponential_) {
      int fraction = 0, exponent = 0;
      for (double v : finite) {
        const std::string t = scientific(v, d_, precision_, 0, -1);
        const std::size_t point = t.find('.'), e = t.find('e');
        fraction = std::max(fraction, static_cast<int>(e - point - 1));
        exponent = std::max(exponent, static_cast<int>(t.size() - e - 2));
        pad_left_ = std::max(pad_left_, static_cast<int>(point));
      }
      precision_ = min_digits_ = fraction;
      exp_digits_ = exponent;
      pad_right_ = exp_digits_ + 2 + precision_;
    } else {
      for (double v : finite) {
        const std::string t = positional(v, d_, precision_);
        const std::size_t point = t.find('.');
        pad_left_ = std::max(pad_left_, static_cast<int>(point));
        pad_right_ = std::max(pad_right_, static_cast<int>(t.size() - point - 1));
      }
    }
    if (finite.size() != shown.size()) {  // room for nan and inf
      bool negative_inf = false;
      for (double v : shown) negative_inf = negative_inf || (std::isinf(v) && v < 0);
      const int offset = pad_right_ + 1;
      pad_left_ = std::max({pad_left_, 3 - offset, 3 + negative_inf - offset});
    }
  }

  std::string operator()(double v) const {
    const auto width = static_cast<std::size_t>(pad_left_ + pad_right_ + 1);
    if (!std::isfinite(v)) {
      const std::string t = non_finite(v);
      return std::string(width - std::min(width, t.size()), ' ') + t;
    }
    std::string t = exponential_ ? scientific(v, d_, precision_, min_digits_, exp_digits_) : positional(v, d_, precision_);
    const auto point = static_cast<int>(t.find('.'));
    t.insert(0, static_cast<std::size_t>(std::max(0, pad_left_ - point)), ' ');
    if (!exponential_) t.append(static_cast<std::size_t>(std::max(0, pad_right_ - (static_cast<int>(t.size()) - std::max(pad_left_, point) - 1))), ' ');
    return t;
  }

 private:
  DType d_;
  int precision_;
  bool exponential_ = false;
  int pad_left_ = 0, pad_right_ = 0, min_digits_ = 0, exp_digits_ = -1;
};

double as_double(DType d, const void* bytes) {
  return visit_dtype(d, [&]<class T>(T) -> double {
    if constexpr (NarrowFloat<T>) {
      std::uint16_t b;
      std::memcpy(&b, bytes, sizeof b);
      return static_cast<float>(T::from_bits(b));
    } else {
      T v;
      std::memcpy(&v, bytes, sizeof v);
      return static_cast<double>(v);
    }
  });
}

/// The flat C-order indices of the elements an array of `shape` shows, in order.
std::vector<std::int64_t> shown_elements(const Shape& shape, const PrintOptions& options) {
  std::vector<std::int64_t> at;
  const int rank = shape.size();
  const bool summarize = numel(shape) > options.threshold;
  auto walk = [&](auto& self, int axis, std::int64_t base) -> void {
    if (axis == rank) return at.push_back(base);
    const std::int64_t n = shape[axis], edge = options.edge_items;
    for (std::int64_t i = 0; i < n; ++i) {
      if (summarize && 2 * edge < n && i == edge) i = n - edge;
      self(self, axis + 1, base * n + i);
    }
  };
  if (numel(shape) > 0) walk(walk, 0, 0);
  return at;
}

}  // namespace

std::string element_text(DType d, const void* bytes) {
  return visit_dtype(d, [&]<class T>(T) -> std::string {
    if constexpr (std::is_same_v<T, bool>) {
      std::uint8_t b;
      std::memcpy(&b, bytes, 1);
      return b ? "True" : "False";  // (any nonzero byte is True)
    } else if constexpr (std::is_integral_v<T>) {
      T v;
      std::memcpy(&v, bytes, sizeof v);
      return fmt::format("{}", v);
    } else {
      // NumPy's str of a scalar: positional with one zero kept ("2.0") from 1e-4 up to 1e16 (float64), 1e6
      // (float32), 1e3 (float16), else scientific without trailing zeros or point ("1e-05")
      const double v = as_double(d, bytes), a = std::abs(v);
      if (!std::isfinite(v)) return non_finite(v);
      const double huge = std::pow(10.0, d == DType::float64 ? 16 : decimal_digits(d));
      if (v == 0 || (a >= 1e-4 && a < huge)) {
        std::string t = positional(v, d, -1);
        return t.back() == '.' ? t + '0' : t;
      }
      std::string t = scientific(v, d, -1, 0, -1);
      const std::size_t e = t.find('e');
      std::size_t end = e;
      while (t[end - 1] == '0') --end;
      if (t[end - 1] == '.') --end;
      return t.substr(0, end) + t.substr(e);
    }
  });
}

std::string format_array(const Shape& shape, const std::function<std::string(std::int64_t)>& cell,
                         const PrintOptions& options) {
  const int rank = shape.size();
  if (rank == 0) return cell(0);
  if (numel(shape) == 0) return "[]";
  // Every shown element's text first: they align right to the widest (formats pad their own already).
  std::vector<std::int64_t> shown = shown_elements(shape, options);
  std::vector<std::string> texts;
  std::size_t width = 0;
  for (std::int64_t at : shown) width = std::max(width, texts.emplace_back(cell(at)).size());
  for (std::string& t : texts) t.insert(0, width - t.size(), ' ');
  std::size_t next = 0;  // texts are laid out in the order they were shown

  const bool summarize = numel(shape) > options.threshold;
  const std::int64_t edge = options.edge_items;
  // NumPy's _extendLine: a word that would pass the width starts a new line (unless the line is empty).
  auto extend = [](std::string& s, std::string& line, const std::string& word, std::int64_t width,
                   const std::string& prefix) {
    if (static_cast<std::int64_t>(line.size() + word.size()) > width && line.size() > prefix.size()) {
      while (!line.empty() && line.back() == ' ') line.pop_back();
      s += line + "\n";
      line = prefix;
    }
    line += word;
  };
  // NumPy's _formatArray: `indent` starts every line after the first, rows wrap at `width`.
  auto write = [&](auto& self, int axis, const std::string& indent, std::int64_t width) -> std::string {
    const std::int64_t n = shape[axis];
    const bool summary = summarize && 2 * edge < n;
    const std::int64_t count = summary ? 2 * edge : n;
    std::string s;
    if (axis == rank - 1) {
      std::string line = indent;
      for (std::int64_t i = 0; i < count; ++i) {
        if (summary && i == edge) {
          extend(s, line, "...", width - 1, indent);
          line += ' ';
        }
        extend(s, line, texts[next++], width - 1, indent);
        if (i + 1 < count) line += ' ';
      }
      s += line;
    } else {
      const std::string between(static_cast<std::size_t>(rank - 1 - axis), '\n');
      for (std::int64_t i = 0; i < count; ++i) {
        if (summary && i == edge) s += indent + "..." + between;
        s += indent + self(self, axis + 1, indent + " ", width - 1);
        if (i + 1 < count) s += between;
      }
    }
    return "[" + s.substr(indent.size()) + "]";
  };
  return write(write, 0, " ", options.line_width);
}

std::string format_values(DType d, const Shape& shape, const void* c_order, const PrintOptions& options) {
  const auto* bytes = static_cast<const unsigned char*>(c_order);
  const std::size_t w = itemsize(d);
  if (shape.size() == 0) return element_text(d, bytes);
  if (!is_floating(d)) {
    // integers align right to the widest; booleans in an array take five places (" True", as NumPy's)
    return format_array(
        shape,
        [&](std::int64_t i) {
          const std::string t = element_text(d, bytes + static_cast<std::size_t>(i) * w);
          return d == DType::bool_ && t == "True" ? " True" : t;
        },
        options);
  }
  std::vector<double> values;
  for (std::int64_t i : shown_elements(shape, options)) values.push_back(as_double(d, bytes + static_cast<std::size_t>(i) * w));
  const FloatFormat format(d, values, options.precision);
  return format_array(
      shape, [&](std::int64_t i) { return format(as_double(d, bytes + static_cast<std::size_t>(i) * w)); }, options);
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
  if (options.line_width < 1) throw Error(fmt::format("print line_width {}: give 1 or more", options.line_width));
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
  return detail::format_values(a.dtype(), a.shape(), bytes.data(), options);
}

std::ostream& operator<<(std::ostream& os, const ArrayBase& a) { return os << to_string(a); }
std::ostream& operator<<(std::ostream& os, const Dims& shape) { return os << to_string(shape); }
std::ostream& operator<<(std::ostream& os, DType d) { return os << dtype_name(d); }
std::string to_string(const Version& v) { return fmt::format("{}.{}.{}", v.major, v.minor, v.patch); }
std::ostream& operator<<(std::ostream& os, const Version& v) { return os << to_string(v); }

}  // namespace fusion
