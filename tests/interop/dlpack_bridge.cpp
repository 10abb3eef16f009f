// SPDX-License-Identifier: Apache-2.0
// A small shared library that lets Python hand DLPack tensors to fusion and take fusion's back, for the
// round trips with PyTorch and CuPy in dlpack_roundtrip.py (ctypes; no Python headers needed).
#include <fusion/fusion.hpp>

#include <string>

namespace fz = fusion;

namespace {
std::string last_error;
}

extern "C" {

/// The message of the last call that returned an error.
const char* fz_bridge_error() { return last_error.c_str(); }

/// Takes a DLManagedTensor (legacy, `versioned` 0) or DLManagedTensorVersioned (1) of float32 on the current
/// device, ordered after `producer` (a CUstream / cudaStream_t), and doubles it in place with one fused
/// kernel; waits for it. fusion owns the tensor from here (its deleter runs once). 0 on success.
int fz_bridge_double_in_place(void* managed, int versioned, void* producer) {
  try {
    auto* stream = static_cast<CUstream_st*>(producer);
    fz::Array<float> a(versioned
                           ? fz::dlpack::from_dlpack(static_cast<fz::dlpack::ManagedTensorVersioned*>(managed), stream)
                           : fz::dlpack::from_dlpack(static_cast<fz::dlpack::ManagedTensor*>(managed), stream));
    a *= 2.f;
    fz::current_stream().synchronize();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
    return 1;
  }
}

/// Wraps `n` float32 at device pointer `data` (a tensor's data_ptr: no DLPack, no copy, owned by the caller)
/// ordered after stream `producer`, adds 1 with one fused kernel on that same stream and waits. 0 on success.
int fz_bridge_add_one_by_pointer(void* data, long long n, void* producer) {
  try {
    const fz::Stream theirs = fz::Stream::from_external(static_cast<CUstream_st*>(producer));
    fz::StreamScope scope(theirs);  // fusion's kernel goes on the caller's stream: no ordering needed
    fz::Array<float> a = fz::from_device(static_cast<const float*>(data), {n});
    a += 1.f;
    theirs.synchronize();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
    return 1;
  }
}

/// A new float32 array, 0.5 * arange(n), exported for `consumer` (a stream, or null): a DLManagedTensor
/// (`versioned` 0) or a DLManagedTensorVersioned (1). Null on error.
void* fz_bridge_export_halves(long long n, int versioned, void* consumer) {
  try {
    fz::Array<float> a = fz::arange<float>(static_cast<double>(n)) * 0.5f;
    auto* stream = static_cast<CUstream_st*>(consumer);
    return versioned ? static_cast<void*>(fz::dlpack::to_dlpack(a, stream))
                     : static_cast<void*>(fz::dlpack::to_dlpack_unversioned(a, stream));
  } catch (const std::exception& e) {
    last_error = e.what();
    return nullptr;
  }
}

}  // extern "C"
