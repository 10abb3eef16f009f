// SPDX-License-Identifier: Apache-2.0
// Running an ElementwiseKernel: bind the placeholders, broadcast the non-raw arguments, allocate the
// outputs not passed, choose the addressing (the same dimension collapsing as fused kernels), launch.
#include <fmt/format.h>

#include <climits>

#include "fusion/error.hpp"
#include "fusion/user_kernels.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/exec/launch.hpp"
#include "runtime/memory/storage.hpp"
#include "runtime/custom/user_kernel.hpp"

namespace fusion {
namespace detail {
namespace {

using codegen::UserAccess;

constexpr int kMaxUserParams = 64;

struct ElementwiseLayout {
  codegen::UserVariant v;
  std::vector<ArrayBase> outs;
  std::vector<const ArrayBase*> arrays;  // per parameter (null for scalars)
  std::vector<ScalarArg> scalars;        // per parameter (converted values of scalar arguments)
  Shape shape;                           // collapsed index space
  std::vector<Strides> strides;          // per parameter (collapsed; strided ones are passed)
  std::int64_t n = 0;
};

ElementwiseLayout analyze(const UserKernel& k, const std::vector<UserArg>& args, bool inspect) {
  const auto& s = k.spec;
  const std::size_t n_in = s.in.size(), n_params = n_in + s.out.size();
  if (n_params > kMaxUserParams)
    throw TypeError(fmt::format("a user kernel takes at most {} parameters", kMaxUserParams));
  const BoundCall b = bind_call(k, args);
  ElementwiseLayout L;
  L.v.dtypes = b.dtypes;
  L.v.types = b.types.types();
  L.v.access.assign(n_params, UserAccess::contiguous);
  L.v.raw_rank.assign(n_params, 0);

  bool sized = false;
  for (std::size_t p = 0; p < args.size(); ++p) sized = sized || (args[p].array && !param_at(s, p).raw);
  const Shape index = broadcast_args(k, args, b.what, true);
  if (!sized)
    throw ShapeError(fmt::format("{}: no non-raw array argument sets the number of elements; pass a non-raw input "
                                 "or output array", b.what));
  for (std::size_t j = 0; j < s.out.size(); ++j) {
    const std::size_t p = n_in + j;
    if (b.outputs_given) {
      const ArrayBase& o = *args[p].array;
      if (!s.out[j].raw && o.shape() != index)
        throw ShapeError(
            fmt::format("{}: the output '{}' has shape {} but the arguments broadcast to {}; pass an output "
                        "of that shape or leave it out",
                        b.what, s.out[j].name, to_string(o.shape()), to_string(index)));
      for (int d = 0; d < o.ndim(); ++d)
        if (o.strides()[d] == 0 && o.shape()[d] > 1)
          throw Error(fmt::format("{}: the output '{}' is a broadcast view (elements share memory); copy it first",
                                  b.what, s.out[j].name));
      L.outs.push_back(o);
    } else {
      L.outs.push_back(inspect ? ArrayBase::make_placeholder(b.dtypes[p], index)
                               : ArrayBase::make_empty(b.dtypes[p], index));
    }
    L.v.fresh.push_back(!b.outputs_given && is_16bit_float(b.dtypes[p]));
  }
  L.n = numel(index);

  L.arrays.assign(n_params, nullptr);
  L.scalars.assign(n_params, ScalarArg{});
  for (std::size_t p = 0; p < n_params; ++p) {
    L.arrays[p] = p < n_in ? args[p].array : &L.outs[p - n_in];
    if (!L.arrays[p]) {
      L.v.access[p] = UserAccess::scalar;
      L.scalars[p].bits =
          scalar_bits(args[p].scalar, b.dtypes[p], fmt::format("{} parameter '{}'", b.what, s.in[p].name));
    } else if (param_at(s, p).raw) {
      const bool dense = L.arrays[p]->is_contiguous() || L.arrays[p]->ndim() == 0;
      L.v.access[p] = dense ? UserAccess::raw_contiguous : UserAccess::raw_strided;
      L.v.raw_rank[p] = static_cast<std::uint8_t>(dense ? 0 : L.arrays[p]->ndim());
    }
  }

  // The non-raw arrays walk the index space together: collapse it as for fused kernels.
  std::vector<std::size_t> walked;
  std::vector<Strides> st;
  for (std::size_t p = 0; p < n_params; ++p)
    if (L.arrays[p] && !param_at(s, p).raw) {
      walked.push_back(p);
      st.push_back(broadcast_strides(*L.arrays[p], index));
    }
  std::vector<Strides> collapsed(walked.size());
  collapse_dims(index, st.data(), static_cast<int>(walked.size()), L.shape, collapsed.data());
  L.v.rank = static_cast<std::uint8_t>(L.shape.size());
  L.strides.assign(n_params, Strides());
  const Strides dense = contiguous_strides(L.shape);
  bool wide = L.n > INT_MAX;
  for (std::size_t w = 0; w < walked.size(); ++w) {
    const std::size_t p = walked[w];
    bool zero = true;
    for (std::int64_t x : collapsed[w]) zero = zero && x == 0;
    L.v.access[p] = zero && L.n > 1 && p < n_in ? UserAccess::broadcast
                    : collapsed[w] == dense      ? UserAccess::contiguous
                                                 : UserAccess::strided;
    L.strides[p] = collapsed[w];
    wide = wide || max_offset(collapsed[w], L.shape) > INT_MAX;
  }
  L.v.index64 = wide;

  // 16-byte vectors, as fused kernels stream, when the code does not need the element index and every
  // array is contiguous (or one value for all), aligned for them, with no raw array in the call.
  bool vectors = L.v.rank == 1 && !codegen::reads_index(s);
  std::size_t widest = 1;
  for (std::size_t p = 0; p < n_params && vectors; ++p) {
    const UserAccess a = L.v.access[p];
    vectors = a == UserAccess::scalar || a == UserAccess::broadcast || a == UserAccess::contiguous;
    if (a == UserAccess::contiguous) widest = std::max(widest, itemsize(L.v.dtypes[p]));
  }
  const std::int64_t V = static_cast<std::int64_t>(codegen::kVectorBytes / widest);
  for (std::size_t p = 0; p < n_params && vectors; ++p)
    if (L.v.access[p] == UserAccess::contiguous)
      vectors = L.arrays[p]->data_ptr() % (static_cast<std::uint64_t>(V) * itemsize(L.v.dtypes[p])) == 0;
  L.v.vector_width = static_cast<std::uint8_t>(vectors && V > 1 && L.n >= V ? V : 1);
  return L;
}

void launch(const UserKernel::Slot& k, ElementwiseLayout& L, const std::shared_ptr<StreamState>& stream) {
  // Arrays, scalars and raw structs by parameter; dims entries: the shape, then each parameter's strides.
  const std::size_t np = L.v.dtypes.size();
  std::vector<std::uint64_t> ptrs(np);
  std::vector<std::vector<std::int64_t>> raw(np);
  std::vector<void*> raw_args(np, nullptr);
  std::vector<const std::int64_t*> dims(1 + np);
  std::vector<const ArrayBase*> read, written;
  const std::size_t n_in = np - L.outs.size();
  dims[0] = L.shape.begin();
  for (std::size_t p = 0; p < np; ++p) {
    dims[1 + p] = L.strides[p].begin();
    if (!L.arrays[p]) continue;
    const ArrayBase& a = *L.arrays[p];
    (p < n_in ? read : written).push_back(&a);
    ptrs[p] = a.data_ptr();
    if (L.v.access[p] == UserAccess::raw_contiguous || L.v.access[p] == UserAccess::raw_strided) {
      raw[p] = {static_cast<std::int64_t>(a.data_ptr()), a.size()};
      if (L.v.access[p] == UserAccess::raw_strided) {
        for (int d = 0; d < a.ndim(); ++d) raw[p].push_back(a.shape()[d]);
        for (int d = 0; d < a.ndim(); ++d) raw[p].push_back(a.strides()[d]);
      }
      raw_args[p] = raw[p].data();
    }
  }
  LaunchArgs a;
  a.pointers = ptrs;
  a.scalars = L.scalars;
  a.raw = raw_args;
  a.dims = dims;
  a.count(codegen::Count::n) = L.n;
  // a thread per vector (the tail's threads take the last elements one by one)
  launch_kernel(k.kernel->function, k.signature, a, {blocks_for((L.n + L.v.vector_width - 1) / L.v.vector_width), 1},
                *stream);
  note_launch(read, written, stream);
  note_minimum(read, written);  // one kernel: it moves exactly the least
}

}  // namespace

Outputs run_elementwise(const UserKernel& k, const std::vector<UserArg>& args) {
  const auto& stream = current_stream_state();
  check_arrays(args, k, stream->device, false);
  ElementwiseLayout L = analyze(k, args, false);
  if (L.n > 0) {
    const UserKernel::Slot& kernel =
        k.kernel_for(L.v, stream->device, [&] { return codegen::emit_user_elementwise(k.spec, L.v); });
    launch(kernel, L, stream);
  }
  return Outputs(std::move(L.outs));
}

KernelInfo inspect_elementwise(const UserKernel& k, const std::vector<UserArg>& args) {
  check_arrays(args, k, -1, true);
  const ElementwiseLayout L = analyze(k, args, true);
  return finish_inspect(codegen::emit_user_elementwise(k.spec, L.v), L.v.describe());
}

}  // namespace detail

ElementwiseKernel::ElementwiseKernel(std::string in_params, std::string out_params, std::string operation,
                                     std::string name, ElementwiseOptions options)
    : impl_(std::make_shared<detail::UserKernel>(
          codegen::make_elementwise_spec(std::move(in_params), std::move(out_params), std::move(operation),
                                         std::move(name), std::move(options.preamble), std::move(options.options)))) {}

Outputs ElementwiseKernel::call(const std::vector<ArrayBase>& arrays) const {
  std::vector<detail::UserArg> args;
  for (const ArrayBase& a : arrays) args.push_back({const_cast<ArrayBase*>(&a), {}});
  return detail::run_elementwise(*impl_, args);
}

const std::string& ElementwiseKernel::name() const { return impl_->spec.name; }

}  // namespace fusion
