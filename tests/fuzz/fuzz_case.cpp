// SPDX-License-Identifier: Apache-2.0
#include "fuzz_case.hpp"
#include "fuzz_functions.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "schedule/matmul_layout.hpp"

namespace fuzz {

using fusion::Shape;
using fusion::Strides;

Shape shape_of(const Case& c, const std::vector<int>& dims) {
  Shape s;
  for (int d : dims) s.push_back(d < 0 ? 1 : c.dim_sizes.at(static_cast<std::size_t>(d)));
  return s;
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::transposed: return "transposed";
    case Layout::reversed: return "reversed";
    case Layout::strided: return "strided";
  }
  return "?";
}

Input output_view(const Case& c, DType d) {
  Input out;
  out.dtype = d;
  out.dims = c.out_dims;
  out.layout = c.into ? c.out_layout : Layout::contiguous;
  return out;
}

Shape base_shape(const Case& c, const Input& in) {
  const Shape s = shape_of(c, in.dims);
  Shape b;
  for (int d = 0; d < s.size(); ++d) {
    if (in.layout == Layout::transposed) b.push_back(s[s.size() - 1 - d]);
    else b.push_back(in.layout == Layout::strided ? 2 * s[d] : s[d]);
  }
  return b;
}

void view_of(const Case& c, const Input& in, std::int64_t& offset, Strides& strides) {
  const Shape s = shape_of(c, in.dims);
  const Strides base = fusion::contiguous_strides(base_shape(c, in));
  offset = 0;
  strides = Strides{};
  for (int d = 0; d < s.size(); ++d) {
    switch (in.layout) {
      case Layout::contiguous: strides.push_back(base[d]); break;
      case Layout::transposed: strides.push_back(base[s.size() - 1 - d]); break;
      case Layout::strided: strides.push_back(2 * base[d]); break;
      case Layout::reversed:
        strides.push_back(-base[d]);
        if (s[d] > 0) offset += (s[d] - 1) * base[d];
        break;
    }
  }
}

namespace {

test::Scalar rich_value(std::mt19937_64& rng, DType d) {
  std::uniform_real_distribution<double> unit(0, 1);
  test::Scalar s;
  const bool special = unit(rng) < 0.08;
  if (fusion::is_floating(d)) {
    static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e30, -1e-30, 3e-39, 65504, 0.5};
    s.f = special ? specials[rng() % std::size(specials)] : std::uniform_real_distribution<double>(-4, 4)(rng);
  } else if (d == DType::bool_) {
    s.i = static_cast<std::int64_t>(rng() & 1);
  } else if (special) {
    const int bits = static_cast<int>(8 * fusion::itemsize(d));
    const bool u = fusion::is_unsigned_int(d);
    const std::int64_t lo =
        u ? 0 : (bits == 64 ? std::numeric_limits<std::int64_t>::min() : -(std::int64_t{1} << (bits - 1)));
    const std::int64_t hi =
        bits == 64 ? std::numeric_limits<std::int64_t>::max() : (std::int64_t{1} << (bits - (u ? 0 : 1))) - 1;
    const std::int64_t choices[] = {lo, hi, 0, u ? 1 : -1};
    s.i = (u && bits == 64 && rng() % 4 == 1) ? -1 : choices[rng() % 4];  // uint64 max is all ones
  } else {
    s.i = fusion::is_unsigned_int(d) ? std::uniform_int_distribution<std::int64_t>(0, 40)(rng)
                                     : std::uniform_int_distribution<std::int64_t>(-20, 20)(rng);
  }
  return s;
}

test::Scalar simple_value(std::mt19937_64& rng, DType d) {
  test::Scalar s;
  if (fusion::is_floating(d)) s.f = 0.5 * std::uniform_int_distribution<int>(-6, 6)(rng);
  else if (d == DType::bool_) s.i = static_cast<std::int64_t>(rng() & 1);
  else s.i = std::uniform_int_distribution<std::int64_t>(fusion::is_unsigned_int(d) ? 0 : -3, 5)(rng);
  return s;
}

}  // namespace

std::vector<test::Scalar> base_values(const Case& c, const Input& in) {
  std::mt19937_64 rng(in.seed);
  std::vector<test::Scalar> v(static_cast<std::size_t>(fusion::numel(base_shape(c, in))));
  for (auto& x : v)
    x = test::normalize(in.values == Values::rich ? rich_value(rng, in.dtype) : simple_value(rng, in.dtype), in.dtype);
  return v;
}

std::vector<test::Scalar> logical_values(const Case& c, const Input& in) {
  const std::vector<test::Scalar> base = base_values(c, in);
  const Shape s = shape_of(c, in.dims);
  std::int64_t offset;
  Strides st;
  view_of(c, in, offset, st);
  std::vector<test::Scalar> out(static_cast<std::size_t>(fusion::numel(s)));
  for (std::size_t k = 0; k < out.size(); ++k) {
    std::int64_t rest = static_cast<std::int64_t>(k), at = offset;
    for (int d = s.size(); d-- > 0;) {
      at += (rest % s[d]) * st[d];
      rest /= s[d];
    }
    out[k] = base[static_cast<std::size_t>(at)];
  }
  return out;
}

std::optional<DType> result_dtype(const Case& c, const Expr& e) {
  switch (e.kind) {
    case Kind::input: return c.inputs.at(static_cast<std::size_t>(e.input)).dtype;
    case Kind::scalar: return std::nullopt;
    case Kind::cast: return e.dtype;
    case Kind::unary: {
      const auto a = result_dtype(c, e.args[0]);
      return a ? std::optional(fusion::ir::result_dtype(e.op, *a)) : std::nullopt;
    }
    case Kind::binary: case Kind::where: {
      const Expr& x = e.args[e.kind == Kind::where ? 1 : 0];
      const Expr& y = e.args[e.kind == Kind::where ? 2 : 1];
      auto dx = result_dtype(c, x), dy = result_dtype(c, y);
      if (!dx && !dy) return std::nullopt;
      if (!dx) dx = fusion::promote_weak(*dy, x.scalar_kind);
      if (!dy) dy = fusion::promote_weak(*dx, y.scalar_kind);
      if (e.kind == Kind::where) return fusion::promote_types(*dx, *dy);
      return fusion::ir::result_dtype(e.op, *dx, *dy);
    }
    case Kind::reduce: {
      const auto a = result_dtype(c, e.args[0]);
      return a ? std::optional(fusion::ir::reduction_result_dtype(e.op, *a)) : std::nullopt;
    }
    case Kind::scan: {
      const auto a = result_dtype(c, e.args[0]);
      return a ? std::optional(fusion::ir::scan_result_dtype(e.op, *a)) : std::nullopt;
    }
    case Kind::gather: return result_dtype(c, e.args[0]);
    case Kind::join: {
      std::optional<DType> d;
      for (const Expr& a : e.args) {
        const auto x = result_dtype(c, a);
        if (!x) return std::nullopt;
        d = d ? fusion::promote_types(*d, *x) : *x;
      }
      return d;
    }
    case Kind::pad: return result_dtype(c, e.args[0]);
    case Kind::product: {
      const auto x = result_dtype(c, e.args[0]), y = result_dtype(c, e.args[1]);
      return x && y ? std::optional(fusion::promote_types(*x, *y)) : std::nullopt;
    }
    case Kind::scatter: return c.inputs.at(static_cast<std::size_t>(e.input)).dtype;
    case Kind::call: return user_functions().at(static_cast<std::size_t>(e.function)).result;
    case Kind::random: return random_generators().at(static_cast<std::size_t>(e.function)).result;
  }
  return std::nullopt;
}

namespace {

/// Lowers expression trees into one graph in the order the front end's lower() visits them, and
/// collects the arguments pack() would.
struct Lowering {
  const Case& c;
  Built& b;
  std::string* why;

  struct Result {
    std::uint32_t node;
    Shape shape;
  };

  std::nullopt_t fail(std::string msg) {
    if (why && why->empty()) *why = std::move(msg);
    return std::nullopt;
  }

  std::optional<DType> dtype_of(const Expr& e) const { return result_dtype(c, e); }

  std::optional<Result> scalar(const Expr& e, DType d) {
    fusion::detail::ScalarArg s;
    s.dtype = d;
    if (fusion::is_floating(d)) {
      // the front end converts a literal to the array's type: float, half and bfloat16 travel as float
      const bool wide = d == DType::float64;
      const double v = wide ? e.value : static_cast<double>(static_cast<float>(e.value));
      if (wide) std::memcpy(&s.bits, &v, 8);
      else { const float f = static_cast<float>(v); std::memcpy(&s.bits, &f, 4); }
    } else {
      if (e.scalar_kind == fusion::ScalarKind::floating) return fail("a float literal beside an integer array");
      const auto v = static_cast<std::int64_t>(e.value);
      const test::Scalar n = test::normalize(test::Scalar{0, v}, d);
      if (n.i != v) return fail(fmt::format("the literal {} does not fit {}", v, fusion::dtype_name(d)));
      std::memcpy(&s.bits, &v, fusion::itemsize(d));
    }
    b.scalars.push_back(s);
    return Result{b.graph.scalar(d), Shape{}};
  }

  std::optional<Result> operand(const Expr& e, const std::optional<DType>& partner) {
    if (e.kind != Kind::scalar) return lower(e);
    if (!partner) return fail("an operation between two literals");
    return scalar(e, fusion::promote_weak(*partner, e.scalar_kind));
  }

  /// A gather's or scatter's element offset along `e.axis` of input `in` through the integer expression `index`
  /// (take_index(index, extent) * stride), and the index space: the index broadcast with `in` off the axis.
  struct AxisOffset {
    std::uint32_t offset;
    Shape space;
  };
  std::optional<AxisOffset> axis_offset(const Expr& index, const Input& in, const Expr& e, const std::string& what) {
    fusion::ir::Graph& g = b.graph;
    const Shape shape = shape_of(c, in.dims);
    if (e.axis >= shape.size()) return fail("a " + what + "'s axis beyond its array's rank");
    if (shape[e.axis] == 0) return fail("a " + what + " along an empty axis");
    auto i = lower(index);
    if (!i) return std::nullopt;
    const DType id = g.dtype(i->node);
    if (!fusion::is_integer(id) || id == DType::bool_) return fail("a " + what + "'s index that is not an integer");
    if (i->shape.size() != shape.size()) return fail("a " + what + "'s index of another rank than its array");
    std::int64_t offset;
    fusion::Strides strides;
    view_of(c, in, offset, strides);
    Shape view = shape;
    view[e.axis] = 1;
    auto s = broadcast(i->shape, view);
    if (!s) return std::nullopt;
    const std::uint32_t n = int64_scalar(shape[e.axis]), st = int64_scalar(strides[e.axis]);
    return AxisOffset{g.binary(Op::mul, g.take_index(i->node, n, e.mode), st), *s};
  }

  /// fz::concatenate: the pieces (their slots placed in the join's index space), then the join's scalars (the
  /// axes after the joined one, its extent there, each piece's end but the last's), as Join::lower has them.
  std::optional<Result> join(const Expr& e) {
    fusion::ir::Graph& g = b.graph;
    std::vector<Result> parts;
    std::vector<std::size_t> first;
    for (const Expr& a : e.args) {
      if (a.kind == Kind::scalar) return fail("a literal as a piece");
      first.push_back(b.slot_input.size());
      const std::size_t nodes = g.nodes.size();
      auto r = lower(a);
      if (!r) return std::nullopt;
      for (std::size_t i = nodes; i < g.nodes.size(); ++i)
        if (fusion::ir::takes_descriptor(g.nodes[i].op)) return fail("a reduction or a scan inside a piece");
      parts.push_back(*r);
    }
    first.push_back(b.slot_input.size());
    Shape out = parts[0].shape;
    if (e.axis >= out.size()) return fail("a join's axis beyond its pieces' rank");
    out[e.axis] = 0;
    for (const Result& p : parts) {
      bool same = p.shape.size() == out.size();
      for (int d = 0; same && d < out.size(); ++d) same = d == e.axis || p.shape[d] == out[d];
      if (!same) return fail("pieces of different shapes off the joined axis");
      out[e.axis] += p.shape[e.axis];
    }
    std::vector<std::int64_t> at(static_cast<std::size_t>(out.size()), 0), ends;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      for (std::size_t slot = first[k]; slot < first[k + 1]; ++slot) {
        Built::Placement& p = b.slot_place[slot];
        if (p.join.size() > 0) return fail("a join inside a piece");
        p = {parts[k].shape, out, at};
      }
      at[static_cast<std::size_t>(e.axis)] += parts[k].shape[e.axis];
      ends.push_back(at[static_cast<std::size_t>(e.axis)]);
    }
    const auto d = dtype_of(e);  // (every piece in the join's dtype first, as the front end converts them)
    if (!d) return fail("a join without a dtype");
    for (Result& p : parts) p.node = g.cast(p.node, *d);
    if (parts.size() == 1) return Result{parts[0].node, out};
    const std::uint32_t after = int64_scalar(out.size() - 1 - e.axis), extent = int64_scalar(out[e.axis]);
    std::vector<std::uint32_t> below;
    for (std::size_t k = 0; k + 1 < parts.size(); ++k) below.push_back(g.leading(after, int64_scalar(ends[k]), extent));
    std::vector<std::uint32_t> values;
    for (const Result& p : parts) values.push_back(p.node);
    return Result{fusion::ir::join_tree(g, values.data(), below.data(), static_cast<int>(values.size())), out};
  }

  /// fz::pad as the front end lowers it (fusion/joining.hpp): the piece's arrays placed in the result at the
  /// widths before, then per tested axis (four; an untested one always inside) its position scalars, in the order
  /// after, extent, start, end; the element inside every box takes the piece's value, any other the fill.
  std::optional<Result> pad(const Expr& e) {
    fusion::ir::Graph& g = b.graph;
    const std::size_t first = b.slot_input.size(), nodes = g.nodes.size();
    auto piece = lower(e.args[0]);
    if (!piece) return std::nullopt;
    for (std::size_t i = nodes; i < g.nodes.size(); ++i)
      if (fusion::ir::takes_descriptor(g.nodes[i].op)) return fail("a reduction or a scan inside a padded piece");
    if (static_cast<int>(e.widths.size()) != piece->shape.size()) return fail("pad widths of another rank");
    Shape out = piece->shape;
    std::vector<std::int64_t> where;
    std::vector<std::array<std::int64_t, 4>> tests;
    for (int d = 0; d < out.size(); ++d) {
      const auto [before, after] = e.widths[static_cast<std::size_t>(d)];
      out[d] += before + after;
      where.push_back(before);
      if (before + after > 0) tests.push_back({out.size() - 1 - d, out[d], before, before + piece->shape[d]});
    }
    if (tests.size() > 4) return fail("more than four padded axes");
    while (tests.size() < 4) tests.push_back({-1, 1, 0, 1});
    for (std::size_t slot = first; slot < b.slot_input.size(); ++slot) {
      Built::Placement& p = b.slot_place[slot];
      if (p.join.size() > 0) return fail("a join inside a padded piece");
      p = {piece->shape, out, where};
    }
    const auto d = dtype_of(e);
    if (!d) return fail("a pad without a dtype");
    const std::uint32_t value = g.cast(piece->node, *d);
    std::uint32_t inside = fusion::ir::kNone;
    for (const auto& t : tests) {
      const std::uint32_t after = int64_scalar(t[0]), extent = int64_scalar(t[1]);
      const std::uint32_t start = int64_scalar(t[2]);
      const std::uint32_t before_start = g.leading(after, start, extent);
      const std::uint32_t end = int64_scalar(t[3]);
      const std::uint32_t before_end = g.leading(after, end, extent);
      const std::uint32_t within =
          g.binary(Op::logical_and, before_end, g.unary(Op::logical_not, before_start));
      inside = inside == fusion::ir::kNone ? within : g.binary(Op::logical_and, inside, within);
    }
    Expr literal;
    literal.kind = Kind::scalar;
    literal.value = e.value;
    literal.scalar_kind = fusion::ScalarKind::integer;
    auto fill = scalar(literal, *d);
    if (!fill) return std::nullopt;
    return Result{g.join(inside, value, fill->node), out};
  }

  /// A user function of the table: its arguments (each converted to its parameter), then its slot (pack()'s order).
  std::optional<Result> call(const Expr& e) {
    if (e.function < 0 || e.function >= static_cast<int>(user_functions().size())) return fail("no such function");
    const UserFunction& f = user_functions()[static_cast<std::size_t>(e.function)];
    if (e.args.size() != f.params.size()) return fail("a call with the wrong number of arguments");
    std::uint32_t x[3];
    Shape s;
    for (std::size_t k = 0; k < e.args.size(); ++k) {
      auto a = operand(e.args[k], f.params[k]);
      if (!a) return std::nullopt;
      x[k] = a->node;
      auto joint = broadcast(s, a->shape);
      if (!joint) return std::nullopt;
      s = *joint;
    }
    b.functions.push_back(user_function_id(e.function));
    b.call_table.push_back(e.function);
    return Result{b.graph.call(f.result, x, f.params.data(), static_cast<int>(e.args.size())), s};
  }

  /// fz::random's leaf: its seed and offset (uint64 literals), the index, then its slot.
  std::optional<Result> random(const Expr& e) {
    if (e.function < 0 || e.function >= static_cast<int>(random_generators().size())) return fail("no such generator");
    const std::uint32_t x[3] = {uint64_scalar(e.seed), uint64_scalar(e.offset), b.graph.iota()};
    const fusion::DType params[3] = {DType::uint64, DType::uint64, DType::int64};
    b.functions.push_back(random_generator_id(e.function));
    b.call_table.push_back(-1 - e.function);
    ++randoms;
    // (shapeless, as fz::random's leaves are: the other operand gives the result its shape, which build() checks
    // is the outputs')
    return Result{b.graph.call(random_generators()[static_cast<std::size_t>(e.function)].result, x, params, 3), Shape{}};
  }
  int randoms = 0;

  /// A 64-bit integer literal of dtype `d` (int64 or uint64), as the front end passes one.
  std::uint32_t scalar64(DType d, std::uint64_t v) {
    fusion::detail::ScalarArg a;
    a.dtype = d;
    std::memcpy(&a.bits, &v, 8);
    b.scalars.push_back(a);
    return b.graph.scalar(d);
  }
  std::uint32_t uint64_scalar(std::uint64_t v) { return scalar64(DType::uint64, v); }
  std::uint32_t int64_scalar(std::int64_t v) { return scalar64(DType::int64, static_cast<std::uint64_t>(v)); }

  std::optional<Shape> broadcast(const Shape& x, const Shape& y) {
    try {
      return fusion::broadcast_shapes(x, y);
    } catch (const fusion::ShapeError& err) {
      return fail(err.what());
    }
  }

  std::optional<Result> lower(const Expr& e) {
    if (e.kind == Kind::random && (parent == nullptr || parent != random_parent))
      return fail("a random leaf that is not an operand of output 0's root");
    const Expr* saved = parent;
    parent = &e;
    std::optional<Result> r;
    try {
      r = lower_checked(e);
    } catch (const fusion::TypeError& err) {  // the graph builders refuse what the front end's static_asserts do
      r = fail(err.what());
    }
    parent = saved;
    return r;
  }
  const Expr* parent = nullptr;         // the tree node whose operands are being lowered
  const Expr* random_parent = nullptr;  // output 0's root, where random leaves may be (outside fz::Unfused)

  std::optional<Result> lower_checked(const Expr& e) {
    fusion::ir::Graph& g = b.graph;
    switch (e.kind) {
      case Kind::input: {
        const Input& in = c.inputs.at(static_cast<std::size_t>(e.input));
        b.slot_input.push_back(e.input);
        b.slot_gather_axis.push_back(-1);
        b.slot_place.emplace_back();
        return Result{g.input(in.dtype), shape_of(c, in.dims)};
      }
      case Kind::gather: {
        // fz::take_along_axis: the index, the axis's extent and stride, then the source (pack()'s order)
        if (e.args[0].kind != Kind::input) return fail("a gather from an expression");
        const Input& in = c.inputs.at(static_cast<std::size_t>(e.args[0].input));
        auto at = axis_offset(e.args[1], in, e, "gather");
        if (!at) return std::nullopt;
        b.slot_input.push_back(e.args[0].input);
        b.slot_gather_axis.push_back(e.axis);
        b.slot_place.emplace_back();
        return Result{g.gather(at->offset, g.input(in.dtype)), at->space};
      }
      case Kind::scatter: {
        // fz::scatter_add and kin: the index, the axis's extent and stride, then the values (pack()'s order)
        const Input& target = c.inputs.at(static_cast<std::size_t>(e.input));
        auto at = axis_offset(e.args[0], target, e, "scatter");
        if (!at) return std::nullopt;
        auto values = operand(e.args[1], target.dtype);
        if (!values) return std::nullopt;
        auto s = broadcast(at->space, values->shape);
        if (!s) return std::nullopt;
        if (s->size() != at->space.size()) return fail("values of a higher rank than the scatter's target");
        return Result{g.scatter(e.op, at->offset, values->node, target.dtype), shape_of(c, target.dims)};
      }
      case Kind::join: return join(e);
      case Kind::pad: return pad(e);
      case Kind::product: {
        if (e.args[0].kind == Kind::scalar || e.args[1].kind == Kind::scalar) return fail("a literal in a product");
        auto x = lower(e.args[0]);
        if (!x) return std::nullopt;
        auto y = lower(e.args[1]);
        if (!y) return std::nullopt;
        const DType d = fusion::promote_types(g.dtype(x->node), g.dtype(y->node));
        if (!fusion::is_floating(d)) return fail("a product of integers (fz::matmul refuses them)");
        Shape s;
        try {
          s = fusion::detail::matmul_shape(x->shape, y->shape);
        } catch (const fusion::ShapeError& err) {
          return fail(err.what());
        }
        return Result{g.product(x->node, y->node, d), s};
      }
      case Kind::call: return call(e);
      case Kind::random: return random(e);
      case Kind::scalar: return fail("a literal on its own");
      case Kind::cast: {
        auto a = lower(e.args[0]);
        if (!a) return std::nullopt;
        return Result{g.explicit_cast(a->node, e.dtype), a->shape};
      }
      case Kind::unary: {
        auto a = lower(e.args[0]);
        if (!a) return std::nullopt;
        return Result{g.unary(e.op, a->node), a->shape};
      }
      case Kind::binary: {
        auto x = operand(e.args[0], dtype_of(e.args[1]));
        if (!x) return std::nullopt;
        auto y = operand(e.args[1], g.dtype(x->node));
        if (!y) return std::nullopt;
        auto s = broadcast(x->shape, y->shape);
        if (!s) return std::nullopt;
        return Result{g.binary(e.op, x->node, y->node), *s};
      }
      case Kind::where: {
        if (e.args[0].kind == Kind::scalar) return fail("a literal condition");
        auto k = lower(e.args[0]);
        if (!k) return std::nullopt;
        auto x = operand(e.args[1], dtype_of(e.args[2]));
        if (!x) return std::nullopt;
        auto y = operand(e.args[2], g.dtype(x->node));
        if (!y) return std::nullopt;
        auto s = broadcast(k->shape, x->shape);
        if (s) s = broadcast(*s, y->shape);
        if (!s) return std::nullopt;
        return Result{g.where(k->node, x->node, y->node), *s};
      }
      case Kind::reduce: {
        auto a = lower(e.args[0]);
        if (!a) return std::nullopt;
        const int rank = a->shape.size();
        fusion::detail::ReduceArg arg;
        arg.keepdims = e.keepdims;
        Shape out;
        if (e.all_axes) {
          arg.n_axes = -1;
        } else {
          if (e.axes >> rank) return fail("a reduction axis beyond the operand's rank");
          arg.n_axes = 0;
          for (int d = 0; d < rank; ++d)
            if ((e.axes >> d) & 1)
              arg.axes[static_cast<std::size_t>(arg.n_axes++)] =
                  static_cast<std::int8_t>(e.negative_axes ? d - rank : d);
          if (arg.n_axes > 1 && (e.op == Op::argmin || e.op == Op::argmax)) return fail("argmin/argmax take one axis");
        }
        for (int d = 0; d < rank; ++d) {
          const bool reduced = e.all_axes || ((e.axes >> d) & 1);
          if (!reduced) out.push_back(a->shape[d]);
          else if (e.keepdims) out.push_back(1);
        }
        b.reductions.push_back(arg);
        const DType in = g.dtype(a->node);
        return Result{g.reduce(e.op, a->node, fusion::ir::reduction_result_dtype(e.op, in)), out};
      }
      case Kind::scan: {
        auto a = lower(e.args[0]);
        if (!a) return std::nullopt;
        const int rank = a->shape.size();
        if (e.axis >= rank) return fail("a scan's axis beyond the operand's rank");
        // Exact scans only: a floating running sum's rounding is checked by its own tests (test_scans_gpu)
        if (e.op == Op::cumsum && fusion::is_floating(g.dtype(a->node))) return fail("a floating cumsum");
        if (e.exclusive && e.op != Op::cumsum) return fail("an exclusive running maximum or minimum");
        fusion::detail::ReduceArg arg;
        arg.n_axes = 1;
        arg.axes[0] = static_cast<std::int8_t>(e.negative_axes ? e.axis - rank : e.axis);
        arg.exclusive = e.exclusive;
        arg.reverse = e.reverse;
        b.reductions.push_back(arg);
        return Result{g.scan(e.op, a->node), a->shape};
      }
    }
    return fail("unknown node");
  }
};

}  // namespace

std::optional<Built> build(const Case& c, std::string* why) {
  Built b;
  Lowering l{c, b, why};
  b.out_shape = shape_of(c, c.out_dims);
  if (c.outputs.empty()) return l.fail("no outputs");
  auto nested_scatter = [](auto& self, const Expr& e) -> bool {
    for (const Expr& a : e.args)
      if (a.kind == Kind::scatter || self(self, a)) return true;
    return false;
  };
  const Expr& root = c.outputs[0];
  if (!c.unfused && (root.kind == Kind::binary || root.kind == Kind::where)) l.random_parent = &root;
  for (const Expr& e : c.outputs) {
    if (nested_scatter(nested_scatter, e) || (e.kind == Kind::scatter && c.outputs.size() > 1))
      return l.fail("a scatter is a statement: the case's only tree");
    auto r = l.lower(e);
    if (!r) return std::nullopt;
    b.graph.outputs.push_back(r->node);
    b.result_shapes.push_back(r->shape);
    // a random leaf draws at the flat index of the outputs (the reference's index space): its result must be theirs
    if (l.randoms > 0 && !(r->shape == b.out_shape)) return l.fail("a random leaf in a result of another shape");
    if (e.kind == Kind::scatter) {  // written in place: the target is the output
      b.out_shape = r->shape;
      b.scatter_target = e.input;
      for (int k : b.slot_input)
        if (k == e.input) return l.fail("a scatter whose values or index read its target");
      continue;
    }
    // Outputs are written at out_shape: each result must broadcast to it (fresh: equal it).
    auto s = l.broadcast(r->shape, b.out_shape);
    if (!s) return std::nullopt;
    if (!(*s == b.out_shape) || (!c.into && !(r->shape == b.out_shape)))
      return l.fail(fmt::format("a result of shape {} cannot be written at {}", fusion::to_string(r->shape),
                                fusion::to_string(b.out_shape)));
  }
  for (const Input& in : c.inputs)
    if (fusion::numel(base_shape(c, in)) > (std::int64_t{1} << 24)) return l.fail("an input over 2^24 elements");
  // outputs written into inputs: each into its own input, which holds exactly the output's shape and dtype
  if (c.alias.size() > c.outputs.size()) return l.fail("more aliased outputs than outputs");
  for (std::size_t k = 0; k < c.alias.size(); ++k) {
    const int a = c.alias[k];
    if (a < 0) continue;
    if (!c.into || b.scatter_target >= 0 || a >= static_cast<int>(c.inputs.size()))
      return l.fail("an aliased output without an input to write into");
    for (std::size_t j = 0; j < k; ++j)
      if (c.alias[j] == a) return l.fail("two outputs written into one input");
    const Input& in = c.inputs[static_cast<std::size_t>(a)];
    if (in.dtype != b.graph.dtype(b.graph.outputs[k]) || !(shape_of(c, in.dims) == b.out_shape))
      return l.fail("an aliased output into an input of another dtype or shape");
  }
  return b;
}

int size(const Case& c) {
  int n = 0;
  auto count = [&](auto& self, const Expr& e) -> void {
    ++n;
    for (const Expr& a : e.args) self(self, a);
  };
  for (const Expr& e : c.outputs) count(count, e);
  return n;
}

}  // namespace fuzz
