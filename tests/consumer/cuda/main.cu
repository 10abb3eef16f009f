// fusion from a CUDA source: its own kernel beside fusion's arrays (built and run without a GPU).
#include <fusion/fusion.hpp>

#include <cstdio>

__global__ void scale(float* x, float a, long long n) {
  const long long i = blockIdx.x * 256ll + threadIdx.x;
  if (i < n) x[i] *= a;
}

int main() {
  namespace fz = fusion;
  auto x = fz::placeholder<float>({1024});
  const fz::KernelInfo k = fz::inspect(fz::named("cuda_consumer", fz::exp(x - fz::max(x))));
  std::printf("%s\n", k.name.c_str());
  return k.name.rfind("cuda_consumer_", 0) == 0 ? 0 : 1;
}
