// SPDX-License-Identifier: Apache-2.0
#include "runtime/custom/user_kernel.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "fusion/error.hpp"
#include "runtime/exec/evaluate_internal.hpp"

namespace fusion::detail {

BoundCall bind_call(const UserKernel& k, const std::vector<UserArg>& args) {
  const auto& s = k.spec;
  BoundCall b;
  b.what = fmt::format("{} '{}'", s.reduction ? "ReductionKernel" : "ElementwiseKernel", s.name);
  std::vector<codegen::ArgKind> kinds;
  for (const UserArg& a : args)
    kinds.push_back(a.array ? codegen::ArgKind{true, a.array->dtype()} : codegen::ArgKind{false, a.scalar.dtype});
  b.types = codegen::bind_types(s.in, s.out, kinds, b.what);
  b.outputs_given = args.size() > s.in.size();
  for (std::size_t p = 0; p < s.in.size() + s.out.size(); ++p) b.dtypes.push_back(b.types.of(param_at(s, p)));
  return b;
}

Shape broadcast_args(const UserKernel& k, const std::vector<UserArg>& args, const std::string& what, bool outputs) {
  Shape shape;
  std::string names, shapes;
  const std::size_t n = outputs ? args.size() : std::min(args.size(), k.spec.in.size());
  for (std::size_t p = 0; p < n; ++p) {
    const auto& u = param_at(k.spec, p);
    if (!args[p].array || u.raw) continue;
    names += (names.empty() ? "" : ", ") + u.name;
    shapes += (shapes.empty() ? "" : ", ") + to_string(args[p].array->shape());
    try {
      shape = broadcast_shapes(shape, args[p].array->shape());
    } catch (const ShapeError&) {
      throw ShapeError(fmt::format("{}: the shapes of {} ({}) do not broadcast together", what, names, shapes));
    }
  }
  return shape;
}

void check_arrays(const std::vector<UserArg>& args, const UserKernel& k, int device, bool placeholders_ok) {
  for (std::size_t p = 0; p < args.size(); ++p) {
    const ArrayBase* a = args[p].array;
    if (!a) continue;
    const std::string& name = param_at(k.spec, p).name;
    if (a->is_placeholder() && placeholders_ok) continue;
    if (!a->has_storage())
      throw Error(fmt::format("{}: the array for '{}' has no memory ({}); make it with fz::empty or fz::asarray",
                              k.spec.name, name,
                              a->is_placeholder() ? "a placeholder can only be inspected" : "never assigned"));
    if (device >= 0 && a->device() != device)
      throw Error(fmt::format("{}: the array for '{}' is on device {} while device {} is current; use fz::DeviceScope",
                              k.spec.name, name, a->device(), device));
  }
}

std::uint64_t scalar_bits(const ScalarArg& s, DType to, const std::string& what) {
  double f = 0;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  enum { floating, signed_, unsigned_, boolean } kind;
  if (is_floating(s.dtype)) {
    kind = floating;
    if (s.dtype == DType::float64) std::memcpy(&f, &s.bits, 8);
    else {
      float x;
      std::memcpy(&x, &s.bits, 4);  // 16-bit scalars travel as float
      f = x;
    }
  } else if (is_signed_int(s.dtype)) {
    kind = signed_;
    switch (itemsize(s.dtype)) {
      case 1: { std::int8_t x; std::memcpy(&x, &s.bits, 1); i = x; break; }
      case 2: { std::int16_t x; std::memcpy(&x, &s.bits, 2); i = x; break; }
      case 4: { std::int32_t x; std::memcpy(&x, &s.bits, 4); i = x; break; }
      default: std::memcpy(&i, &s.bits, 8);
    }
  } else if (s.dtype == DType::bool_) {
    kind = boolean;
    bool x;
    std::memcpy(&x, &s.bits, 1);
    u = x;
  } else {
    kind = unsigned_;
    switch (itemsize(s.dtype)) {
      case 1: { std::uint8_t x; std::memcpy(&x, &s.bits, 1); u = x; break; }
      case 2: { std::uint16_t x; std::memcpy(&x, &s.bits, 2); u = x; break; }
      case 4: { std::uint32_t x; std::memcpy(&x, &s.bits, 4); u = x; break; }
      default: std::memcpy(&u, &s.bits, 8);
    }
  }
  auto refuse = [&](const std::string& value) {
    return TypeError(
        fmt::format("{}: the scalar {} does not fit the parameter's dtype {}", what, value, dtype_name(to)));
  };
  std::uint64_t out = 0;
  auto put = [&](auto v) { std::memcpy(&out, &v, sizeof v); };
  if (is_floating(to)) {
    const double v = kind == floating ? f : kind == signed_ ? static_cast<double>(i) : static_cast<double>(u);
    if (to == DType::float64) put(v);
    else put(static_cast<float>(v));
    return out;
  }
  if (kind == floating) {
    if (!(std::isfinite(f) && f == std::trunc(f))) throw refuse(fmt::format("{}", f));
    if (f >= -9.3e18 && f <= 1.8e19) {
      if (f < 0) kind = signed_, i = static_cast<std::int64_t>(f);
      else kind = unsigned_, u = static_cast<std::uint64_t>(f);
    } else {
      throw refuse(fmt::format("{}", f));
    }
  }
  if (kind == boolean) kind = unsigned_;
  const std::string text = kind == signed_ ? std::to_string(i) : std::to_string(u);
  auto fits = [&](auto zero) {
    using T = decltype(zero);
    return kind == signed_ ? std::in_range<T>(i) : std::in_range<T>(u);
  };
  auto put_int = [&](auto zero) {
    using T = decltype(zero);
    if (!fits(zero)) throw refuse(text);
    put(kind == signed_ ? static_cast<T>(i) : static_cast<T>(u));
  };
  visit_dtype(to, [&]<class T>(T) {
    if constexpr (std::is_same_v<T, bool>) {
      put_int(std::uint8_t{});
      if (out > 1) throw refuse(text);
    } else if constexpr (std::is_integral_v<T>) {
      put_int(T{});
    }  // (floating types returned above)
  });
  return out;
}

}  // namespace fusion::detail
