// SPDX-License-Identifier: Apache-2.0
#include "codegen/device_functions.hpp"

#include <fmt/format.h>

#include <cctype>
#include <deque>
#include <mutex>

#include "fusion/error.hpp"
#include "fusion/function.hpp"

namespace fusion {
namespace {

std::mutex& table_mutex() {
  static std::mutex mu;
  return mu;
}
std::deque<codegen::DeviceFunction>& table() {  // a deque: references stay valid as it grows
  static std::deque<codegen::DeviceFunction> t;
  return t;
}

}  // namespace

namespace codegen {
const DeviceFunction& device_function(std::uint32_t id) {
  std::lock_guard lock(table_mutex());
  if (id >= table().size()) throw Error(fmt::format("internal: no fz::function with id {}", id));
  return table()[id];
}
}  // namespace codegen

namespace detail {
std::uint32_t register_function(std::string name, std::string body, DType result, std::vector<DType> params) {
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok || name.starts_with("fz_"))
    throw TypeError(fmt::format("fz::function name '{}' must be a C identifier not starting with fz_", name));
  const std::size_t start = body.find_first_not_of(" \t\n");
  if (start == std::string::npos || body[start] != '(' || body.find('{') == std::string::npos)
    throw TypeError(fmt::format("fz::function '{}': the body starts with the parameter list and holds the code, e.g. "
                                "\"(float x, float y) {{ return x * y; }}\"", name));
  std::lock_guard lock(table_mutex());
  auto& t = table();
  for (std::size_t id = 0; id < t.size(); ++id)
    if (t[id].name == name && t[id].body == body && t[id].result == result && t[id].params == params)
      return static_cast<std::uint32_t>(id);
  t.push_back(codegen::DeviceFunction{std::move(name), std::move(body), result, std::move(params)});
  return static_cast<std::uint32_t>(t.size() - 1);
}
}  // namespace detail

}  // namespace fusion
