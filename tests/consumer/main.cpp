// A project that uses an installed fusion through find_package: it must build and run without a GPU.
#include <fusion/fusion.hpp>

#include <iostream>

int main() {
  namespace fz = fusion;
  auto x = fz::placeholder<float>({1024}), y = fz::placeholder<float>({1024});
  const fz::KernelInfo k = fz::inspect(fz::named("consumer_axpy", 2.0f * x + y));
  std::cout << k.name << "\n";
  return k.name.rfind("consumer_axpy_", 0) == 0 ? 0 : 1;
}
