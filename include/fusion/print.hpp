// SPDX-License-Identifier: Apache-2.0
// Printing arrays as NumPy prints them: `std::cout << a` or fz::to_string(a).
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>

#include "fusion/array.hpp"
#include "fusion/array_base.hpp"
#include "fusion/version.hpp"

namespace fusion {

/// How arrays print, as NumPy's np.set_printoptions (its defaults): process-wide, read at each print.
struct PrintOptions {
  /// Digits after the point at most (NumPy's floatmode "maxprec": fewer when fewer read back the same
  /// value); -1: as many as the shortest text that reads back needs.
  int precision = 8;
  /// Arrays of more elements than this are summarized: the first and last `edge_items` along each axis.
  std::int64_t threshold = 1000;
  std::int64_t edge_items = 3;
  /// Rows wrap before this many characters.
  std::int64_t line_width = 75;
};
PrintOptions print_options();
void set_print_options(const PrintOptions& options);

/// Sets print options for a scope and puts the previous ones back at its end.
class ScopedPrintOptions {
 public:
  explicit ScopedPrintOptions(const PrintOptions& options) : previous_(print_options()) { set_print_options(options); }
  ~ScopedPrintOptions() { set_print_options(previous_); }
  ScopedPrintOptions(const ScopedPrintOptions&) = delete;
  ScopedPrintOptions& operator=(const ScopedPrintOptions&) = delete;

 private:
  PrintOptions previous_;
};

/// NumPy's str of an array, character for character under the same options: nested brackets, rows wrapped
/// at 75 characters, columns aligned; floats in the shortest text that reads back to the same value of
/// their dtype, at most 8 digits after the point, points aligned (`2.` for an integral float), scientific
/// notation for the whole array when its nonzero magnitudes reach 1e8, fall below 1e-4 or span more than
/// 1e3; `nan`, `inf`, `True`; arrays of over 1,000 elements show the first and last 3 along each axis
/// around `...`; a 0-d array prints as NumPy's scalar (`2.0`). A placeholder prints its dtype and shape.
/// Downloads the array (waits for the current stream).
/// With fmt: `#include <fusion/fmt.hpp>`, then `fmt::format("{}", a)`.
std::string to_string(const ArrayBase& a);
std::ostream& operator<<(std::ostream& os, const ArrayBase& a);
/// An expression prints its value: it runs (as fz::eval does), then prints as that array.
template <Expression E> std::ostream& operator<<(std::ostream& os, const E& e) { return os << eval(e); }

/// A shape as NumPy writes one: `(2, 3)`, `(5,)`, `()`.
std::ostream& operator<<(std::ostream& os, const Dims& shape);
/// A dtype's name: `float32`.
std::ostream& operator<<(std::ostream& os, DType d);
/// A version: `1.4.0`.
std::string to_string(const Version& v);
std::ostream& operator<<(std::ostream& os, const Version& v);

namespace detail {
/// NumPy's str of one value of dtype `d` stored at `bytes` (a scalar's: `2.0`, `1e-05`, `True`).
std::string element_text(DType d, const void* bytes);
/// The layout of to_string, from each shown element's text (`cell(flat C-order index)`), aligned right.
std::string format_array(const Shape& shape, const std::function<std::string(std::int64_t)>& cell,
                         const PrintOptions& options = {});
/// to_string of an array of dtype `d` and `shape` from its elements in C order on the host.
std::string format_values(DType d, const Shape& shape, const void* c_order, const PrintOptions& options = {});
}  // namespace detail

}  // namespace fusion
