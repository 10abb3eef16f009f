// SPDX-License-Identifier: Apache-2.0
#include "fuzz_reference.hpp"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "fuzz_functions.hpp"
#include "reference_reduce.hpp"
#include "schedule/matmul_layout.hpp"
#include "support.hpp"

namespace fuzz {

using fusion::Shape;
using fusion::ir::Node;

test::Scalar scalar_value(const fusion::detail::ScalarArg& s) {
  test::Scalar v;
  if (s.dtype == DType::float64) {
    std::memcpy(&v.f, &s.bits, 8);
  } else if (fusion::is_floating(s.dtype)) {
    float f;
    std::memcpy(&f, &s.bits, 4);
    v.f = f;
  } else {
    std::memcpy(&v.i, &s.bits, 8);
  }
  return test::normalize(v, s.dtype);
}

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer: a well-spread hash of (run, node, element)
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Perturbation runs: every rounded result moved up by its unit; every one down; alternating by node
/// (so that errors of a value and of its reciprocal do not cancel); the opposite alternation; up and
/// down by an eighth of the unit (one ulp: a move of exactly 8 ulp can keep an integer's parity); then
/// runs with a random sign and size per (node, element). A monotone flip shows in the first runs.
// snap: accumulating reductions land on the nearest multiple of their error bound (a cancelling sum that
// rounds to 0 on the GPU, compared with == against 0: fuzz case 73000317); the other runs move values.
// up_ulp, down_ulp: one step along the dtype's own grid (a float32 near 3e7 moves by 2: x * (1 + 2^-20) moved it by
// 32 and x * (1 + 2^-23) by 4, so an index made of it kept its residue mod 4 in every run: fuzz case 29003384).
// lost_up, lost_down: a sum or mean whose error bound exceeds its value has lost its sign too: it becomes a tiny
// positive (negative) value, which the moves above never reach (fuzz case 2730011096: a mean of int64 with 2^63 - 1
// and -2^63 among them, -2.06 in the reference, +1.9 on the GPU; x / mean then crossed 7 in no run).
enum Run : std::uint64_t {
  up = 1, down, alternate, alternate_other, up_small, down_small, snap, up_ulp, down_ulp, lost_up, lost_down
};  // 0: exact

double jitter(std::uint64_t run, std::size_t node, std::size_t element, double u) {
  switch (run) {
    case up: return 1 + u;
    case down: return 1 - u;
    case alternate: return node % 2 == 0 ? 1 + u : 1 - u;
    case alternate_other: return node % 2 == 1 ? 1 + u : 1 - u;
    case up_small: return 1 + u / 8;
    case down_small: return 1 - u / 8;
    case snap: case up_ulp: case down_ulp: case lost_up: case lost_down: return 1;  // (see reduce, and next_on_grid)
    default: {
      const std::uint64_t h = mix(run ^ mix(node * 0x100000001b3ull ^ mix(element)));
      const double size = 0.05 + 0.95 * static_cast<double>(h >> 12) * 0x1p-52;
      return (h & 1) ? 1 + u * size : 1 - u * size;
    }
  }
}

/// `x` moved one step up (or down) along the grid of `d` (float64, float32 or a 16-bit format).
double next_on_grid(double x, DType d, bool up) {
  if (!std::isfinite(x)) return x;
  const double toward = up ? HUGE_VAL : -HUGE_VAL;
  if (d == DType::float64) return std::nextafter(x, toward);
  const float f = static_cast<float>(x);
  if (d == DType::float32) return std::nextafterf(f, static_cast<float>(toward));
  // a 16-bit format: the step is that of its grid at x, found by rounding x moved by half a step past it
  const double unit = d == DType::float16 ? 0x1p-10 : 0x1p-7;
  const double moved = test::normalize({x + (up ? 1 : -1) * std::max(std::fabs(x), 0x1p-14) * unit * 0.75, 0}, d).f;
  return moved == x ? test::normalize({x + (up ? 1 : -1) * std::fabs(x) * unit * 1.5, 0}, d).f : moved;
}

/// The error a node's value may carry on the GPU: 8 units in the last place for float64 and float32
/// (CUDA's math functions are within a few ulp); half a unit of the 16-bit formats, which round wherever
/// a value is stored (outputs, temporaries, every op under fz::Unfused).
double rounding_unit(DType d) {
  switch (d) {
    case DType::float64: return 0x1p-49;
    case DType::float32: return 0x1p-20;
    case DType::float16: return 0x1p-11;
    case DType::bfloat16: return 0x1p-8;
    default: return 0;
  }
}

/// Ops whose result is exact given their operands: perturbing them adds nothing.
bool exact(fusion::ir::Op op) {
  using fusion::ir::Op;
  switch (op) {
    case Op::input: case Op::scalar: case Op::cast: case Op::where: case Op::neg: case Op::abs: case Op::sign:
    case Op::floor: case Op::ceil: case Op::trunc: case Op::rint: case Op::round: case Op::maximum:
    case Op::minimum: case Op::fmax: case Op::fmin: case Op::copysign: case Op::min: case Op::max:
    case Op::nanmin: case Op::nanmax: case Op::argmin: case Op::argmax: case Op::any: case Op::all:
      return true;
    default: return false;
  }
}

/// Results no reference can pin down: IEEE leaves the sign of a NaN to the platform (x86 makes -nan, a
/// GPU +nan); fmin/fmax/minimum/maximum may return either zero of a (+0, -0) pair; trigonometry of huge
/// arguments depends on bits below the operand's rounding error.
bool unspecified(fusion::ir::Op op, DType od, const test::Scalar& a, const test::Scalar& b) {
  using fusion::ir::Op;
  if (!fusion::is_floating(od)) return false;
  switch (op) {
    case Op::signbit: return std::isnan(a.f);
    // sin, cos and tan of an argument whose rounding error (a few ulp) spans radians: any value is right
    case Op::sin: case Op::cos: case Op::tan:
      return std::fabs(a.f) * rounding_unit(od == DType::float64 ? od : DType::float32) > 1e-3;
    // tgamma and lgamma of a negative argument whose rounding error spans their poles (every integer):
    // a float32 beyond 2^23 is an integer, a pole, where the float64 reference sees a value beside one
    // (fuzz case 15000798: tgamma gave NaN on the GPU, 0 in float64)
    case Op::tgamma: case Op::lgamma:
      return a.f < 0 && std::fabs(a.f) * rounding_unit(od == DType::float64 ? od : DType::float32) > 1e-3;
    // the remainder of a value whose rounding error spans the divisor, likewise: any residue is right (fuzz case
    // 2711008218: floor_divide(erfc(x), -3e-39) % 3.55, a quotient of 1.8e32 an ulp apart on the GPU)
    case Op::remainder: case Op::fmod:
      return std::isfinite(a.f) && b.f != 0 && std::fabs(a.f) * rounding_unit(od == DType::float64 ? od : DType::float32) >
                                       1e-3 * std::fabs(b.f);
    case Op::copysign: return std::isnan(b.f);
    case Op::fmin: case Op::fmax: case Op::minimum: case Op::maximum:
      return a.f == 0 && b.f == 0 && std::signbit(a.f) != std::signbit(b.f);
    default: return false;
  }
}

/// A 16-bit value stays a float inside a kernel and rounds where it is stored: a finite float beyond the
/// format's range is finite fused and infinite stored (unfused, in a plan's temporary), so either is right.
bool overflows_when_stored(const test::Scalar& x, DType d) {
  if (d != DType::float16 && d != DType::bfloat16) return false;
  return std::isfinite(x.f) && !std::isfinite(test::normalize(x, d).f);
}

/// Index of element `k` of `out` in an operand of shape `s` broadcast against it.
struct Broadcaster {
  Shape out;
  fusion::Strides st;  // per output axis: the operand's stride (0 where it is broadcast)
  Broadcaster(const Shape& s, const Shape& o) : out(o) {
    const fusion::Strides cs = fusion::contiguous_strides(s);
    for (int d = 0; d < o.size(); ++d) {
      const int sd = d - (o.size() - s.size());
      st.push_back(sd < 0 || s[sd] == 1 ? 0 : cs[sd]);
    }
  }
  std::size_t operator()(std::int64_t k) const {
    std::int64_t at = 0;
    for (int d = out.size(); d-- > 0;) {
      at += (k % out[d]) * st[d];
      k /= out[d];
    }
    return static_cast<std::size_t>(at);
  }
};

Tensor broadcast_to(const Tensor& t, const Shape& s) {
  const Broadcaster at(t.shape, s);
  Tensor r{s, {}, {}};
  const auto n = static_cast<std::size_t>(fusion::numel(s));
  r.values.resize(n);
  r.undefined.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    r.values[k] = t.values[at(static_cast<std::int64_t>(k))];
    r.undefined[k] = t.undefined[at(static_cast<std::int64_t>(k))];
  }
  return r;
}

struct Interpreter {
  const Case& c;
  const Built& b;
  std::uint64_t run;
  std::vector<Tensor> v;
  std::string error;
  std::vector<bool> inside;  // per node: computed inside a concatenate's piece

  Tensor input(const Node& n) {
    const Input& in = c.inputs[static_cast<std::size_t>(b.slot_input[n.slot])];
    Tensor t{shape_of(c, in.dims), logical_values(c, in), {}};
    t.undefined.assign(t.values.size(), 0);
    return t;
  }

  Tensor elementwise(std::size_t k, const Node& n) {
    const fusion::ir::Graph& g = b.graph;
    Shape s;
    for (std::uint32_t x : {n.a, n.b, n.c})
      if (x != fusion::ir::kNone) s = fusion::broadcast_shapes(s, v[x].shape);
    if (n.op == fusion::ir::Op::iota) s = b.out_shape;  // (a random leaf's index: the outputs' flat one)
    const auto total = static_cast<std::size_t>(fusion::numel(s));
    Tensor r{s, std::vector<test::Scalar>(total), std::vector<std::uint8_t>(total)};
    const DType od = test::operand_dtype_of(g, n);
    const double u = run && !exact(n.op) ? rounding_unit(n.dtype) : 0;
    std::vector<Broadcaster> at;
    for (std::uint32_t x : {n.a, n.b, n.c})
      if (x != fusion::ir::kNone) at.emplace_back(v[x].shape, s);
    for (std::size_t e = 0; e < total; ++e) {
      test::Scalar ops[3];
      bool undefined = false;
      int j = 0;
      for (std::uint32_t x : {n.a, n.b, n.c}) {
        if (x == fusion::ir::kNone) continue;
        const std::size_t i = at[static_cast<std::size_t>(j)](static_cast<std::int64_t>(e));
        ops[j++] = v[x].values[i];
        // where: only the branch taken decides whether the result is defined
        if (n.op != fusion::ir::Op::where) undefined = undefined || v[x].undefined[i];
      }
      if (n.op == fusion::ir::Op::where) {
        const Tensor& taken = v[ops[0].i ? n.b : n.c];
        undefined = v[n.a].undefined[at[0](static_cast<std::int64_t>(e))] ||
                    taken.undefined[at[ops[0].i ? 1 : 2](static_cast<std::int64_t>(e))];
      }
      test::Scalar x = n.op == fusion::ir::Op::call
                           ? call(n, ops)
                           : test::apply(n, od, ops[0], ops[1], ops[2], static_cast<std::int64_t>(e), &undefined);
      undefined = undefined || unspecified(n.op, od, ops[0], ops[1]) || overflows_when_stored(x, n.dtype);
      // Under fz::Unfused every op stores its result: a 16-bit one rounds there, exactly as the GPU does
      // (erf rounded up to 1 then cast to an integer is 1, not 0; no perturbation run sees that past pow(1, NaN)).
      // (a concatenate's pieces run inside its kernel, fz::Unfused or not: their math stays in float)
      if (c.unfused && !inside[k]) x = test::normalize(x, n.dtype);
      if (u && n.op == fusion::ir::Op::floor_divide) {
        // its result lies on the integers: the rounding is the quotient's, before the floor (a -2 moved off the
        // integers equalled no integer in any run: fuzz case 2730009447 compared floor_divide(-1.25, x) with one)
        if (std::isfinite(x.f) && ops[1].f != 0) {
          const double q = ops[0].f / ops[1].f;
          const double moved = run == up_ulp || run == down_ulp ? next_on_grid(q, n.dtype, run == up_ulp)
                                                                : q * jitter(run, k, e, u);
          x.f = test::normalize({std::floor(moved), 0}, n.dtype).f;
        }
      } else if (u && (run == up_ulp || run == down_ulp)) x.f = next_on_grid(x.f, n.dtype, run == up_ulp);
      else if (u && n.op == fusion::ir::Op::logaddexp && std::isfinite(x.f)) {
        // the larger operand plus log1p(exp(-|a - b|)): near 0 the two cancel, and the error is their rounding,
        // not the result's (fuzz case 2732009982: 3 % logaddexp(-1.25, -0.336) divides by 0.00114, 295 ulp off)
        const double terms = std::max(std::fabs(ops[0].f), std::fabs(ops[1].f)) + 0.7;
        x.f = test::normalize({x.f + (jitter(run, k, e, u) - 1) * std::max(terms, std::fabs(x.f)), 0}, n.dtype).f;
      } else if (u) x.f = test::normalize({x.f * jitter(run, k, e, u), 0}, n.dtype).f;
      r.values[e] = x;
      r.undefined[e] = undefined;
    }
    return r;
  }

  /// A user function's host twin, or a random generator's value at (seed, offset, index).
  test::Scalar call(const Node& n, const test::Scalar* args) const {
    const int t = b.call_table.at(n.slot);
    if (t >= 0) return test::normalize(user_functions()[static_cast<std::size_t>(t)].host(args), n.dtype);
    const RandomGenerator& r = random_generators()[static_cast<std::size_t>(-1 - t)];
    return test::normalize(r.host(static_cast<std::uint64_t>(args[0].i), static_cast<std::uint64_t>(args[1].i), args[2].i),
                           n.dtype);
  }

  Tensor reduce(std::size_t k, const Node& n) {
    const fusion::detail::ReduceArg& arg = b.reductions[n.slot];
    const Tensor& operand = v[n.a];
    const int rank = operand.shape.size();
    unsigned mask = 0;
    if (arg.n_axes < 0) mask = (1u << rank) - 1;
    for (int j = 0; j < arg.n_axes; ++j) mask |= 1u << ((arg.axes[static_cast<std::size_t>(j)] + rank) % rank);
    return reduced(k, n.op, n.dtype, b.graph.dtype(n.a), operand, mask, arg.keepdims, arg.ddof);
  }

  /// fz::matmul (NumPy's, batch axes broadcast, a 1-D operand a row or a column): the products a_ik * b_kj laid
  /// along a last axis, then summed as a float sum is (its error bound, perturbations and partial sums' range), in
  /// float32 for 16-bit and float32 operands (cuBLASLt's and the generated kernels' accumulator), float64 for float64.
  Tensor product(std::size_t k, const Node& n) {
    const Tensor &A = v[n.a], &B = v[n.b];
    Shape as = A.shape, bs = B.shape;
    if (as.size() == 1) as.insert(0, 1);
    if (bs.size() == 1) bs.push_back(1);
    const int ra = as.size(), rb = bs.size();
    const std::int64_t m = as[ra - 2], K = as[ra - 1], cols = bs[rb - 1];
    const Shape batch = fusion::broadcast_shapes(Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2));
    Shape laid = fusion::detail::matmul_shape(A.shape, B.shape);
    laid.push_back(K);
    Tensor p{laid, {}, {}};
    // the flat offset of (batch index `o`, row, column) in an operand of shape `s` (C order, its batch axes
    // broadcast against `batch`)
    auto at = [&](const Shape& s, std::int64_t o, std::int64_t row, std::int64_t col) {
      const int r = s.size(), own = r - 2;
      std::int64_t off = 0, scale = s[r - 1] * s[r - 2];
      for (int d = batch.size() - 1, i = own - 1; d >= 0; --d, --i) {
        const std::int64_t c = o % batch[d];
        o /= batch[d];
        if (i < 0) continue;
        if (s[i] != 1) off += c * scale;
        scale *= s[i];
      }
      return off + row * s[r - 1] + col;
    };
    const std::int64_t nb = fusion::numel(batch);
    for (std::int64_t o = 0; o < nb; ++o)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
          for (std::int64_t q = 0; q < K; ++q) {
            const auto x = static_cast<std::size_t>(at(as, o, i, q)), y = static_cast<std::size_t>(at(bs, o, q, j));
            p.values.push_back(test::Scalar{A.values[x].f * B.values[y].f, 0});
            p.undefined.push_back(A.undefined[x] || B.undefined[y]);
          }
    const DType accumulator = n.dtype == DType::float64 ? DType::float64 : DType::float32;
    Tensor r = reduced(k, fusion::ir::Op::sum, n.dtype, accumulator, p, 1u << (laid.size() - 1), false, 0);
    // A library's sum may start from its first product rather than from +0, so a zero's sign is unspecified (fuzz
    // case 2404008546: 0 * -0.5 through cuBLASLt gave -0, which signbit tells from NumPy's +0)
    for (std::size_t e = 0; e < r.values.size(); ++e) r.undefined[e] = r.undefined[e] || r.values[e].f == 0;
    return r;
  }

  /// Reduction `op` to dtype `dtype` of `operand` (of dtype `in`) over the axes in `mask`.
  Tensor reduced(std::size_t k, fusion::ir::Op op, DType dtype, DType in, const Tensor& operand, unsigned mask,
                 bool keepdims, double ddof) {
    const int rank = operand.shape.size();
    std::int64_t count = 1;
    Shape s;
    for (int d = 0; d < rank; ++d) {
      if ((mask >> d) & 1) count *= operand.shape[d];
      if (!((mask >> d) & 1)) s.push_back(operand.shape[d]);
      else if (keepdims) s.push_back(1);
    }
    if (count == 0 && fusion::ir::needs_nonempty(op) && fusion::numel(s) > 0) {
      error = std::string(fusion::ir::op_name(op)) + " of an empty extent";
      return {};
    }
        Tensor r;
    r.shape = s;
    const test::Reduced red = test::reduce(op, in, dtype, operand.values, operand.shape, mask, ddof);
    r.values = red.values;
    const bool sixteen = dtype == DType::float16 || dtype == DType::bfloat16;
    const std::vector<test::Scalar> wide =  // the 16-bit result before rounding, to see whether it overflows
        sixteen ? test::reduce(op, in, DType::float32, operand.values, operand.shape, mask, ddof).values
                : std::vector<test::Scalar>{};
    // Accumulating rounds: a float sum is within (1 + log2 n) units of sum(|x|) of the exact one — a
    // cancelling sum can lose every digit. Move the result by that bound (a product: relatively).
    const bool accumulates = op == fusion::ir::Op::sum || op == fusion::ir::Op::prod ||
                             op == fusion::ir::Op::mean || op == fusion::ir::Op::var;
    // Integers accumulate exactly in a sum or product, and in float64 in a mean or var (fuzz case 73000342:
    // the mean of 19 int64 with 2^63 - 1 and -2^63 among them came out 0 on the GPU, -17/19 exactly).
    const bool float_mean = (op == fusion::ir::Op::mean || op == fusion::ir::Op::var) && !fusion::is_floating(in);
    const DType accumulator = float_mean ? DType::float64 : in;
    if (run && accumulates && fusion::is_floating(accumulator)) {
      const double grow = rounding_unit(accumulator) * (1 + std::log2(static_cast<double>(count) + 1));
      for (std::size_t e = 0; e < r.values.size(); ++e) {
        double& v = r.values[e].f;
        const bool bounded = run == snap || run == lost_up || run == lost_down;
        if (bounded && op != fusion::ir::Op::prod) {
          const double bound = grow * red.magnitude[e] /
                               (op == fusion::ir::Op::mean || op == fusion::ir::Op::var
                                    ? std::max(1.0, static_cast<double>(count) - ddof)
                                    : 1.0);
          if (!(bound > 0) || !std::isfinite(v)) continue;
          if (run == snap) v = test::normalize({std::round(v / bound) * bound, 0}, dtype).f;
          else if (std::fabs(v) <= bound && op != fusion::ir::Op::var)  // (a variance stays >= 0)
            v = test::normalize({(run == lost_up ? 0x1p-20 : -0x1p-20) * bound, 0}, dtype).f;
          continue;
        }
        const double step = jitter(run, k, e, grow) - 1;  // +-grow
        if (op == fusion::ir::Op::prod) v *= 1 + step;
        else
          v += step * red.magnitude[e] /
               (op == fusion::ir::Op::mean || op == fusion::ir::Op::var
                    ? std::max(1.0, static_cast<double>(count) - ddof)
                    : 1.0);
        v = test::normalize({v, 0}, dtype).f;
      }
    }
    std::vector<test::Scalar> flags(operand.undefined.size());
    for (std::size_t e = 0; e < flags.size(); ++e) flags[e].i = operand.undefined[e];
    for (const test::Scalar& f :
         test::reduce(fusion::ir::Op::any, DType::bool_, DType::bool_, flags, operand.shape, mask).values)
      r.undefined.push_back(static_cast<std::uint8_t>(f.i));
    for (std::size_t e = 0; e < wide.size(); ++e)
      r.undefined[e] = r.undefined[e] || overflows_when_stored(wide[e], dtype);
    // A float sum's partial sums (a variance's: of squared deviations) may leave the accumulator's range in one
    // order and not in another, where its magnitude does (fuzz case 2720010916: the float var of 146 values with
    // four near ±9.2e18 is 2.3e36, but its sum of squares passes FLT_MAX, and NumPy's float32 var is inf too).
    if (accumulates && op != fusion::ir::Op::prod && fusion::is_floating(accumulator)) {
      const double top = accumulator == DType::float64 ? DBL_MAX : FLT_MAX;  // (16-bit floats add in float)
      for (std::size_t e = 0; e < r.values.size(); ++e) r.undefined[e] = r.undefined[e] || red.magnitude[e] > top;
    }
    // A float product's partial products may leave the accumulator's range in one order and not in
    // another (1e-30 * 1e-30 underflows to 0 in float, then 0 * inf is NaN; the float64 reference
    // never underflows): where the factors could take a partial product out of range, any result is right.
    if (op == fusion::ir::Op::prod && fusion::is_floating(in)) {
      const bool wide64 = in == DType::float64;
      const double top = wide64 ? DBL_MAX : FLT_MAX, bottom = wide64 ? DBL_MIN : FLT_MIN;
      std::vector<test::Scalar> big(operand.values.size()), small(operand.values.size());
      for (std::size_t e = 0; e < big.size(); ++e) {
        const double a = std::fabs(operand.values[e].f);
        const bool finite_nonzero = std::isfinite(a) && a != 0;
        big[e].f = finite_nonzero ? std::max(a, 1.0) : 1.0;
        small[e].f = finite_nonzero ? std::min(a, 1.0) : 1.0;
      }
      const auto hi =
          test::reduce(fusion::ir::Op::prod, DType::float64, DType::float64, big, operand.shape, mask).values;
      const auto lo =
          test::reduce(fusion::ir::Op::prod, DType::float64, DType::float64, small, operand.shape, mask).values;
      for (std::size_t e = 0; e < r.values.size(); ++e)
        if (!std::isnan(r.values[e].f) && (hi[e].f > top || lo[e].f < bottom)) r.undefined[e] = 1;
    }
    const bool extreme = op == fusion::ir::Op::min || op == fusion::ir::Op::max || op == fusion::ir::Op::nanmin ||
                         op == fusion::ir::Op::nanmax;
    if (extreme && fusion::is_floating(in))  // which zero of a (+0, -0) pair wins is unspecified
      for (std::size_t e = 0; e < r.values.size(); ++e) r.undefined[e] = r.undefined[e] || r.values[e].f == 0;
    const double u = run ? rounding_unit(dtype) : 0;  // a 16-bit result rounds where it is stored
    if (u && (dtype == DType::float16 || dtype == DType::bfloat16))
      for (std::size_t e = 0; e < r.values.size(); ++e)
        r.values[e].f = test::normalize({r.values[e].f * jitter(run, k, e, u), 0}, dtype).f;
    return r;
  }

  /// fz::concatenate (two pieces at a time: a join of more is a tree of them, ir::join_tree): b's elements, then c's,
  /// along the axis its position test names (the axes after it, a scalar).
  Tensor join(const Node& n) {
    const fusion::ir::Graph& g = b.graph;
    if (g.nodes[n.a].op != fusion::ir::Op::leading) return pad(n);  // (a join's test is one position test)
    const Tensor& x = v[n.b];
    const Tensor& y = v[n.c];
    const auto after = static_cast<int>(scalar_value(b.scalars[g.nodes[g.nodes[n.a].a].slot]).i);
    const int axis = x.shape.size() - 1 - after;
    std::int64_t inner = 1;
    for (int d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
    Shape s = x.shape;
    s[axis] += y.shape[axis];
    Tensor r{s, {}, {}};
    const std::int64_t bx = x.shape[axis] * inner, by = y.shape[axis] * inner;
    const std::int64_t outer = bx + by == 0 ? 0 : fusion::numel(s) / (bx + by);
    for (std::int64_t o = 0; o < outer; ++o)
      for (const auto& [t, block] : {std::pair{&x, bx}, std::pair{&y, by}})
        for (std::int64_t i = 0; i < block; ++i) {
          const auto at = static_cast<std::size_t>(o * block + i);
          r.values.push_back(test::normalize(t->values[at], n.dtype));
          r.undefined.push_back(t->undefined[at]);
        }
    return r;
  }

  /// fz::pad: the piece's value inside the box its position tests bound (per tested axis a test of the box's start,
  /// under a logical_not, and one of its end: the axes after it, the bound, the result's extent), the fill elsewhere.
  Tensor pad(const Node& n) {
    const fusion::ir::Graph& g = b.graph;
    const Tensor& x = v[n.b];
    const Tensor& fill = v[n.c];
    const int rank = x.shape.size();
    Shape s = x.shape;
    std::vector<std::int64_t> start(static_cast<std::size_t>(rank), 0), end(x.shape.begin(), x.shape.end());
    auto value_of = [&](std::uint32_t node) { return scalar_value(b.scalars[g.nodes[node].slot]).i; };
    auto walk = [&](auto& self, std::uint32_t k, bool negated) -> void {
      const Node& t = g.nodes[k];
      if (t.op == fusion::ir::Op::leading) {
        const std::int64_t after = value_of(t.a);
        if (after < 0) return;  // an untested slot: always inside
        const int axis = rank - 1 - static_cast<int>(after);
        if (axis < 0 || axis >= rank) return void(error = "internal: a pad's test names no axis of its piece");
        s[axis] = value_of(t.c);
        (negated ? start : end)[static_cast<std::size_t>(axis)] = value_of(t.b);
        return;
      }
      if (t.op == fusion::ir::Op::logical_not) return self(self, t.a, !negated);
      for (std::uint32_t o : {t.a, t.b})
        if (o != fusion::ir::kNone) self(self, o, negated);
    };
    walk(walk, n.a, false);
    Tensor r{s, {}, {}};
    const std::int64_t total = fusion::numel(s);
    std::vector<std::int64_t> idx(static_cast<std::size_t>(rank), 0);
    for (std::int64_t e = 0; e < total; ++e) {
      std::int64_t rest = e, at = 0, stride = 1;
      bool inside = true;
      for (int d = rank - 1; d >= 0; --d) {
        idx[static_cast<std::size_t>(d)] = rest % s[d];
        rest /= s[d];
        const std::int64_t i = idx[static_cast<std::size_t>(d)] - start[static_cast<std::size_t>(d)];
        inside = inside && i >= 0 && idx[static_cast<std::size_t>(d)] < end[static_cast<std::size_t>(d)];
        at += (x.shape[d] == 1 ? 0 : i) * stride;
        stride *= x.shape[d];
      }
      const Tensor& from = inside ? x : fill;
      const auto k = inside ? static_cast<std::size_t>(at) : 0;
      r.values.push_back(test::normalize(from.values[k], n.dtype));
      r.undefined.push_back(from.undefined[k]);
    }
    return r;
  }

  /// fz::take_along_axis: the source's element at the result element's position with the axis's coordinate
  /// replaced by the valid index (the take_index node beside the stride in the offset's product).
  Tensor gather(const Node& n) {
    const fusion::ir::Graph& g = b.graph;
    const Node& src_node = g.nodes[n.b];
    const Input& in = c.inputs[static_cast<std::size_t>(b.slot_input[src_node.slot])];
    const int axis = b.slot_gather_axis[src_node.slot];
    const Shape src = shape_of(c, in.dims);
    const std::vector<test::Scalar> values = logical_values(c, in);
    const Node& offset = g.nodes[n.a];
    const std::uint32_t k_node = g.nodes[offset.a].op == fusion::ir::Op::take_index ? offset.a : offset.b;
    const Tensor& k = v[k_node];
    Shape view = src;
    view[axis] = 1;
    const Shape s = fusion::broadcast_shapes(k.shape, view);
    const auto total = static_cast<std::size_t>(fusion::numel(s));
    Tensor r{s, std::vector<test::Scalar>(total), std::vector<std::uint8_t>(total)};
    const Broadcaster at_k(k.shape, s);
    const fusion::Strides cs = fusion::contiguous_strides(src);
    for (std::size_t e = 0; e < total; ++e) {
      const std::size_t ki = at_k(static_cast<std::int64_t>(e));
      std::int64_t rest = static_cast<std::int64_t>(e), at = 0;
      for (int d = s.size() - 1; d >= 0; --d) {
        const std::int64_t coord = rest % s[d];
        rest /= s[d];
        const int sd = d - (s.size() - src.size());
        if (sd < 0) continue;
        at += (sd == axis ? k.values[ki].i : (src[sd] == 1 ? 0 : coord)) * cs[sd];
      }
      r.values[e] = values[static_cast<std::size_t>(at)];
      r.undefined[e] = k.undefined[ki];
    }
    return r;
  }

  /// fz::scatter_add / scatter_max / scatter_min: the target's values, each element of the index space added
  /// (or kept if larger, smaller) at the target's element with the axis's coordinate replaced by its valid index.
  /// Float atomics add in any order, each add rounding: perturbed runs move a sum by (count + 1) units of the
  /// magnitudes added, and a sum whose partial sums could leave the dtype's range has no defined value.
  Tensor scatter(std::size_t k, const Node& n) {
    const fusion::ir::Graph& g = b.graph;
    const Input& in = c.inputs[static_cast<std::size_t>(b.scatter_target)];
    const int axis = c.outputs[0].axis;
    Tensor r{shape_of(c, in.dims), logical_values(c, in), {}};
    r.undefined.assign(r.values.size(), 0);
    const Node& offset = g.nodes[n.a];
    const std::uint32_t k_node = g.nodes[offset.a].op == fusion::ir::Op::take_index ? offset.a : offset.b;
    const Tensor &index = v[k_node], &values = v[n.b];
    Shape view = r.shape;
    view[axis] = 1;
    const Shape s = fusion::broadcast_shapes(fusion::broadcast_shapes(index.shape, values.shape), view);
    const Broadcaster at_index(index.shape, s), at_value(values.shape, s);
    const fusion::Strides cs = fusion::contiguous_strides(r.shape);
    const DType d = n.dtype;
    const bool fl = fusion::is_floating(d), unsigned_ = fusion::is_unsigned_int(d), add = n.op == fusion::ir::Op::scatter_add;
    std::vector<double> magnitude(r.values.size());
    std::vector<std::int64_t> count(r.values.size());
    std::vector<std::uint8_t> non_finite(r.values.size());
    for (std::size_t e = 0; e < r.values.size(); ++e) magnitude[e] = fl ? std::fabs(r.values[e].f) : 0;
    for (std::int64_t e = 0; e < fusion::numel(s); ++e) {
      const std::size_t ii = at_index(e), vi = at_value(e);
      std::int64_t rest = e, at = 0;
      for (int dim = s.size() - 1; dim >= 0; --dim) {
        const std::int64_t coord = rest % s[dim];
        rest /= s[dim];
        if (dim != axis) at += coord * cs[dim];
      }
      const std::int64_t i = index.values[ii].i;
      if (index.undefined[ii] || i < 0 || i >= r.shape[axis]) {  // any element along the axis may receive it
        for (std::int64_t j = 0; j < r.shape[axis]; ++j) r.undefined[static_cast<std::size_t>(at + j * cs[axis])] = 1;
        continue;
      }
      const auto t = static_cast<std::size_t>(at + i * cs[axis]);
      test::Scalar& acc = r.values[t];
      const test::Scalar x = values.values[vi];
      r.undefined[t] = r.undefined[t] || index.undefined[ii] || values.undefined[vi];
      ++count[t];
      if (add && fl) {
        acc.f += x.f;
        magnitude[t] += std::fabs(x.f);
        non_finite[t] = non_finite[t] || !std::isfinite(x.f);
      } else if (add) {  // integers wrap
        acc.i = static_cast<std::int64_t>(static_cast<std::uint64_t>(acc.i) + static_cast<std::uint64_t>(x.i));
      } else {  // NaN wins; of equal values the target's stays
        const bool max = n.op == fusion::ir::Op::scatter_max;
        const bool wins = fl ? !std::isnan(acc.f) && (std::isnan(x.f) || (max ? x.f > acc.f : x.f < acc.f))
                          : unsigned_ ? (max ? static_cast<std::uint64_t>(x.i) > static_cast<std::uint64_t>(acc.i)
                                             : static_cast<std::uint64_t>(x.i) < static_cast<std::uint64_t>(acc.i))
                                      : (max ? x.i > acc.i : x.i < acc.i);
        if (wins) acc = x;
      }
    }
    const double u = rounding_unit(d);
    for (std::size_t e = 0; e < r.values.size(); ++e) {
      if (count[e] == 0) continue;
      double& f = r.values[e].f;
      if (add && fl) {
        const double top = d == DType::float64 ? DBL_MAX : d == DType::float32 ? FLT_MAX : d == DType::float16 ? 65504.0 : 3.38953139e38;
        if (!non_finite[e] && magnitude[e] > top) r.undefined[e] = 1;  // a partial sum may overflow in some order
        if (run && std::isfinite(f)) f += (jitter(run, k, e, u * static_cast<double>(count[e] + 1)) - 1) * magnitude[e];
      }
      if (!add && fl && f == 0) r.undefined[e] = 1;  // which zero of a (+0, -0) pair stays is unspecified
      r.values[e] = test::normalize(r.values[e], d);
    }
    return r;
  }

  /// A running maximum, minimum or integer sum along one axis (exact: no rounding to model).
  Tensor scan(const Node& n) {
    const fusion::detail::ReduceArg& arg = b.reductions[n.slot];
    const Tensor& x = v[n.a];
    const int rank = x.shape.size(), axis = (arg.axes[0] + rank) % rank;
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= x.shape[d];
    for (int d = axis + 1; d < rank; ++d) inner *= x.shape[d];
    const std::int64_t len = x.shape[axis];
    Tensor r{x.shape, std::vector<test::Scalar>(x.values.size()), std::vector<std::uint8_t>(x.values.size())};
    const bool fl = fusion::is_floating(n.dtype), sum = n.op == fusion::ir::Op::cumsum;
    const bool unsigned_ = fusion::is_unsigned_int(n.dtype);
    auto later_wins = [&](const test::Scalar& acc, const test::Scalar& y) {  // y replaces acc
      if (fl) return !std::isnan(acc.f) && (std::isnan(y.f) || (n.op == fusion::ir::Op::cummax ? !(acc.f > y.f) : !(acc.f < y.f)));
      const bool less = unsigned_ ? static_cast<std::uint64_t>(acc.i) < static_cast<std::uint64_t>(y.i) : acc.i < y.i;
      const bool greater = unsigned_ ? static_cast<std::uint64_t>(acc.i) > static_cast<std::uint64_t>(y.i) : acc.i > y.i;
      return n.op == fusion::ir::Op::cummax ? !greater : !less;
    };
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        test::Scalar acc{0, 0};
        bool have = false, undefined = false;
        for (std::int64_t t = 0; t < len; ++t) {
          const std::int64_t j = arg.reverse ? len - 1 - t : t;
          const auto at = static_cast<std::size_t>((o * len + j) * inner + i);
          const test::Scalar y = x.values[at];
          if (arg.exclusive) r.values[at] = acc, r.undefined[at] = undefined;
          if (sum)  // integers wrap, as NumPy's
            acc = test::normalize({0, static_cast<std::int64_t>(static_cast<std::uint64_t>(acc.i) +
                                                                static_cast<std::uint64_t>(y.i))},
                                  n.dtype);
          else if (!have || later_wins(acc, y))
            acc = y;
          have = true;
          undefined = undefined || x.undefined[at];
          if (!arg.exclusive)  // which zero of a (+0, -0) pair a running extreme keeps is unspecified
            r.values[at] = acc, r.undefined[at] = undefined || (fl && acc.f == 0);
        }
      }
    return r;
  }

  Expected operator()() {
    const fusion::ir::Graph& g = b.graph;
    v.resize(g.nodes.size());
    inside = fusion::ir::inside_pieces(g);
    for (std::size_t k = 0; k < g.nodes.size() && error.empty(); ++k) {
      const Node& n = g.nodes[k];
      if (n.op == fusion::ir::Op::input) {
        v[k] = input(n);
      } else if (n.op == fusion::ir::Op::scalar) {
        v[k] = Tensor{Shape{}, {test::normalize(scalar_value(b.scalars[n.slot]), n.dtype)}, {0}};
      } else if (fusion::ir::is_reduction(n.op)) {
        v[k] = reduce(k, n);
      } else if (fusion::ir::is_product(n.op)) {
        v[k] = product(k, n);
      } else if (fusion::ir::is_scan(n.op)) {
        v[k] = scan(n);
      } else if (n.op == fusion::ir::Op::gather) {
        v[k] = gather(n);
      } else if (n.op == fusion::ir::Op::leading) {
        v[k] = Tensor{Shape{}, {test::Scalar{}}, {0}};  // (read by the concatenate: its axis)
      } else if (n.op == fusion::ir::Op::concatenate) {
        v[k] = join(n);
      } else if (fusion::ir::is_scatter(n.op)) {
        v[k] = scatter(k, n);
      } else {
        v[k] = elementwise(k, n);
      }
    }
    Expected out;
    out.error = error;
    if (!error.empty()) return out;
    for (std::uint32_t o : g.outputs) out.outputs.push_back(broadcast_to(v[o], b.out_shape));
    return out;
  }
};

}  // namespace

Expected reference(const Case& c, const Built& b, std::uint64_t perturbation) {
  return Interpreter{c, b, perturbation, {}, {}}();
}

Oracle oracle(const Case& c, const Built& b) {
  Oracle o{reference(c, b), {}};
  if (o.exact.error.empty())
    for (std::uint64_t run : {std::uint64_t{up}, std::uint64_t{down}, std::uint64_t{alternate},
                              std::uint64_t{alternate_other}, std::uint64_t{up_small}, std::uint64_t{down_small},
                              std::uint64_t{snap}, std::uint64_t{up_ulp}, std::uint64_t{down_ulp},
                              std::uint64_t{lost_up}, std::uint64_t{lost_down},
                              std::uint64_t{0x5eed}, std::uint64_t{0xfeed}})
      o.perturbed.push_back(reference(c, b, run));
  return o;
}

bool close(test::Scalar got, test::Scalar want, DType d, double scale) {
  if (!fusion::is_floating(d)) return test::normalize(got, d).i == test::normalize(want, d).i;
  const test::Tolerance t = test::tolerance(d);
  return test::close(got.f, want.f, {t.rtol * scale, t.atol * scale});
}

Status status(const Oracle& o, std::size_t k, std::size_t e, DType d) {
  if (o.exact.outputs[k].undefined[e]) return Status::undefined;
  for (const Expected& p : o.perturbed)
    if (!p.error.empty() || p.outputs[k].undefined[e] ||
        !close(p.outputs[k].values[e], o.exact.outputs[k].values[e], d, 0.5))
      return Status::unstable;
  return Status::check;
}

}  // namespace fuzz
