// SPDX-License-Identifier: Apache-2.0
// Running a ReductionKernel: bind the placeholders, broadcast the inputs, reduce over the requested
// axes with the same layouts (warp, block or thread per output, split over blocks) as fused reductions.
#include <fmt/format.h>

#include "codegen/spell.hpp"
#include "fusion/error.hpp"
#include "fusion/user_kernels.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/exec/launch.hpp"
#include "runtime/exec/reduce_launch.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "runtime/custom/user_kernel.hpp"

namespace fusion {
namespace detail {
namespace {

using codegen::UserAccess;

struct ReductionCall {
  codegen::UserVariant v;
  ArrayBase out;
  ReduceLayout L;
  std::vector<ScalarArg> scalars;  // converted scalar arguments, by input parameter
};

ReductionCall analyze(const UserKernel& k, const std::vector<UserArg>& args, const ReduceArg& arg, int device,
                      bool inspect) {
  const auto& s = k.spec;
  const std::size_t n_in = s.in.size();
  const BoundCall b = bind_call(k, args);
  ReductionCall c{{}, ArrayBase(b.dtypes[n_in]), {}, {}};
  c.v.dtypes = b.dtypes;
  c.v.types = b.types.types();
  c.v.access.assign(n_in + 1, UserAccess::contiguous);
  c.v.raw_rank.assign(n_in + 1, 0);
  c.v.fresh.assign(1, false);
  const Reduced shapes = reduced_shapes(broadcast_args(k, args, b.what, false), arg);
  if (b.outputs_given) {
    const ArrayBase& o = *args[n_in].array;
    if (o.shape() != shapes.out)
      throw ShapeError(fmt::format("{}: the output '{}' has shape {} but the reduction gives {}", b.what, s.out[0].name,
                                   to_string(o.shape()), to_string(shapes.out)));
    c.out = o;
  } else {
    c.out = inspect ? ArrayBase::make_placeholder(b.dtypes[n_in], shapes.out)
                    : ArrayBase::make_empty(b.dtypes[n_in], shapes.out);
  }
  int np = 0;
  c.scalars.resize(n_in);
  for (std::size_t p = 0; p < n_in; ++p) {
    if (args[p].array) {
      if (np == codegen::kMaxParams)
        throw TypeError(fmt::format("{} reads more than {} arrays", b.what, codegen::kMaxParams));
      c.L.v.param_of_slot[static_cast<std::size_t>(np)] = static_cast<std::uint8_t>(np);
      c.L.params[np++] = args[p].array;
    } else {
      c.v.access[p] = UserAccess::scalar;
      c.scalars[p].bits =
          scalar_bits(args[p].scalar, b.dtypes[p], fmt::format("{} parameter '{}'", b.what, s.in[p].name));
    }
  }
  const DType rd = b.types.resolve(s.reduce_type, "reduce_type");
  const std::size_t acc_bytes = codegen::compute_type(rd) == "float" ? 4 : itemsize(rd);
  analyze_reduction(np, c.out, shapes, arg, acc_bytes, planned_device(device), c.L);
  c.v.reduce = c.L.v;
  return c;
}

codegen::GeneratedKernel generate(const UserKernel& k, const ReductionCall& c) {
  return codegen::emit_user_reduction(k.spec, c.v);
}

}  // namespace

Outputs run_reduction(const UserKernel& k, const std::vector<UserArg>& args, const ReduceArg& arg) {
  const auto& stream = current_stream_state();
  check_arrays(args, k, stream->device, false);
  ReductionCall c = analyze(k, args, arg, stream->device, false);
  if (c.out.size() > 0) {
    const UserKernel::Slot& kernel = k.kernel_for(c.v, stream->device, [&] { return generate(k, c); });
    const ArrayBase* written[1] = {&c.out};
    launch_reduction(kernel.kernel->function, kernel.signature, c.L, c.scalars, written, stream);
    note_minimum({c.L.params, static_cast<std::size_t>(c.L.v.n_params)}, written);  // one kernel: exactly the least
  }
  std::vector<ArrayBase> outs;
  outs.push_back(std::move(c.out));
  return Outputs(std::move(outs));
}

KernelInfo inspect_reduction(const UserKernel& k, const std::vector<UserArg>& args, const ReduceArg& arg) {
  check_arrays(args, k, -1, true);
  const ReductionCall c = analyze(k, args, arg, device_count() > 0 ? enter_current_device() : -1, true);
  return finish_inspect(generate(k, c), c.v.describe() + "; " + c.v.reduce.describe());
}

}  // namespace detail

ReductionKernel::ReductionKernel(std::string in_params, std::string out_params, std::string map_expr,
                                 std::string reduce_expr, std::string post_map_expr, std::string identity,
                                 std::string name, ReductionOptions o)
    : impl_(std::make_shared<detail::UserKernel>(codegen::make_reduction_spec(
          std::move(in_params), std::move(out_params), std::move(map_expr), std::move(reduce_expr),
          std::move(post_map_expr), std::move(identity), std::move(name), std::move(o.preamble), std::move(o.options),
          std::move(o.reduce_type), std::move(o.loop_prep), std::move(o.after_loop)))) {}

const std::string& ReductionKernel::name() const { return impl_->spec.name; }

}  // namespace fusion
