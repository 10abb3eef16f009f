// CUDA's own 16-bit types convert to and from fusion arrays (compiles; the values are checked on the GPU).
#include <fusion/cuda_types.hpp>
int main() {
  std::vector<__half> h(4, __float2half(1.5f));
  std::vector<__nv_bfloat16> b(4, __float2bfloat16(2.5f));
  fusion::Array<fusion::half> a = fusion::asarray(h, {2, 2});
  fusion::Array<fusion::bfloat16> c = fusion::asarray(b);
  std::vector<__half> back = fusion::to_host_as<__half>(a);
  std::vector<__nv_bfloat16> back_b = fusion::to_host_as<__nv_bfloat16>(c);
  return static_cast<int>(back.size() + back_b.size()) - 8;
}
