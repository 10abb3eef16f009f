// SPDX-License-Identifier: Apache-2.0
// Data types, their C++ spellings, and NumPy's promotion rules (NEP 50: C++ scalars are weak).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "fusion/half.hpp"

namespace fusion {

enum class DType : std::uint8_t {
  bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64
};
inline constexpr int kNumDTypes = 13;

constexpr bool is_floating(DType d) { return d >= DType::float16; }
constexpr bool is_signed_int(DType d) { return d >= DType::int8 && d <= DType::int64; }
constexpr bool is_unsigned_int(DType d) { return d >= DType::uint8 && d <= DType::uint64; }
constexpr bool is_integer(DType d) { return is_signed_int(d) || is_unsigned_int(d); }

constexpr std::size_t itemsize(DType d) {
  constexpr std::size_t sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8};
  return sizes[static_cast<int>(d)];
}
/// NumPy's name: "float32", "int8", "bool", ...
std::string_view dtype_name(DType d);
/// Short tag used in kernel names: "f32", "i8", "b1", "bf16", ...
std::string_view dtype_tag(DType d);

/// The floating dtype that NumPy's math functions pick for an input dtype (int8 -> float16, int32 -> float64).
constexpr DType float_for(DType d) {
  if (is_floating(d)) return d;
  switch (itemsize(d)) {
    case 1: return DType::float16;
    case 2: return DType::float32;
    default: return DType::float64;
  }
}

/// NumPy's promote_types for two array dtypes (bfloat16 follows ml_dtypes: bf16 with f16 gives f32).
constexpr DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::bool_) return b;
  if (b == DType::bool_) return a;
  if (is_floating(a) || is_floating(b)) {
    const DType fa = float_for(a), fb = float_for(b);
    if (fa == fb) return fa;
    // a small integer's float_for is float16; next to bfloat16 it yields bfloat16 (as in ml_dtypes)
    if (fa == DType::bfloat16 && !is_floating(b) && fb == DType::float16) return DType::bfloat16;
    if (fb == DType::bfloat16 && !is_floating(a) && fa == DType::float16) return DType::bfloat16;
    if ((fa == DType::float16 && fb == DType::bfloat16) || (fa == DType::bfloat16 && fb == DType::float16))
      return DType::float32;
    return itemsize(fa) >= itemsize(fb) ? (itemsize(fa) == itemsize(fb) ? DType::float32 : fa) : fb;
  }
  if (is_signed_int(a) == is_signed_int(b)) return itemsize(a) >= itemsize(b) ? a : b;
  const DType s = is_signed_int(a) ? a : b, u = is_signed_int(a) ? b : a;
  if (itemsize(s) > itemsize(u)) return s;
  switch (itemsize(u)) {  // the smallest signed type holding both
    case 1: return DType::int16;
    case 2: return DType::int32;
    case 4: return DType::int64;
    default: return DType::float64;  // uint64 with a signed type, as NumPy
  }
}

/// The kind of a C++ scalar mixed into an array expression; it takes the array's dtype where it can (NEP 50).
enum class ScalarKind : std::uint8_t { boolean, integer, floating };
constexpr DType promote_weak(DType array, ScalarKind scalar) {
  switch (scalar) {
    case ScalarKind::boolean: return array;
    case ScalarKind::integer: return array == DType::bool_ ? DType::int64 : array;
    default: return is_floating(array) ? array : DType::float64;
  }
}

// ---- C++ type <-> DType ---------------------------------------------------------------------------
template <class T> struct DTypeOf;
template <> struct DTypeOf<bool> { static constexpr DType value = DType::bool_; };
template <> struct DTypeOf<std::int8_t> { static constexpr DType value = DType::int8; };
template <> struct DTypeOf<std::int16_t> { static constexpr DType value = DType::int16; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::int32; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::int64; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::uint8; };
template <> struct DTypeOf<std::uint16_t> { static constexpr DType value = DType::uint16; };
template <> struct DTypeOf<std::uint32_t> { static constexpr DType value = DType::uint32; };
template <> struct DTypeOf<std::uint64_t> { static constexpr DType value = DType::uint64; };
template <> struct DTypeOf<half> { static constexpr DType value = DType::float16; };
template <> struct DTypeOf<bfloat16> { static constexpr DType value = DType::bfloat16; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::float64; };

template <class T> concept Element = requires { DTypeOf<T>::value; };
template <class T> inline constexpr DType dtype_of = DTypeOf<T>::value;

template <DType D> struct TypeOfT;
template <> struct TypeOfT<DType::bool_> { using type = bool; };
template <> struct TypeOfT<DType::int8> { using type = std::int8_t; };
template <> struct TypeOfT<DType::int16> { using type = std::int16_t; };
template <> struct TypeOfT<DType::int32> { using type = std::int32_t; };
template <> struct TypeOfT<DType::int64> { using type = std::int64_t; };
template <> struct TypeOfT<DType::uint8> { using type = std::uint8_t; };
template <> struct TypeOfT<DType::uint16> { using type = std::uint16_t; };
template <> struct TypeOfT<DType::uint32> { using type = std::uint32_t; };
template <> struct TypeOfT<DType::uint64> { using type = std::uint64_t; };
template <> struct TypeOfT<DType::float16> { using type = half; };
template <> struct TypeOfT<DType::bfloat16> { using type = bfloat16; };
template <> struct TypeOfT<DType::float32> { using type = float; };
template <> struct TypeOfT<DType::float64> { using type = double; };
template <DType D> using TypeOf = typename TypeOfT<D>::type;

/// The kind of a plain C++ scalar (`2.5f`, `1`, `true`); `long`, `char` etc. count by their category.
template <class S> constexpr ScalarKind scalar_kind() {
  if constexpr (std::is_same_v<S, bool>) return ScalarKind::boolean;
  else if constexpr (std::is_integral_v<S>) return ScalarKind::integer;
  else return ScalarKind::floating;
}
template <class S> concept CppScalar = std::is_arithmetic_v<S>;

}  // namespace fusion
