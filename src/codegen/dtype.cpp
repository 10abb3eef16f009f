// SPDX-License-Identifier: Apache-2.0
#include "fusion/dtype.hpp"

namespace fusion {

std::string_view dtype_name(DType d) {
  constexpr std::string_view names[] = {"bool",   "int8",   "int16",   "int32",    "int64",   "uint8",  "uint16",
                                        "uint32", "uint64", "float16", "bfloat16", "float32", "float64"};
  return names[static_cast<int>(d)];
}

std::string_view dtype_tag(DType d) {
  constexpr std::string_view tags[] = {"b1", "i8", "i16", "i32", "i64", "u8", "u16",
                                       "u32", "u64", "f16", "bf16", "f32", "f64"};
  return tags[static_cast<int>(d)];
}

}  // namespace fusion
