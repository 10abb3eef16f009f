// SPDX-License-Identifier: Apache-2.0
// Expression nodes. Each node type knows its dtype at compile time, lowers itself into an ir::Graph
// (once per process, see evaluate.hpp) and packs its run-time arguments (arrays, scalar values).
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "fusion/array_base.hpp"
#include "fusion/error.hpp"
#include "fusion/ir.hpp"
#include "fusion/shape.hpp"

namespace fusion {

template <class T> class Array;

namespace detail {

/// A scalar kernel argument: its bits in the dtype's compute type (16-bit floats travel as float).
struct ScalarArg {
  std::uint64_t bits = 0;
  DType dtype = DType::float32;
};

/// The run-time half of a reduction: which axes (as the user wrote them), keepdims, and ddof.
struct ReduceArg {
  std::array<std::int8_t, kMaxDims> axes{};
  std::int8_t n_axes = -1;  // -1: every axis
  bool keepdims = false;
  double ddof = 0;          // mean divides by (count - ddof): var and std use it
  bool exclusive = false;   // scans: each element's result leaves the element itself out
  bool reverse = false;     // scans: from the end of the axis to its start
  bool operator==(const ReduceArg&) const = default;
};

/// Where pack() puts arguments, in the order lower() numbered them.
struct ArgSink {
  const ArrayBase** arrays;
  ScalarArg* scalars;
  ReduceArg* reductions;
  std::uint32_t* functions;  // fz::function ids, in the order lower() numbered their calls
  int n_arrays = 0, n_scalars = 0, n_reductions = 0, n_functions = 0;
};

template <class T> ScalarArg to_scalar_arg(T v) {
  ScalarArg s;
  s.dtype = dtype_of<T>;
  if constexpr (NarrowFloat<T>) {
    const float f = v;
    std::memcpy(&s.bits, &f, sizeof f);
  } else {
    std::memcpy(&s.bits, &v, sizeof v);
  }
  return s;
}

}  // namespace detail

/// Base of every expression node. It lives in namespace fusion so that argument-dependent lookup finds
/// fusion's operators and functions for nodes as it does for arrays.
struct ExpressionBase {};

namespace expr {

/// Marker base of every node; `astype<U>()` works on any expression, and `to_host()` / `item()` evaluate
/// it and read the result (`fz::sum(x * y).item()`), as on an array.
template <class Derived> struct Node : ExpressionBase {
  using is_fusion_expr = void;
  template <Element U> auto astype() const;
  auto to_host() const;  ///< evaluates into a new array, then its elements in C order (defined in array.hpp)
  auto item() const;     ///< evaluates; the single element of a one-element result (ShapeError otherwise)
};

/// An array read by reference (an lvalue Array that outlives the expression).
template <Element T> struct ArrayRef : Node<ArrayRef<T>> {
  static constexpr DType dtype = dtype_of<T>;
  static constexpr int n_arrays = 1, n_scalars = 0, n_reductions = 0, n_functions = 0;
  const ArrayBase* array;
  static std::uint32_t lower(ir::Graph& g) { return g.input(dtype); }
  void pack(detail::ArgSink& s) const { s.arrays[s.n_arrays++] = array; }
};

/// An array held by value (a temporary such as `x.slice(...)` kept alive by the expression).
template <Element T> struct ArrayOwned : Node<ArrayOwned<T>> {
  static constexpr DType dtype = dtype_of<T>;
  static constexpr int n_arrays = 1, n_scalars = 0, n_reductions = 0, n_functions = 0;
  Array<T> array;
  explicit ArrayOwned(Array<T>&& a) : array(std::move(a)) {}
  /// A copy of the node shares the array (a node describes data; it never copies it).
  ArrayOwned(const ArrayOwned& o) : array(ArrayBase(o.array)) {}
  ArrayOwned(ArrayOwned&&) noexcept = default;
  static std::uint32_t lower(ir::Graph& g) { return g.input(dtype); }
  void pack(detail::ArgSink& s) const { s.arrays[s.n_arrays++] = &array; }
};

/// A C++ scalar, already converted to the dtype it takes in the expression. Its value is a kernel
/// argument: changing it never recompiles.
template <Element T> struct Scalar : Node<Scalar<T>> {
  static constexpr DType dtype = dtype_of<T>;
  static constexpr int n_arrays = 0, n_scalars = 1, n_reductions = 0, n_functions = 0;
  T value;
  static std::uint32_t lower(ir::Graph& g) { return g.scalar(dtype); }
  void pack(detail::ArgSink& s) const { s.scalars[s.n_scalars++] = detail::to_scalar_arg(value); }

  /// Converts `v`, refusing integers that do not fit (NEP 50: `int8_array + 1000` is an error).
  template <CppScalar S> static Scalar make(S v) {
    // (a bool literal always fits; std::in_range refuses bool)
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && std::is_integral_v<S> &&
                  !std::is_same_v<S, bool>) {
      if (!std::in_range<T>(v))
        throw TypeError("the scalar " + std::to_string(v) + " does not fit the array's dtype " +
                        std::string(dtype_name(dtype)) + "; cast the array first with fz::cast<T>()");
    }
    Scalar s;
    if constexpr (NarrowFloat<T>) s.value = T(static_cast<float>(v));
    else s.value = static_cast<T>(v);
    return s;
  }
};

/// The flat element index, as int64 (behind fz::arange).
struct Iota : Node<Iota> {
  static constexpr DType dtype = DType::int64;
  static constexpr int n_arrays = 0, n_scalars = 0, n_reductions = 0, n_functions = 0;
  static std::uint32_t lower(ir::Graph& g) { return g.iota(); }
  void pack(detail::ArgSink&) const {}
};

template <DType To, class A> struct Cast : Node<Cast<To, A>> {
  static constexpr DType dtype = To;
  static constexpr int n_arrays = A::n_arrays, n_scalars = A::n_scalars, n_reductions = A::n_reductions;
  static constexpr int n_functions = A::n_functions;
  A a;
  static std::uint32_t lower(ir::Graph& g) { return g.explicit_cast(A::lower(g), To); }
  void pack(detail::ArgSink& s) const { a.pack(s); }
};

template <ir::Op OP, class A> struct Unary : Node<Unary<OP, A>> {
  static_assert(!ir::is_bitwise(OP) || ir::accepts(OP, A::dtype),
                "fusion: '~' and other bitwise operations need integer or bool operands; "
                "convert floats first with fz::cast<std::int32_t>(e)");
  static_assert(ir::is_bitwise(OP) || ir::accepts(OP, A::dtype),
                "fusion: negation and sign are not defined for bool arrays (as in NumPy); use !e or cast first");
  static constexpr DType dtype = ir::result_dtype(OP, A::dtype);
  static constexpr int n_arrays = A::n_arrays, n_scalars = A::n_scalars, n_reductions = A::n_reductions;
  static constexpr int n_functions = A::n_functions;
  A a;
  static std::uint32_t lower(ir::Graph& g) { return g.unary(OP, A::lower(g)); }
  void pack(detail::ArgSink& s) const { a.pack(s); }
};

/// What every node of two operands shares: their argument counts, the operands, and packing them in the
/// order lower() numbers them (a, then b). Built as `Derived{{{}, a, b}}`.
template <class Derived, class A, class B> struct TwoOperands : Node<Derived> {
  static constexpr int n_arrays = A::n_arrays + B::n_arrays, n_scalars = A::n_scalars + B::n_scalars;
  static constexpr int n_reductions = A::n_reductions + B::n_reductions, n_functions = A::n_functions + B::n_functions;
  A a;
  B b;
  void pack(detail::ArgSink& s) const {
    a.pack(s);
    b.pack(s);
  }
};

template <ir::Op OP, class A, class B> struct Binary : TwoOperands<Binary<OP, A, B>, A, B> {
  static_assert(!ir::is_bitwise(OP) || ir::accepts(OP, A::dtype, B::dtype),
                "fusion: bitwise operators and shifts need integer or bool operands; "
                "convert floats first with fz::cast<std::int32_t>(e)");
  static_assert(ir::is_bitwise(OP) || ir::accepts(OP, A::dtype, B::dtype),
                "fusion: '-' is not defined between bool arrays (as in NumPy); use != or cast to an integer first");
  static constexpr DType dtype = ir::result_dtype(OP, A::dtype, B::dtype);
  static std::uint32_t lower(ir::Graph& g) {
    const std::uint32_t x = A::lower(g);  // operands lower in the order pack() visits them
    const std::uint32_t y = B::lower(g);
    return g.binary(OP, x, y);
  }
};

template <class C, class A, class B> struct Where : Node<Where<C, A, B>> {
  static constexpr DType dtype = promote_types(A::dtype, B::dtype);
  static constexpr int n_arrays = C::n_arrays + A::n_arrays + B::n_arrays;
  static constexpr int n_scalars = C::n_scalars + A::n_scalars + B::n_scalars;
  static constexpr int n_reductions = C::n_reductions + A::n_reductions + B::n_reductions;
  static constexpr int n_functions = C::n_functions + A::n_functions + B::n_functions;
  C c;
  A a;
  B b;
  static std::uint32_t lower(ir::Graph& g) {
    const std::uint32_t k = C::lower(g);
    const std::uint32_t x = A::lower(g);
    const std::uint32_t y = B::lower(g);
    return g.where(k, x, y);
  }
  void pack(detail::ArgSink& s) const {
    c.pack(s);
    a.pack(s);
    b.pack(s);
  }
};

/// fz::named: the user's name replaces the op part of the kernel symbol.
template <class A> struct Named : Node<Named<A>> {
  static constexpr DType dtype = A::dtype;
  static constexpr int n_arrays = A::n_arrays, n_scalars = A::n_scalars, n_reductions = A::n_reductions;
  static constexpr int n_functions = A::n_functions;
  std::string name;
  A a;
  static std::uint32_t lower(ir::Graph& g) { return A::lower(g); }
  void pack(detail::ArgSink& s) const { a.pack(s); }
};

/// `A`, with the kernel(s) of the assignment it is part of compiled with approximate float32 math.
template <class A> struct FastMath : Node<FastMath<A>> {
  static constexpr DType dtype = A::dtype;
  static constexpr int n_arrays = A::n_arrays, n_scalars = A::n_scalars, n_reductions = A::n_reductions;
  static constexpr int n_functions = A::n_functions;
  A a;
  static std::uint32_t lower(ir::Graph& g) {
    const std::uint32_t r = A::lower(g);
    g.fast_math = true;
    return r;
  }
  void pack(detail::ArgSink& s) const { a.pack(s); }
};

/// A reduction of `A` to dtype `Result` over the axes in `arg` (known only at run time, like shapes).
template <ir::Op OP, DType Result, class A> struct Reduce : Node<Reduce<OP, Result, A>> {
  static constexpr DType dtype = Result;
  static constexpr int n_arrays = A::n_arrays, n_scalars = A::n_scalars, n_reductions = A::n_reductions + 1;
  static constexpr int n_functions = A::n_functions;
  A a;
  detail::ReduceArg arg;
  static std::uint32_t lower(ir::Graph& g) { return g.reduce(OP, A::lower(g), Result); }
  void pack(detail::ArgSink& s) const {
    a.pack(s);  // inner reductions first: lower() numbers them first too
    s.reductions[s.n_reductions++] = arg;
  }
};

template <class Derived>
template <Element U>
auto Node<Derived>::astype() const {
  return Cast<dtype_of<U>, Derived>{{}, static_cast<const Derived&>(*this)};
}

}  // namespace expr

/// Anything that is an expression node.
template <class E> concept Expression = requires { typename std::decay_t<E>::is_fusion_expr; };

namespace detail {
template <class T> struct IsArray : std::false_type {};
template <class T> struct IsArray<Array<T>> : std::true_type {};
}  // namespace detail
template <class A> concept ArrayLike = detail::IsArray<std::decay_t<A>>::value;
/// An array or an expression: what fusion's operators and functions take.
template <class A> concept Operand = ArrayLike<A> || Expression<A>;

namespace detail {

/// The node an operand becomes: lvalue arrays by reference, temporaries by value, nodes as they are.
template <class A> auto to_node(A&& a) {
  using D = std::decay_t<A>;
  if constexpr (ArrayLike<A>) {
    using T = typename D::value_type;
    if constexpr (std::is_lvalue_reference_v<A>) return expr::ArrayRef<T>{{}, &a};
    else return expr::ArrayOwned<T>(std::move(a));
  } else {
    return D(std::forward<A>(a));
  }
}
template <class A> using node_t = decltype(to_node(std::declval<A>()));

/// An operand or a scalar that takes `Partner`'s dtype by NEP 50's weak-scalar rule.
template <DType Partner, class A> auto to_node_beside(A&& a) {
  if constexpr (CppScalar<std::decay_t<A>>) {
    using T = TypeOf<promote_weak(Partner, scalar_kind<std::decay_t<A>>())>;
    return expr::Scalar<T>::make(a);
  } else {
    return to_node(std::forward<A>(a));
  }
}

template <ir::Op OP, class A, class B> auto make_binary(A&& a, B&& b) {
  if constexpr (CppScalar<std::decay_t<A>>) {
    auto y = to_node(std::forward<B>(b));
    auto x = to_node_beside<decltype(y)::dtype>(a);
    return expr::Binary<OP, decltype(x), decltype(y)>{{{}, std::move(x), std::move(y)}};
  } else {
    auto x = to_node(std::forward<A>(a));
    auto y = to_node_beside<decltype(x)::dtype>(std::forward<B>(b));
    return expr::Binary<OP, decltype(x), decltype(y)>{{{}, std::move(x), std::move(y)}};
  }
}

template <ir::Op OP, class A> auto make_unary(A&& a) {
  auto x = to_node(std::forward<A>(a));
  return expr::Unary<OP, decltype(x)>{{}, std::move(x)};
}

}  // namespace detail
}  // namespace fusion
