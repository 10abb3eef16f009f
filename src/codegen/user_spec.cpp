// SPDX-License-Identifier: Apache-2.0
// Checking what the user wrote once, at construction, so that mistakes surface where they are made.
#include <fmt/format.h>

#include <cctype>

#include "codegen/emit_user.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {
namespace {

void check_name(const std::string& kind, const std::string& name) {
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) throw TypeError(fmt::format("{} name '{}' is not a C identifier (letters, digits, '_')", kind, name));
}

UserKernelSpec parse_common(const std::string& kind, std::string in, std::string out, std::string name,
                            std::string preamble, std::vector<std::string> options) {
  check_name(kind, name);
  UserKernelSpec s;
  s.name = std::move(name);
  const std::string what = fmt::format("{} '{}'", kind, s.name);
  s.in = parse_params(in, what + " in_params");
  s.out = parse_params(out, what + " out_params");
  for (const UserParam& o : s.out)
    for (const UserParam& i : s.in)
      if (o.name == i.name)
        throw TypeError(
            fmt::format("{}: '{}' is both an input and an output; give them different names", what, o.name));
  s.preamble = std::move(preamble);
  s.options = std::move(options);
  for (const std::string& o : s.options)
    if (o.starts_with("--gpu-architecture") || o.starts_with("-arch"))
      throw TypeError(fmt::format("{}: the option '{}' is fusion's to choose (from the device)", what, o));
  return s;
}

}  // namespace

UserKernelSpec make_elementwise_spec(std::string in, std::string out, std::string operation, std::string name,
                                     std::string preamble, std::vector<std::string> options) {
  UserKernelSpec s = parse_common("ElementwiseKernel", std::move(in), std::move(out), std::move(name),
                                  std::move(preamble), std::move(options));
  if (operation.find_first_not_of(" \t\n") == std::string::npos)
    throw TypeError(fmt::format("ElementwiseKernel '{}' has an empty operation", s.name));
  s.operation = std::move(operation);
  return s;
}

UserKernelSpec make_reduction_spec(std::string in, std::string out, std::string map, std::string reduce,
                                   std::string post_map, std::string identity, std::string name, std::string preamble,
                                   std::vector<std::string> options, std::string reduce_type, std::string loop_prep,
                                   std::string after_loop) {
  UserKernelSpec s = parse_common("ReductionKernel", std::move(in), std::move(out), std::move(name),
                                  std::move(preamble), std::move(options));
  s.reduction = true;
  const std::string what = fmt::format("ReductionKernel '{}'", s.name);
  if (s.out.size() != 1 || s.out[0].raw)
    throw TypeError(
        fmt::format("{} needs exactly one (non-raw) output parameter; out_params has {}", what, s.out.size()));
  for (const UserParam& p : s.in)
    if (p.raw)
      throw TypeError(fmt::format("{}: raw inputs ('{}') are supported by ElementwiseKernel only", what, p.name));
  auto blank = [](const std::string& t) { return t.find_first_not_of(" \t\n") == std::string::npos; };
  if (blank(map) || blank(reduce) || blank(post_map) || blank(identity))
    throw TypeError(fmt::format("{} needs map_expr, reduce_expr, post_map_expr and identity (the value of an empty "
                                "reduction, e.g. \"0\")", what));
  s.map_expr = std::move(map);
  s.reduce_expr = std::move(reduce);
  s.post_map_expr = std::move(post_map);
  s.identity = std::move(identity);
  s.reduce_type = reduce_type.empty() ? s.out[0].type : std::move(reduce_type);
  if (!dtype_from_name(s.reduce_type)) {
    bool bound = false;
    for (const UserParam& p : s.in) bound = bound || p.type == s.reduce_type;
    for (const UserParam& p : s.out) bound = bound || p.type == s.reduce_type;
    if (!bound)
      throw TypeError(fmt::format("{}: reduce_type '{}' is neither a dtype nor a placeholder of a parameter", what,
                                  s.reduce_type));
  }
  s.loop_prep = std::move(loop_prep);
  s.after_loop = std::move(after_loop);
  return s;
}

bool reads_index(const UserKernelSpec& s) {
  const std::string& code = s.operation;
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t at = 0; at < code.size();) {
    if (!ident(code[at])) {
      ++at;
      continue;
    }
    std::size_t end = at;
    while (end < code.size() && ident(code[end])) ++end;
    const std::string_view word(code.data() + at, end - at);
    if (word == "i" || word == "_ind") return true;
    at = end;
  }
  return false;
}

std::string UserVariant::describe() const {
  std::string s;
  for (const auto& [name, d] : types) s += fmt::format("{}={}, ", name, dtype_name(d));
  bool strided = false;
  for (UserAccess a : access) strided = strided || a == UserAccess::strided;
  s += strided || rank > 1 ? fmt::format("strided, rank {}", rank) : std::string("linear");
  if (vector_width > 1) s += fmt::format(", {}-wide vectors", vector_width);
  s += index64 ? ", 64-bit index" : ", 32-bit index";
  return s;
}

}  // namespace fusion::codegen
