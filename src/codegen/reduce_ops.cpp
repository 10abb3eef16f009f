// SPDX-License-Identifier: Apache-2.0
#include "codegen/reduce_ops.hpp"

#include <fmt/format.h>

#include "codegen/spell.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {

using ir::Op;

namespace {

/// The extreme value of a dtype as a CUDA literal: `high` the largest (+inf for floats), else the lowest.
std::string extreme(DType d, bool high) { return high ? dtype_info(d).highest : dtype_info(d).lowest; }

std::string nan_of(DType d) {
  return d == DType::float64 ? "__longlong_as_double(0x7ff8000000000000ll)" : "__int_as_float(0x7fc00000)";
}

/// The value an empty reduction starts from.
std::string identity(Op op, DType d) {
  switch (ir::reduce_info(op).identity) {
    case ir::ReduceIdentity::zero: return fmt::format("({})0", compute_type(d));
    case ir::ReduceIdentity::one: return fmt::format("({})1", compute_type(d));
    case ir::ReduceIdentity::false_: return "false";
    case ir::ReduceIdentity::true_: return "true";
    case ir::ReduceIdentity::highest: return extreme(d, true);
    case ir::ReduceIdentity::lowest: return extreme(d, false);
    case ir::ReduceIdentity::nan_or_highest: return is_floating(d) ? nan_of(d) : extreme(d, true);
    case ir::ReduceIdentity::nan_or_lowest: return is_floating(d) ? nan_of(d) : extreme(d, false);
  }
  throw Error("internal: not a reduction");
}

/// Body of fz_combine(a, b), where `a` always holds earlier elements than `b`.
std::string combine(Op op, DType d) {
  const std::string t(compute_type(d));
  const bool fl = is_floating(d);
  switch (op) {
    case Op::sum: case Op::mean: return fmt::format("return ({})(a + b);", t);
    case Op::prod: return fmt::format("return ({})(a * b);", t);
    case Op::any: return "return a || b;";
    case Op::all: return "return a && b;";
    // min/max propagate NaN; the nan- forms skip it (NaN only when both are NaN)
    case Op::min: return fl ? "return (a < b || a != a) ? a : b;" : "return a < b ? a : b;";
    case Op::max: return fl ? "return (a > b || a != a) ? a : b;" : "return a > b ? a : b;";
    case Op::nanmin: return fl ? "return (b < a || a != a) ? b : a;" : "return a < b ? a : b;";
    case Op::nanmax: return fl ? "return (b > a || a != a) ? b : a;" : "return a > b ? a : b;";
    case Op::argmin: case Op::argmax: {
      const char* better = op == Op::argmin ? "<" : ">";
      std::string s;
      // the first NaN wins, as NumPy's argmin/argmax; ties go to the lower index
      if (fl)
        s +=
            "const bool an = a.v != a.v, bn = b.v != b.v;\nif (an || bn) return (an && (!bn || a.i <= b.i)) ? a : b;\n";
      s += fmt::format("if (a.v != b.v) return a.v {} b.v ? a : b;\nreturn a.i <= b.i ? a : b;", better);
      return s;
    }
    default: throw Error("internal: not a reduction");
  }
}

/// Moving a value down a warp by `d` lanes (or from lane `fz_lane0`, which the caller defines:
/// `from_lane0`): shuffles take 32- and 64-bit values, so narrow types widen.
std::string shuffle(DType d, const std::string& x, bool from_lane0 = false) {
  const std::string t(compute_type(d));
  const char* call = from_lane0 ? "__shfl_sync(0xffffffffu, {}, fz_lane0)" : "__shfl_down_sync(0xffffffffu, {}, d)";
  if (itemsize(d) >= 4 || is_floating(d)) return fmt::format(fmt::runtime(call), x);
  return fmt::format("({}){}", t, fmt::format(fmt::runtime(call), "(int)" + x));
}

/// A load from the split workspace that bypasses L1 (other blocks wrote it during this kernel).
std::string load_cg(DType d, const std::string& p) {
  if (d == DType::bool_) return fmt::format("(__ldcg((const unsigned char*){}) != 0)", p);
  return fmt::format("__ldcg({})", p);
}

}  // namespace

std::string accumulator_struct(Op op) {
  if (ir::is_arg_reduction(op)) return "template <class T> struct FzArg { T v; long long i; };\n";
  if (op == Op::var)
    return "// Count, mean and sum of squared deviations (Chan et al. combine two). While a thread adds its\n"
           "// elements, mean is a fixed shift and s1, s2 sum x - shift and its square in double: no division\n"
           "// per element, and settling (mean += s1 / n, m2 += s2 - s1^2 / n) cancels little, as the shift is\n"
           "// one of the thread's elements (or its settled mean).\n"
           "template <class T> struct FzWelford { T n, mean, m2; double s1, s2; };\n";
  return "";
}

ReduceOpSpelling reduce_op_spelling(Op op, DType vd) {
  const std::string VT(compute_type(vd));
  ReduceOpSpelling s;
  s.value = VT;
  if (ir::is_arg_reduction(op)) {
    s.acc = fmt::format("FzArg<{}>", VT);
    s.identity = fmt::format("{}{{{}, 9223372036854775807ll}}", s.acc, identity(op, vd));
    s.lift = fmt::format("{}{{x, r}}", s.acc);
    s.shuffle = fmt::format("{}{{{}, {}}}", s.acc, shuffle(vd, "a.v"), shuffle(DType::int64, "a.i"));
    s.from_lane0 = fmt::format("{}{{{}, {}}}", s.acc, shuffle(vd, "a.v", true), shuffle(DType::int64, "a.i", true));
    s.load_partial = fmt::format("{}{{{}, {}}}", s.acc, load_cg(vd, "&p->v"), load_cg(DType::int64, "&p->i"));
    s.result = "a.i";
  } else if (op == Op::var) {
    // Chan's pairwise combine keeps a float32 variance of data with mean 1e4 and std 1 accurate, where
    // a sum of squares would cancel; the order of combination is fixed by the layout, as for the others.
    s.acc = fmt::format("FzWelford<{}>", VT);
    s.identity = fmt::format("{}{{0, 0, 0, 0, 0}}", s.acc);
    // m2 starts as x - x, not 0: an infinite or NaN element makes the variance NaN, as in NumPy
    // (x - mean is NaN for it), even when it is alone in its row.
    s.lift = fmt::format("{}{{1, x, x - x, 0, 0}}", s.acc);
    s.step = fmt::format(
        "if (a.n == ({0})0) a.mean = x;  // the shift: the thread's first element\n"
        "const double d = (double)x - (double)a.mean;  // an infinity or NaN makes d (then m2) NaN\n"
        "a.n += ({0})1;\n"
        "a.s1 += d;\n"
        "a.s2 += d * d;\n"
        "return a;",
        VT);
    s.settle = fmt::format(
        "if (a.n == ({0})0) return a;\n"
        "const double offset = a.s1 / (double)a.n;  // the mean minus the shift\n"
        "return {1}{{a.n, ({0})((double)a.mean + offset), ({0})((double)a.m2 + (a.s2 - a.s1 * offset)), 0, 0}};",
        VT, s.acc);
    s.shuffle = fmt::format("{}{{{}, {}, {}}}", s.acc, shuffle(vd, "a.n"), shuffle(vd, "a.mean"), shuffle(vd, "a.m2"));
    s.from_lane0 = fmt::format("{}{{{}, {}, {}}}", s.acc, shuffle(vd, "a.n", true), shuffle(vd, "a.mean", true),
                               shuffle(vd, "a.m2", true));
    s.load_partial = fmt::format("{}{{__ldcg(&p->n), __ldcg(&p->mean), __ldcg(&p->m2)}}", s.acc);
    s.combine = fmt::format(
        "if (b.n == ({0})0) return a;\n"
        "if (a.n == ({0})0) return b;\n"
        "const {0} n = a.n + b.n, w = b.n / n, delta = b.mean - a.mean;\n"
        "return {1}{{n, a.mean + delta * w, a.m2 + b.m2 + delta * delta * a.n * w, 0, 0}};",
        VT, s.acc);
    s.result = fmt::format("a.m2 / ({})divisor", VT);
    return s;
  } else {
    s.acc = VT;
    s.identity = identity(op, vd);
    s.lift = "x";
    s.shuffle = shuffle(vd, "a");
    s.from_lane0 = shuffle(vd, "a", true);
    s.load_partial = load_cg(vd, "p");
    s.result = op == Op::mean ? fmt::format("a / ({})divisor", VT) : "a";
  }
  s.combine = combine(op, vd);
  return s;
}

std::size_t accumulator_size(Op op, DType vd) {
  const std::size_t value = compute_type(vd) == "float" ? 4 : itemsize(vd);
  if (ir::is_arg_reduction(op)) return 16;
  if (op == Op::var) return value == 4 ? 32 : 40;  // sizeof(FzWelford<T>): three T, then two doubles
  return value;
}

}  // namespace fusion::codegen
