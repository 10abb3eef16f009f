// SPDX-License-Identifier: Apache-2.0
// The README's first example, as it is there (tests/test_docs.cpp keeps the two equal and checks what it prints).
#include <fusion/fusion.hpp>
#include <iostream>
#include <vector>
namespace fz = fusion;

int main() {
  std::vector<float> hx{1, 2, 3, 4}, hy{0.5f, 1, 1.5f, 2};
  fz::Array<float> x = fz::asarray(hx, {2, 2}), y = fz::asarray(hy, {2, 2});
  fz::Array<float> out = fz::sin(x) + fz::cos(y) / fz::sqrt(x);  // one kernel
  fz::Array<float> p = fz::softmax(x * y);                         // one kernel: max, exp, sum, divide per row
  float d = fz::eval(fz::sum((x - y) * (x - y))).item();           // one kernel, then a wait for the value
  std::cout << out << "\n" << p << "\n" << d << "\n";
  std::cout << fz::inspect(fz::sin(x) + fz::cos(y) / fz::sqrt(x)).name << "\n";  // what would run, no GPU needed
}
