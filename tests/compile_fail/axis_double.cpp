// Must not compile: a floating-point axis.
#include <fusion/fusion.hpp>
int main() {
  auto m = fusion::placeholder<float>({4, 4});
  auto e = fusion::mean(m, 1.5);
  (void)e;
}
