// SPDX-License-Identifier: Apache-2.0
// fmt::format("{}", array): for programs that use fmt (9 or later). Not in fusion.hpp, so that fusion's
// headers need no fmt; the text is fz::to_string's (PrintOptions apply).
#pragma once
#include <fmt/format.h>

#include <string>

#include "fusion/print.hpp"

// A specialization of fmt's template: left out of the reference.
/// @cond
template <class A>
  requires std::is_base_of_v<fusion::ArrayBase, A>
struct fmt::formatter<A> : fmt::formatter<std::string> {
  template <class Context> auto format(const A& a, Context& ctx) const {
    return fmt::formatter<std::string>::format(fusion::to_string(a), ctx);
  }
};
/// @endcond
