// SPDX-License-Identifier: Apache-2.0
// A case as a Catch2 test in fusion's own C++ API: what a person pastes into tests/ to keep a bug fixed.
#include <fmt/format.h>

#include <cmath>

#include "fuzz_functions.hpp"
#include "fuzz_run.hpp"

namespace fuzz {

namespace {

std::string cpp_type(DType d) {
  switch (d) {
    case DType::bool_: return "bool";
    case DType::float16: return "fz::half";
    case DType::bfloat16: return "fz::bfloat16";
    case DType::float32: return "float";
    case DType::float64: return "double";
    default: return fmt::format("std::{}_t", fusion::dtype_name(d));
  }
}

std::string float_literal(double f, bool single) {
  if (std::isnan(f)) return "NAN";
  if (std::isinf(f)) return f > 0 ? "INFINITY" : "-INFINITY";
  std::string s = single ? fmt::format("{}", static_cast<float>(f)) : fmt::format("{}", f);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return single ? s + "f" : s;
}

std::string literal(const test::Scalar& v, DType d) {
  switch (d) {
    case DType::bool_: return v.i ? "true" : "false";
    case DType::float64: return float_literal(v.f, false);
    case DType::float32: return float_literal(v.f, true);
    case DType::float16: case DType::bfloat16: return fmt::format("{}({})", cpp_type(d), float_literal(v.f, true));
    case DType::int64: return v.i == INT64_MIN ? "INT64_MIN" : fmt::format("{}", v.i);
    default:
      if (fusion::is_unsigned_int(d))
        return fmt::format("{}u", static_cast<std::uint64_t>(v.i) &
                                      (d == DType::uint64 ? ~0ull : (1ull << 8 * fusion::itemsize(d)) - 1));
      return fmt::format("{}", v.i);
  }
}

std::string shape_literal(const fusion::Shape& s) {
  std::string out = "{";
  for (int d = 0; d < s.size(); ++d) out += fmt::format("{}{}", d ? ", " : "", s[d]);
  return out + "}";
}

const char* operator_symbol(Op op) {
  switch (op) {
    case Op::add: return "+"; case Op::sub: return "-"; case Op::mul: return "*"; case Op::div: return "/";
    case Op::remainder: return "%"; case Op::eq: return "=="; case Op::ne: return "!="; case Op::lt: return "<";
    case Op::le: return "<="; case Op::gt: return ">"; case Op::ge: return ">="; case Op::logical_and: return "&&";
    case Op::logical_or: return "||"; case Op::bit_and: return "&"; case Op::bit_or: return "|";
    case Op::bit_xor: return "^"; case Op::shl: return "<<"; case Op::shr: return ">>";
    default: return nullptr;
  }
}

/// Prints trees in the order lowering numbers reductions (operands first), to write each one's axes.
struct Printer {
  const Built& b;
  std::size_t reduction = 0;

  std::string operator()(const Expr& e) {
    switch (e.kind) {
      case Kind::input: return fmt::format("in{}", e.input);
      case Kind::scalar:
        if (e.scalar_kind == fusion::ScalarKind::boolean) return e.value != 0 ? "true" : "false";
        if (e.scalar_kind == fusion::ScalarKind::integer) return fmt::format("{}", static_cast<std::int64_t>(e.value));
        return float_literal(e.value, false);
      case Kind::cast: return fmt::format("fz::cast<{}>({})", cpp_type(e.dtype), (*this)(e.args[0]));
      case Kind::unary: {
        const std::string a = (*this)(e.args[0]);
        if (e.op == Op::neg) return "-(" + a + ")";
        if (e.op == Op::logical_not) return "!(" + a + ")";
        if (e.op == Op::bit_not) return "~(" + a + ")";
        return fmt::format("fz::{}({})", fusion::ir::op_name(e.op), a);
      }
      case Kind::binary: {
        const std::string x = (*this)(e.args[0]), y = (*this)(e.args[1]);
        if (const char* sym = operator_symbol(e.op)) return fmt::format("({} {} {})", x, sym, y);
        return fmt::format("fz::{}({}, {})", fusion::ir::op_name(e.op), x, y);
      }
      case Kind::where: {
        const std::string k = (*this)(e.args[0]), x = (*this)(e.args[1]), y = (*this)(e.args[2]);
        return fmt::format("fz::where({}, {}, {})", k, x, y);
      }
      case Kind::reduce: {
        const std::string a = (*this)(e.args[0]);
        const fusion::detail::ReduceArg& arg = b.reductions.at(reduction++);
        std::string axes;
        for (int j = 0; j < arg.n_axes; ++j)
          axes += fmt::format("{}{}", j ? ", " : "", arg.axes[static_cast<std::size_t>(j)]);
        if (arg.n_axes < 0 && !arg.keepdims) return fmt::format("fz::{}({})", fusion::ir::op_name(e.op), a);
        return fmt::format("fz::{}({}, {{{}}}, {})", fusion::ir::op_name(e.op), a, axes, arg.keepdims);
      }
      case Kind::scan: {
        const std::string a = (*this)(e.args[0]);
        const fusion::detail::ReduceArg& arg = b.reductions.at(reduction++);
        return fmt::format("fz::{}({}, {}, {{.exclusive = {}, .reverse = {}}})", fusion::ir::op_name(e.op), a,
                           arg.axes[0], arg.exclusive, arg.reverse);
      }
      case Kind::gather: {
        const std::string index = (*this)(e.args[1]);  // (first: the index's reductions are numbered first)
        return fmt::format("fz::take_along_axis<fz::IndexMode::{}>({}, {}, {})",
                           e.mode == fusion::ir::IndexMode::wrap ? "wrap" : "clip", (*this)(e.args[0]), index, e.axis);
      }
      case Kind::join: {
        std::string pieces;
        for (const Expr& a : e.args) pieces += ", " + (*this)(a);
        return fmt::format("fz::concatenate({}{})", e.axis, pieces);
      }
      case Kind::pad: {
        std::string widths;
        for (const auto& [before, after] : e.widths)
          widths += fmt::format("{}{{{}, {}}}", widths.empty() ? "" : ", ", before, after);
        return fmt::format("fz::pad({}, {{{}}}, {})", (*this)(e.args[0]), widths, static_cast<int>(e.value));
      }
      case Kind::product: {
        const std::string x = (*this)(e.args[0]);
        return fmt::format("fz::matmul({}, {})", x, (*this)(e.args[1]));
      }
      case Kind::call: {
        std::string args;
        for (const Expr& a : e.args) args += (args.empty() ? "" : ", ") + (*this)(a);
        return fmt::format("{}({})", user_functions().at(static_cast<std::size_t>(e.function)).name, args);
      }
      case Kind::random:
        return fmt::format("{}({}ull, fz::random::Offset{{{}ull}})",
                           random_generators().at(static_cast<std::size_t>(e.function)).cpp, e.seed, e.offset);
      case Kind::scatter: {  // a statement
        const std::string index = (*this)(e.args[0]);
        return fmt::format("fz::{}<fz::IndexMode::{}>(in{}, {}, {}, {})", fusion::ir::op_name(e.op),
                           e.mode == fusion::ir::IndexMode::wrap ? "wrap" : "clip", e.input, e.axis, index,
                           (*this)(e.args[1]));
      }
    }
    return "?";
  }
};

}  // namespace

/// How the printed test takes `l`'s view of an array of shape `base`: "", ".transpose()" or ".slice({...})".
std::string view_suffix(const fusion::Shape& base, Layout l) {
  if (l == Layout::transposed) return ".transpose()";
  if (l == Layout::contiguous) return "";
  std::string each;
  for (int d = 0; d < base.size(); ++d)
    each += fmt::format("{}fz::Slice{{{{}}, {{}}, {}}}", d ? ", " : "", l == Layout::reversed ? -1 : 2);
  return ".slice({" + each + "})";
}

std::string to_cpp(const Case& c, const std::string& title) {
  const auto built = build(c);
  if (!built) return "// (the case does not build)\n";
  const Built& b = *built;
  std::string s = fmt::format("TEST_CASE(\"{}\", \"[gpu][fuzz]\") {{\n", title);
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const Input& in = c.inputs[i];
    const fusion::Shape bs = base_shape(c, in);
    std::string values;
    for (const test::Scalar& v : base_values(c, in)) values += (values.empty() ? "" : ", ") + literal(v, in.dtype);
    bool target = static_cast<int>(i) == b.scatter_target;  // (written in place)
    for (const int a : c.alias) target = target || static_cast<int>(i) == a;
    s += fmt::format("  {} in{} = fz::asarray(std::vector<{}>{{{}}}, {}){};\n", target ? "auto" : "const auto", i,
                     cpp_type(in.dtype), values, shape_literal(bs), view_suffix(bs, in.layout));
  }
  std::vector<bool> defined(user_functions().size(), false);  // the user functions the trees call
  auto define = [&](auto& self, const Expr& e) -> void {
    if (e.kind == Kind::call && !defined.at(static_cast<std::size_t>(e.function))) {
      const UserFunction& f = user_functions()[static_cast<std::size_t>(e.function)];
      s += fmt::format("  const auto {0} = fz::function<{1}>(\"{0}\", \"{2}\");\n", f.name, f.signature, f.body);
      defined[static_cast<std::size_t>(e.function)] = true;
    }
    for (const Expr& a : e.args) self(self, a);
  };
  for (const Expr& e : c.outputs) define(define, e);
  if (c.unfused) s += "  fz::Unfused unfused;  // every operation its own kernel\n";
  if (c.generated) s += "  fz::GeneratedProducts generated;  // products as fusion's own kernels, the math around inside\n";
  if (b.scatter_target >= 0 && c.deterministic) s += "  fz::Deterministic deterministic;  // exact floating sums\n";
  Printer print{b};
  std::vector<std::string> exprs;
  for (const Expr& e : c.outputs) exprs.push_back(print(e));
  std::string run;
  if (b.scatter_target >= 0) {
    run = exprs[0] + ";";
    s += fmt::format("  auto& out0 = in{};  // the scatter's target\n", b.scatter_target);
  } else if (!c.into && exprs.size() == 1) {
    // (a bare array is not an expression: unary + makes it one)
    run = fmt::format("const auto out0 = fz::eval({}{});", c.outputs[0].kind == Kind::input ? "+" : "", exprs[0]);
  } else if (!c.into) {  // several outputs into new arrays: a tie of empty ones
    std::string outs, rhs;
    for (std::size_t k = 0; k < exprs.size(); ++k) {
      s += fmt::format("  fz::Array<{}> out{};\n", cpp_type(b.graph.dtype(b.graph.outputs[k])), k);
      outs += fmt::format("{}out{}", k ? ", " : "", k);
      rhs += (k ? ", " : "") + exprs[k];
    }
    run = fmt::format("fz::tie({}) = std::make_tuple({});", outs, rhs);
  } else {
    for (std::size_t k = 0; k < exprs.size(); ++k) {
      if (alias_of(c, k) >= 0) {
        s += fmt::format("  auto& out{} = in{};  // written in place: the expressions read it too\n", k, alias_of(c, k));
        continue;
      }
      const Input view = output_view(c, b.graph.dtype(b.graph.outputs[k]));
      const fusion::Shape bs = base_shape(c, view);
      if (view.layout == Layout::contiguous) {
        s += fmt::format("  auto out{} = fz::empty<{}>({});\n", k, cpp_type(view.dtype), shape_literal(bs));
      } else {  // written through a view of a larger array
        s += fmt::format("  auto base{} = fz::empty<{}>({});\n", k, cpp_type(view.dtype), shape_literal(bs));
        s += fmt::format("  auto out{} = base{}{};\n", k, k, view_suffix(bs, view.layout));
      }
    }
    if (exprs.size() == 1) {
      run = fmt::format("fz::copyto(out0, {});", exprs[0]);
    } else {
      std::string outs, rhs;
      for (std::size_t k = 0; k < exprs.size(); ++k)
        outs += fmt::format("{}out{}", k ? ", " : "", k), rhs += (k ? ", " : "") + exprs[k];
      run = fmt::format("fz::tie({}) = std::make_tuple({});", outs, rhs);
    }
  }
  const Oracle o = oracle(c, b);
  if (!o.exact.error.empty()) {
    const std::string stmt =
        run.rfind("const auto out0 = ", 0) == 0 ? run.substr(18, run.size() - 19) : run.substr(0, run.size() - 1);
    s += fmt::format("  CHECK_THROWS_AS({}, fz::Error);  // {}\n}}\n", stmt, o.exact.error);
    return s;
  }
  s += "  " + run + "\n";
  for (std::size_t k = 0; k < exprs.size(); ++k) {
    const DType d = b.graph.dtype(b.graph.outputs[k]);
    std::string want;
    int listed = 0, skipped = 0;
    for (std::size_t e = 0; e < o.exact.outputs[k].values.size(); ++e) {
      if (status(o, k, e, d) != Status::check) { ++skipped; continue; }
      if (listed++ == 64) break;
      want += fmt::format("{}{{{}, {}}}", want.empty() ? "" : ", ", e,
                          float_literal(test::to_double(o.exact.outputs[k].values[e], d), false));
    }
    s += fmt::format("  const auto got{} = out{}.to_host();\n", k, k);
    s += fmt::format("  // the float64 reference{}\n",
                     skipped ? fmt::format(" ({} ill-conditioned or undefined elements left out)", skipped) : "");
    s += fmt::format("  for (const auto& [i, want] : std::vector<std::pair<std::size_t, double>>{{{}}})\n", want);
    s +=
        fmt::format("    CHECK(test::close(test::as_double(got{}[i]), want, test::tolerance(out{}.dtype())));\n", k, k);
  }
  return s + "}\n";
}

}  // namespace fuzz
