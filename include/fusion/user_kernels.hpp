// SPDX-License-Identifier: Apache-2.0
// Kernels written by the user in CUDA, in CuPy's terms: ElementwiseKernel and ReductionKernel take
// parameter lists like "float32 x, T y" and a few lines of code; fusion writes the kernel around them
// and compiles it through the same NVRTC, caches, naming and inspection as fused expressions.
#pragma once
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "fusion/array.hpp"
#include "fusion/inspect.hpp"
#include "fusion/reductions.hpp"

namespace fusion {

/// The arrays a user kernel wrote: the outputs passed in (as views of them) or the ones it allocated.
class Outputs {
 public:
  explicit Outputs(std::vector<ArrayBase> arrays) : arrays_(std::move(arrays)) {}
  std::size_t size() const { return arrays_.size(); }
  const ArrayBase& operator[](std::size_t k) const { return arrays_.at(k); }
  /// Output `k` as an Array<T>; a TypeError when its dtype is not T.
  template <Element T> Array<T> get(std::size_t k = 0) const {
    const ArrayBase& a = arrays_.at(k);
    if (a.dtype() != dtype_of<T>)
      throw TypeError("the kernel's output " + std::to_string(k) + " is " + std::string(dtype_name(a.dtype())) +
                      ", not " + std::string(dtype_name(dtype_of<T>)));
    return Array<T>(a);
  }
  /// The single output (`fz::Array<float> r = kernel(x);`).
  template <Element T> operator Array<T>() const {
    if (arrays_.size() != 1)
      throw TypeError("the kernel has " + std::to_string(arrays_.size()) + " outputs; take one with .get<T>(k)");
    return get<T>(0);
  }

 private:
  std::vector<ArrayBase> arrays_;
};

struct ElementwiseOptions {
  std::string preamble;              ///< code placed before the kernel (helper functions, constants)
  std::vector<std::string> options;  ///< extra NVRTC options ("-DSCALE=2", "--use_fast_math")
};

struct ReductionOptions {
  std::string preamble;
  std::vector<std::string> options;
  std::string reduce_type;  ///< the type of `a` and `b` (a dtype name or a placeholder); default: the output's
  std::string loop_prep;    ///< statements at the start of each thread's work (visible to after_loop, post_map)
  std::string after_loop;   ///< statements after `a` holds the reduced value, before post_map_expr
};

namespace detail {

struct UserKernel;  // parsed parameters, code and compiled variants (src/runtime/custom/user_kernel.hpp)

/// One argument of a user-kernel call: an array, or a C++ scalar with its dtype.
struct UserArg {
  ArrayBase* array = nullptr;
  ScalarArg scalar;
};

/// The dtype of a plain C++ scalar by its kind and width (`long long`, `char` included).
template <class S> constexpr DType scalar_dtype() {
  if constexpr (Element<S>) return dtype_of<S>;
  else if constexpr (std::is_same_v<S, bool>) return DType::bool_;
  else if constexpr (std::is_floating_point_v<S>) return sizeof(S) == 4 ? DType::float32 : DType::float64;
  else if constexpr (std::is_signed_v<S>)
    return sizeof(S) == 1 ? DType::int8 : sizeof(S) == 2 ? DType::int16 : sizeof(S) == 4 ? DType::int32 : DType::int64;
  else
    return sizeof(S) == 1   ? DType::uint8
           : sizeof(S) == 2 ? DType::uint16
           : sizeof(S) == 4 ? DType::uint32
                            : DType::uint64;
}

template <class A> UserArg user_arg(A&& a) {
  using D = std::decay_t<A>;
  if constexpr (ArrayLike<D>) {
    return UserArg{const_cast<ArrayBase*>(static_cast<const ArrayBase*>(&a)), {}};
  } else {
    static_assert(CppScalar<D> || NarrowFloat<D>,
                  "fusion: user kernels take Arrays and C++ scalars; evaluate an expression first with fz::eval(e)");
    if constexpr (std::is_same_v<D, long double>) return user_arg(static_cast<double>(a));
    else if constexpr (Element<D>) return UserArg{nullptr, to_scalar_arg(a)};
    else {
      using T = TypeOf<scalar_dtype<D>()>;
      return UserArg{nullptr, to_scalar_arg(static_cast<T>(a))};
    }
  }
}

/// The reduction part of a ReductionKernel call: axes and keepdims, given after the arrays.
struct ReduceCallArgs {
  std::vector<UserArg> args;
  ReduceArg reduce = Axes().arg(false);
  bool axes_seen = false;
  void add(Axes a) { axes_seen = true, reduce = a.arg(reduce.keepdims); }
  void add(KeepDims k) { reduce.keepdims = k; }
  template <class A> void add(A&& a) {
    if (axes_seen) throw TypeError("a ReductionKernel takes its axes after every array and scalar argument");
    args.push_back(user_arg(std::forward<A>(a)));
  }
};

Outputs run_elementwise(const UserKernel& k, const std::vector<UserArg>& args);
KernelInfo inspect_elementwise(const UserKernel& k, const std::vector<UserArg>& args);
Outputs run_reduction(const UserKernel& k, const std::vector<UserArg>& args, const ReduceArg& r);
KernelInfo inspect_reduction(const UserKernel& k, const std::vector<UserArg>& args, const ReduceArg& r);

}  // namespace detail

/// An elementwise kernel from a few lines of CUDA, as CuPy's: parameters are "dtype name" or
/// "Placeholder name" (bound from the arguments), "raw ..." for arrays the code indexes itself (`y[i]`,
/// `y.size()`); `i` is the element index and `_ind.size()` the element count. Non-raw arguments
/// broadcast together; outputs not passed are allocated. Runs on the current stream.
class ElementwiseKernel {
 public:
  ElementwiseKernel(std::string in_params, std::string out_params, std::string operation, std::string name = "kernel",
                    ElementwiseOptions options = {});
  /// Launches with inputs, then optionally outputs; returns the outputs.
  template <class... A> Outputs operator()(A&&... args) const {
    return detail::run_elementwise(*impl_, {detail::user_arg(std::forward<A>(args))...});
  }
  /// The kernel these arguments would run, compiled but not launched (placeholder arrays work without a GPU).
  template <class... A> KernelInfo inspect(A&&... args) const {
    return detail::inspect_elementwise(*impl_, {detail::user_arg(std::forward<A>(args))...});
  }
  /// The same call with its arguments in a list (inputs, then optionally outputs), for code that picks the
  /// arrays at run time: arrays of any dtype, bound to the parameters as above.
  Outputs call(const std::vector<ArrayBase>& arrays) const;
  const std::string& name() const;

 private:
  std::shared_ptr<const detail::UserKernel> impl_;
};

/// A reduction from CUDA snippets, as CuPy's: `map_expr` turns each element (the inputs by name) into a
/// value, `reduce_expr` combines two values `a` and `b`, `post_map_expr` writes the output from the
/// reduced `a`, and `identity` is the value of an empty reduction. Call as `k(x)` (everything),
/// `k(x, fz::Axes(1))` or `k(x, fz::Axes{0, 2}, fz::keepdims)`; the output is allocated unless passed.
class ReductionKernel {
 public:
  ReductionKernel(std::string in_params, std::string out_params, std::string map_expr, std::string reduce_expr,
                  std::string post_map_expr, std::string identity, std::string name = "reduce_kernel",
                  ReductionOptions options = {});
  template <class... A> Outputs operator()(A&&... args) const {
    detail::ReduceCallArgs c;
    (c.add(std::forward<A>(args)), ...);
    return detail::run_reduction(*impl_, c.args, c.reduce);
  }
  template <class... A> KernelInfo inspect(A&&... args) const {
    detail::ReduceCallArgs c;
    (c.add(std::forward<A>(args)), ...);
    return detail::inspect_reduction(*impl_, c.args, c.reduce);
  }
  const std::string& name() const;

 private:
  std::shared_ptr<const detail::UserKernel> impl_;
};

}  // namespace fusion
