// SPDX-License-Identifier: Apache-2.0
// Random multi-statement regions: a pool of arrays (several dtypes, one shape, some viewed transposed or
// reversed) and a few statements writing pool arrays or temporaries from random elementwise expressions
// of the pool, some reading through take_along_axis (a gather, possibly of an array an earlier statement
// wrote), some scattering into a pool array (floats: scatter_add under fz::Deterministic; integers also
// scatter_max and scatter_min), some calling a user ElementwiseKernel on pool arrays (its placeholders bound
// by their dtypes; raw arrays read in reverse), which must first run what the region recorded; some joining
// pieces (fz::concatenate's nodes) cut from arrays at other positions than they land, so that an element reads
// what other threads of a fused kernel would write (a roll of an array an earlier statement wrote, or of the
// array written). The statements run one by one on one copy of the pool and as a fz::Lazy region on another;
// every pool array must end bit-identical. The oracle is the engine itself, statement by statement:
// what a region promises is exactly that.
#include "fuzz_region.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>

#include "fusion/user_kernels.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "reference.hpp"

namespace fuzz {

namespace {

using fusion::ArrayBase;
using fusion::ir::Graph;
namespace detail = fusion::detail;

constexpr DType kDTypes[] = {DType::float32, DType::float32, DType::float64,
                             DType::float16, DType::int32,   DType::bool_};
constexpr Op kUnary[] = {Op::neg, Op::abs, Op::square, Op::sqrt, Op::exp, Op::sin, Op::floor, Op::logical_not};
constexpr Op kBinary[] = {Op::add, Op::sub, Op::mul, Op::mul, Op::div, Op::maximum, Op::lt, Op::pow};

/// Where a statement's operand or output lives: pool array `index` (a temporary when >= pool size),
/// as itself or through a view of the same shape.
enum class View : std::uint8_t { whole, transposed, reversed };

struct Operand {
  int index;
  View view;
};

/// A slot read by a join's piece: `length` elements along `axis` cut from `start`, placed in the statement's
/// (rows, cols) index space from `at` (as fz::concatenate places a piece's arrays); axis -1: read as it is.
struct Placement {
  int axis = -1;
  std::int64_t start = 0, length = 0, at = 0;
};

/// One statement: the expression's graph and what its input slots read; the output it writes.
struct Statement {
  Graph graph;
  std::vector<Operand> reads;  // by input slot
  std::vector<int> gather_axis;  // by input slot: -1, or a gather's source (passed as its view along this axis)
  std::vector<Placement> placed;  // by input slot: where a join's piece reads it
  std::vector<detail::ScalarArg> scalars;
  Operand out;
  bool fresh = false;  // a new temporary (fresh assignment), else into an existing array
  int scatter_axis = -1;  // >= 0: the graph is a scatter into `out` along this axis (under fz::Deterministic)
  int user_kernel = -1;   // >= 0: no graph; user_kernels()[user_kernel] called on `reads`, writing `out`
};

/// ElementwiseKernels as people write them beside fused code: placeholders bound by any dtype of the pool
/// (arithmetic through double, so that bool and float16 compile as well), a raw array read at another
/// element than the one written.
struct UserKernelCase {
  fusion::ElementwiseKernel kernel;
  int inputs;
  bool raw_first;  // the first input is raw: the output may not be any array the call reads
};
const std::vector<UserKernelCase>& user_kernels() {
  static const std::vector<UserKernelCase> table = {
      {fusion::ElementwiseKernel("T x, U y", "T z", "z = (T)((double)x * 0.5 - (double)y)", "fuzz_half_minus"), 2,
       false},
      {fusion::ElementwiseKernel("T x", "T z", "z = (T)(-(double)x)", "fuzz_negate"), 1, false},
      {fusion::ElementwiseKernel("raw T src, U x", "T z", "z = (T)((double)src[_ind.size() - 1 - i] + (double)x)",
                                 "fuzz_reverse_plus"),
       2, true},
  };
  return table;
}

struct RegionCase {
  std::int64_t rows, cols;
  std::vector<DType> pool;  // dtypes of the pool arrays (values from the seed)
  std::vector<DType> temps;  // dtypes of the temporaries statements create
  std::vector<Statement> statements;
};

ArrayBase view_of(const ArrayBase& a, View v) {
  if (v == View::transposed) return a.transposed({});
  if (v == View::reversed) return a.sliced({{{}, {}, -1}, {{}, {}, 1}});
  return a;
}

/// Slot `k`'s array as the statement reads it, from `a` (its pool array or temporary, viewed).
ArrayBase slot_view(const ArrayBase& a, const Statement& st, std::size_t k, const RegionCase& rc) {
  if (st.gather_axis[k] >= 0) return detail::gather_view(a, st.gather_axis[k], 1, "fuzz");
  const Placement& p = st.placed[k];
  if (p.axis < 0) return a;
  std::vector<fusion::Slice> cut(2);
  cut[static_cast<std::size_t>(p.axis)] = {p.start, p.start + p.length, 1};
  std::vector<std::int64_t> at(2, 0);
  at[static_cast<std::size_t>(p.axis)] = p.at;
  return a.sliced(cut).placed({rc.rows, rc.cols}, at);
}

RegionCase generate_region(std::uint64_t seed, const RegionOptions& options) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  RegionCase rc;
  rc.rows = 1 + pick(40);
  rc.cols = pick(3) == 0 ? rc.rows : 1 + pick(70);  // square sometimes: transposed views then fit
  const int n_pool = 2 + pick(4);
  for (int i = 0; i < n_pool; ++i) rc.pool.push_back(kDTypes[pick(6)]);
  const int n_statements = 2 + pick(6);
  auto dtype_of = [&](int index) {
    return index < n_pool ? rc.pool[static_cast<std::size_t>(index)]
                          : rc.temps[static_cast<std::size_t>(index - n_pool)];
  };
  auto any_view = [&] {
    return rc.rows == rc.cols && pick(4) == 0 ? View::transposed : pick(6) == 0 ? View::reversed : View::whole;
  };
  // A view's stride along `axis` (the pool and temporaries are C-ordered (rows, cols) arrays)
  auto stride_of = [&](View v, int axis) -> std::int64_t {
    if (v == View::transposed) return axis == 0 ? 1 : rc.cols;
    if (axis == 1) return 1;
    return v == View::reversed ? -rc.cols : rc.cols;
  };
  auto int64_scalar = [](Statement& st, std::int64_t v) {
    detail::ScalarArg a;
    a.dtype = DType::int64;
    std::memcpy(&a.bits, &v, 8);
    st.scalars.push_back(a);
    return st.graph.scalar(DType::int64);
  };
  for (int s = 0; s < n_statements; ++s) {
    Statement st;
    const int available = n_pool + static_cast<int>(rc.temps.size());
    auto read = [&](const Operand& operand, int gather_axis = -1, const Placement& placed = {}) {
      st.reads.push_back(operand);
      st.gather_axis.push_back(gather_axis);
      st.placed.push_back(placed);
      return st.graph.input(dtype_of(operand.index));
    };
    auto literal = [&] {
      const double v = (pick(2) ? 1 : -1) * (0.25 + pick(8) * 0.5);
      detail::ScalarArg a;  // a float literal travels as a float's bits
      const float f = static_cast<float>(v);
      std::memcpy(&a.bits, &f, 4);
      st.scalars.push_back(a);
      return st.graph.scalar(DType::float32);
    };
    // A join's piece landing at `p`: a tree of elementwise math over arrays cut from random starts.
    std::function<std::uint32_t(int, const Placement&)> piece = [&](int depth, const Placement& p) -> std::uint32_t {
      const int kind = depth >= 3 ? pick(2) : pick(4);
      if (kind == 0) {
        Placement cut = p;
        cut.start = pick(static_cast<int>((p.axis == 0 ? rc.rows : rc.cols) - p.length) + 1);
        return read({pick(available), any_view()}, -1, cut);
      }
      if (kind == 1) return literal();
      if (kind == 2) {
        const Op op = kUnary[pick(8)];
        const std::uint32_t x = piece(depth + 1, p);
        return fusion::ir::accepts(op, st.graph.dtype(x)) ? st.graph.unary(op, x) : x;
      }
      const Op op = kBinary[pick(8)];
      const std::uint32_t x = piece(depth + 1, p), y = piece(depth + 1, p);
      return fusion::ir::accepts(op, st.graph.dtype(x), st.graph.dtype(y)) ? st.graph.binary(op, x, y) : x;
    };
    // A random tree of depth <= 3 over available arrays and scalars.
    std::function<std::uint32_t(int)> tree = [&](int depth) -> std::uint32_t {
      const int kind = depth >= 3 ? pick(2) : pick(5 + options.indexing + options.joins);
      if (kind == 0) return read({pick(available), any_view()});
      if (options.joins && kind == 5 + options.indexing) {  // concatenate of 2 or 3 pieces (some empty) along an axis
        const int axis = pick(2), n = 2 + pick(2);
        const std::int64_t total = axis == 0 ? rc.rows : rc.cols;
        std::vector<std::int64_t> cuts{0, total};
        for (int k = 1; k < n; ++k) cuts.push_back(pick(static_cast<int>(total) + 1));
        std::sort(cuts.begin(), cuts.end());
        std::vector<std::uint32_t> value, below;
        for (std::size_t k = 0; k + 1 < cuts.size(); ++k)
          value.push_back(piece(depth + 1, {axis, 0, cuts[k + 1] - cuts[k], cuts[k]}));
        DType joined = st.graph.dtype(value[0]);  // (the pieces in their promoted dtype, as fz::concatenate's)
        for (std::uint32_t v : value) joined = fusion::promote_types(joined, st.graph.dtype(v));
        for (std::uint32_t& v : value) v = st.graph.cast(v, joined);
        const std::uint32_t after = int64_scalar(st, 1 - axis), extent = int64_scalar(st, total);
        for (int k = 1; k < n; ++k)
          below.push_back(st.graph.leading(after, int64_scalar(st, cuts[static_cast<std::size_t>(k)]), extent));
        return fusion::ir::join_tree(st.graph, value.data(), below.data(), n);
      }
      if (kind == 5) {  // take_along_axis(source, index tree as int32, axis), wrapping
        const int axis = pick(2);
        // the index reads a whole array too, so that the gather's result has the pool's shape (a later gather
        // from a temporary it makes assumes that shape)
        std::uint32_t index = tree(depth + 1);
        const std::uint32_t full = read({pick(available), View::whole});
        index = fusion::ir::accepts(Op::add, st.graph.dtype(index), st.graph.dtype(full))
                    ? st.graph.binary(Op::add, index, full)
                    : full;
        index = st.graph.explicit_cast(index, DType::int32);
        const Operand source{pick(available), any_view()};
        const std::uint32_t extent = int64_scalar(st, axis == 0 ? rc.rows : rc.cols);
        const std::uint32_t stride = int64_scalar(st, stride_of(source.view, axis));
        const std::uint32_t at =
            st.graph.binary(Op::mul, st.graph.take_index(index, extent, fusion::ir::IndexMode::wrap), stride);
        return st.graph.gather(at, read(source, axis));
      }
      if (kind == 1) return literal();
      if (kind == 2) {
        const Op op = kUnary[pick(8)];
        const std::uint32_t x = tree(depth + 1);
        return fusion::ir::accepts(op, st.graph.dtype(x)) ? st.graph.unary(op, x) : x;
      }
      const Op op = kBinary[pick(8)];
      const std::uint32_t x = tree(depth + 1), y = tree(depth + 1);
      return fusion::ir::accepts(op, st.graph.dtype(x), st.graph.dtype(y)) ? st.graph.binary(op, x, y) : x;
    };
    if (options.kernels && pick(4) == 0) {  // a user kernel: x of the output's dtype (the output itself: in place)
      st.user_kernel = pick(static_cast<int>(user_kernels().size()));
      const UserKernelCase& k = user_kernels()[static_cast<std::size_t>(st.user_kernel)];
      st.fresh = pick(3) == 0;
      const Operand first{pick(available), any_view()};
      if (st.fresh) {
        rc.temps.push_back(dtype_of(first.index));
        st.out = {n_pool + static_cast<int>(rc.temps.size()) - 1, View::whole};
      } else {
        std::vector<int> same;  // pool arrays of the first operand's dtype
        for (int i = 0; i < n_pool; ++i)
          if (rc.pool[static_cast<std::size_t>(i)] == dtype_of(first.index)) same.push_back(i);
        const bool in_place = !k.raw_first && pick(2) == 0 && first.index < n_pool;
        st.out = in_place ? first : Operand{same.empty() ? -1 : same[static_cast<std::size_t>(pick(static_cast<int>(same.size())))], any_view()};
      }
      st.reads.push_back(first);
      if (k.inputs == 2) st.reads.push_back({pick(available), any_view()});
      st.gather_axis.assign(st.reads.size(), -1);
      st.placed.assign(st.reads.size(), {});
      // Each element must be read and written by one thread: the output may be read only as the same view of
      // it, and never through the raw parameter (a fresh temporary is read by nothing yet).
      bool overlaps = st.out.index < 0;
      for (std::size_t r = 0; r < st.reads.size(); ++r)
        overlaps = overlaps || (st.reads[r].index == st.out.index &&
                                (st.reads[r].view != st.out.view || (r == 0 && k.raw_first)));
      if (!overlaps) {
        rc.statements.push_back(std::move(st));
        continue;
      }
      st = Statement{};  // (drawn again as an expression)
    }
    if (options.indexing && pick(5) == 0) {  // a scatter into a pool array no tree of the statement reads
      const Operand target{pick(n_pool), rc.rows == rc.cols && pick(4) == 0 ? View::transposed : any_view()};
      const DType td = rc.pool[static_cast<std::size_t>(target.index)];
      const int axis = pick(2);
      const std::uint32_t index = st.graph.explicit_cast(tree(1), DType::int64);
      const std::uint32_t extent = int64_scalar(st, axis == 0 ? rc.rows : rc.cols);
      const std::uint32_t stride = int64_scalar(st, stride_of(target.view, axis));
      const std::uint32_t at =
          st.graph.binary(Op::mul, st.graph.take_index(index, extent, fusion::ir::IndexMode::wrap), stride);
      const std::uint32_t values = tree(1);
      const bool reads_target =
          std::any_of(st.reads.begin(), st.reads.end(), [&](const Operand& o) { return o.index == target.index; });
      if (td != DType::bool_ && !reads_target) {
        // (a float maximum keeps whichever of +0 and -0 came first: not the same bits run to run)
        static const Op ops[] = {Op::scatter_add, Op::scatter_max, Op::scatter_min};
        const Op op = fusion::is_floating(td) ? Op::scatter_add : ops[pick(3)];
        st.graph.outputs.push_back(st.graph.scatter(op, at, values, td));
        st.out = target;
        st.scatter_axis = axis;
        rc.statements.push_back(std::move(st));
        continue;
      }
      st = Statement{};  // (drawn again as a plain statement)
    }
    std::uint32_t root = tree(0);
    if (st.reads.empty())  // every statement reads an array (its shape is the pool's)
      root = st.graph.binary(Op::add, root, read({pick(available), View::whole}));
    st.graph.outputs.push_back(root);
    st.fresh = pick(3) == 0;
    if (st.fresh) {
      rc.temps.push_back(kDTypes[pick(6)]);
      st.out = {n_pool + static_cast<int>(rc.temps.size()) - 1, View::whole};
    } else {
      st.out = {pick(n_pool), any_view()};
    }
    rc.statements.push_back(std::move(st));
  }
  return rc;
}

/// Runs the case's first `count` statements over `pool` (temporaries made as they come, dropped at the
/// end); `before_end` is called while the temporaries still live (to inspect a region).
void run(const RegionCase& rc, std::vector<ArrayBase>& pool, std::size_t count = SIZE_MAX,
         const std::function<void()>& before_end = {}) {
  std::vector<ArrayBase> temps(rc.temps.size(), ArrayBase::make_placeholder(DType::float32, {0}));
  for (std::size_t t = 0; t < rc.temps.size(); ++t) temps[t] = ArrayBase::make_placeholder(rc.temps[t], {0});
  auto array = [&](const Operand& o) {
    const ArrayBase& a = o.index < static_cast<int>(pool.size())
                             ? pool[static_cast<std::size_t>(o.index)]
                             : temps[static_cast<std::size_t>(o.index) - pool.size()];
    return view_of(a, o.view);
  };
  for (std::size_t si = 0; si < std::min(count, rc.statements.size()); ++si) {
    const Statement& st = rc.statements[si];
    std::vector<ArrayBase> reads;
    for (std::size_t k = 0; k < st.reads.size(); ++k) reads.push_back(slot_view(array(st.reads[k]), st, k, rc));
    if (st.user_kernel >= 0) {
      const fusion::ElementwiseKernel& k = user_kernels()[static_cast<std::size_t>(st.user_kernel)].kernel;
      if (st.fresh) {
        temps[static_cast<std::size_t>(st.out.index) - pool.size()] = k.call(reads)[0];
      } else {
        reads.push_back(array(st.out));
        k.call(reads);
      }
      continue;
    }
    std::vector<const ArrayBase*> slots;
    for (const ArrayBase& a : reads) slots.push_back(&a);
    const detail::Call call{detail::lowered_for_graph(st.graph), slots.data(), st.scalars.data(), nullptr,
                            static_cast<int>(slots.size()), static_cast<int>(st.scalars.size()), 0, {}};
    if (st.scatter_axis >= 0) {  // (floating sums exact: the same bits in both runs)
      fusion::Deterministic deterministic;
      const ArrayBase target = array(st.out);
      detail::scatter_into(call, detail::gather_view(target, st.scatter_axis, 1, "fuzz"), target);
    } else if (st.fresh) {
      ArrayBase& t = temps[static_cast<std::size_t>(st.out.index) - pool.size()];
      t = ArrayBase::make_placeholder(t.dtype(), {0});  // fresh: only the dtype is kept
      ArrayBase fresh = ArrayBase::make_empty(t.dtype(), {0});
      detail::evaluate(call, fresh, detail::AssignMode::fresh);
      t = fresh;
    } else {
      ArrayBase out = array(st.out);
      detail::evaluate(call, out, detail::AssignMode::into);
    }
  }
  if (before_end) before_end();
}

std::vector<ArrayBase> upload_pool(const RegionCase& rc, std::uint64_t seed) {
  std::vector<ArrayBase> pool;
  for (std::size_t i = 0; i < rc.pool.size(); ++i) {
    const Case values_case{seed, {rc.rows, rc.cols}, {0, 1}, {}, {}, false, Layout::contiguous, false};
    Input in;
    in.dtype = rc.pool[i];
    in.dims = {0, 1};
    in.seed = seed * 31 + i;
    in.values = Values::simple;
    pool.push_back(test::upload(base_values(values_case, in), in.dtype, {rc.rows, rc.cols}));
  }
  return pool;
}

std::vector<double> as_doubles(const ArrayBase& a) {
  Graph g;
  g.outputs.push_back(g.cast(g.input(a.dtype()), DType::float64));
  const ArrayBase* arrays[1] = {&a};
  ArrayBase f = ArrayBase::make_empty(DType::float64, {0});
  detail::evaluate({detail::lowered_for_graph(g), arrays, nullptr, nullptr, 1, 0, 0, {}}, f, detail::AssignMode::fresh);
  std::vector<double> v(static_cast<std::size_t>(f.size()));
  f.download(v.data());
  return v;
}

/// The first `limit` elements whose bits differ between two arrays of one dtype, except that any NaN matches
/// any NaN: IEEE 754 leaves the sign and payload of a NaN result open (of two NaN operands either may come
/// through, and the compiler may swap the operands of a commutative op), and so does NumPy.
std::vector<std::size_t> differing_elements(const ArrayBase& x, const ArrayBase& y, std::size_t limit) {
  const std::size_t size = itemsize(x.dtype()), bytes = x.nbytes();
  std::vector<unsigned char> a(bytes), b(bytes);
  x.download(a.data());
  y.download(b.data());
  std::vector<std::size_t> differ;
  if (std::memcmp(a.data(), b.data(), bytes) == 0) return differ;
  std::vector<double> da, db;  // NaN-ness, read only when some element differs
  if (fusion::is_floating(x.dtype())) da = as_doubles(x), db = as_doubles(y);
  for (std::size_t e = 0; e * size < bytes && differ.size() < limit; ++e)
    if (std::memcmp(&a[e * size], &b[e * size], size) != 0 && !(!da.empty() && std::isnan(da[e]) && std::isnan(db[e])))
      differ.push_back(e);
  return differ;
}

/// For a failing case: the first statement after which the region and the one-by-one run differ, the
/// kernels the region became up to there, and the first differing elements.
std::string bisect(const RegionCase& rc, std::uint64_t seed) {
  for (std::size_t k = 1; k <= rc.statements.size(); ++k) {
    std::vector<ArrayBase> eager = upload_pool(rc, seed), lazy = upload_pool(rc, seed);
    run(rc, eager, k);
    std::string plan;
    {
      fusion::Lazy region;
      run(rc, lazy, k, [&] {
        try {
          for (const std::string& e : fusion::inspect(region).plan) plan += "    " + e + "\n";
        } catch (const fusion::Error& e) {  // (a scatter ran what was recorded before it)
          plan += fmt::format("    ({})\n", e.what());
        }
      });
    }
    for (std::size_t i = 0; i < rc.pool.size(); ++i) {
      const std::vector<std::size_t> differ = differing_elements(eager[i], lazy[i], 4);
      std::string diffs;
      if (!differ.empty()) {
        const std::vector<double> a = as_doubles(eager[i]), b = as_doubles(lazy[i]);
        for (std::size_t e : differ) diffs += fmt::format(" [{}] {} vs {};", e, a[e], b[e]);
      }
      if (!diffs.empty())
        return fmt::format("  first differs after statement {} (array {}):{}\n  the region's kernels:\n{}", k, i, diffs,
                           plan);
    }
  }
  return "  (no prefix differs: the full run does)\n";
}

const char* view_name(View v) { return v == View::transposed ? ".T" : v == View::reversed ? "[::-1]" : ""; }

std::string describe(const RegionCase& rc) {
  std::string s = fmt::format("pool of {} arrays ({}, {}):", rc.pool.size(), rc.rows, rc.cols);
  for (DType d : rc.pool) s += fmt::format(" {}", fusion::dtype_name(d));
  s += "; statements:";
  for (std::size_t i = 0; i < rc.statements.size(); ++i) {
    const Statement& st = rc.statements[i];
    if (st.user_kernel >= 0) {
      s += fmt::format("\n  {}: {} {}{} = {}(", i + 1, st.fresh ? "temp" : "array", st.out.index, view_name(st.out.view),
                       user_kernels()[static_cast<std::size_t>(st.user_kernel)].kernel.name());
      for (const Operand& o : st.reads) s += fmt::format(" a{}{}", o.index, view_name(o.view));
      s += " )";
      continue;
    }
    s += fmt::format("\n  {}: {} {}{} {} graph(", i + 1, st.fresh ? "temp" : "array", st.out.index,
                     view_name(st.out.view), st.scatter_axis >= 0 ? fmt::format("scatters along axis {}:", st.scatter_axis) : "=");
    for (const fusion::ir::Node& n : st.graph.nodes) {
      if (n.op != Op::input) {
        s += fmt::format(" {}:{}", fusion::ir::op_name(n.op), fusion::dtype_name(n.dtype));
        continue;
      }
      const Placement& p = st.placed[n.slot];
      s += fmt::format(" a{}{}", st.reads[n.slot].index, view_name(st.reads[n.slot].view));
      if (p.axis >= 0) s += fmt::format("[{}:{} along {}, placed at {}]", p.start, p.start + p.length, p.axis, p.at);
    }
    s += " )";
  }
  return s;
}

}  // namespace

std::string describe_region_case(std::uint64_t seed, const RegionOptions& options) {
  const RegionCase rc = generate_region(seed, options);
  std::string s = describe(rc);
  // The kernels, without a GPU: the region over placeholder arrays, and each statement alone.
  std::vector<ArrayBase> pool;
  for (DType d : rc.pool) pool.push_back(ArrayBase::make_placeholder(d, {rc.rows, rc.cols}));
  try {
    fusion::Lazy region;
    run(rc, pool, SIZE_MAX, [&] { s += "\n// the region's kernels\n" + fusion::inspect(region).source; });
    region.discard();
  } catch (const fusion::Error& e) {
    s += fmt::format("\n// the region cannot be inspected: {}", e.what());
  }
  for (std::size_t i = 0; i < rc.statements.size(); ++i) {
    const Statement& st = rc.statements[i];
    if (st.scatter_axis >= 0 || st.user_kernel >= 0) {  // (nothing to inspect without the arrays it writes)
      s += fmt::format("\n// statement {} {}", i + 1, st.user_kernel >= 0 ? "calls a user kernel" : "scatters");
      continue;
    }
    std::vector<ArrayBase> reads;
    for (std::size_t k = 0; k < st.reads.size(); ++k) {
      const Operand& o = st.reads[k];
      const ArrayBase a =
          view_of(ArrayBase::make_placeholder(o.index < static_cast<int>(rc.pool.size())
                                                  ? rc.pool[static_cast<std::size_t>(o.index)]
                                                  : rc.temps[static_cast<std::size_t>(o.index) - rc.pool.size()],
                                              {rc.rows, rc.cols}),
                  o.view);
      reads.push_back(slot_view(a, st, k, rc));
    }
    std::vector<const ArrayBase*> slots;
    for (const ArrayBase& a : reads) slots.push_back(&a);
    const detail::Call call{detail::lowered_for_graph(st.graph), slots.data(), st.scalars.data(), nullptr,
                            static_cast<int>(slots.size()), static_cast<int>(st.scalars.size()), 0, {}};
    s += fmt::format("\n// statement {} alone\n{}", i + 1, detail::inspect(call).source);
  }
  return s;
}

Verdict run_region_case(std::uint64_t seed, const RegionOptions& options) {
  const RegionCase rc = generate_region(seed, options);
  std::vector<ArrayBase> eager = upload_pool(rc, seed), lazy = upload_pool(rc, seed);
  Verdict v;
  std::string eager_error, lazy_error;
  try {
    run(rc, eager);
  } catch (const fusion::Error& e) {
    eager_error = e.what();
  }
  const std::uint64_t before = fusion::stats().launches;
  try {
    fusion::Lazy region;
    run(rc, lazy);
  } catch (const fusion::Error& e) {
    lazy_error = e.what();
  }
  v.kernels = static_cast<int>(fusion::stats().launches - before);
  if (!eager_error.empty() || !lazy_error.empty()) {
    // The same statement fails in both (a dtype the op refuses...): an invalid case, unless only one fails.
    if (eager_error.empty() != lazy_error.empty())
      return {Verdict::engine_error,
              fmt::format("{}: statement by statement '{}', as a region '{}'", describe(rc), eager_error, lazy_error)};
    return {Verdict::invalid, eager_error};
  }
  for (std::size_t i = 0; i < rc.pool.size(); ++i) {
    v.compared += eager[i].size();
    if (!differing_elements(eager[i], lazy[i], 1).empty()) {
      v.kind = Verdict::mismatch;
      v.detail += fmt::format("pool array {} ({}) differs from the statement-by-statement run; {}\n", i,
                              fusion::dtype_name(rc.pool[i]), describe(rc));
    }
  }
  if (v.kind == Verdict::mismatch) v.detail += bisect(rc, seed);
  return v;
}

}  // namespace fuzz
