// Must not compile: a number where keepdims goes (a misplaced axis).
#include <fusion/fusion.hpp>
int main() {
  auto m = fusion::placeholder<float>({4, 4, 4});
  auto e = fusion::sum(m, 0, 2);
  (void)e;
}
