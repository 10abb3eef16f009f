// SPDX-License-Identifier: Apache-2.0
#include "codegen/variant.hpp"

#include <fmt/format.h>

namespace fusion::codegen {

void Variant::hash_into(StableHasher& h, std::uint32_t n_slots) const {
  h.add_byte(rank);
  h.add_byte(vector_width);
  h.add_byte(index64);
  h.add_byte(out_aliases_input);
  h.add_byte(static_cast<std::uint8_t>(out_dtype));
  h.add_byte(static_cast<std::uint8_t>(out_access));
  h.add_byte(n_params);
  for (std::uint32_t s = 0; s < n_slots; ++s) h.add_byte(param_of_slot[s]);
  for (int p = 0; p < n_params; ++p) h.add_byte(static_cast<std::uint8_t>(access[p]));
}

std::string Variant::describe() const {
  std::string s = has_strided() ? fmt::format("strided, rank {}", rank) : "linear";
  if (vector_width > 1) s += fmt::format(", {}-wide vectors", vector_width);
  s += index64 ? ", 64-bit index" : ", 32-bit index";
  if (out_aliases_input) s += ", output aliases an input";
  int broadcast = 0, strided = 0;
  for (int p = 0; p < n_params; ++p) {
    broadcast += access[p] == Access::broadcast;
    strided += access[p] == Access::strided;
  }
  if (broadcast) s += fmt::format(", {} broadcast input(s)", broadcast);
  if (strided) s += fmt::format(", {} strided input(s)", strided);
  if (out_access == Access::strided) s += ", strided output";
  return s;
}

}  // namespace fusion::codegen
