// Must not compile: fz::max(x, 0.f) read as a ReLU (NumPy's max reduces; the message points to relu).
#include <fusion/fusion.hpp>
int main() {
  auto x = fusion::placeholder<float>({4, 4});
  auto e = fusion::max(x, 0.f);
  (void)e;
}
