// SPDX-License-Identifier: Apache-2.0
#include "codegen/spell.hpp"

#include <fmt/format.h>

#include "codegen/device_functions.hpp"
#include "codegen/exact_sum.hpp"
#include "fusion/error.hpp"

namespace fusion {
namespace codegen {

std::string_view compute_type(DType d) { return dtype_info(d).cuda; }
std::string_view storage_type(DType d) { return dtype_info(d).storage; }

std::string load_conversion(DType d, const std::string& v) {
  if (!is_16bit_float(d)) return v;
  return fmt::format("{}({})", dtype_info(d).to_float, v);
}

std::string store_conversion(DType from, DType to, const std::string& v) {
  if (is_16bit_float(to)) return fmt::format("{}((float)({}))", dtype_info(to).from_float, v);
  if (from == to || (compute_type(from) == compute_type(to))) return v;
  return fmt::format("({})({})", compute_type(to), v);
}

void need_conversions(SpellContext& ctx, DType d) {
  if (is_16bit_float(d)) ctx.conversions.insert(d);
}

const char* conversion_source(DType d) {
  switch (d) {
    case DType::float16:
      return R"(// IEEE half <-> float, rounding to nearest even (PTX cvt), without cuda_fp16.h.
__device__ __forceinline__ float fz_half_to_float(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short fz_float_to_half(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; })";
    case DType::bfloat16:
      // The PTX cvt (sm_80 and later) and not integer arithmetic: with the arithmetic, the compiler split a
      // rows kernel's 16-byte stores of 8 results into 2-byte ones (m + row in bfloat16 ran at 27% of the
      // copy bandwidth, float16 at 92%).
      return R"(// bfloat16 <-> float, rounding to nearest even (PTX cvt from sm_80; before it, integer arithmetic).
__device__ __forceinline__ float fz_bfloat16_to_float(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short fz_float_to_bfloat16(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  const unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN stays NaN, quiet
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
})";
    default: throw Error(fmt::format("internal: no conversion functions for {}", dtype_name(d)));
  }
}

std::string scatter_identity(ir::Op op, DType d) {
  using ir::Op;
  switch (op) {
    case Op::scatter_add: return "0";
    case Op::scatter_max: return dtype_info(d).lowest;
    case Op::scatter_min: return dtype_info(d).highest;
    default: throw Error("internal: not a scatter");
  }
}

std::string scatter_function(ir::Op op) { return std::string("fz_") + ir::op_info(op).name; }

bool checks_indices(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::take_index && n.slot == static_cast<std::uint32_t>(ir::IndexMode::raise)) return true;
  return false;
}

bool is_heavy_math(ir::Op op) { return ir::op_info(op).cost == ir::Cost::heavy; }

std::string outlined_source(const std::string& f, bool binary) {
  if (binary)
    return fmt::format("template <class T> __device__ __noinline__ T fz_outlined_{0}(T a, T b) {{ return {0}(a, b); }}",
                       f);
  return fmt::format("template <class T> __device__ __noinline__ T fz_outlined_{0}(T a) {{ return {0}(a); }}", f);
}

namespace {

/// Per node: whether float's approximations, far inside a 16-bit rounding, may compute its float32 value. Every use
/// must round it to a half or a bfloat16 (a cast to one), or scale a value that may be approximated in turn (a
/// product or a quotient: relative errors add), or add it, non-negative (an exp: nothing cancels), into a sum that
/// may be (softmax's exp, sum and division, computed in float32 and stored in bfloat16). Not an output. Users come
/// after their operands, so one pass from the last node settles each before its operands.
std::vector<bool> rounded_to_16(const ir::Graph& g) {
  using ir::Op;
  std::vector<bool> r(g.nodes.size(), false);
  for (const ir::Node& m : g.nodes)
    for (std::uint32_t o : {m.a, m.b, m.c})
      if (o != ir::kNone) r[o] = true;
  for (std::uint32_t o : g.outputs) r[o] = false;
  for (std::size_t j = g.nodes.size(); j-- > 0;) {
    const ir::Node& m = g.nodes[j];
    for (std::uint32_t o : {m.a, m.b, m.c}) {
      if (o == ir::kNone) continue;
      const Op op = g.nodes[o].op;
      const bool rounds = m.op == Op::cast && is_16bit_float(m.dtype);
      const bool scales = (m.op == Op::mul || m.op == Op::div) && m.dtype == DType::float32 && r[j];
      const bool adds = m.op == Op::sum && m.dtype == DType::float32 && r[j] && (op == Op::exp || op == Op::exp2);
      if (!rounds && !scales && !adds) r[o] = false;
    }
  }
  return r;
}

/// The ops spelled with float's approximations where their value allows it (helpers exp16, div16, sqrt16; fusion's
/// fast log1p).
bool has_approximation(ir::Op op) {
  using ir::Op;
  return op == Op::exp || op == Op::sqrt || op == Op::div || op == Op::reciprocal || op == Op::log1p;
}

}  // namespace

// A half or bfloat16 result keeps 11 or 8 bits on store: float's full-range approximations err far inside that,
// where the precise expf, log1pf and IEEE division cost most of a bfloat16 softmax's or softplus's instructions (71%
// and 85% of the copy limit with them; torch.compile's kernels use the same approximations). So are float32 values
// that reach only 16-bit roundings through products, quotients and sums of exps (rounded_to_16: a softmax computed
// in float32 and stored in bfloat16), and 16-bit values whose float result flows on (a float32 sum of 16-bit exps:
// the approximation's error, far under the 16-bit rounding NumPy would apply there).
std::vector<bool> approximated(const ir::Graph& g) {
  std::vector<bool> r = rounded_to_16(g);
  for (std::size_t i = 0; i < r.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const DType d = n.a == ir::kNone ? n.dtype : g.nodes[n.a].dtype;
    const bool sixteen = is_16bit_float(n.dtype) && is_16bit_float(d);
    const bool wide = r[i] && n.dtype == DType::float32 && d == DType::float32;
    r[i] = !g.fast_math && has_approximation(n.op) && (sixteen || wide);
  }
  return r;
}

std::string spell(const ir::Node& n, DType d, const std::string& a, const std::string& b, const std::string& c,
                  SpellContext& ctx, bool approximate) {
  std::set<Helper>& needs = ctx.helpers;
  using ir::Op;
  const bool fl = is_floating(d);
  const bool is_bool = d == DType::bool_;
  const std::string t(compute_type(n.dtype));
  // C++ promotes integers narrower than int before arithmetic; casting back gives the dtype's wrap-around.
  const bool narrow = !is_floating(n.dtype) && itemsize(n.dtype) < 4;
  auto wrap = [&](const std::string& e) { return narrow ? fmt::format("({})({})", t, e) : e; };
  // a sum, difference, product or negation of 8- or 16-bit integers (computed in 32 bits) wrapped through PTX
  auto narrow_wrap = [&](const std::string& e) {
    needs.insert(Helper::wrap_narrow);
    return fmt::format("({})fz_wrap_{}<{}>({})", t, is_signed_int(n.dtype) ? "s" : "u", 8 * itemsize(n.dtype), e);
  };
  // Signed overflow is undefined in C++ and NVRTC optimizes on it (sign(-x) became -sign(x) for
  // INT_MIN); int16 * int16 overflows the int it is promoted to. NumPy wraps: integers add, subtract,
  // multiply and negate in their unsigned type, and the cast back gives the wrap-around.
  const bool integer = !fl && !is_bool;
  const std::string u = itemsize(n.dtype) == 8 ? "unsigned long long" : "unsigned";
  // Floating +, - and * are rounded one by one, as NumPy rounds them: ptxas would otherwise fuse some
  // products into the next add (an fma) and not others, by where its schedule puts them, so one
  // expression gave different bits in different lanes of one kernel, and in a kernel of a region and
  // in its statement's own (fusion-fuzz --regions, case 11000386). Division, sqrt and the math
  // functions are correctly rounded or fixed code already.
  auto rn = [&](const char* f32, const char* f64, const std::string& x, const std::string& y) {
    return fmt::format("{}({}, {})", n.dtype == DType::float64 ? f64 : f32, x, y);
  };
  auto arith = [&](const std::string& x, const char* op, const std::string& y) {
    if (fl && op[0] == '+') return rn("__fadd_rn", "__dadd_rn", x, y);
    if (fl && op[0] == '-') return rn("__fsub_rn", "__dsub_rn", x, y);
    if (fl && op[0] == '*') return rn("__fmul_rn", "__dmul_rn", x, y);
    if (!integer) return fmt::format("{} {} {}", x, op, y);
    if (narrow) return narrow_wrap(fmt::format("({}){} {} ({}){}", u, x, op, u, y));
    return fmt::format("({})(({}){} {} ({}){})", t, u, x, op, u, y);
  };
  // An ordered comparison of floats is false when either side is NaN. The CUDA 13.0 compiler (sm_90) folds
  // one whose operand it believes non-negative against a constant: `exp2f(x) >= 0.f` and `fabsf(x) >= 0.f`
  // became true for a NaN x (fusion-fuzz seed 16, case 16000780). With isnan() tests in front the fold
  // leaves them and the result is right (`x == x` tests were merged into the compare and folded with it;
  // measured on an H100 with nvcc 13.0, tests/test_fuzz_gpu.cpp keeps the case).
  auto ordered = [&](const std::string& x, const char* op, const std::string& y) {
    if (!fl) return fmt::format("({} {} {})", x, op, y);
    return fmt::format("(!isnan({0}) && !isnan({1}) && {0} {2} {1})", x, y, op);
  };
  // Costly math goes through a __noinline__ wrapper when the kernel holds many such calls.
  const bool outline = ctx.outline_heavy_math && is_heavy_math(n.op);
  auto call1 = [&](const char* f) {
    if (outline) ctx.outlined.insert(std::string("1") + f);
    return outline ? fmt::format("fz_outlined_{}({})", f, a) : fmt::format("{}({})", f, a);
  };
  auto call2 = [&](const char* f) {
    if (outline) ctx.outlined.insert(std::string("2") + f);
    return outline ? fmt::format("fz_outlined_{}({}, {})", f, a, b) : fmt::format("{}({}, {})", f, a, b);
  };
  auto helper2 = [&](Helper h, const char* f) {
    needs.insert(h);
    return fmt::format("{}<{}>({}, {})", f, compute_type(d), a, b);
  };
  if (fl && n.op == Op::tgamma) {
    needs.insert(Helper::tgamma);
    return call1("fz_tgamma");
  }
  if (fl && (n.op == Op::gelu || n.op == Op::gelu_tanh)) {
    needs.insert(Helper::gelu);
    return call1(n.op == Op::gelu ? "fz_gelu" : "fz_gelu_tanh");
  }
  if (fl && n.op == Op::log1p && ctx.fast_math && n.dtype != DType::float64) {
    needs.insert(Helper::log1p_fast);
    return fmt::format("fz_log1p_fast({})", a);
  }
  if (approximate && !ctx.fast_math) {  // (approximated() says where float's approximations may compute the value)
    switch (n.op) {
      case Op::log1p: needs.insert(Helper::log1p_fast); return fmt::format("fz_log1p_fast({})", a);
      case Op::exp: needs.insert(Helper::exp16); return fmt::format("fz_exp16({})", a);
      case Op::sqrt: needs.insert(Helper::sqrt16); return fmt::format("fz_sqrt16({})", a);
      case Op::div: needs.insert(Helper::div16); return fmt::format("fz_div16({}, {})", a, b);
      case Op::reciprocal: needs.insert(Helper::div16); return fmt::format("fz_div16(1.f, {})", a);
      default: break;
    }
  }
  // Ops a CUDA math function computes on floating operands are spelled from the op table.
  const ir::OpInfo& info = ir::op_info(n.op);
  if (fl && *info.math) return info.arity == ir::Arity::unary ? call1(info.math) : call2(info.math);
  switch (n.op) {
    case Op::cast: {
      if (n.dtype == DType::bool_) return fmt::format("({} != 0)", a);
      if (is_16bit_float(n.dtype)) {  // rounds to the 16-bit grid, stays a float
        need_conversions(ctx, n.dtype);
        return load_conversion(n.dtype, store_conversion(d, n.dtype, a));
      }
      return fmt::format("({})({})", t, a);
    }
    case Op::neg:
      if (!integer) return "-" + a;
      needs.insert(Helper::neg_int);  // (8- and 16-bit operands go through int and wrap back where stored)
      if (narrow) return narrow_wrap(fmt::format("(unsigned)fz_neg_int((int){})", a));
      return fmt::format("({})fz_neg_int(({}){})", t, itemsize(d) == 8 ? "long long" : "int", a);
    case Op::abs:
      if (!is_signed_int(d)) return a;
      needs.insert(Helper::abs_int);  // (8- and 16-bit operands go through int and wrap back where stored)
      return itemsize(d) == 8 ? fmt::format("fz_abs_int({})", a) : fmt::format("({})fz_abs_int((int){})", t, a);
    case Op::sign:
      needs.insert(Helper::sign);
      return fmt::format("fz_sign<{}>({})", compute_type(d), a);
    case Op::square: return is_bool ? a : arith(a, "*", a);
    case Op::reciprocal:
      return fl ? fmt::format("{}(1) / {}", t, a) : wrap(fmt::format("{0} == 0 ? 0 : 1 / {0}", a));
    case Op::floor: case Op::ceil: case Op::trunc: case Op::rint: case Op::round: return a;  // integers
    case Op::bit_not: return is_bool ? "!" + a : wrap("~" + a);
    case Op::logical_not: return "!" + a;
    case Op::isnan: return fl ? fmt::format("({0} != {0})", a) : "false";
    case Op::isinf: return fl ? fmt::format("(bool)isinf({})", a) : "false";
    case Op::isfinite: return fl ? fmt::format("(bool)isfinite({})", a) : "true";
    case Op::signbit:
      return fl ? fmt::format("(bool)signbit({})", a) : (is_signed_int(d) ? "(" + a + " < 0)" : "false");
    case Op::add: return is_bool ? fmt::format("({} || {})", a, b) : arith(a, "+", b);
    case Op::sub: return arith(a, "-", b);
    case Op::mul: return is_bool ? fmt::format("({} && {})", a, b) : arith(a, "*", b);
    case Op::div: return fmt::format("{} / {}", a, b);
    case Op::floor_divide:
      return helper2(Helper::floor_divide, fl ? "fz_floor_divide_float" : "fz_floor_divide_int");
    case Op::remainder: return helper2(Helper::remainder, fl ? "fz_remainder_float" : "fz_remainder_int");
    case Op::fmod: return helper2(Helper::fmod_int, "fz_fmod_int");
    case Op::pow: return helper2(Helper::pow_int, "fz_pow_int");
    case Op::maximum: return fl ? helper2(Helper::maximum, "fz_maximum") : fmt::format("({0} > {1} ? {0} : {1})", a, b);
    case Op::minimum: return fl ? helper2(Helper::minimum, "fz_minimum") : fmt::format("({0} < {1} ? {0} : {1})", a, b);
    case Op::fmax: return fmt::format("({0} > {1} ? {0} : {1})", a, b);
    case Op::fmin: return fmt::format("({0} < {1} ? {0} : {1})", a, b);
    case Op::bit_and: return wrap(fmt::format("{} & {}", a, b));
    case Op::bit_or: return wrap(fmt::format("{} | {}", a, b));
    case Op::bit_xor: return wrap(fmt::format("{} ^ {}", a, b));
    case Op::shl: return helper2(Helper::shifts, "fz_shl");
    case Op::shr: return helper2(Helper::shifts, "fz_shr");
    case Op::logaddexp: return helper2(Helper::logaddexp, "fz_logaddexp");
    case Op::eq: return fmt::format("({} == {})", a, b);
    case Op::ne: return fmt::format("({} != {})", a, b);
    case Op::lt: return ordered(a, "<", b);
    case Op::le: return ordered(a, "<=", b);
    case Op::gt: return ordered(a, ">", b);
    case Op::ge: return ordered(a, ">=", b);
    case Op::logical_and: return fmt::format("({} && {})", a, b);
    case Op::logical_or: return fmt::format("({} || {})", a, b);
    case Op::where: return fmt::format("({} ? {} : {})", a, b, c);
    // (an emitter writes a concatenate as branches, each computing its piece: write_values)
    case Op::leading:  // (a and b as the launcher resolves them; c, the join's own extent, is for the launcher
                       // alone; `<a>_at`, the element's position, an argument of fz_expr: codegen/join_tests.hpp.
                       // A rows kernel presets the test's value instead: its column against a limit)
      needs.insert(Helper::leading);
      return fmt::format("fz_before({}_at, {})", a, b);
    case Op::take_index: {
      needs.insert(Helper::take_index);
      switch (static_cast<ir::IndexMode>(n.slot)) {
        case ir::IndexMode::wrap: return fmt::format("fz_index_wrap({}, {})", a, b);
        case ir::IndexMode::clip: return fmt::format("fz_index_clip({}, {})", a, b);
        case ir::IndexMode::raise: break;
      }
      return fmt::format("fz_index_raise({}, {}, {})", a, b, kIndexFault);
    }
    case Op::scatter_add:
    case Op::scatter_max:
    case Op::scatter_min: {
      const bool add = n.op == Op::scatter_add;
      if (add && ctx.exact_sums != ExactSums::none && is_floating(n.dtype)) {  // (16-bit values add as float)
        needs.insert(Helper::scatter_exact);
        const std::string write = fmt::format("fz_scatter_exact<{}>({}, {}, ({}){}, fz_plane)",
                                              ctx.exact_sums == ExactSums::shared ? "fz_in_shared" : "fz_in_global", kScatterTarget, a,
                                              n.dtype == DType::float64 ? "double" : "float", b);
        return c.empty() ? write : fmt::format("({} < 0 ? 0 : {})", c, write);
      }
      needs.insert(add ? Helper::scatter_add : Helper::scatter_extreme);
      const std::string at = fmt::format("{} + {}", kScatterTarget, a);
      std::string write = fmt::format("{}({}, ({}){})", scatter_function(n.op), at, compute_type(n.dtype), b);
      if (is_16bit_float(n.dtype)) {
        need_conversions(ctx, n.dtype);
        const DTypeInfo& info = dtype_info(n.dtype);
        write = add ? fmt::format("fz_scatter_add_16<{}, {}>({}, {})", info.to_float, info.from_float, at, b)
                    : fmt::format("fz_scatter_extreme_16<{}, {}, {}>({}, {})", info.to_float, info.from_float,
                                  n.op == Op::scatter_max, at, b);
      }
      return c.empty() ? write : fmt::format("({} < 0 ? 0 : {})", c, write);  // a bad checked index writes nothing
    }
    // `b` names the source's pointer at this element's position in it (emitters pass gathered inputs so)
    case Op::gather:  // (a bad checked index reads nothing: 0)
      need_conversions(ctx, n.dtype);
      return c.empty() ? load_conversion(n.dtype, fmt::format("{}[{}]", b, a))
                       : fmt::format("({} < 0 ? ({})0 : {})", c, compute_type(n.dtype),
                                     load_conversion(n.dtype, fmt::format("{}[{}]", b, a)));
    case Op::call: {
      ctx.functions.insert(n.slot);
      std::string args = a;
      for (const std::string* x : {&b, &c})
        if (!x->empty()) args += ", " + *x;
      return fmt::format("{}({})", device_function(n.slot).name, args);
    }
    // Leaves are named by the emitters; reductions are spelled by the reduction emitter, never as one
    // expression; floating math calls were spelled above.
    default: break;
  }
  throw Error(fmt::format("internal: no CUDA spelling for op {}", ir::op_name(n.op)));
}

}  // namespace codegen
}  // namespace fusion
