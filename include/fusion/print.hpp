// SPDX-License-Identifier: Apache-2.0
// Printing arrays as NumPy prints them: `std::cout << a` or fz::to_string(a).
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>

#include "fusion/array_base.hpp"

namespace fusion {

/// How arrays print, as NumPy's np.set_printoptions: process-wide, read at each print.
struct PrintOptions {
  /// Digits after the point at most (NumPy's floatmode "maxprec": fewer when fewer read back the same
  /// value); -1: as many as the shortest text that reads back needs.
  int precision = -1;
  /// Arrays of more elements than this are summarized: the first and last `edge_items` along each axis.
  std::int64_t threshold = 1000;
  std::int64_t edge_items = 3;
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

/// NumPy's str of an array: nested brackets, columns aligned, each value in the shortest text that reads
/// back to the same value of its dtype (`2.` for an integral float, `nan`, `inf`, `True`); arrays of over
/// 1,000 elements show the first and last 3 along each axis around `...` (PrintOptions changes both). A
/// placeholder prints its dtype and shape. Downloads the array (waits for the current stream).
/// With fmt: `#include <fusion/fmt.hpp>`, then `fmt::format("{}", a)`.
std::string to_string(const ArrayBase& a);
std::ostream& operator<<(std::ostream& os, const ArrayBase& a);

namespace detail {
/// The text of one element of dtype `d` stored at `bytes` (PrintOptions::precision).
std::string element_text(DType d, const void* bytes, int precision = -1);
/// The layout of to_string, from each shown element's text (`cell(flat C-order index)`).
std::string format_array(const Shape& shape, const std::function<std::string(std::int64_t)>& cell,
                         const PrintOptions& options = {});
}  // namespace detail

}  // namespace fusion
