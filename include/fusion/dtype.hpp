// SPDX-License-Identifier: Apache-2.0
// Data types, their C++ spellings, and NumPy's promotion rules (NEP 50: C++ scalars are weak).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "fusion/half.hpp"

namespace fusion {

enum class DType : std::uint8_t {
  bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64
};

enum class DKind : std::uint8_t { boolean, signed_int, unsigned_int, floating };

/// Everything fusion knows about a dtype, in one row. Adding a dtype is a row here, a DTypeOf/TypeOfT
/// pair below and its promotion rules (a new 16-bit float also needs its host type in half.hpp and its
/// device conversions in codegen/spell.cpp), and its host reference in the tests.
struct DTypeInfo {
  DType dtype;
  const char* name;     ///< NumPy's name: "float32", "int8", "bool"
  const char* tag;      ///< short tag in kernel names: "f32", "i8", "b1", "bf16"
  std::size_t size;     ///< bytes per element
  DKind kind;
  DType compute;        ///< the dtype values live in while computing: 16-bit floats compute in float32
  const char* cuda;     ///< the CUDA type of a computed value
  const char* storage;  ///< the CUDA type of an element in memory (16-bit floats are raw bits)
  const char* lowest;   ///< the lowest value as a CUDA literal (-inf for floats): max's identity
  const char* highest;  ///< the highest value as a CUDA literal (+inf for floats): min's identity
  double epsilon;       ///< the gap from 1 to the next value (0 for integers)
  std::int8_t dlpack;   ///< DLPack's type code (DLDataTypeCode): int 0, uint 1, float 2, bfloat 4, bool 6
  std::int8_t nccl;     ///< NCCL's ncclDataType_t, -1 where NCCL has none
  const char* to_float = "";    ///< the device function widening a stored element (16-bit floats)
  const char* from_float = "";  ///< the device function rounding a float to storage (16-bit floats)
};

// clang-format off
inline constexpr DTypeInfo kDTypes[] = {
    {DType::bool_, "bool", "b1", 1, DKind::boolean, DType::bool_, "bool", "bool", "false", "true", 0, 6, -1},
    {DType::int8, "int8", "i8", 1, DKind::signed_int, DType::int8, "signed char", "signed char",
     "(signed char)-128", "(signed char)127", 0, 0, 0},
    {DType::int16, "int16", "i16", 2, DKind::signed_int, DType::int16, "short", "short",
     "(short)-32768", "(short)32767", 0, 0, -1},
    {DType::int32, "int32", "i32", 4, DKind::signed_int, DType::int32, "int", "int",
     "(-2147483647 - 1)", "2147483647", 0, 0, 2},
    {DType::int64, "int64", "i64", 8, DKind::signed_int, DType::int64, "long long", "long long",
     "(-9223372036854775807ll - 1)", "9223372036854775807ll", 0, 0, 4},
    {DType::uint8, "uint8", "u8", 1, DKind::unsigned_int, DType::uint8, "unsigned char", "unsigned char",
     "(unsigned char)0", "(unsigned char)255", 0, 1, 1},
    {DType::uint16, "uint16", "u16", 2, DKind::unsigned_int, DType::uint16, "unsigned short", "unsigned short",
     "(unsigned short)0", "(unsigned short)65535", 0, 1, -1},
    {DType::uint32, "uint32", "u32", 4, DKind::unsigned_int, DType::uint32, "unsigned int", "unsigned int",
     "0u", "4294967295u", 0, 1, 3},
    {DType::uint64, "uint64", "u64", 8, DKind::unsigned_int, DType::uint64, "unsigned long long", "unsigned long long",
     "0ull", "18446744073709551615ull", 0, 1, 5},
    {DType::float16, "float16", "f16", 2, DKind::floating, DType::float32, "float", "unsigned short",
     "__int_as_float(0xff800000)", "__int_as_float(0x7f800000)", 0x1p-10, 2, 6,
     "fz_half_to_float", "fz_float_to_half"},
    {DType::bfloat16, "bfloat16", "bf16", 2, DKind::floating, DType::float32, "float", "unsigned short",
     "__int_as_float(0xff800000)", "__int_as_float(0x7f800000)", 0x1p-7, 4, 9,
     "fz_bfloat16_to_float", "fz_float_to_bfloat16"},
    {DType::float32, "float32", "f32", 4, DKind::floating, DType::float32, "float", "float",
     "__int_as_float(0xff800000)", "__int_as_float(0x7f800000)", 0x1p-23, 2, 7},
    {DType::float64, "float64", "f64", 8, DKind::floating, DType::float64, "double", "double",
     "__longlong_as_double(0xfff0000000000000ll)", "__longlong_as_double(0x7ff0000000000000ll)", 0x1p-52, 2, 8},
};
// clang-format on
inline constexpr int kNumDTypes = static_cast<int>(sizeof(kDTypes) / sizeof(kDTypes[0]));
constexpr bool dtype_rows_in_enum_order() {
  for (int i = 0; i < kNumDTypes; ++i)
    if (static_cast<int>(kDTypes[i].dtype) != i) return false;
  return true;
}
static_assert(dtype_rows_in_enum_order(), "kDTypes has one row per DType, in the enum's order");

constexpr const DTypeInfo& dtype_info(DType d) { return kDTypes[static_cast<int>(d)]; }
constexpr bool is_floating(DType d) { return dtype_info(d).kind == DKind::floating; }
constexpr bool is_signed_int(DType d) { return dtype_info(d).kind == DKind::signed_int; }
constexpr bool is_unsigned_int(DType d) { return dtype_info(d).kind == DKind::unsigned_int; }
constexpr bool is_integer(DType d) { return is_signed_int(d) || is_unsigned_int(d); }
/// float16 and bfloat16: stored as 16 bits, computed in float, rounded once on store.
constexpr bool is_16bit_float(DType d) { return is_floating(d) && dtype_info(d).size == 2; }
constexpr std::size_t itemsize(DType d) { return dtype_info(d).size; }
/// NumPy's name: "float32", "int8", "bool", ...
constexpr std::string_view dtype_name(DType d) { return dtype_info(d).name; }
/// Short tag used in kernel names: "f32", "i8", "b1", "bf16", ...
constexpr std::string_view dtype_tag(DType d) { return dtype_info(d).tag; }

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
namespace detail {
/// dtype_of, or float32 for a type that is not an element (after a static_assert said so: no more errors).
template <class T> constexpr DType dtype_or_float() {
  if constexpr (Element<T>) return dtype_of<T>;
  else return DType::float32;
}
}  // namespace detail

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

namespace detail {
/// `f(T{})` with T the C++ element type of `d` (bool, the fixed-width integers, half, bfloat16, float,
/// double): code that works per element type is written once, and a new dtype reaches it by its TypeOf.
template <int I = 0, class F> decltype(auto) visit_dtype(DType d, F&& f) {
  if constexpr (I + 1 < static_cast<int>(sizeof(kDTypes) / sizeof(kDTypes[0])))
    if (static_cast<int>(d) != I) return visit_dtype<I + 1>(d, std::forward<F>(f));
  return f(TypeOf<static_cast<DType>(I)>{});
}
}  // namespace detail

/// The kind of a plain C++ scalar (`2.5f`, `1`, `true`); `long`, `char` etc. count by their category.
template <class S> constexpr ScalarKind scalar_kind() {
  if constexpr (std::is_same_v<S, bool>) return ScalarKind::boolean;
  else if constexpr (std::is_integral_v<S>) return ScalarKind::integer;
  else return ScalarKind::floating;
}
template <class S> concept CppScalar = std::is_arithmetic_v<S>;

}  // namespace fusion
