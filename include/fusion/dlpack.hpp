// SPDX-License-Identifier: Apache-2.0
// DLPack, the tensor exchange ABI of PyTorch, CuPy, JAX and others: fusion arrays out and their tensors in,
// without a copy. The structs below are DLPack 1.0's layout, written here so that no header is needed;
// they are layout-identical to dlpack.h's (a program that has it may reinterpret_cast between them).
#pragma once
#include <cstdint>

#include "fusion/array.hpp"
#include "fusion/stream.hpp"

namespace fusion::dlpack {

struct Version { std::uint32_t major, minor; };
/// DLDeviceType values fusion meets.
enum DeviceType : std::int32_t { kCPU = 1, kCUDA = 2, kCUDAHost = 3, kCUDAManaged = 13 };
struct Device { std::int32_t device_type, device_id; };
/// DLDataTypeCode values.
enum TypeCode : std::uint8_t {
  kInt = 0,
  kUInt = 1,
  kFloat = 2,
  kOpaqueHandle = 3,
  kBfloat = 4,
  kComplex = 5,
  kBool = 6
};
struct DataType { std::uint8_t code, bits; std::uint16_t lanes; };
struct Tensor {
  void* data;
  Device device;
  std::int32_t ndim;
  DataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  ///< in elements; null: C-contiguous
  std::uint64_t byte_offset;
};
/// DLManagedTensor (before DLPack 1.0).
struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};
inline constexpr std::uint64_t kFlagReadOnly = 1, kFlagIsCopied = 2;
/// DLManagedTensorVersioned (DLPack 1.0 and later).
struct ManagedTensorVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  std::uint64_t flags;
  Tensor dl_tensor;
};

/// The DLPack dtype of a fusion dtype, and back (TypeError for a DLPack dtype fusion has not: complex,
/// vectors of lanes, 8-bit floats).
DataType to_dlpack_dtype(DType d);
DType from_dlpack_dtype(DataType t);

/// A fusion array as a DLPack tensor (DLPack 1.0): no copy; the tensor keeps the memory alive until its
/// deleter runs (call it once, as DLPack says). The consumer's stream `consumer` (null: the consumer
/// synchronizes itself) waits for fusion's work on the array enqueued so far on the current stream.
ManagedTensorVersioned* to_dlpack(const ArrayBase& a, CUstream_st* consumer = nullptr);
/// The same as the older, unversioned DLManagedTensor, for consumers that take only those (the
/// "dltensor" capsules of torch.utils.dlpack.from_dlpack and cupy.fromDlpack).
ManagedTensor* to_dlpack_unversioned(const ArrayBase& a, CUstream_st* consumer = nullptr);

/// A DLPack tensor on the current CUDA device as a fusion array, no copy. fusion takes ownership: the
/// deleter runs once, after fusion's last use of the memory. `producer` (null: the memory is ready) is
/// the stream the producer last used it on. Refused (TypeError, and the caller keeps ownership): another
/// device type or device, a dtype fusion has not, a misaligned pointer, read-only tensors (fusion may
/// write through arrays).
ArrayBase from_dlpack(ManagedTensorVersioned* t, CUstream_st* producer = nullptr);
/// The same for a tensor of the older, unversioned DLManagedTensor.
ArrayBase from_dlpack(ManagedTensor* t, CUstream_st* producer = nullptr);

}  // namespace fusion::dlpack
