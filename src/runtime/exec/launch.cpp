// SPDX-License-Identifier: Apache-2.0
#include "runtime/exec/step_hook.hpp"
#include "runtime/exec/launch.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "codegen/launch_shape.hpp"
#include "codegen/spell.hpp"
#include "fusion/error.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/measure/stats_counters.hpp"
#include "runtime/memory/storage.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "schedule/layout.hpp"
#include "schedule/tuning.hpp"

namespace fusion::detail {

using codegen::ArgSource;

namespace {
/// Most parameters a generated kernel has (64 arrays, 8 outputs, 256 scalars, their strides, ...).
constexpr std::size_t kMaxKernelParams = 512;
constexpr std::size_t kIndexFaultBytes = 3 * sizeof(std::uint64_t);

/// The stream's fault word for checked indices (StreamState::index_fault), allocated and zeroed on first use.
CUdeviceptr index_fault_word(const StreamState& s) {
  if (!s.index_fault || is_stale(s.index_fault_generation, s.device)) {  // a device reset freed the old one
    FUSION_CU(cuMemAlloc, &s.index_fault, kIndexFaultBytes);
    s.index_fault_generation = context_generation(s.device);
    FUSION_CU(cuMemsetD8Async, s.index_fault, 0, kIndexFaultBytes, s.handle);
  }
  return s.index_fault;
}

/// After a kernel that checks indices: waits for it, and reports the first bad index it met (then clears
/// the word for the next kernel). NumPy raises at the statement; so does fz::take in its default mode,
/// at the cost of this wait (IndexMode::wrap and clip never wait).
void report_index_fault(const StreamState& s) {
  std::uint64_t word[3] = {0, 0, 0};
  FUSION_CU(cuMemcpyDtoHAsync, word, s.index_fault, sizeof word, s.handle);
  FUSION_CU(cuStreamSynchronize, s.handle);
  if (word[0] == 0) return;
  FUSION_CU(cuMemsetD8Async, s.index_fault, 0, kIndexFaultBytes, s.handle);
  throw IndexError(fmt::format("index {} is out of bounds for an axis of size {} (fz::take: indices count from -size "
                               "to size - 1; IndexMode::wrap or IndexMode::clip take any index)",
                               static_cast<std::int64_t>(word[1]), static_cast<std::int64_t>(word[2])));
}

/// A refused launch names the kernel and the shape it was launched with (what a bug report needs).
[[noreturn]] void throw_launch_failure(CUresult r, CUfunction f, const Grid& grid) {
  const char* name = nullptr;
  if (driver().cuFuncGetName == nullptr || driver().cuFuncGetName(&name, f) != CUDA_SUCCESS) name = nullptr;
  check(r, fmt::format("cuLaunchKernelEx of {} ({} x {} blocks of {} threads, {} bytes of dynamic shared memory)",
                       name ? name : "a kernel", grid.x, grid.y, grid.block, grid.shared_bytes)
               .c_str());
  throw Error("internal: a failed launch was not reported");  // (check throws for any failure)
}

template <class T> T& at(std::span<T> values, std::uint16_t i, const char* what) {
  if (i >= values.size())
    throw Error(fmt::format("internal: a kernel parameter names {} {} of {}", what, i, values.size()));
  return values[i];
}
}  // namespace

void launch_kernel(CUfunction f, const codegen::KernelSignature& sig, const LaunchArgs& a, Grid grid,
                   const StreamState& stream) {
  const auto& params = sig.params();
  if (params.size() > kMaxKernelParams)
    throw Error(
        fmt::format("a kernel may take at most {} parameters (this one has {}); evaluate a part of the expression "
                    "first with fz::eval",
                    kMaxKernelParams, params.size()));
  void* argv[kMaxKernelParams];
  std::uint64_t fault = 0;  // the fault word, for a kernel that checks indices
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::uint16_t k = params[i].index;
    if (params[i].source == ArgSource::workspace && k == codegen::kIndexFaultWorkspace) {
      fault = index_fault_word(stream);
      argv[i] = &fault;
      continue;
    }
    switch (params[i].source) {
      case ArgSource::pointer: argv[i] = const_cast<std::uint64_t*>(&at(a.pointers, k, "pointer")); break;
      case ArgSource::scalar: argv[i] = const_cast<std::uint64_t*>(&at(a.scalars, k, "scalar").bits); break;
      case ArgSource::count: argv[i] = const_cast<std::int64_t*>(&a.counts[k]); break;
      case ArgSource::divisor: argv[i] = const_cast<double*>(&at(a.divisors, k, "divisor")); break;
      case ArgSource::dims: argv[i] = const_cast<std::int64_t*>(at(a.dims, k, "dims entry")); break;
      case ArgSource::raw: argv[i] = at(a.raw, k, "raw array"); break;
      case ArgSource::workspace: argv[i] = const_cast<std::uint64_t*>(&a.workspace[k]); break;
      case ArgSource::tensor_map: argv[i] = const_cast<CUtensorMap*>(&at(a.tensor_maps, k, "tensor map")); break;
    }
  }
  // (a kernel taking dynamic shared memory opted in to all a block can have when it was loaded: load_kernel)
  if (fault != 0) {  // its report waits for the kernel: no capture may hold it
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    FUSION_CU(cuStreamIsCapturing, stream.handle, &capturing);
    if (tls_step != nullptr || capturing != CU_STREAM_CAPTURE_STATUS_NONE)
      throw Error("fz::take with checked indices (IndexMode::raise, the default) waits for its kernel to report a "
                  "bad index, which a fz::Step or a stream capture cannot do: pass IndexMode::wrap or IndexMode::clip");
  }
  if (tls_step != nullptr) [[unlikely]]  // a step's body: the launch becomes a node of its graph
    return record_launch(*tls_step, f, argv, params.size(), static_cast<unsigned>(grid.x),
                         static_cast<unsigned>(grid.y), grid.block, grid.shared_bytes);
  // A programmatic dependent of the kernel before it on the stream: every generated kernel first waits for that one
  // (codegen/kernel_frame.hpp), so the driver may launch it while that one's last blocks finish. H200, back-to-back
  // calls (bench/pdl_probe.cu): a copy of 2^22 float32 6.95 -> 5.83 us, column sums of 2048^2 5.85 -> 4.87 us.
  CUlaunchAttribute overlap;
  overlap.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  overlap.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = static_cast<unsigned>(grid.x);
  config.gridDimY = static_cast<unsigned>(grid.y);
  config.gridDimZ = 1;
  config.blockDimX = grid.block;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = grid.shared_bytes;
  config.hStream = stream.handle;
  config.attrs = &overlap;
  // (the attribute is Hopper's: older devices launch in stream order, their kernels' wait compiled out)
  config.numAttrs = tuning().launch_overlap && properties_of(stream.device).compute_capability_major >= 9 ? 1 : 0;
  const CUresult launched = driver().cuLaunchKernelEx(&config, f, argv, nullptr);
  if (launched != CUDA_SUCCESS) [[unlikely]]
    throw_launch_failure(launched, f, grid);
  if (fault != 0) report_index_fault(stream);
}

void note_launch(std::span<const ArrayBase* const> read, std::span<const ArrayBase* const> written,
                 const std::shared_ptr<StreamState>& stream) {
  std::uint64_t bytes_read = 0, bytes_written = 0;
  for (const ArrayBase* r : read) {
    r->storage()->note_use(stream);
    bytes_read += static_cast<std::uint64_t>(r->touched_bytes());
  }
  for (const ArrayBase* w : written) {
    w->storage()->note_use(stream);
    w->storage()->note_write();
    bytes_written += static_cast<std::uint64_t>(w->nbytes());
  }
  if (tls_step != nullptr) [[unlikely]] {  // the step's graph keeps this memory alive and in place
    for (const ArrayBase* a : read) tls_step->memory.push_back(a->storage());
    for (const ArrayBase* a : written) tls_step->memory.push_back(a->storage());
  }
  Counters& ctr = counters();
  ctr.launches.fetch_add(1, std::memory_order_relaxed);
  ctr.bytes_read.fetch_add(bytes_read, std::memory_order_relaxed);
  ctr.bytes_written.fetch_add(bytes_written, std::memory_order_relaxed);
}

void note_minimum(std::span<const ArrayBase* const> read, std::span<const ArrayBase* const> written) {
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < read.size(); ++i) {
    bool seen = false;
    for (std::size_t j = 0; j < i && !seen; ++j) seen = same_view(*read[j], *read[i]);
    if (!seen) bytes += static_cast<std::uint64_t>(read[i]->touched_bytes());
  }
  for (const ArrayBase* w : written) bytes += static_cast<std::uint64_t>(w->nbytes());
  counters().min_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

std::int64_t blocks_for(std::int64_t work) {
  return std::min<std::int64_t>((work + codegen::kBlockThreads - 1) / codegen::kBlockThreads, codegen::kMaxGridX);
}

}  // namespace fusion::detail
