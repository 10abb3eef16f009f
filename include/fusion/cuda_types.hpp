// SPDX-License-Identifier: Apache-2.0
// Host data in CUDA's own 16-bit float types: __half (cuda_fp16.h) and __nv_bfloat16 (cuda_bf16.h) have
// the same 2-byte layout as fz::half and fz::bfloat16, so arrays are made from them, and read back into
// them, by copying bits. Include this header where your code already uses the CUDA types (it includes
// the CUDA headers; fusion's other headers do not).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <span>
#include <vector>

#include "fusion/array.hpp"

namespace fusion {

namespace detail {
/// The fusion type with the same bits as CUDA's type C.
template <class C> struct SameBits;
template <> struct SameBits<__half> { using type = half; };
template <> struct SameBits<__nv_bfloat16> { using type = bfloat16; };
template <class C> concept CudaFloat16 = requires { typename SameBits<C>::type; };

template <class To, class From> std::vector<To> copy_bits(std::span<const From> from) {
  static_assert(sizeof(To) == sizeof(From) && std::is_trivially_copyable_v<From> && std::is_trivially_copyable_v<To>);
  std::vector<To> to(from.size());
  if (!from.empty()) std::memcpy(to.data(), from.data(), from.size() * sizeof(From));
  return to;
}
}  // namespace detail

/// A new device array of fz::half (from __half) or fz::bfloat16 (from __nv_bfloat16) with these bits.
template <detail::CudaFloat16 C> auto asarray(std::span<const C> host, const Shape& shape) {
  using T = typename detail::SameBits<C>::type;
  return asarray<T>(detail::copy_bits<T>(host), shape);
}
template <detail::CudaFloat16 C> auto asarray(const std::vector<C>& host, const Shape& shape) {
  return asarray(std::span<const C>(host), shape);
}
template <detail::CudaFloat16 C> auto asarray(const std::vector<C>& host) {
  return asarray(std::span<const C>(host), Shape{static_cast<std::int64_t>(host.size())});
}

/// The elements of a half or bfloat16 array as CUDA's type `C` (C order, after the current stream's work).
template <detail::CudaFloat16 C> std::vector<C> to_host_as(const Array<typename detail::SameBits<C>::type>& a) {
  const auto v = a.to_host();
  return detail::copy_bits<C>(std::span<const typename detail::SameBits<C>::type>(v));
}

}  // namespace fusion
