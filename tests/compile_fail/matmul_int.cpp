// Must not compile: a matrix product of integer arrays (cuBLASLt's products here are floating).
#include <fusion/fusion.hpp>
int main() {
  auto a = fusion::placeholder<int>({4, 4});
  auto c = fusion::matmul(a, a);
  (void)c;
}
