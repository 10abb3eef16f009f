// SPDX-License-Identifier: Apache-2.0
// What a Stream shares among its copies and with the arrays allocated on it.
#pragma once
#include <cuda.h>

#include <memory>

#include "runtime/cuda/driver.hpp"

namespace fusion::detail {

struct StreamState {
  CUstream handle = nullptr;
  int device = 0;
  bool owned = false;  // created by fusion, destroyed with the last owner
  bool non_blocking = false;
  int priority = 0;
  /// The context generation the handle was made in; 0 for the built-in handles (legacy, per-thread),
  /// which stay valid across device resets.
  unsigned generation = 0;
  /// Scratch for reductions split over several blocks (counters, then partial results): kernels on
  /// one stream run in order, so they can share it. Allocated on first use, zeroed counters.
  CUdeviceptr reduce_workspace = 0;
  unsigned workspace_generation = 0;
  /// cuBLASLt's workspace for matrix products on this stream (kBlasWorkspaceBytes), allocated on first use.
  CUdeviceptr blas_workspace = 0;
  unsigned blas_workspace_generation = 0;
  /// The fault word of checked indices (fz::take's raise mode), zeroed: set, then the bad index and the
  /// extent. The launcher reads it after such a kernel (launch.cpp); allocated on first use.
  mutable CUdeviceptr index_fault = 0;
  mutable unsigned index_fault_generation = 0;
  /// The state one-pass scans share between their blocks (codegen/scan_state.hpp): zeroed when made, grown
  /// on demand; each launch leaves it ready for the next (runtime/exec/scan.cpp).
  CUdeviceptr scan_state = 0;
  std::int64_t scan_state_bytes = 0;
  unsigned scan_state_generation = 0;
  /// Whether a device reset destroyed the handle (never for the built-in ones).
  bool reset_destroyed() const { return generation && is_stale(generation, device); }
  ~StreamState();
};

/// `s` checked for use: its device's context current, and a DeviceResetError if a reset destroyed its handle
/// (the driver crashes on a destroyed stream rather than report it).
const StreamState& live(const StreamState& s);

/// The calling thread's current stream on the current device (its context made current). Hot path.
const std::shared_ptr<StreamState>& current_stream_state();

/// Called with each stream fusion owns just before it is destroyed, while work may still be queued on it (the device
/// pool, a layer above, frees the blocks it cached for that stream: runtime/memory/block_cache.hpp).
using StreamReleaseHook = void (*)(int device, CUstream stream);
void set_stream_release_hook(StreamReleaseHook hook);

/// Whether fusion sees `stream`'s end: a built-in handle (the null, legacy and per-thread streams, never destroyed) or
/// a live stream fusion created (whose destruction calls the release hook first). Another library's stream, taken in
/// by Stream::from_external, may be destroyed behind fusion's back and its handle reused.
bool stream_lifetime_known(CUstream stream);

}  // namespace fusion::detail
