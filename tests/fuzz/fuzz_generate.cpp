// SPDX-License-Identifier: Apache-2.0
// Random, well-typed cases. Shapes are built top-down: every subtree is generated for a target shape
// it must broadcast to, so a reduction inside an expression gets an operand with extra (reduced) axes.
#include <random>

#include "fuzz_case.hpp"
#include "fuzz_functions.hpp"

namespace fuzz {

namespace {

using fusion::ir::Arity;

struct Generator {
  std::mt19937_64 rng;
  Case& c;
  GenOptions o;
  int reductions = 0;
  int in_piece = 0;  // inside a join's piece: no reduction, scan or join
  int products = 0;
  bool sixteen_products = false;  // every product's operands one 16-bit dtype (GenOptions::generated_products)
  bool long_k = false;            // ... and K of 512 to 2,048 over a result of a few rows (the Hopper path's K split)
  int contiguous_leaves = 0;  // new leaves contiguous (a join cut on vectors, half the time: its rows kernel's pieces)

  int pick(int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

  /// Half the arrays contiguous, the rest transposed, reversed or strided views.
  Layout layout() {
    const int l = pick(10);
    return l < 5 ? Layout::contiguous : l < 7 ? Layout::transposed : l < 9 ? Layout::reversed : Layout::strided;
  }

  DType random_dtype() {
    static const DType common[] = {DType::float32, DType::float32, DType::float32, DType::float64, DType::float64,
                                   DType::int32,   DType::int32,   DType::int64,   DType::float16, DType::bfloat16};
    if (chance(0.75)) return common[pick(static_cast<int>(std::size(common)))];
    return static_cast<DType>(pick(fusion::kNumDTypes));  // any, bool and the narrow integers included
  }

  std::int64_t numel(const std::vector<int>& dims) const { return fusion::numel(shape_of(c, dims)); }

  /// A new dimension variable whose extent keeps `with` (plus it) within the element budget.
  int new_dim(const std::vector<int>& with) {
    const std::int64_t room = std::max<std::int64_t>(1, o.max_elements / std::max<std::int64_t>(1, numel(with)));
    std::int64_t n;
    const int r = pick(100);
    if (r < 3) n = 0;
    else if (r < 18) n = 1;
    else if (r < 75) n = 2 + pick(7);
    else if (r < 93) n = 9 + pick(32);
    else n = 41 + pick(160);
    c.dim_sizes.push_back(std::min(n, room));
    return static_cast<int>(c.dim_sizes.size() - 1);
  }

  bool broadcasts_to(const std::vector<int>& dims, const std::vector<int>& target) const {
    if (dims.size() > target.size()) return false;
    const fusion::Shape s = shape_of(c, dims), t = shape_of(c, target);
    for (int k = 1; k <= s.size(); ++k)
      if (s[s.size() - k] != 1 && s[s.size() - k] != t[t.size() - k]) return false;
    return true;
  }

  /// `full`: the leaf must have the target's rank (a reduction's operand needs its axes to exist).
  /// In a join's piece, the leaf a `full` chain reaches has exactly the target's shape (so has the piece, as
  /// fz::concatenate requires).
  Expr input_leaf(const std::vector<int>& target, bool full) {
    const bool exact = full && in_piece > 0;
    std::vector<int> fits;
    for (std::size_t k = 0; k < c.inputs.size(); ++k)
      if (broadcasts_to(c.inputs[k].dims, target) && (!full || c.inputs[k].dims.size() == target.size()) &&
          (!exact || c.inputs[k].dims == target))
        fits.push_back(static_cast<int>(k));
    Expr e;
    e.kind = Kind::input;
    if (!fits.empty() && (c.inputs.size() >= 8 || chance(0.4))) {
      e.input = fits[static_cast<std::size_t>(pick(static_cast<int>(fits.size())))];
      return e;
    }
    Input in;
    in.dtype = random_dtype();
    const std::size_t drop = full || target.empty() || chance(0.8) ? 0 : 1 + pick(static_cast<int>(target.size()));
    for (std::size_t k = drop; k < target.size(); ++k) in.dims.push_back(!exact && chance(0.15) ? -1 : target[k]);
    in.layout = contiguous_leaves > 0 ? Layout::contiguous : layout();
    in.seed = rng();
    c.inputs.push_back(in);
    e.input = static_cast<int>(c.inputs.size() - 1);
    return e;
  }

  Expr literal() {
    Expr e;
    e.kind = Kind::scalar;
    const int k = pick(10);
    e.scalar_kind = k < 5   ? fusion::ScalarKind::integer
                    : k < 9 ? fusion::ScalarKind::floating
                            : fusion::ScalarKind::boolean;
    if (e.scalar_kind == fusion::ScalarKind::integer) e.value = pick(8);
    else if (e.scalar_kind == fusion::ScalarKind::floating) e.value = 0.25 * (pick(33) - 16);
    else e.value = pick(2);
    return e;
  }

  static Expr wrap(Kind kind, Op op, std::vector<Expr> args) {
    Expr e;
    e.kind = kind;
    e.op = op;
    e.args = std::move(args);
    return e;
  }
  static Expr cast(Expr a, DType to) {
    Expr e = wrap(Kind::cast, Op::cast, {std::move(a)});
    e.dtype = to;
    return e;
  }
  DType integer_dtype() {
    static const DType ints[] = {DType::int8,  DType::int16,  DType::int32, DType::int64,
                                 DType::uint8, DType::uint32, DType::bool_};
    return ints[pick(static_cast<int>(std::size(ints)))];
  }

  Op unary_op() {
    return static_cast<Op>(static_cast<int>(Op::neg) + pick(static_cast<int>(Op::signbit) - static_cast<int>(Op::neg) + 1));
  }
  Op binary_op() {
    return static_cast<Op>(static_cast<int>(Op::add) + pick(static_cast<int>(Op::logical_or) - static_cast<int>(Op::add) + 1));
  }

  Expr unary(const std::vector<int>& target, int depth, bool full) {
    const Op op = unary_op();
    return unary_of(op, gen(target, depth - 1, full));
  }
  /// `op` of `a`, which is cast first where `op` does not take its dtype.
  Expr unary_of(Op op, Expr a) {
    const DType d = *dtype(a);
    if (!fusion::ir::accepts(op, d))
      a = cast(std::move(a), fusion::ir::is_bitwise(op) ? integer_dtype() : DType::int16);
    return wrap(Kind::unary, op, {std::move(a)});
  }

  Expr binary(const std::vector<int>& target, int depth, bool full) {
    const Op op = binary_op();
    Expr a = gen(target, depth - 1, full), b = gen(target, depth - 1);
    if (chance(0.2)) b = literal();
    return binary_of(op, std::move(a), std::move(b));
  }
  /// `op` of `a` and `b` in either order, both made integers where `op` does not take their dtypes.
  Expr binary_of(Op op, Expr a, Expr b) {
    if (chance(0.4)) std::swap(a, b);
    const auto da = dtype(a), db = dtype(b);
    const DType xa = da ? *da : fusion::promote_weak(*db, a.scalar_kind),
                xb = db ? *db : fusion::promote_weak(*da, b.scalar_kind);
    if (!fusion::ir::accepts(op, xa, xb)) {
      // make both operands integers (a literal stays: it adopts its partner's dtype)
      const DType to = fusion::ir::is_bitwise(op) ? integer_dtype() : DType::int32;
      if (a.kind == Kind::scalar && a.scalar_kind == fusion::ScalarKind::floating)
        a.scalar_kind = fusion::ScalarKind::integer, a.value = 3;
      if (b.kind == Kind::scalar && b.scalar_kind == fusion::ScalarKind::floating)
        b.scalar_kind = fusion::ScalarKind::integer, b.value = 2;
      if (a.kind != Kind::scalar) a = cast(std::move(a), to);
      if (b.kind != Kind::scalar) b = cast(std::move(b), to);
    }
    return wrap(Kind::binary, op, {std::move(a), std::move(b)});
  }

  Expr reduce(const std::vector<int>& target, int depth, bool full) {
    static const Op ops[] = {Op::sum, Op::sum, Op::sum, Op::prod, Op::min, Op::max, Op::nanmin, Op::nanmax,
                             Op::argmin, Op::argmax, Op::any, Op::all, Op::mean, Op::mean, Op::var};
    Expr e = wrap(Kind::reduce, ops[pick(static_cast<int>(std::size(ops)))], {});
    e.keepdims = chance(0.4);
    e.negative_axes = chance(0.3);
    const bool arg = e.op == Op::argmin || e.op == Op::argmax;
    std::vector<int> dims;
    if ((chance(0.25) && !(full && !target.empty())) || target.size() >= 6) {
      // over every axis: a 0-d result (or all ones with keepdims), broadcast against anything
      e.all_axes = true;
      // a full-rank result (deep inside a reduction) keeps every axis: as many as the target has
      e.keepdims = (e.keepdims || full) && !target.empty();
      const int rank = full && e.keepdims ? static_cast<int>(target.size())
                       : e.keepdims     ? 1 + pick(static_cast<int>(std::min<std::size_t>(3, target.size())))
                                        : 1 + pick(3);
      for (int k = 0; k < rank; ++k) dims.push_back(new_dim(dims));
    } else if (e.keepdims && !target.empty()) {
      dims = target;  // reduce one or two axes of the target: their extent-1 results broadcast back
      const int n = arg ? 1 : 1 + pick(2);
      for (int k = 0; k < n; ++k) {
        const int axis = pick(static_cast<int>(dims.size()));
        if ((e.axes >> axis) & 1) continue;
        std::vector<int> others = dims;
        others.erase(others.begin() + axis);
        dims[static_cast<std::size_t>(axis)] = new_dim(others);
        e.axes |= 1u << axis;
      }
    } else {
      e.keepdims = false;  // insert one or two reduced axes
      dims = target;
      const int n = arg ? 1 : 1 + pick(2);
      for (int k = 0; k < n; ++k) {
        const int axis = pick(static_cast<int>(dims.size()) + 1);
        dims.insert(dims.begin() + axis, new_dim(dims));
        // earlier reduced axes at or after `axis` move one up
        unsigned moved = 0;
        for (int d = 0; d < 8; ++d)
          if ((e.axes >> d) & 1) moved |= 1u << (d >= axis ? d + 1 : d);
        e.axes = moved | (1u << axis);
      }
    }
    ++reductions;
    e.args.push_back(gen(dims, depth - 1, true));
    return e;
  }

  /// A reduction whose result meets its own operand again along the reduced axes (softmax's
  /// `x - max(x, -1, true)`, layer norm's `x - mean(x)`): the pattern layer kernels run in one pass.
  Expr feedback(const std::vector<int>& target, int depth) {
    static const Op ops[] = {Op::sum, Op::max, Op::min, Op::mean, Op::var, Op::nanmax, Op::prod};
    static const Op meet[] = {Op::sub, Op::div, Op::add, Op::mul, Op::maximum};
    Expr x = gen(target, depth - 1, true);
    Expr r = wrap(Kind::reduce, ops[pick(static_cast<int>(std::size(ops)))], {});
    r.keepdims = true;
    r.negative_axes = chance(0.3);
    const int n = 1 + pick(std::min(2, static_cast<int>(target.size())));
    for (int k = 0; k < n; ++k) r.axes |= 1u << pick(static_cast<int>(target.size()));
    ++reductions;
    r.args.push_back(x);  // the same subexpression, the same arrays
    Expr a = std::move(x), b = std::move(r);
    if (chance(0.3)) std::swap(a, b);
    const Op op = meet[pick(static_cast<int>(std::size(meet)))];
    const auto da = dtype(a), db = dtype(b);
    if (da && db && !fusion::ir::accepts(op, *da, *db))
      return wrap(Kind::binary, Op::sub, {cast(std::move(a), DType::float32), cast(std::move(b), DType::float32)});
    return wrap(Kind::binary, op, {std::move(a), std::move(b)});
  }

  /// A running maximum, minimum or (of integers) sum along one axis of an operand of the target's rank.
  Expr scan(const std::vector<int>& target, int depth) {
    Expr x = gen(target, depth - 1, true);
    const auto d = dtype(x);
    const bool exact_sum = d && !fusion::is_floating(*d);
    static const Op ops[] = {Op::cummax, Op::cummin, Op::cumsum};
    Expr e = wrap(Kind::scan, ops[pick(exact_sum ? 3 : 2)], {std::move(x)});
    e.axis = pick(static_cast<int>(target.size()));
    e.negative_axes = chance(0.3);
    e.reverse = chance(0.4);
    e.exclusive = e.op == Op::cumsum && chance(0.4);
    ++reductions;
    return e;
  }

  /// fz::concatenate of 2 or 3 pieces along a random axis: the target's extent there cut into theirs (each a new
  /// dimension; some may be empty), each piece an expression of its own shape with no reduction, scan or join.
  Expr join(const std::vector<int>& target, int depth) {
    const int axis = pick(static_cast<int>(target.size()));
    const std::int64_t total = c.dim_sizes[static_cast<std::size_t>(target[static_cast<std::size_t>(axis)])];
    const int n = 2 + pick(2);
    std::vector<std::int64_t> cuts{0, total};
    // (half the joins cut on multiples of 8: along a row of whole vectors a rows kernel then chooses a piece per
    // vector, Variant::vector_joins)
    const bool on_vectors = chance(0.5);
    for (int k = 1; k < n; ++k) {
      const std::int64_t cut = total == 0 ? 0 : pick(static_cast<int>(total) + 1);
      cuts.push_back(on_vectors ? cut - cut % 8 : cut);
    }
    std::sort(cuts.begin(), cuts.end());
    Expr e;
    e.kind = Kind::join;
    e.op = Op::concatenate;
    e.axis = axis;
    ++in_piece;
    if (on_vectors) ++contiguous_leaves;
    for (int k = 0; k < n; ++k) {
      std::vector<int> t = target;
      c.dim_sizes.push_back(cuts[static_cast<std::size_t>(k) + 1] - cuts[static_cast<std::size_t>(k)]);
      t[static_cast<std::size_t>(axis)] = static_cast<int>(c.dim_sizes.size() - 1);
      e.args.push_back(gen(t, depth - 1, true));
    }
    --in_piece;
    if (on_vectors) --contiguous_leaves;
    return e;
  }

  /// fz::pad of a piece with the target's shape less the widths drawn (half the axes padded, by up to the whole
  /// extent), by a literal that fits the piece's dtype.
  Expr pad(const std::vector<int>& target, int depth) {
    Expr e;
    e.kind = Kind::pad;
    e.op = Op::concatenate;
    std::vector<int> t = target;
    for (std::size_t d = 0; d < target.size(); ++d) {
      const std::int64_t extent = c.dim_sizes[static_cast<std::size_t>(target[d])];
      std::int64_t before = 0, after = 0;
      if (extent > 0 && chance(0.5)) {
        before = pick(static_cast<int>(extent) + 1);
        after = pick(static_cast<int>(extent - before) + 1);
        if (chance(0.3)) before -= before % 4, after -= after % 4;  // (on vectors: as the joins above)
      }
      e.widths.emplace_back(before, after);
      if (before + after == 0) continue;
      c.dim_sizes.push_back(extent - before - after);
      t[d] = static_cast<int>(c.dim_sizes.size() - 1);
    }
    ++in_piece;
    e.args.push_back(gen(t, depth - 1, true));
    --in_piece;
    const auto d = dtype(e.args[0]);
    e.value = d && (*d == DType::bool_) ? pick(2) : pick(4);
    return e;
  }

  /// fz::matmul whose result is the target's last two axes (a third, batch, axis half the time where the target has
  /// one; with `full`, all the target's axes): operands of (batch, rows, k) and (k, columns) or (batch, k, columns), k a new extent (0 and 1 among them),
  /// each an expression of its own, cast to a floating dtype where it is not one. The operands are drawn as a
  /// join's pieces are (elementwise, their leaves of exactly their shape): a broadcast k would not line up.
  Expr product(const std::vector<int>& target, int depth, bool full) {
    ++products;
    const std::size_t r = target.size();
    std::vector<int> lead;  // the batch axes, if any: all of the target's where the result must have its rank
    if (full) lead.assign(target.begin(), target.end() - 2);
    else if (r >= 3 && chance(0.5)) lead.push_back(target[r - 3]);
    std::vector<int> a = lead, b = chance(0.5) ? lead : std::vector<int>{};
    const int k = new_dim({target[r - 2], target[r - 1]});
    c.dim_sizes[static_cast<std::size_t>(k)] = std::min<std::int64_t>(c.dim_sizes[static_cast<std::size_t>(k)], 64);
    if (sixteen_products) {  // (GenOptions::generated_products: K whole 16-byte rows mostly, the Hopper path's; one step or five)
      static const std::int64_t ks[] = {1, 3, 8, 16, 64, 72, 100, 128, 192, 320};
      // (the float64 reference holds every product a_ik * b_kj: 2^20 of them at most, a few seconds)
      const std::int64_t most = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / std::max<std::int64_t>(1, numel(target)));
      static const std::int64_t long_ks[] = {512, 520, 1024, 2048};
      const std::int64_t drawn = long_k ? long_ks[pick(static_cast<int>(std::size(long_ks)))] : ks[pick(static_cast<int>(std::size(ks)))];
      c.dim_sizes[static_cast<std::size_t>(k)] = std::min(drawn, most > 8 ? most / 8 * 8 : most);
    }
    a.insert(a.end(), {target[r - 2], k});
    b.insert(b.end(), {k, target[r - 1]});
    ++in_piece;
    Expr x = gen(a, depth - 1, true), y = gen(b, depth - 1, true);
    --in_piece;
    static const DType floats[] = {DType::float32, DType::float32, DType::float64, DType::float16, DType::bfloat16};
    // 16-bit operands a third of the time (the products fusion generates itself, under Case::generated)
    const DType half = chance(0.5) ? DType::bfloat16 : DType::float16;
    const bool sixteen = chance(0.35) || sixteen_products;
    for (Expr* e : {&x, &y}) {
      const auto d = dtype(*e);
      if (sixteen && d != half) *e = cast(std::move(*e), half);
      else if (!d || !fusion::is_floating(*d)) *e = cast(std::move(*e), floats[pick(static_cast<int>(std::size(floats)))]);
    }
    return wrap(Kind::product, Op::matmul, {std::move(x), std::move(y)});
  }

  /// take_along_axis of a new input of the target's rank (its own extent along the axis) through an integer
  /// index expression of the target's rank, in the wrap or clip mode.
  Expr gather(const std::vector<int>& target, int depth) {
    const int axis = pick(static_cast<int>(target.size()));
    Input in;
    in.dtype = random_dtype();
    in.dims = target;
    std::vector<int> others = target;
    others.erase(others.begin() + axis);
    in.dims[static_cast<std::size_t>(axis)] = new_dim(others);
    c.dim_sizes.back() = std::max<std::int64_t>(c.dim_sizes.back(), 1);  // a gather needs something to read
    in.layout = layout();
    in.seed = rng();
    c.inputs.push_back(in);
    Expr source;
    source.kind = Kind::input;
    source.input = static_cast<int>(c.inputs.size() - 1);
    Expr index = gen(target, depth - 1, true);
    const auto d = dtype(index);
    if (!d || !fusion::is_integer(*d) || *d == DType::bool_) index = cast(std::move(index), chance(0.5) ? DType::int32 : DType::int64);
    Expr e = wrap(Kind::gather, Op::gather, {std::move(source), std::move(index)});
    e.axis = axis;
    e.mode = chance(0.5) ? fusion::ir::IndexMode::wrap : fusion::ir::IndexMode::clip;
    return e;
  }

  /// A scatter case: scatter_add, scatter_max or scatter_min into a new target input of rank 1 to 3 (at least one
  /// element along the axis), the index and the values expressions over the index space (the target's shape with
  /// its own extent along the axis), in the wrap or clip mode; a floating sum under fz::Deterministic half the time.
  void scatter_case(int depth) {
    static const DType targets[] = {DType::float32, DType::float32, DType::float64, DType::float16, DType::bfloat16,
                                    DType::int32,   DType::int64,   DType::uint32,  DType::uint64};
    static const Op ops[] = {Op::scatter_add, Op::scatter_add, Op::scatter_max, Op::scatter_min};
    const int rank = 1 + pick(3);
    Input target;
    target.dtype = targets[pick(static_cast<int>(std::size(targets)))];
    for (int k = 0; k < rank; ++k) target.dims.push_back(new_dim(target.dims));
    Expr e = wrap(Kind::scatter, ops[pick(static_cast<int>(std::size(ops)))], {});
    e.axis = pick(rank);
    e.mode = chance(0.5) ? fusion::ir::IndexMode::wrap : fusion::ir::IndexMode::clip;
    auto& bins = c.dim_sizes[static_cast<std::size_t>(target.dims[static_cast<std::size_t>(e.axis)])];
    bins = std::max<std::int64_t>(bins, 1);
    target.layout = layout();
    target.seed = rng();
    c.out_dims = target.dims;
    std::vector<int> space = target.dims;
    std::vector<int> others = target.dims;
    others.erase(others.begin() + e.axis);
    space[static_cast<std::size_t>(e.axis)] = new_dim(others);
    // (no reductions or scans inside: fz::scatter_add evaluates such operands first, into arrays, as the
    // harness's one scatter call cannot; test_scatter_gpu checks that)
    reductions = 3;
    Expr index = gen(space, depth - 1, true);
    const auto d = dtype(index);
    if (!d || !fusion::is_integer(*d) || *d == DType::bool_) index = cast(std::move(index), chance(0.5) ? DType::int32 : DType::int64);
    Expr values = chance(0.1) ? literal() : gen(space, depth - 1);
    c.inputs.push_back(target);  // (after the trees: they never read it)
    e.input = static_cast<int>(c.inputs.size() - 1);
    e.args = {std::move(index), std::move(values)};
    c.outputs = {std::move(e)};
    c.into = true;
    c.deterministic = chance(0.5);
  }

  /// A call of one of user_functions(), each argument an expression that broadcasts to the target.
  Expr call(const std::vector<int>& target, int depth, bool full) {
    Expr e;
    e.kind = Kind::call;
    e.op = Op::call;
    e.function = pick(static_cast<int>(user_functions().size()));
    const std::size_t n = user_functions()[static_cast<std::size_t>(e.function)].params.size();
    for (std::size_t k = 0; k < n; ++k) e.args.push_back(gen(target, depth - 1, full && k == 0));
    return e;
  }

  /// A row layer as models write it, over a new floating input of the target's shape (rows along its last axis):
  /// softmax, layer norm, RMSNorm or x - max(x) (the layer kernels' own patterns, which the cluster layout takes).
  Expr classic_row(const std::vector<int>& target) {
    static const DType floats[] = {DType::float32, DType::float32, DType::float16, DType::bfloat16, DType::float64};
    Input in;
    in.dtype = floats[pick(static_cast<int>(std::size(floats)))];
    in.dims = target;
    in.layout = chance(0.8) ? Layout::contiguous : layout();
    in.seed = rng();
    in.values = Values::simple;  // (exp of rich values overflows: every element would be left out)
    c.inputs.push_back(in);
    Expr x;
    x.input = static_cast<int>(c.inputs.size() - 1);
    if (chance(0.3)) x = wrap(Kind::binary, Op::mul, {x, literal_of(0.5)});  // a fused prologue
    auto row = [&](Op op, Expr a) {
      Expr r = wrap(Kind::reduce, op, {std::move(a)});
      r.axes = 1u << (target.size() - 1);
      r.keepdims = true;
      r.negative_axes = chance(0.5);
      ++reductions;
      return r;
    };
    switch (pick(4)) {
      case 0: {  // softmax
        Expr e = wrap(Kind::unary, Op::exp, {wrap(Kind::binary, Op::sub, {x, row(Op::max, x)})});
        return wrap(Kind::binary, Op::div, {e, row(Op::sum, e)});
      }
      case 1: {  // layer norm
        Expr d = wrap(Kind::binary, Op::sub, {x, row(Op::mean, x)});
        return wrap(Kind::binary, Op::div,
                    {d, wrap(Kind::unary, Op::sqrt, {wrap(Kind::binary, Op::add, {row(Op::var, x), literal_of(0.25)})})});
      }
      case 2:  // RMSNorm
        return wrap(Kind::binary, Op::mul,
                    {x, wrap(Kind::unary, Op::rsqrt,
                             {wrap(Kind::binary, Op::add, {row(Op::mean, wrap(Kind::binary, Op::mul, {x, x})), literal_of(0.25)})})});
      default: return wrap(Kind::binary, Op::sub, {x, row(Op::max, x)});
    }
  }
  static Expr literal_of(double v) {
    Expr e;
    e.kind = Kind::scalar;
    e.scalar_kind = fusion::ScalarKind::floating;
    e.value = v;
    return e;
  }

  std::optional<DType> dtype(const Expr& e) const { return result_dtype(c, e); }

  /// An expression that broadcasts to `target`; with `full`, one of exactly its rank.
  Expr gen(const std::vector<int>& target, int depth, bool full = false) {
    if (depth <= 0 || chance(0.12)) return input_leaf(target, full);
    if (o.products && products < 2 && in_piece == 0 && target.size() >= 2 && chance(0.08)) return product(target, depth, full);
    if (o.calls && chance(0.08)) return call(target, depth, full);
    const int r = pick(100);
    if (r < 30) return unary(target, depth, full);
    if (r < 72) return binary(target, depth, full);
    if (r < 80) return cast(gen(target, depth - 1, full), random_dtype());
    if (r < 87) {
      Expr x = gen(target, depth - 1, full), y = gen(target, depth - 1);
      if (chance(0.15)) y = literal();
      if (chance(0.4)) std::swap(x, y);
      return wrap(Kind::where, Op::where, {gen(target, depth - 1), std::move(x), std::move(y)});
    }
    if (in_piece > 0) {  // (a piece computes its own elements alone; a join's index or source may gather)
      if (o.gathers && !target.empty() && c.inputs.size() < 12 && chance(0.35)) return gather(target, depth);
      return unary(target, depth, full);
    }
    if (o.joins && !target.empty() && c.inputs.size() < 12 && chance(0.3))
      return chance(0.3) ? pad(target, depth) : join(target, depth);
    if (o.scans && reductions < 3 && !target.empty() && chance(0.25)) return scan(target, depth);
    if (o.gathers && !target.empty() && c.inputs.size() < 12 && chance(0.35)) return gather(target, depth);
    if (reductions < 3 && !target.empty() && chance(0.4)) return feedback(target, depth);
    if (reductions < 3) return reduce(target, depth, full);
    return unary(target, depth, full);
  }

  /// GenOptions::tall_columns: a reduction over the rows of a tall matrix (1,024 to 4,097 rows, 1 to 257 columns) of any
  /// expression, sometimes met by an input or literal after it: the grouped column kernels, whose row ranges are the
  /// blocks of a cluster where a split would cut each column tile 16 or more ways (schedule/reduce_layout.cpp), and
  /// the split over blocks where it would not.
  void tall_columns_case() {
    static const std::int64_t rows[] = {1024, 1500, 2048, 3001, 4097};
    static const std::int64_t columns[] = {1, 7, 64, 64, 70, 96, 128, 128, 200, 257};  // (fewer than 64: a thread a row)
    static const Op ops[] = {Op::sum, Op::sum, Op::mean, Op::var, Op::max, Op::min, Op::nanmax, Op::argmax, Op::argmin,
                             Op::any};
    c.dim_sizes = {rows[pick(static_cast<int>(std::size(rows)))], columns[pick(static_cast<int>(std::size(columns)))]};
    o.max_elements = c.dim_sizes[0] * c.dim_sizes[1];
    Expr r = wrap(Kind::reduce, ops[pick(static_cast<int>(std::size(ops)))], {});
    r.axes = 1u;  // the rows
    r.negative_axes = chance(0.3);
    ++reductions;
    r.args.push_back(gen({0, 1}, 1 + pick(3), true));
    c.out_dims = {1};
    c.outputs.push_back(chance(0.5) ? std::move(r)
                                    : binary_of(binary_op(), std::move(r), chance(0.3) ? literal() : input_leaf({1}, false)));
    c.into = chance(0.5);
    if (!c.into) {
      auto b = build(c);
      if (!b || !(b->result_shapes[0] == b->out_shape)) c.into = true;
    }
    if (c.into) c.out_layout = layout();
  }

  /// GenOptions::generated_products: a product of two 16-bit expressions (K of 1 to 320 or 512 to 2,048, 2^20 products at most; results of up to 300 x 520,
  /// batched a third of the time), then one to three elementwise steps meeting new inputs (a bias, a residual, any
  /// broadcast) or literals, as fusion's own kernel (Case::generated): what its epilogue and its tile edges must
  /// get right. The result's extents are drawn from the ones at and around tile edges; a fifth of the cases are a few
  /// rows and columns over K of 512 to 2,048, which the Hopper path splits over blocks (its default fill only: the
  /// fuzz stage's product_large_fill=1 sends them to whole tiles).
  void generated_products_case() {
    static const std::int64_t rows[] = {1, 7, 16, 33, 64, 65, 100, 128, 129, 190, 256, 300};
    static const std::int64_t columns[] = {8, 24, 100, 128, 136, 192, 200, 256, 260, 384, 520};
    static const std::int64_t few_rows[] = {1, 7, 16}, few_columns[] = {8, 24, 100, 128};  // (2,048 results at most)
    o.max_elements = 160000;
    sixteen_products = true;
    long_k = chance(0.2);
    if (!long_k && chance(0.33)) c.out_dims.push_back(new_dim({})), c.dim_sizes.back() = std::min<std::int64_t>(c.dim_sizes.back(), 3);
    c.dim_sizes.push_back(long_k ? few_rows[pick(3)] : rows[pick(static_cast<int>(std::size(rows)))]);
    c.out_dims.push_back(static_cast<int>(c.dim_sizes.size() - 1));
    c.dim_sizes.push_back(long_k ? few_columns[pick(4)] : columns[pick(static_cast<int>(std::size(columns)))]);
    c.out_dims.push_back(static_cast<int>(c.dim_sizes.size() - 1));
    Expr e = product(c.out_dims, 1 + pick(3), true);
    for (int step = 0, n = 1 + pick(3); step < n; ++step)
      e = chance(0.35) ? unary_of(unary_op(), std::move(e))
                       : binary_of(binary_op(), std::move(e), chance(0.25) ? literal() : input_leaf(c.out_dims, false));
    c.outputs.push_back(std::move(e));
    c.into = chance(0.5);
    if (!c.into) {
      auto b = build(c);
      if (!b || !(b->result_shapes[0] == b->out_shape)) c.into = true;
    }
    if (c.into) c.out_layout = layout();
    c.generated = true;
  }
};

}  // namespace

Case generate(std::uint64_t seed, const GenOptions& o) {
  Case c;
  c.seed = seed;
  Generator g{std::mt19937_64(seed), c, o};
  if (o.scatters && g.chance(0.3)) {  // (drawn only with the option: other seeds' cases stay what they were)
    g.scatter_case(1 + g.pick(o.max_depth));
    return c;
  }
  if (o.register_rows || (o.long_rows && g.chance(0.4))) {  // a layer expression over long rows, then any further outputs
    static const std::int64_t lengths[] = {4097, 16384, 20000, 32768, 65536, 100003, 262144, 300000};
    static const std::int64_t rows[] = {1, 2, 3, 12, 16};
    static const std::int64_t held[] = {1024, 4096, 8192, 4000};  // (rows held in registers: --register-rows)
    g.o.max_elements = 330000;
    if (o.register_rows)
      c.dim_sizes = {16 + g.pick(48), held[g.pick(static_cast<int>(std::size(held)))]}, g.o.max_elements = c.dim_sizes[0] * c.dim_sizes[1];
    else
      c.dim_sizes = {rows[g.pick(static_cast<int>(std::size(rows)))], lengths[g.pick(static_cast<int>(std::size(lengths)))]};
    // A cluster of blocks per row runs only where the rows fill the device (a dozen rows leave most of an H100's
    // 132 SMs idle: the plan splits the reductions instead): half the cases of a dozen rows or more of 20,000 or
    // 32,768 elements take 64 or 40 of them, clusters of two blocks (drawn only there: other seeds' cases stay)
    if (c.dim_sizes[0] >= 12 && (c.dim_sizes[1] == 20000 || c.dim_sizes[1] == 32768) && g.chance(0.5)) {
      c.dim_sizes[0] = c.dim_sizes[1] == 20000 ? 64 : 40;
      g.o.max_elements = c.dim_sizes[0] * c.dim_sizes[1];
    }
    if (c.dim_sizes[1] * c.dim_sizes[0] > g.o.max_elements) c.dim_sizes[0] = std::max<std::int64_t>(1, g.o.max_elements / c.dim_sizes[1]);
    c.out_dims = {0, 1};
    c.into = g.chance(0.5);
    if (g.chance(0.5)) {
      c.outputs.push_back(g.classic_row(c.out_dims));
    } else {
      c.outputs.push_back(g.feedback(c.out_dims, 1 + g.pick(4)));
      for (Expr& a : c.outputs[0].args)  // along the rows, mostly (the layer kernels' case)
        if (a.kind == Kind::reduce && g.chance(0.8)) a.axes = 2;
    }
    if (g.chance(0.3)) c.outputs.push_back(g.gen(c.out_dims, 1 + g.pick(3)));
    if (c.outputs.size() > 1) c.into = true;
    if (!c.into) {
      auto b = build(c);
      if (!b || !(b->result_shapes[0] == b->out_shape)) c.into = true;
    }
    return c;
  }
  if (o.tall_columns && g.chance(0.5)) {  // (drawn only with the option: other seeds' cases stay what they were)
    g.tall_columns_case();
    return c;
  }
  if (o.generated_products) {  // every case a product of two 16-bit expressions with an elementwise epilogue
    g.generated_products_case();
    return c;
  }
  const int rank = g.pick(5);
  for (int k = 0; k < rank; ++k) c.out_dims.push_back(g.new_dim(c.out_dims));
  const int n_out = g.chance(0.8) ? 1 : 2 + g.pick(2);
  c.into = n_out > 1 || g.chance(0.5);
  c.unfused = g.chance(0.2);
  const int depth = 1 + g.pick(o.max_depth);
  for (int k = 0; k < n_out; ++k) c.outputs.push_back(g.gen(c.out_dims, depth, k == 0));
  // The engine allocates only results of exactly the output shape; anything else is written into one.
  if (!c.into) {
    auto b = build(c);
    if (!b || !(b->result_shapes[0] == b->out_shape)) c.into = true;
  }
  if (c.into) c.out_layout = g.layout();  // drawn last, so that a seed's expressions stay what they were
  if (o.calls && !c.unfused && g.chance(0.5)) {  // a random leaf beside output 0: dropout's x * (uniform < p)
    Expr r;
    r.kind = Kind::random;
    r.op = Op::call;
    r.function = g.pick(static_cast<int>(random_generators().size()));
    r.seed = g.rng();
    r.offset = g.chance(0.5) ? 0 : g.rng() >> g.pick(64);
    static const Op meet[] = {Op::add, Op::mul, Op::lt, Op::sub, Op::maximum};
    const Expr before = c.outputs[0];
    Expr root = Generator::wrap(Kind::binary, meet[g.pick(static_cast<int>(std::size(meet)))], {before, std::move(r)});
    if (g.chance(0.5)) std::swap(root.args[0], root.args[1]);
    const auto da = result_dtype(c, root.args[0]), db = result_dtype(c, root.args[1]);
    if (da && db && !fusion::ir::accepts(root.op, *da, *db)) root.op = Op::add;
    c.outputs[0] = std::move(root);
    if (!build(c)) c.outputs[0] = before;  // (an ill-typed meeting: the case stays as it was)
  }
  if (o.aliases && c.into && g.chance(0.5)) {
    // output 0 into an input of its shape and dtype, if one has them; each further output of a tie, half the time,
    // into another (two outputs into two inputs that both trees read: the swap fz::tie(x, y) = (g(y), h(x)))
    if (auto b = build(c)) {
      std::vector<bool> taken(c.inputs.size(), false);
      for (std::size_t k = 0; k < c.outputs.size(); ++k) {
        if (k > 0 && !g.chance(0.5)) continue;
        std::vector<int> fits;
        for (std::size_t i = 0; i < c.inputs.size(); ++i)
          if (!taken[i] && c.inputs[i].dtype == b->graph.dtype(b->graph.outputs[k]) &&
              shape_of(c, c.inputs[i].dims) == b->out_shape)
            fits.push_back(static_cast<int>(i));
        if (fits.empty() && c.outputs.size() > 1) {  // a tie: a new input to write into (the swap below reads it)
          Input in;
          in.dtype = b->graph.dtype(b->graph.outputs[k]);
          in.dims = c.out_dims;
          in.layout = g.layout();
          in.seed = g.rng();
          c.inputs.push_back(in);
          taken.push_back(false);
          fits.push_back(static_cast<int>(c.inputs.size() - 1));
        }
        if (fits.empty()) continue;
        const int a = fits[static_cast<std::size_t>(g.pick(static_cast<int>(fits.size())))];
        c.alias.resize(c.outputs.size(), -1);
        c.alias[k] = a;
        taken[static_cast<std::size_t>(a)] = true;
      }
    }
    // the swap made sure of, half the time: output 0's tree meets a read of output 1's input and the reverse
    if (c.alias.size() >= 2 && c.alias[0] >= 0 && c.alias[1] >= 0 && g.chance(0.5)) {
      const Case before = c;
      for (std::size_t k = 0; k < 2; ++k) {
        Expr leaf;
        leaf.kind = Kind::input;
        leaf.input = c.alias[1 - k];
        // (in the output's dtype, which must not change)
        const DType to = c.inputs[static_cast<std::size_t>(c.alias[k])].dtype;
        Expr cast = Generator::cast(std::move(leaf), to);
        const bool boolean = to == DType::bool_;
        static const Op meet[] = {Op::maximum, Op::minimum, Op::add, Op::sub};
        const Op op = meet[g.pick(boolean ? 2 : static_cast<int>(std::size(meet)))];
        Expr root = Generator::wrap(Kind::binary, op, {c.outputs[k], std::move(cast)});
        if (g.chance(0.5)) std::swap(root.args[0], root.args[1]);
        c.outputs[k] = std::move(root);
      }
      if (!build(c)) c = before;  // (an ill-typed meeting: the case stays as it was)
    }
  }
  // half the cases with products run them as fusion's own kernels, the math around them inside (drawn last)
  if (g.products > 0) c.generated = g.chance(0.5);
  return c;
}

}  // namespace fuzz
