// Must not compile: PyTorch's rand(n) habit, uniform<float>(n, seed), would be one value with seed n.
#include <fusion/fusion.hpp>
int main() {
  const int n = 1000, seed = 7;
  auto e = fusion::random::uniform<float>(n, seed);
  (void)e;
}
