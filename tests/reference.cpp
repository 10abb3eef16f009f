// SPDX-License-Identifier: Apache-2.0
#include "reference.hpp"

#include <cmath>
#include <stdexcept>

namespace test {

using fusion::DType;
using fusion::ir::Node;
using fusion::ir::Op;

Scalar normalize(Scalar s, DType d) {
  using fusion::itemsize;
  if (fusion::is_floating(d)) {
    if (d == DType::float32) s.f = static_cast<float>(s.f);
    if (d == DType::float16) s.f = static_cast<float>(fusion::half(static_cast<float>(s.f)));
    if (d == DType::bfloat16) s.f = static_cast<float>(fusion::bfloat16(static_cast<float>(s.f)));
    return s;
  }
  if (d == DType::bool_) { s.i = s.i != 0; return s; }
  const int bits = static_cast<int>(8 * itemsize(d));
  if (bits == 64) return s;
  const std::uint64_t mask = (1ull << bits) - 1;
  std::uint64_t u = static_cast<std::uint64_t>(s.i) & mask;
  if (fusion::is_signed_int(d) && (u >> (bits - 1))) u |= ~mask;
  s.i = static_cast<std::int64_t>(u);
  return s;
}

double to_double(Scalar s, DType d) {
  if (fusion::is_floating(d)) return s.f;
  if (d == DType::uint64) return static_cast<double>(static_cast<std::uint64_t>(s.i));
  return static_cast<double>(s.i);
}

namespace {

/// NumPy and C++ leave a float -> integer conversion undefined when the truncated value does not fit.
bool fits(double f, DType to) {
  if (std::isnan(f)) return false;
  const double t = std::trunc(f);
  const int bits = static_cast<int>(8 * fusion::itemsize(to));
  if (fusion::is_unsigned_int(to)) return t >= 0 && t < std::ldexp(1.0, bits);
  return t >= -std::ldexp(1.0, bits - 1) && t < std::ldexp(1.0, bits - 1);
}

Scalar convert(Scalar s, DType from, DType to, bool* undefined) {
  Scalar r;
  if (fusion::is_floating(to)) {
    r.f = to_double(s, from);
  } else if (to == DType::bool_) {
    r.i = fusion::is_floating(from) ? (s.f != 0) : (s.i != 0);
  } else if (fusion::is_floating(from)) {
    if (!fits(s.f, to)) {
      if (undefined) *undefined = true;
      return normalize(r, to);
    }
    r.i = fusion::is_unsigned_int(to) && s.f >= 9.2e18 ? static_cast<std::int64_t>(static_cast<std::uint64_t>(s.f))
                                                       : static_cast<std::int64_t>(std::trunc(s.f));
  } else {
    r.i = s.i;
  }
  return normalize(r, to);
}

double floor_divide(double a, double b) {
  if (b == 0) return a / b;
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return std::copysign(0.0, a / b);
  double q = std::floor(div);
  if (div - q > 0.5) q += 1;
  return q;
}

double remainder(double a, double b) {
  double m = std::fmod(a, b);
  if (b == 0) return m;
  if (m != 0) {
    if ((b < 0) != (m < 0)) m += b;
  } else {
    m = std::copysign(0.0, b);
  }
  return m;
}

double float_op(Op op, double a, double b, double c) {
  switch (op) {
    case Op::neg: return -a;
    case Op::abs: return std::fabs(a);
    case Op::sign: return a > 0 ? 1 : (a < 0 ? -1 : a);
    case Op::square: return a * a;
    case Op::reciprocal: return 1 / a;
    case Op::floor: return std::floor(a);
    case Op::ceil: return std::ceil(a);
    case Op::trunc: return std::trunc(a);
    case Op::rint: return std::nearbyint(a);
    case Op::round: return std::round(a);
    case Op::sqrt: return std::sqrt(a);
    case Op::rsqrt: return 1 / std::sqrt(a);
    // glibc's cbrt is 1 ulp off for some perfect cubes (cbrt(64) < 4), and x % 1 jumps there: long double
    case Op::cbrt: return static_cast<double>(std::cbrt(static_cast<long double>(a)));
    case Op::exp: return std::exp(a);
    case Op::exp2: return std::exp2(a);
    case Op::expm1: return std::expm1(a);
    case Op::log: return std::log(a);
    case Op::log2: return std::log2(a);
    case Op::log10: return std::log10(a);
    case Op::log1p: return std::log1p(a);
    case Op::sin: return std::sin(a);
    case Op::cos: return std::cos(a);
    case Op::tan: return std::tan(a);
    case Op::asin: return std::asin(a);
    case Op::acos: return std::acos(a);
    case Op::atan: return std::atan(a);
    case Op::sinh: return std::sinh(a);
    case Op::cosh: return std::cosh(a);
    case Op::tanh: return std::tanh(a);
    case Op::asinh: return std::asinh(a);
    case Op::acosh: return std::acosh(a);
    case Op::atanh: return std::atanh(a);
    case Op::erf: return std::erf(a);
    case Op::erfc: return std::erfc(a);
    case Op::lgamma: {  // lgamma_r: std::lgamma writes the global signgam, a race between threads
      int sign = 0;
      return ::lgamma_r(a, &sign);
    }
    case Op::tgamma: return std::tgamma(a);
    case Op::gelu: return 0.5 * a * (1 + std::erf(a * 0.707106781186547524));
    case Op::gelu_tanh: return 0.5 * a * (1 + std::tanh(0.797884560802865355 * (a + 0.044715 * a * a * a)));
    case Op::add: return a + b;
    case Op::sub: return a - b;
    case Op::mul: return a * b;
    case Op::div: return a / b;
    case Op::floor_divide: return floor_divide(a, b);
    case Op::remainder: return remainder(a, b);
    case Op::fmod: return std::fmod(a, b);
    case Op::pow: return std::pow(a, b);
    case Op::maximum: return std::isnan(a) ? a : (std::isnan(b) ? b : std::max(a, b));
    case Op::minimum: return std::isnan(a) ? a : (std::isnan(b) ? b : std::min(a, b));
    case Op::fmax: return std::fmax(a, b);
    case Op::fmin: return std::fmin(a, b);
    case Op::atan2: return std::atan2(a, b);
    case Op::hypot: return std::hypot(a, b);
    case Op::copysign: return std::copysign(a, b);
    case Op::logaddexp: {
      if (a == b) return a + std::log(2.0);
      const double m = std::max(a, b);
      return m + std::log1p(std::exp(-std::fabs(a - b)));
    }
    default: break;
  }
  (void)c;
  throw std::logic_error(std::string("no float reference for ") + fusion::ir::op_name(op));
}

std::int64_t int_op(Op op, DType d, std::int64_t a, std::int64_t b) {
  const bool u = fusion::is_unsigned_int(d);
  const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
  const int bits = static_cast<int>(8 * fusion::itemsize(d));
  const bool neg_a = !u && a < 0, neg_b = !u && b < 0;
  switch (op) {
    case Op::neg: return static_cast<std::int64_t>(0 - ua);
    case Op::abs: return neg_a ? static_cast<std::int64_t>(0 - ua) : a;
    case Op::sign: return a == 0 ? 0 : (neg_a ? -1 : 1);
    case Op::square: return static_cast<std::int64_t>(ua * ua);
    case Op::reciprocal: return a == 0 ? 0 : (u ? static_cast<std::int64_t>(1 / ua) : (a == -1 ? -1 : 1 / a));
    case Op::floor: case Op::ceil: case Op::trunc: case Op::rint: case Op::round: return a;
    case Op::bit_not: return d == DType::bool_ ? !a : ~a;
    case Op::add: return d == DType::bool_ ? (a || b) : static_cast<std::int64_t>(ua + ub);
    case Op::sub: return static_cast<std::int64_t>(ua - ub);
    case Op::mul: return d == DType::bool_ ? (a && b) : static_cast<std::int64_t>(ua * ub);
    case Op::floor_divide: {
      if (b == 0) return 0;
      if (u) return static_cast<std::int64_t>(ua / ub);
      if (b == -1) return static_cast<std::int64_t>(0 - ua);  // INT64_MIN / -1 wraps (and traps on the host)
      std::int64_t q = a / b;
      if (a % b != 0 && ((a < 0) != (b < 0))) --q;
      return q;
    }
    case Op::remainder: {
      if (b == 0) return 0;
      if (u) return static_cast<std::int64_t>(ua % ub);
      if (b == -1) return 0;
      std::int64_t r = a % b;
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case Op::fmod: return b == 0 || (!u && b == -1) ? 0 : (u ? static_cast<std::int64_t>(ua % ub) : a % b);
    case Op::pow: {
      if (neg_b) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
      std::uint64_t r = 1, base = ua, e = ub;
      while (e) {
        if (e & 1) r *= base;
        base *= base;
        e >>= 1;
      }
      return static_cast<std::int64_t>(r);
    }
    case Op::maximum: case Op::fmax: return (u ? ua > ub : a > b) ? a : b;
    case Op::minimum: case Op::fmin: return (u ? ua < ub : a < b) ? a : b;
    case Op::bit_and: return a & b;
    case Op::bit_or: return a | b;
    case Op::bit_xor: return a ^ b;
    case Op::shl:
      return (neg_b || (u ? ub : static_cast<std::uint64_t>(b)) >= static_cast<std::uint64_t>(bits))
                 ? 0
                 : static_cast<std::int64_t>(ua << b);
    case Op::shr:
      if (neg_b || (u ? ub : static_cast<std::uint64_t>(b)) >= static_cast<std::uint64_t>(bits)) return neg_a ? -1 : 0;
      return u ? static_cast<std::int64_t>((ua & (bits == 64 ? ~0ull : ((1ull << bits) - 1))) >> b) : (a >> b);
    default: break;
  }
  throw std::logic_error(std::string("no integer reference for ") + fusion::ir::op_name(op));
}

bool compare(Op op, Scalar x, Scalar y, DType d) {
  if (fusion::is_floating(d)) {
    const double a = x.f, b = y.f;
    switch (op) {
      case Op::eq: return a == b;
      case Op::ne: return a != b;
      case Op::lt: return a < b;
      case Op::le: return a <= b;
      case Op::gt: return a > b;
      default: return a >= b;
    }
  }
  const bool u = fusion::is_unsigned_int(d);
  const auto ua = static_cast<std::uint64_t>(x.i), ub = static_cast<std::uint64_t>(y.i);
  switch (op) {
    case Op::eq: return x.i == y.i;
    case Op::ne: return x.i != y.i;
    case Op::lt: return u ? ua < ub : x.i < y.i;
    case Op::le: return u ? ua <= ub : x.i <= y.i;
    case Op::gt: return u ? ua > ub : x.i > y.i;
    default: return u ? ua >= ub : x.i >= y.i;
  }
}

}  // namespace

Scalar apply(const Node& n, DType od, Scalar a, Scalar b, Scalar c, std::int64_t index, bool* undefined) {
  Scalar r;
  switch (n.op) {
    case Op::input: case Op::scalar: r = a; break;
    case Op::iota: r.i = index; break;
    case Op::cast: r = convert(a, od, n.dtype, undefined); break;
    case Op::where: r = a.i ? b : c; break;
    case Op::take_index: {  // an index made valid by the mode (fz::take), as the kernels' fz_index_* do
      const std::int64_t i = a.i, m = b.i;
      switch (static_cast<fusion::ir::IndexMode>(n.slot)) {
        case fusion::ir::IndexMode::wrap: r.i = i % m < 0 ? i % m + m : i % m; break;
        case fusion::ir::IndexMode::clip: r.i = i < 0 ? 0 : (i >= m ? m - 1 : i); break;
        case fusion::ir::IndexMode::raise: r.i = i >= -m && i < m ? (i < 0 ? i + m : i) : -1; break;
      }
      break;
    }
    case Op::logical_not: r.i = !a.i; break;
    case Op::logical_and: r.i = a.i && b.i; break;
    case Op::logical_or: r.i = a.i || b.i; break;
    case Op::isnan: r.i = fusion::is_floating(od) && std::isnan(a.f); break;
    case Op::isinf: r.i = fusion::is_floating(od) && std::isinf(a.f); break;
    case Op::isfinite: r.i = !fusion::is_floating(od) || std::isfinite(a.f); break;
    case Op::signbit: r.i = fusion::is_floating(od) ? std::signbit(a.f) : (fusion::is_signed_int(od) && a.i < 0); break;
    case Op::eq: case Op::ne: case Op::lt: case Op::le: case Op::gt: case Op::ge: r.i = compare(n.op, a, b, od); break;
    default:
      if (fusion::is_floating(od)) r.f = float_op(n.op, a.f, b.f, c.f);
      else r.i = int_op(n.op, od, a.i, b.i);
  }
  // 16-bit floats compute in float on the GPU and round only on store; float32 rounds per op.
  return (n.dtype == DType::float16 || n.dtype == DType::bfloat16) && n.op != Op::cast && n.op != Op::input
             ? Scalar{static_cast<float>(r.f), r.i}
             : normalize(r, n.dtype);
}

DType operand_dtype_of(const fusion::ir::Graph& g, const Node& n) {
  return n.a == fusion::ir::kNone ? n.dtype : g.nodes[n.op == Op::where ? n.b : n.a].dtype;
}

Scalar interpret(const fusion::ir::Graph& g, const std::vector<Scalar>& inputs, const std::vector<Scalar>& scalars,
                 std::int64_t index) {
  std::vector<Scalar> v(g.nodes.size());
  for (std::size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    auto operand = [&](std::uint32_t x) { return x != fusion::ir::kNone ? v[x] : Scalar{}; };
    Scalar a = operand(n.a);
    if (n.op == Op::input) a = inputs.at(n.slot);
    if (n.op == Op::scalar) a = scalars.at(n.slot);
    v[k] = apply(n, operand_dtype_of(g, n), a, operand(n.b), operand(n.c), index);
  }
  return v[g.outputs[0]];
}

std::vector<unsigned char> to_bytes(const std::vector<Scalar>& v, DType d) {
  const std::size_t w = fusion::itemsize(d);
  std::vector<unsigned char> out(v.size() * w);
  for (std::size_t k = 0; k < v.size(); ++k) {
    const Scalar s = normalize(v[k], d);
    unsigned char* p = out.data() + k * w;
    switch (d) {
      case DType::float64: std::memcpy(p, &s.f, 8); break;
      case DType::float32: { const float f = static_cast<float>(s.f); std::memcpy(p, &f, 4); break; }
      case DType::float16: { const fusion::half h(static_cast<float>(s.f)); std::memcpy(p, &h.bits, 2); break; }
      case DType::bfloat16: { const fusion::bfloat16 h(static_cast<float>(s.f)); std::memcpy(p, &h.bits, 2); break; }
      default: std::memcpy(p, &s.i, w); break;  // little-endian: the low bytes
    }
  }
  return out;
}

std::vector<Scalar> from_bytes(const std::vector<unsigned char>& b, DType d) {
  const std::size_t w = fusion::itemsize(d);
  std::vector<Scalar> out(b.size() / w);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const unsigned char* p = b.data() + k * w;
    Scalar s;
    switch (d) {
      case DType::float64: std::memcpy(&s.f, p, 8); break;
      case DType::float32: { float f; std::memcpy(&f, p, 4); s.f = f; break; }
      case DType::float16: { std::uint16_t h; std::memcpy(&h, p, 2); s.f = fusion::half::from_bits(h); break; }
      case DType::bfloat16: { std::uint16_t h; std::memcpy(&h, p, 2); s.f = fusion::bfloat16::from_bits(h); break; }
      default: std::memcpy(&s.i, p, w); s = normalize(s, d); break;
    }
    out[k] = s;
  }
  return out;
}

fusion::ArrayBase upload(const std::vector<Scalar>& values, DType d, const fusion::Shape& shape) {
  fusion::ArrayBase a = fusion::ArrayBase::make_empty(d, shape);
  const auto bytes = to_bytes(values, d);
  a.upload(bytes.data(), values.size());
  return a;
}

fusion::ArrayBase poisoned(DType d, const fusion::Shape& shape) {
  fusion::ArrayBase a = fusion::ArrayBase::make_empty(d, shape);
  std::vector<unsigned char> bytes(a.nbytes(), d == DType::bool_ ? 0x01 : 0xff);
  a.upload(bytes.data(), static_cast<std::size_t>(a.size()));
  return a;
}

std::vector<Scalar> download(const fusion::ArrayBase& a) {
  std::vector<unsigned char> bytes(a.nbytes());
  a.download(bytes.data());
  return from_bytes(bytes, a.dtype());
}

}  // namespace test
