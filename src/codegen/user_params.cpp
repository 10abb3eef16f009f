// SPDX-License-Identifier: Apache-2.0
#include "codegen/user_params.hpp"

#include <fmt/format.h>

#include <cctype>

#include "fusion/error.hpp"

namespace fusion::codegen {
namespace {

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> w;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    const std::size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > start) w.push_back(s.substr(start, i - start));
  }
  return w;
}

}  // namespace

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (dtype_name(static_cast<DType>(i)) == name) return static_cast<DType>(i);
  if (name == "double") return DType::float64;
  if (name == "half") return DType::float16;
  // NumPy reads these as 64-bit (float, int) or platform types; C++ readers expect 32-bit. Refuse the guess.
  for (std::string_view ambiguous : {"float", "int", "uint", "long", "short", "char", "unsigned", "longlong", "single"})
    if (name == ambiguous)
      throw TypeError(fmt::format("the type name '{}' means different widths in NumPy and C++; write the dtype "
                                  "(float32, float64, int32, int64, ...)", name));
  if (name.starts_with("complex")) throw TypeError(fmt::format("'{}': complex dtypes are not supported", name));
  return std::nullopt;
}

std::vector<UserParam> parse_params(std::string_view spec, std::string_view what) {
  std::vector<UserParam> params;
  if (trim(spec).empty()) return params;
  const auto entries = split(spec, ',');
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const std::string_view entry = trim(entries[k]);
    auto fail = [&](std::string_view why) {
      return TypeError(fmt::format("{} \"{}\": parameter {} ('{}') {}; write each parameter as "
                                   "'[raw] <dtype or placeholder> <name>', e.g. \"float32 x, raw T y\"",
                                   what, spec, k + 1, entry, why));
    };
    auto w = words(entry);
    UserParam p;
    if (!w.empty() && w[0] == "raw") {
      p.raw = true;
      w.erase(w.begin());
    }
    if (w.size() != 2) throw fail(w.size() < 2 ? "needs a type and a name" : "has more than a type and a name");
    if (!is_identifier(w[0])) throw fail(fmt::format("has the type '{}', which is not an identifier", w[0]));
    if (!is_identifier(w[1])) throw fail(fmt::format("has the name '{}', which is not an identifier", w[1]));
    p.type = std::string(w[0]);
    p.name = std::string(w[1]);
    if (p.name == "i" || p.name == "_ind" || p.name.starts_with("_fz") || p.name.starts_with("fz_") || p.name == "raw")
      throw fail(fmt::format("uses the reserved name '{}' (i and _ind are the element index, _fz*/fz_* are fusion's)",
                             p.name));
    try {
      p.dtype = dtype_from_name(p.type);
    } catch (const TypeError& e) {
      throw fail(e.what());
    }
    if (dtype_from_name(p.name)) throw fail(fmt::format("is named '{}', which is a type name", p.name));
    for (const UserParam& q : params)
      if (q.name == p.name) throw fail(fmt::format("repeats the name '{}'", p.name));
    params.push_back(std::move(p));
  }
  return params;
}

std::optional<DType> TypeBinding::find(std::string_view placeholder) const {
  for (const auto& [name, d] : types_)
    if (name == placeholder) return d;
  return std::nullopt;
}

DType TypeBinding::of(const UserParam& p) const {
  if (p.dtype) return *p.dtype;
  if (auto d = find(p.type)) return *d;
  throw TypeError(fmt::format("the type {} of parameter '{}' is not bound by any argument", p.type, p.name));
}

DType TypeBinding::resolve(std::string_view type, std::string_view what) const {
  if (auto d = dtype_from_name(type)) return *d;
  if (auto d = find(type)) return *d;
  throw TypeError(fmt::format("the type {} of {} is not bound by any argument; use a dtype name or a placeholder "
                              "that a parameter binds", type, what));
}

std::string param_names(const std::vector<UserParam>& ps) {
  std::string s;
  for (const UserParam& p : ps) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

TypeBinding bind_types(const std::vector<UserParam>& in, const std::vector<UserParam>& out,
                       std::span<const ArgKind> args, std::string_view kernel) {
  const std::size_t n_in = in.size(), n_out = out.size();
  if (args.size() != n_in && args.size() != n_in + n_out)
    throw TypeError(fmt::format("{} takes {} input{} ({}){}; got {} argument{}", kernel, n_in, n_in == 1 ? "" : "s",
                                param_names(in),
                                n_out ? fmt::format(" and optionally {} output{} ({})", n_out, n_out == 1 ? "" : "s",
                                                    param_names(out))
                                      : std::string(),
                                args.size(), args.size() == 1 ? "" : "s"));
  auto param = [&](std::size_t k) -> const UserParam& { return k < n_in ? in[k] : out[k - n_in]; };
  auto role = [&](std::size_t k) { return k < n_in ? "input" : "output"; };
  TypeBinding b;
  // Arrays first: they fix the placeholders; C++ scalars adapt to them (as NumPy's weak scalars).
  for (std::size_t k = 0; k < args.size(); ++k) {
    const UserParam& p = param(k);
    const ArgKind& a = args[k];
    if (!a.array) {
      if (p.raw)
        throw TypeError(fmt::format("{}: the raw {} '{}' needs an array, not a scalar", kernel, role(k), p.name));
      if (k >= n_in) throw TypeError(fmt::format("{}: the output '{}' needs an array, not a scalar", kernel, p.name));
      continue;
    }
    if (p.dtype) {
      if (*p.dtype != a.dtype)
        throw TypeError(fmt::format("{}: the {} '{}' is {} but the array passed for it is {}; convert it with "
                                    "fz::cast<T>() or declare the parameter with a placeholder",
                                    kernel, role(k), p.name, dtype_name(*p.dtype), dtype_name(a.dtype)));
      continue;
    }
    if (auto bound = b.find(p.type)) {
      if (*bound != a.dtype) {
        std::string first;
        for (std::size_t j = 0; j < k && first.empty(); ++j)
          if (args[j].array && !param(j).dtype && param(j).type == p.type) first = param(j).name;
        throw TypeError(fmt::format("{}: the placeholder {} is {} from '{}' but the array for '{}' is {}", kernel,
                                    p.type, dtype_name(*bound), first, p.name, dtype_name(a.dtype)));
      }
    } else {
      b.set(p.type, a.dtype);
    }
  }
  for (std::size_t k = 0; k < args.size(); ++k)
    if (!args[k].array && !param(k).dtype && !b.find(param(k).type)) b.set(param(k).type, args[k].dtype);
  for (std::size_t k = args.size(); k < n_in + n_out; ++k) {
    const UserParam& p = param(k);
    if (p.raw)
      throw TypeError(
          fmt::format("{}: the raw output '{}' has no shape to allocate; pass the output array", kernel, p.name));
    if (!p.dtype && !b.find(p.type))
      throw TypeError(fmt::format("{}: nothing binds the type {} of the output '{}'; pass the output array (or bind {} "
                                  "through an input)", kernel, p.type, p.name, p.type));
  }
  return b;
}

}  // namespace fusion::codegen
