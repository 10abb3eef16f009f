// Must compile: the spellings the compile-fail cases point to (so a failure there is the check, not the setup).
#include <fusion/fusion.hpp>
int main() {
  auto m = fusion::placeholder<float>({4, 4, 4});
  auto a = fusion::sum(m, 1);
  auto b = fusion::sum(m, {0, 2}, true);
  auto c = fusion::sum(m, fusion::Axes{}, fusion::keepdims);
  auto d = fusion::var(m, 1, false, 1);
  auto e = fusion::sum(m, static_cast<long>(-1));
  (void)a, (void)b, (void)c, (void)d, (void)e;
}
