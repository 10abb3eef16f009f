// Must not compile: `true` where the axis goes (it once reduced axis 1 silently).
#include <fusion/fusion.hpp>
int main() {
  auto m = fusion::placeholder<float>({4, 4});
  auto e = fusion::sum(m, true);
  (void)e;
}
