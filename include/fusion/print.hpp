// SPDX-License-Identifier: Apache-2.0
// Printing arrays as NumPy prints them: `std::cout << a` or fz::to_string(a).
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>

#include "fusion/array_base.hpp"

namespace fusion {

/// NumPy's str of an array: nested brackets, columns aligned, each value in the shortest text that reads
/// back to the same value of its dtype (`2.` for an integral float, `nan`, `inf`, `True`); arrays of over
/// 1,000 elements show the first and last 3 along each axis around `...`. A placeholder prints its dtype
/// and shape. Downloads the array (waits for the current stream).
std::string to_string(const ArrayBase& a);
std::ostream& operator<<(std::ostream& os, const ArrayBase& a);

namespace detail {
/// The text of one element of dtype `d` stored at `bytes`.
std::string element_text(DType d, const void* bytes);
/// The layout of to_string, from each shown element's text (`cell(flat C-order index)`).
std::string format_array(const Shape& shape, const std::function<std::string(std::int64_t)>& cell);
}  // namespace detail

}  // namespace fusion
