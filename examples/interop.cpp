// SPDX-License-Identifier: Apache-2.0
// Living with other GPU code: memory another library owns used without a copy (fz::from_device, DLPack
// both ways), transfers through pinned buffers that overlap work, dropout with fused random numbers, and
// printing. Each result is checked on the host.
#include <fusion/fusion.hpp>

#include <cstdio>
#include <iostream>

namespace fz = fusion;

int main() {
  if (fz::device_count() == 0) {  // dropout's kernel is still generated and compiled, over a placeholder array
    const auto x = fz::placeholder<float>({1 << 20});
    std::cout << fz::inspect(fz::where(fz::random::uniform<float>(2024, fz::random::Offset{1}) < 0.5f, 0.f, x / 0.5f))
              << "\n";
    std::printf("No GPU here (%s)\nDropout's kernel above was generated and compiled; the rest of this example shares "
                "and moves GPU memory, which needs a GPU.\n", fz::no_device_reason().c_str());
    return 0;
  }
  bool ok = true;
  // "Another library's" buffer: here memory of a fusion array, handed over by pointer with an owner.
  auto theirs = std::make_shared<fz::Array<float>>(fz::arange<float>(12.0));
  fz::Array<float> m = fz::from_device(theirs->data_ptr<float>(), {3, 4}, {}, theirs);  // no copy
  m *= 2.f;                                            // writes into their memory
  std::cout << "their buffer, doubled in place:\n" << *theirs << "\n";
  ok = ok && theirs->to_host()[11] == 22.f;

  // DLPack out and back in (what PyTorch's torch.from_dlpack / CuPy's cupy.from_dlpack consume)
  fz::dlpack::ManagedTensorVersioned* t = fz::dlpack::to_dlpack(m.transpose());
  fz::Array<float> back(fz::dlpack::from_dlpack(t));  // fusion owns the tensor now; its deleter runs once
  std::printf("DLPack round trip: shape (%lld, %lld), same memory: %s\n", static_cast<long long>(back.shape()[0]),
              static_cast<long long>(back.shape()[1]), back.data_ptr() == m.data_ptr() ? "yes" : "no");
  ok = ok && back.data_ptr() == m.data_ptr();

  // dropout: one kernel, the mask from Philox(seed, step, index)
  const float p = 0.5f;
  fz::Array<float> x = fz::full<float>({1 << 20}, 1.f);
  fz::reset_stats();
  fz::Array<float> y = fz::where(fz::random::uniform<float>(2024, fz::random::Offset{1}) < p, 0.f, x / (1 - p));
  const std::int64_t launches = fz::stats().launches;
  const double kept = fz::sum(y).item() / 2.0 / static_cast<double>(x.size());
  std::printf("dropout: %lld kernel(s), kept %.4f of the elements (expect about %.2f)\n",
              static_cast<long long>(launches), kept, 1 - p);
  ok = ok && launches == 1 && kept > 0.49 && kept < 0.51;

  // a transfer that does not wait: enqueued on the stream, read after synchronizing
  fz::PinnedBuffer<float> host(static_cast<std::size_t>(y.size()));
  y.copy_to(host);
  host.synchronize();
  std::printf("pinned copy: first values %.1f %.1f %.1f\n", host[0], host[1], host[2]);
  ok = ok && (host[0] == 0.f || host[0] == 2.f);

  std::printf("interop: %s\n", ok ? "all results as expected" : "MISMATCH");
  return ok ? 0 : 1;
}
