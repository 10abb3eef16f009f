// The CUDA runtime's cudaStream_t is the driver's CUstream: code using the runtime API (cuBLAS, thrust,
// your kernels) hands its stream to fusion as it is, and gets fusion's stream back the same way.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fusion/fusion.hpp>
int main() {
  cudaStream_t theirs = nullptr;  // e.g. from cudaStreamCreate, or at::cuda::getCurrentCUDAStream()
  const fusion::Stream s = fusion::Stream::from_external(theirs);
  const fusion::StreamScope scope(s);  // fusion's work now runs on their stream, in its order
  cudaStream_t back = s.handle();
  CUstream as_driver = s.handle();
  return back == as_driver ? 0 : 1;
}
