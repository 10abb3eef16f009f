// SPDX-License-Identifier: Apache-2.0
// fmt::format("{}", array) (and expressions, shapes, dtypes, versions): for programs that use fmt (9 or later). Not in fusion.hpp, so that fusion's
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
template <class E>
  requires fusion::Expression<E>
struct fmt::formatter<E> : fmt::formatter<std::string> {
  template <class Context> auto format(const E& e, Context& ctx) const {
    return fmt::formatter<std::string>::format(fusion::to_string(fusion::eval(e)), ctx);
  }
};
template <> struct fmt::formatter<fusion::Dims> : fmt::formatter<std::string> {
  template <class Context> auto format(const fusion::Dims& s, Context& ctx) const {
    return fmt::formatter<std::string>::format(fusion::to_string(s), ctx);
  }
};
template <> struct fmt::formatter<fusion::DType> : fmt::formatter<std::string_view> {
  template <class Context> auto format(fusion::DType d, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(fusion::dtype_name(d), ctx);
  }
};
template <> struct fmt::formatter<fusion::Version> : fmt::formatter<std::string> {
  template <class Context> auto format(const fusion::Version& v, Context& ctx) const {
    return fmt::formatter<std::string>::format(fusion::to_string(v), ctx);
  }
};
/// @endcond
