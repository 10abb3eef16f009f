// SPDX-License-Identifier: Apache-2.0
// DLPack export and import: a fusion array's memory handed to another library and back, no copy.
#include "fusion/dlpack.hpp"

#include <fmt/format.h>

#include <atomic>
#include <vector>

#include "fusion/device.hpp"
#include "fusion/error.hpp"
#include "fusion/event.hpp"
#include "fusion/external.hpp"
#include "runtime/cuda/device_state.hpp"

namespace fusion::dlpack {

DataType to_dlpack_dtype(DType d) {
  return {static_cast<std::uint8_t>(dtype_info(d).dlpack), static_cast<std::uint8_t>(8 * itemsize(d)), 1};
}

DType from_dlpack_dtype(DataType t) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DataType c = to_dlpack_dtype(static_cast<DType>(i));
    if (c.code == t.code && c.bits == t.bits && t.lanes == 1) return static_cast<DType>(i);
  }
  throw TypeError(
      fmt::format("DLPack dtype (code {}, {} bits, {} lanes) has no fusion dtype: fusion takes bool, signed and "
                  "unsigned integers, float16, bfloat16, float32 and float64 with one lane",
                  t.code, t.bits, t.lanes));
}

namespace {

/// What an exported tensor owns: the array (its memory stays alive) and the shape and strides it points to.
struct Export {
  ArrayBase array;
  std::vector<std::int64_t> shape, strides;
  CUstream_st* consumer = nullptr;
  ManagedTensorVersioned tensor{};
};

void delete_export(ManagedTensorVersioned* t) {
  auto* e = static_cast<Export*>(t->manager_ctx);
  try {
    // the consumer's work enqueued so far may still read the memory: free it only after that work
    if (e->consumer && e->array.has_storage())
      e->array.record_stream(Stream::from_external(e->consumer, e->array.device()));
  } catch (...) {  // a deleter must not throw; the memory is then freed in fusion's stream order
  }
  delete e;
}

/// The checks and the array common to both structs; the owner runs `release` once, and only if the
/// import succeeded (a refused tensor stays the caller's).
template <class Managed>
ArrayBase import(Managed* t, const Tensor& dl, CUstream_st* producer) {
  if (dl.device.device_type != kCUDA && dl.device.device_type != kCUDAManaged)
    throw TypeError(
        fmt::format("from_dlpack: the tensor is on device type {} (CPU is 1, CUDA host memory 3); fusion takes "
                    "CUDA device memory (2) or managed memory (13)",
                    dl.device.device_type));
  const DType d = from_dlpack_dtype(dl.dtype);
  if (dl.ndim < 0 || (dl.ndim > 0 && !dl.shape)) throw TypeError("from_dlpack: the tensor has no shape");
  const int current = fusion::Device::current().id();
  if (dl.device.device_type == kCUDA && dl.device.device_id != current)
    throw TypeError(
        fmt::format("from_dlpack: the tensor is on CUDA device {} but device {} is current; use fz::DeviceScope",
                    dl.device.device_id, current));
  ExternalView view;
  for (int i = 0; i < dl.ndim; ++i) view.shape.push_back(dl.shape[i]);
  if (dl.strides)
    for (int i = 0; i < dl.ndim; ++i) view.strides.push_back(dl.strides[i]);
  view.data = static_cast<const char*>(dl.data) + dl.byte_offset;
  auto armed = std::make_shared<std::atomic<bool>>(false);
  view.owner = std::shared_ptr<void>(t, [armed](void* p) {
    auto* m = static_cast<Managed*>(p);
    if (armed->load() && m->deleter) m->deleter(m);
  });
  if (producer) view.last_used_on = std::make_shared<const Stream>(Stream::from_external(producer, current));
  ArrayBase a = from_device(d, view);
  armed->store(true);  // from here on the tensor is fusion's
  return a;
}

}  // namespace

ManagedTensorVersioned* to_dlpack(const ArrayBase& a, CUstream_st* consumer) {
  if (a.is_placeholder()) throw Error("to_dlpack: a placeholder array has no memory; it exists for fz::inspect");
  if (!a.has_storage() && a.size() > 0)
    throw Error("to_dlpack: the array has no memory (default-constructed, never assigned)");
  a.note_escape();  // the other library may write it whenever it likes
  auto* e = new Export{a, {a.shape().begin(), a.shape().end()}, {a.strides().begin(), a.strides().end()}, consumer, {}};
  ManagedTensorVersioned& t = e->tensor;
  t.version = {1, 0};
  t.manager_ctx = e;
  t.deleter = delete_export;
  t.flags = 0;
  t.dl_tensor.data = a.has_storage() ? reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.data_ptr())) : nullptr;
  t.dl_tensor.device = {kCUDA, a.has_storage() ? a.device() : fusion::Device::current().id()};
  t.dl_tensor.ndim = a.ndim();
  t.dl_tensor.dtype = to_dlpack_dtype(a.dtype());
  t.dl_tensor.shape = e->shape.data();
  t.dl_tensor.strides = e->strides.data();
  t.dl_tensor.byte_offset = 0;
  if (consumer && a.has_storage()) {  // the consumer's stream waits for fusion's work on the array so far
    try {
      Event ready({.disable_timing = true});
      ready.record();
      Stream::from_external(consumer, a.device()).wait_event(ready);
    } catch (...) {
      delete e;
      throw;
    }
  }
  return &t;
}

ManagedTensor* to_dlpack_unversioned(const ArrayBase& a, CUstream_st* consumer) {
  ManagedTensorVersioned* v = to_dlpack(a, consumer);
  // the older struct wraps the versioned one: the same tensor, and its deleter runs the versioned one's
  return new ManagedTensor{v->dl_tensor, v, [](ManagedTensor* self) {
                             auto* inner = static_cast<ManagedTensorVersioned*>(self->manager_ctx);
                             inner->deleter(inner);
                             delete self;
                           }};
}

ArrayBase from_dlpack(ManagedTensorVersioned* t, CUstream_st* producer) {
  if (!t) throw Error("from_dlpack: a null tensor");
  if (t->version.major > 1)
    throw TypeError(
        fmt::format("from_dlpack: DLPack {}.{} is newer than fusion knows (1.x); the producer can export 1.0",
                    t->version.major, t->version.minor));
  if (t->flags & kFlagReadOnly)
    throw TypeError("from_dlpack: the tensor is read-only, and fusion arrays may be written; copy it first");
  return import(t, t->dl_tensor, producer);
}

ArrayBase from_dlpack(ManagedTensor* t, CUstream_st* producer) {
  if (!t) throw Error("from_dlpack: a null tensor");
  return import(t, t->dl_tensor, producer);
}

}  // namespace fusion::dlpack
