// SPDX-License-Identifier: Apache-2.0
// Printing arrays as NumPy does, without a GPU: each dtype's element text and the bracket layout
// (alignment, blocks of higher ranks, summarizing large arrays). test_array_gpu.cpp prints real arrays.
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "support.hpp"

#include <fusion/fmt.hpp>

namespace {

template <class T> std::string text(T v) { return fz::detail::element_text(fz::dtype_of<T>, &v); }

/// format_array over the values 0, 1, 2, ... (the flat index as the text).
std::string indices(const fz::Shape& s) {
  return fz::detail::format_array(s, [](std::int64_t i) { return std::to_string(i); });
}

}  // namespace

TEST_CASE("print: each dtype's element reads back as the same value", "[print]") {
  // NumPy's str of a scalar (a 0-d array prints so): one zero after an integral float's point
  CHECK(text(1.5f) == "1.5");
  CHECK(text(2.0f) == "2.0");
  CHECK(text(0.1f) == "0.1");
  CHECK(text(-0.0f) == "-0.0");
  CHECK(text(1e-30f) == "1e-30");
  CHECK(text(1.5e20) == "1.5e+20");
  CHECK(text(std::numeric_limits<float>::quiet_NaN()) == "nan");
  CHECK(text(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(text(0.1) == "0.1");
  CHECK(text(1.0 / 3.0) == "0.3333333333333333");
  CHECK(text(fz::half(0.1f)) == "0.1");         // shortest in half precision, not float's 0.099975586
  CHECK(text(fz::bfloat16(3.14159f)) == "3.14");  // bfloat16 keeps about 3 digits
  CHECK(text(fz::half(65504.f)) == "6.55e+04");  // scientific from 1e3 in half, 1e6 in float, 1e16 in double
  CHECK(text(fz::half(999.f)) == "999.0");
  CHECK(text(1e6f) == "1e+06");
  CHECK(text(123456789.f) == "1.2345679e+08");
  CHECK(text(1e15) == "1000000000000000.0");
  CHECK(text(1e16) == "1e+16");
  CHECK(text(true) == "True");
  CHECK(text(false) == "False");
  CHECK(text(std::int8_t{-128}) == "-128");
  CHECK(text(std::uint64_t{18446744073709551615ull}) == "18446744073709551615");
  // every half value's text reads back to the same bits
  for (std::uint32_t b = 0; b < 0x10000; b += 7) {
    const fz::half h = fz::half::from_bits(static_cast<std::uint16_t>(b));
    if (std::isnan(float(h))) continue;
    const std::string t = text(h);
    INFO(b << " -> " << t);
    if (std::isinf(float(h))) CHECK(t.find("inf") != std::string::npos);
    else CHECK(fz::half(std::strtof(t.c_str(), nullptr)).bits == h.bits);
  }
}

TEST_CASE("print: NumPy's layout of brackets, alignment and summaries", "[print]") {
  CHECK(indices({}) == "0");
  CHECK(indices({0}) == "[]");
  CHECK(indices({3, 0}) == "[]");
  CHECK(indices({4}) == "[0 1 2 3]");
  CHECK(indices({2, 6}) == "[[ 0  1  2  3  4  5]\n [ 6  7  8  9 10 11]]");
  CHECK(indices({2, 2, 2}) == "[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]");
  CHECK(indices({1001}) == "[   0    1    2 ...  998  999 1000]");
  CHECK(indices({100, 100}) ==
        "[[   0    1    2 ...   97   98   99]\n [ 100  101  102 ...  197  198  199]\n [ 200  201  202 ...  297  298  "
        "299]\n ...\n"
        " [9700 9701 9702 ... 9797 9798 9799]\n [9800 9801 9802 ... 9897 9898 9899]\n [9900 9901 9902 ... 9997 9998 "
        "9999]]");
  // a summarized array asks only for the elements it shows
  std::int64_t asked = 0;
  fz::detail::format_array({1000, 1000}, [&](std::int64_t) { return std::to_string(++asked); });
  CHECK(asked == 36);
}

TEST_CASE("print: a placeholder shows its dtype and shape", "[print]") {
  auto p = fz::placeholder<float>({2, 3});
  std::ostringstream os;
  os << p;
  CHECK(os.str() == "<float32 array of shape (2, 3), a placeholder>");
}

TEST_CASE("print: NumPy's str, character for character (tests/golden/print_numpy.txt)", "[print]") {
  // Arrays and options with the text NumPy gave them (tests/tools/print_table.py): every float dtype NumPy
  // has, positional and scientific notation, nan and inf, summaries, rows wrapped at the line width, 0-d.
  std::ifstream in(std::string(FUSION_GOLDEN_DIR) + "/print_numpy.txt");
  REQUIRE(in);
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.rfind("case ", 0) != 0) continue;
    std::istringstream head(line.substr(5));
    std::string dtype, dims;
    fz::PrintOptions options;
    head >> dtype >> dims >> options.precision >> options.threshold >> options.edge_items >> options.line_width;
    fz::Shape shape;
    for (std::size_t at = 0; dims != "-" && at < dims.size();) {
      const std::size_t comma = std::min(dims.find(',', at), dims.size());
      shape.push_back(std::stoll(dims.substr(at, comma - at)));
      at = comma + 1;
    }
    std::string hex, want, text;
    std::getline(in, hex);
    std::vector<unsigned char> bytes;
    for (std::size_t i = 0; hex != "-" && i + 1 < hex.size(); i += 2)
      bytes.push_back(static_cast<unsigned char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    while (std::getline(in, text) && text != "end") want += (want.empty() ? "" : "\n") + text;
    fz::DType d = fz::DType::float32;
    bool known = false;
    for (fz::DType each : {fz::DType::float64, fz::DType::float32, fz::DType::float16, fz::DType::int64,
                           fz::DType::int32, fz::DType::int16, fz::DType::int8, fz::DType::uint64, fz::DType::uint8,
                           fz::DType::bool_})
      if (dtype == (each == fz::DType::bool_ ? "bool" : fz::dtype_name(each))) d = each, known = true;
    INFO(line);
    REQUIRE(known);
    REQUIRE(bytes.size() == static_cast<std::size_t>(fz::numel(shape)) * fz::itemsize(d));
    CHECK(fz::detail::format_values(d, shape, bytes.data(), options) == want);
    ++cases;
  }
  CHECK(cases == 83);
}

TEST_CASE("print: PrintOptions set digits after the point, where summaries start, the line width", "[print]") {
  auto with = [](std::vector<double> v, int precision) {
    fz::PrintOptions o;
    o.precision = precision;
    return fz::detail::format_values(fz::DType::float64, {static_cast<std::int64_t>(v.size())}, v.data(), o);
  };
  CHECK(with({1.0 / 3.0}, 8) == "[0.33333333]");  // NumPy's default
  CHECK(with({1.0 / 3.0}, -1) == "[0.3333333333333333]");  // the shortest text that reads back
  CHECK(with({2.0 / 3.0, 1.5}, 4) == "[0.6667 1.5   ]");    // rounded; no more digits than needed
  CHECK(with({1.0 / 3e10, 1.0}, 3) == "[3.333e-11 1.000e+00]");
  const fz::half h(0.1f);
  fz::PrintOptions none;
  none.precision = 0;
  CHECK(fz::detail::format_values(fz::DType::float16, {1}, &h, none) == "[0.]");
  const std::vector<std::int32_t> ints{7, -12};
  CHECK(fz::detail::format_values(fz::DType::int32, {2}, ints.data(), none) == "[  7 -12]");  // integers have no point

  fz::PrintOptions small;
  small.threshold = 5;
  small.edge_items = 1;
  CHECK(fz::detail::format_array({6}, [](std::int64_t i) { return std::to_string(i); }, small) == "[0 ... 5]");
  small.threshold = 6;
  CHECK(fz::detail::format_array({6}, [](std::int64_t i) { return std::to_string(i); }, small) == "[0 1 2 3 4 5]");

  // process-wide, put back by the scope; bad values are refused and change nothing
  CHECK(fz::print_options().precision == 8);
  {
    fz::PrintOptions p;
    p.precision = 3;
    fz::ScopedPrintOptions scope(p);
    CHECK(fz::print_options().precision == 3);
    fz::PrintOptions bad;
    bad.precision = -2;
    CHECK_THROWS_AS(fz::set_print_options(bad), fz::Error);
    CHECK(fz::print_options().precision == 3);
  }
  CHECK(fz::print_options().precision == 8);
  CHECK(fz::print_options().threshold == 1000);
  fz::PrintOptions narrow;
  narrow.line_width = 0;
  CHECK_THROWS_AS(fz::set_print_options(narrow), fz::Error);
}

TEST_CASE("print: fmt::format of an array is its to_string", "[print]") {
  auto p = fz::placeholder<fz::bfloat16>({4});
  CHECK(fmt::format("{}", p) == fz::to_string(p));
  CHECK(fmt::format("x = {:>50}", p) == "x = " + std::string(50 - fz::to_string(p).size(), ' ') + fz::to_string(p));
  const fz::ArrayBase& base = p;
  CHECK(fmt::format("{}", base) == "<bfloat16 array of shape (4,), a placeholder>");
}

TEST_CASE("shapes, dtypes and versions print to streams and fmt", "[print]") {
  std::ostringstream os;
  os << fz::Shape{2, 3} << " " << fz::Shape{5} << " " << fz::Shape{} << " " << fz::DType::bfloat16 << " "
     << fz::Version{1, 4, 0};
  CHECK(os.str() == "(2, 3) (5,) () bfloat16 1.4.0");
  CHECK(fmt::format("{} {} {}", fz::Shape{7, 1}, fz::DType::int8, fz::version()) ==
        "(7, 1) int8 " + fz::to_string(fz::version()));
}

TEST_CASE("version: the headers and the library say the same", "[print]") {
  CHECK(fz::version() == fz::header_version);
  CHECK(FUSION_VERSION == fz::header_version.major * 10000 + fz::header_version.minor * 100 + fz::header_version.patch);
}
