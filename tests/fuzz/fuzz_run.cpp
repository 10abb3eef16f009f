// SPDX-License-Identifier: Apache-2.0
#include "fuzz_run.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <stdexcept>

#include "runtime/exec/evaluate_internal.hpp"

namespace fuzz {

using fusion::ArrayBase;
using fusion::Shape;

const char* kind_name(Verdict::Kind k) {
  switch (k) {
    case Verdict::pass: return "pass";
    case Verdict::mismatch: return "mismatch";
    case Verdict::engine_error: return "engine error";
    case Verdict::missing_error: return "missing error";
    case Verdict::corrupted_output: return "output written before an error";
    case Verdict::invalid: return "invalid case";
  }
  return "?";
}

namespace {

/// An input (or output) as the engine sees it: `in.layout`'s view of `base`.
ArrayBase make_view(const Case& c, const Input& in, const ArrayBase& base) {
  const auto every_axis = [&](std::int64_t step) {
    return std::vector<fusion::Slice>(static_cast<std::size_t>(base.ndim()), {{}, {}, step});
  };
  ArrayBase view = in.layout == Layout::transposed ? base.transposed({})
                   : in.layout == Layout::reversed ? base.sliced(every_axis(-1))
                   : in.layout == Layout::strided  ? base.sliced(every_axis(2))
                                                   : base;
  // The reference reads the same elements through view_of(); both must describe one view.
  std::int64_t offset;
  fusion::Strides strides;
  view_of(c, in, offset, strides);
  if (!(view.shape() == shape_of(c, in.dims)) ||
      (view.size() > 1 && (view.offset() != offset || !(view.strides() == strides))))
    throw std::logic_error("fuzz harness: the engine's view differs from the reference's");
  return view;
}

/// A case's arrays and arguments, ready to hand to the engine.
struct Prepared {
  Built b;
  std::vector<ArrayBase> bases, views;
  std::vector<ArrayBase> gathered;  // gathers' sources as fz::take_along_axis passes them
  std::vector<const ArrayBase*> slots;

  Prepared(const Case& c, Built built, bool placeholder) : b(std::move(built)) {
    for (const Input& in : c.inputs) {
      const Shape bs = base_shape(c, in);
      bases.push_back(placeholder ? ArrayBase::make_placeholder(in.dtype, bs)
                                  : test::upload(base_values(c, in), in.dtype, bs));
      views.push_back(make_view(c, in, bases.back()));
    }
    gathered.reserve(2 * b.slot_input.size());  // (slots point into it)
    for (std::size_t k = 0; k < b.slot_input.size(); ++k) {
      const ArrayBase* view = &views[static_cast<std::size_t>(b.slot_input[k])];
      const int axis = b.slot_gather_axis[k];
      if (axis >= 0) {
        gathered.push_back(fusion::detail::gather_view(*view, axis, 1, "fuzz"));
        view = &gathered.back();
      }
      if (const Built::Placement& p = b.slot_place[k]; p.join.size() > 0) {  // as fz::concatenate places it
        gathered.push_back(view->broadcast(p.piece).placed(p.join, p.at));
        view = &gathered.back();
      }
      slots.push_back(view);
    }
  }
  fusion::detail::Call call() const {
    return {fusion::detail::lowered_for_graph(b.graph),
            slots.data(),
            b.scalars.data(),
            b.reductions.data(),
            static_cast<int>(slots.size()),
            static_cast<int>(b.scalars.size()),
            static_cast<int>(b.reductions.size()),
            {},
            b.functions.data(),
            static_cast<int>(b.functions.size())};
  }
};

/// A kernel takes at most 64 array operands: a bigger expression may be refused (a plan may split it).
bool too_many_operands(const Built& b, const fusion::Error& e) {
  return b.slot_input.size() > 64 && std::string(e.what()).find("array operands") != std::string::npos;
}

bool still_poisoned(const ArrayBase& a) {
  std::vector<unsigned char> bytes(a.nbytes());
  a.download(bytes.data());
  const unsigned char poison = a.dtype() == DType::bool_ ? 0x01 : 0xff;
  for (unsigned char x : bytes)
    if (x != poison) return false;
  return true;
}

/// Which elements of a base allocation of `n` elements the view `in` describes.
std::vector<char> view_mask(const Case& c, const Input& in, std::int64_t n) {
  std::int64_t offset;
  fusion::Strides strides;
  view_of(c, in, offset, strides);
  const Shape s = shape_of(c, in.dims);
  std::vector<char> in_view(static_cast<std::size_t>(n), 0);
  for (std::int64_t k = 0; k < fusion::numel(s); ++k) {
    std::int64_t rest = k, at = offset;
    for (int d = s.size() - 1; d >= 0; --d) at += rest % s[d] * strides[d], rest /= s[d];
    in_view[static_cast<std::size_t>(at)] = 1;
  }
  return in_view;
}

/// The elements of an output's base allocation outside its view: none may have been written.
std::int64_t written_outside(const Case& c, const Input& out, const ArrayBase& base) {
  const std::vector<char> in_view = view_mask(c, out, base.size());
  std::vector<unsigned char> bytes(base.nbytes());
  base.download(bytes.data());
  const std::size_t item = fusion::itemsize(base.dtype());
  const unsigned char poison = base.dtype() == DType::bool_ ? 0x01 : 0xff;
  std::int64_t written = 0;
  for (std::size_t e = 0; e < in_view.size(); ++e)
    for (std::size_t b = 0; b < item && !in_view[e]; ++b)
      if (bytes[e * item + b] != poison) {
        ++written;
        break;
      }
  return written;
}

/// The elements of an input written in place whose values changed (outside its view only, or everywhere).
std::int64_t changed(const Case& c, const Input& in, const ArrayBase& base, bool outside_only) {
  const std::vector<test::Scalar> before = base_values(c, in), after = test::download(base);
  const std::vector<char> in_view = view_mask(c, in, static_cast<std::int64_t>(before.size()));
  std::int64_t n = 0;
  for (std::size_t e = 0; e < before.size(); ++e)
    n += !(outside_only && in_view[e]) &&
         !(before[e].i == after[e].i &&
           (std::isnan(before[e].f) ? std::isnan(after[e].f) : before[e].f == after[e].f));
  return n;
}

std::string describe(const test::Scalar& s, DType d) { return fmt::format("{}", test::to_double(s, d)); }

Verdict compare(const Prepared& p, const Oracle& o, const std::vector<ArrayBase>& outs) {
  Verdict v;
  int shown = 0;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    const DType d = p.b.graph.dtype(p.b.graph.outputs[k]);
    if (!(outs[k].shape() == p.b.out_shape) || outs[k].dtype() != d) {
      v.kind = Verdict::mismatch;
      v.detail +=
          fmt::format("output {}: {} {} instead of {} {}\n", k, fusion::dtype_name(outs[k].dtype()),
                      fusion::to_string(outs[k].shape()), fusion::dtype_name(d), fusion::to_string(p.b.out_shape));
      continue;
    }
    const std::vector<test::Scalar> got = test::download(outs[k]);
    for (std::size_t e = 0; e < got.size(); ++e) {
      switch (status(o, k, e, d)) {
        case Status::undefined: ++v.undefined; continue;
        case Status::unstable: ++v.unstable; continue;
        case Status::check: break;
      }
      ++v.compared;
      const test::Scalar& want = o.exact.outputs[k].values[e];
      if (!close(got[e], want, d)) {
        v.kind = Verdict::mismatch;
        if (shown++ < 4)
          v.detail += fmt::format("output {} ({}) element {}: got {}, want {}\n", k, fusion::dtype_name(d), e,
                                  describe(got[e], d), describe(want, d));
      }
    }
  }
  return v;
}

}  // namespace

std::string strategy_of(const std::string& plan_entry) {
  const auto open = plan_entry.find(" (");
  if (open == std::string::npos) return "?";
  const std::string words = plan_entry.substr(open + 2);
  auto field = [&](std::size_t from) {  // up to the next ", ", without a parenthesised remark
    std::string f = words.substr(from, words.find(", ", from) - from);
    return f.substr(0, f.find(" ("));
  };
  std::string s = field(0);
  if (s.back() == ')') s.pop_back();
  if ((s == "reduction" || s == "layer") && words.find(", ") != std::string::npos)
    s += ": " + field(words.find(", ") + 2);
  if (words.find("-wide vectors") != std::string::npos) s += " +vectors";
  if (words.find("piece chosen per vector") != std::string::npos) s += " +pieces";  // (Variant::vector_joins)
  if (words.find("read at every") != std::string::npos) s += " +stepped";  // (Access::stepped)
  if (words.find("over a cluster of") != std::string::npos) s += " +cluster";  // (a layer's row split over blocks)
  if (words.find("the row held in registers") != std::string::npos) s += " +registers";  // (LayerVariant::registers)
  if (words.find("(no bound tests)") != std::string::npos) s += " +whole parts";  // (LayerVariant::full_parts)
  // a generated product's kernel and tiles (ProductVariant::describe: "..., 128x192x64 tiles, Hopper: ...")
  if (const auto t = words.find(" tiles, "); s.starts_with("generated") && t != std::string::npos) {
    const std::size_t from = words.rfind(' ', t - 1) + 1;
    s += fmt::format(" +{} {}", words.find(" tiles, Hopper", t) == t ? "Hopper" : "mma.sync", words.substr(from, t - from));
    if (words.find("K split") != std::string::npos) s += " +split";
  }
  return s;
}

namespace {

/// The strategies of the kernels a case runs as (fz::inspect's plan; into a view where the case writes one).
std::vector<std::string> strategies(const Case& c, const Prepared& p, const std::vector<ArrayBase>& outs) {
  std::vector<std::string> out;
  std::optional<fusion::GeneratedProducts> generated;  // (as the case runs)
  if (c.generated) generated.emplace();
  try {
    const fusion::KernelInfo info = c.into && outs.size() == 1 ? fusion::detail::inspect_into(p.call(), outs[0])
                                                               : fusion::detail::inspect(p.call());
    for (const std::string& entry : info.plan) out.push_back(strategy_of(entry));
  } catch (const fusion::Error&) {
  }
  return out;
}

}  // namespace

namespace {

/// A scatter case: the target input is written in place (under fz::Deterministic where the case says so); its
/// view is compared, and the rest of its allocation must keep its values.
Verdict run_scatter(const Case& c, const Prepared& p, const Oracle& o) {
  const auto t = static_cast<std::size_t>(p.b.scatter_target);
  ArrayBase target = p.views[t];
  const std::uint64_t launches = fusion::stats().launches;
  try {
    std::optional<fusion::Unfused> unfused;
    if (c.unfused) unfused.emplace();
    std::optional<fusion::Deterministic> deterministic;
    if (c.deterministic) deterministic.emplace();
    fusion::detail::scatter_into(p.call(), fusion::detail::gather_view(target, c.outputs[0].axis, 1, "fuzz"), target);
  } catch (const fusion::Error& e) {
    if (o.exact.error.empty()) return {Verdict::engine_error, e.what()};
    return {Verdict::pass, e.what()};
  }
  if (!o.exact.error.empty()) return {Verdict::missing_error, "the reference has no value: " + o.exact.error};
  Verdict v = compare(p, o, {target});
  const Input& in = c.inputs[t];
  const std::int64_t outside = changed(c, in, p.bases[t], true);
  if (outside) {
    v.kind = Verdict::mismatch;
    v.detail += fmt::format("{} element(s) of the target's allocation outside its {} view changed\n", outside,
                            layout_name(in.layout));
  }
  v.kernels = static_cast<int>(fusion::stats().launches - launches);
  v.strategies = {c.deterministic && fusion::is_floating(in.dtype) && c.outputs[0].op == Op::scatter_add
                      ? "scatter (exact sums)"
                      : "scatter"};
  return v;
}

}  // namespace

Verdict run_on_gpu(const Case& c) {
  std::string why;
  auto built = build(c, &why);
  if (!built) return {Verdict::invalid, why};
  const Oracle o = oracle(c, *built);
  const Prepared p(c, std::move(*built), false);
  if (p.b.scatter_target >= 0) return run_scatter(c, p, o);
  const std::size_t n_out = c.outputs.size();
  std::vector<ArrayBase> outs, bases;
  std::vector<std::size_t> base_output;  // per base: the output written through it
  std::vector<ArrayBase*> out_ptrs;
  if (c.into) {
    for (std::size_t k = 0; k < n_out; ++k) {
      if (alias_of(c, k) >= 0) {  // written into the input's own view, which the expressions also read
        outs.push_back(p.views[static_cast<std::size_t>(alias_of(c, k))]);
        continue;
      }
      const Input view = output_view(c, p.b.graph.dtype(p.b.graph.outputs[k]));
      base_output.push_back(k);
      bases.push_back(test::poisoned(view.dtype, base_shape(c, view)));
      outs.push_back(make_view(c, view, bases.back()));
    }
  } else {  // replaced: fresh keeps only their dtypes (a tie of new arrays where there are several)
    for (std::size_t k = 0; k < n_out; ++k)
      outs.push_back(ArrayBase::make_empty(p.b.graph.dtype(p.b.graph.outputs[k]), {0}));
  }
  for (ArrayBase& a : outs) out_ptrs.push_back(&a);
  const std::uint64_t launches = fusion::stats().launches;
  try {
    std::optional<fusion::Unfused> unfused;
    if (c.unfused) unfused.emplace();
    std::optional<fusion::GeneratedProducts> generated;
    if (c.generated) generated.emplace();
    const auto mode = c.into ? fusion::detail::AssignMode::into : fusion::detail::AssignMode::fresh;
    if (n_out == 1) fusion::detail::evaluate(p.call(), outs[0], mode);
    else fusion::detail::evaluate_multi(p.call(), out_ptrs.data(), static_cast<int>(n_out), mode);
  } catch (const fusion::Error& e) {
    if (o.exact.error.empty() && !too_many_operands(p.b, e)) return {Verdict::engine_error, e.what()};
    for (const ArrayBase& a : bases)
      if (a.size() > 0 && !still_poisoned(a)) return {Verdict::corrupted_output, e.what()};
    for (const int a : c.alias)
      if (a >= 0 && changed(c, c.inputs[static_cast<std::size_t>(a)], p.bases[static_cast<std::size_t>(a)], false))
        return {Verdict::corrupted_output, e.what()};
    return {Verdict::pass, e.what()};
  }
  if (!o.exact.error.empty()) return {Verdict::missing_error, "the reference has no value: " + o.exact.error};
  Verdict v = compare(p, o, outs);
  for (std::size_t k = 0; k < c.alias.size(); ++k)
    if (const int a = c.alias[k]; a >= 0)
      if (const std::int64_t n = changed(c, c.inputs[static_cast<std::size_t>(a)], p.bases[static_cast<std::size_t>(a)], true)) {
        v.kind = Verdict::mismatch;
        v.detail += fmt::format("output {}, written into input {}: {} element(s) of its allocation outside the view "
                                "changed\n", k, a, n);
      }
  for (std::size_t k = 0; k < bases.size(); ++k)
    if (const std::int64_t n = written_outside(c, output_view(c, bases[k].dtype()), bases[k])) {
      v.kind = Verdict::mismatch;
      v.detail += fmt::format("output {}: {} element(s) of its base allocation outside the {} view were written\n",
                              base_output[k],
                              n, layout_name(c.out_layout));
    }
  v.kernels = static_cast<int>(fusion::stats().launches - launches);
  v.strategies = strategies(c, p, outs);
  return v;
}

Verdict compile_only(const Case& c) {
  std::string why;
  auto built = build(c, &why);
  if (!built) return {Verdict::invalid, why};
  const Oracle o = oracle(c, *built);  // the reference runs here too: it must not fail on any case
  const Prepared p(c, std::move(*built), true);
  Verdict v;
  if (p.b.scatter_target >= 0) {  // (a scatter writes into an array: nothing to inspect without one)
    for (std::size_t e = 0; e < o.exact.outputs[0].values.size(); ++e) {
      const Status s = status(o, 0, e, p.b.graph.dtype(p.b.graph.outputs[0]));
      ++(s == Status::check ? v.compared : s == Status::unstable ? v.unstable : v.undefined);
    }
    return v;
  }
  try {
    std::optional<fusion::GeneratedProducts> generated;  // (its product kernels compiled too)
    if (c.generated) generated.emplace();
    std::optional<fusion::Unfused> unfused;  // (planned as the GPU run plans it: each operation its own kernel)
    if (c.unfused) unfused.emplace();
    const fusion::KernelInfo info = fusion::detail::inspect(p.call());
    v.kernels = info.kernels;
    for (const std::string& entry : info.plan) v.strategies.push_back(strategy_of(entry));
  } catch (const fusion::CompileError& e) {
    return {Verdict::engine_error, e.what()};
  } catch (const fusion::Error& e) {
    if (o.exact.error.empty() && !too_many_operands(p.b, e)) return {Verdict::engine_error, e.what()};
  }
  for (std::size_t k = 0; k < o.exact.outputs.size(); ++k)
    for (std::size_t e = 0; e < o.exact.outputs[k].values.size(); ++e) {
      const Status s = status(o, k, e, p.b.graph.dtype(p.b.graph.outputs[k]));
      ++(s == Status::check ? v.compared : s == Status::unstable ? v.unstable : v.undefined);
    }
  return v;
}

// ---- shrinking ------------------------------------------------------------------------------------

namespace {

/// Every node of the case's trees, as (output, path of operand indices), in pre-order.
void paths(const Expr& e, std::vector<int>& at, std::vector<std::vector<int>>& out) {
  out.push_back(at);
  for (std::size_t j = 0; j < e.args.size(); ++j) {
    at.push_back(static_cast<int>(j));
    paths(e.args[j], at, out);
    at.pop_back();
  }
}

Expr& node_at(Expr& root, const std::vector<int>& path) {
  Expr* e = &root;
  for (int j : path) e = &e->args[static_cast<std::size_t>(j)];
  return *e;
}

/// Drops inputs no tree reads and renumbers the rest.
void drop_unused_inputs(Case& c) {
  std::vector<int> used(c.inputs.size(), 0);
  auto mark = [&](auto& self, Expr& e) -> void {
    if (e.kind == Kind::input || e.kind == Kind::scatter) used[static_cast<std::size_t>(e.input)] = 1;
    for (Expr& a : e.args) self(self, a);
  };
  for (Expr& e : c.outputs) mark(mark, e);
  for (const int a : c.alias)
    if (a >= 0) used[static_cast<std::size_t>(a)] = 1;  // (written, if no longer read)
  std::vector<int> renumber(c.inputs.size(), -1);
  std::vector<Input> kept;
  for (std::size_t k = 0; k < c.inputs.size(); ++k)
    if (used[k]) renumber[k] = static_cast<int>(kept.size()), kept.push_back(c.inputs[k]);
  auto remap = [&](auto& self, Expr& e) -> void {
    if (e.kind == Kind::input || e.kind == Kind::scatter) e.input = renumber[static_cast<std::size_t>(e.input)];
    for (Expr& a : e.args) self(self, a);
  };
  for (Expr& e : c.outputs) remap(remap, e);
  for (int& a : c.alias)
    if (a >= 0) a = renumber[static_cast<std::size_t>(a)];
  c.inputs = std::move(kept);
}

}  // namespace

Case shrink(const Case& start, const std::function<Verdict(const Case&)>& run, int budget) {
  Case best = start;
  const Verdict::Kind kind = run(best).kind;
  auto attempt = [&](Case cand) {
    if (budget <= 0 || !build(cand)) return false;
    --budget;
    if (run(cand).kind != kind) return false;
    drop_unused_inputs(cand);
    best = std::move(cand);
    return true;
  };
  for (bool progress = true; progress && budget > 0;) {
    progress = false;
    for (std::size_t k = 0; best.outputs.size() > 1 && k < best.outputs.size();) {
      Case cand = best;
      cand.outputs.erase(cand.outputs.begin() + static_cast<std::ptrdiff_t>(k));
      if (k < cand.alias.size()) cand.alias.erase(cand.alias.begin() + static_cast<std::ptrdiff_t>(k));
      if (attempt(std::move(cand))) progress = true;
      else ++k;
    }
    // a node replaced by one of its operands: restart the walk after each success (paths change)
    for (bool again = true; again && budget > 0;) {
      again = false;
      for (std::size_t k = 0; k < best.outputs.size() && !again; ++k) {
        std::vector<std::vector<int>> all;
        std::vector<int> at;
        paths(best.outputs[k], at, all);
        for (const auto& path : all) {
          // (a success replaces `best`: stop before touching its old nodes again)
          const std::size_t n_args = node_at(best.outputs[k], path).args.size();
          for (std::size_t j = 0; j < n_args && !again; ++j) {
            Case cand = best;
            Expr child = node_at(best.outputs[k], path).args[j];
            node_at(cand.outputs[k], path) = std::move(child);
            again = attempt(std::move(cand));
          }
          if (again) break;
        }
      }
      progress = progress || again;
    }
    for (std::size_t i = 0; i < best.inputs.size(); ++i) {
      if (best.inputs[i].layout != Layout::contiguous) {
        Case cand = best;
        cand.inputs[i].layout = Layout::contiguous;
        progress = attempt(std::move(cand)) || progress;
      }
      if (i < best.inputs.size() && best.inputs[i].values != Values::simple) {
        Case cand = best;
        cand.inputs[i].values = Values::simple;
        progress = attempt(std::move(cand)) || progress;
      }
    }
    for (std::size_t d = 0; d < best.dim_sizes.size(); ++d) {
      for (std::int64_t smaller : {std::int64_t{1}, best.dim_sizes[d] / 2}) {
        if (smaller >= best.dim_sizes[d] || (smaller == 0 && best.dim_sizes[d] != 0)) continue;
        Case cand = best;
        cand.dim_sizes[d] = smaller;
        if (attempt(std::move(cand))) { progress = true; break; }
      }
    }
    if (best.unfused) {
      Case cand = best;
      cand.unfused = false;
      progress = attempt(std::move(cand)) || progress;
    }
    if (best.generated) {
      Case cand = best;
      cand.generated = false;
      progress = attempt(std::move(cand)) || progress;
    }
    if (best.into && best.out_layout != Layout::contiguous) {
      Case cand = best;
      cand.out_layout = Layout::contiguous;
      progress = attempt(std::move(cand)) || progress;
    }
    for (std::size_t k = 0; k < best.alias.size(); ++k)
      if (best.alias[k] >= 0) {  // each output written into a fresh array instead
        Case cand = best;
        cand.alias[k] = -1;
        if (!aliased(cand)) cand.alias.clear();
        progress = attempt(std::move(cand)) || progress;
      }
    if (best.into) {
      Case cand = best;
      cand.into = false;
      cand.alias.clear();
      progress = attempt(std::move(cand)) || progress;
    }
  }
  return best;
}

}  // namespace fuzz
