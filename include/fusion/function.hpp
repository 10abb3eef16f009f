// SPDX-License-Identifier: Apache-2.0
// User device functions inside fused expressions: `auto f = fz::function<float(float, float)>("f",
// "(float x, float y) { return x * y; }");` then `fz::sqrt(f(x, y)) + 1.f` is one kernel that defines f once.
#pragma once
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "fusion/expr.hpp"

namespace fusion {

namespace detail {
/// Records a definition (identical ones share an id); a TypeError for a bad name or body.
std::uint32_t register_function(std::string name, std::string body, DType result, std::vector<DType> params);
}  // namespace detail

namespace expr {

/// The parameter dtypes of a user function (std::integer_sequence takes integral types only).
template <DType... P> struct DTypes {};

/// A call of a user function; arguments are converted to the parameter dtypes `P` first.
template <DType R, class Params, class... A> struct Call;
template <DType R, DType... P, class... A> struct Call<R, DTypes<P...>, A...> : Node<Call<R, DTypes<P...>, A...>> {
  static constexpr DType dtype = R;
  static constexpr int n_arrays = (A::n_arrays + ...), n_scalars = (A::n_scalars + ...);
  static constexpr int n_reductions = (A::n_reductions + ...), n_functions = (A::n_functions + ...) + 1;
  std::uint32_t id;
  std::tuple<A...> args;
  static std::uint32_t lower(ir::Graph& g) {
    const std::uint32_t x[] = {A::lower(g)...};  // braces evaluate left to right, as pack() visits
    constexpr DType params[] = {P...};
    return g.call(R, x, params, static_cast<int>(sizeof...(A)));
  }
  void pack(detail::ArgSink& s) const {
    std::apply([&](const auto&... a) { (a.pack(s), ...); }, args);
    s.functions[s.n_functions++] = id;  // after the arguments: lower() numbers inner calls first too
  }
};

}  // namespace expr

template <class Signature> class Function;

/// A device function written in CUDA, callable on arrays, expressions and scalars inside any fused
/// expression. Parameters and result are fusion dtypes other than 16-bit floats (those arrays convert
/// to the parameter type, e.g. float); at most 3 parameters.
template <class R, class... P> class Function<R(P...)> {
  static_assert(sizeof...(P) >= 1 && sizeof...(P) <= ir::kMaxCallArgs, "fusion: fz::function takes 1 to 3 parameters");
  static_assert(Element<R> && (Element<P> && ...),
                "fusion: fz::function types are fusion dtypes (float, int32_t, ...)");
  static_assert(!NarrowFloat<R> && (!NarrowFloat<P> && ...),
                "fusion: write fz::function with float where data is 16-bit: such arrays convert to float and back");

 public:
  Function(std::string name, std::string body)
      : id_(detail::register_function(std::move(name), std::move(body), dtype_of<R>, {dtype_of<P>...})) {}

  template <class... A>
    requires(sizeof...(A) == sizeof...(P) && ((Operand<A> || CppScalar<std::decay_t<A>>) && ...))
  auto operator()(A&&... a) const {
    return make(std::index_sequence_for<P...>{}, std::forward<A>(a)...);
  }

 private:
  template <std::size_t... I, class... A> auto make(std::index_sequence<I...>, A&&... a) const {
    using Params = std::tuple<P...>;
    auto node = [](auto&& x, auto index) {
      using X = decltype(x);
      if constexpr (CppScalar<std::decay_t<X>>)
        return expr::Scalar<std::tuple_element_t<decltype(index)::value, Params>>::make(x);
      else return detail::to_node(std::forward<X>(x));
    };
    using Node = expr::Call<dtype_of<R>, expr::DTypes<dtype_of<P>...>,
                            decltype(node(std::forward<A>(a), std::integral_constant<std::size_t, I>{}))...>;
    return Node{{}, id_, {node(std::forward<A>(a), std::integral_constant<std::size_t, I>{})...}};
  }
  std::uint32_t id_;
};

/// `fz::function<float(float, float)>("name", "(float x, float y) { ... }")`.
template <class Signature> Function<Signature> function(std::string name, std::string body) {
  return Function<Signature>(std::move(name), std::move(body));
}

}  // namespace fusion
