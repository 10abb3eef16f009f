// SPDX-License-Identifier: Apache-2.0
// Running an expression as one layer kernel (codegen/layer_variant.hpp): the shapes checked, the
// outputs prepared, the layout analyzed, the kernel found or built, launched.
#include "codegen/emit_layer.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/exec/evaluate_internal.hpp"
#include "runtime/exec/launch.hpp"
#include "runtime/exec/layer_layout.hpp"
#include "runtime/memory/storage.hpp"

namespace fusion::detail {

using codegen::LayerVariant;
using LayerSlot = KernelSlot<LayerVariant>;

namespace {

const LayerSlot& kernel_for(const Lowered& lw, const LayerVariant& v, int device, std::string_view name) {
  return find_or_build(lw.layer_slots, v, device, name, [&] {
    return new_slot(v, device, name, codegen::emit_layer(merged_graph(lw, v.param_of_slot), v, name));
  });
}

void launch(const LayerSlot& k, const LayerLayout& L, const Call& c, ArrayBase* const* outs, int K,
            const std::shared_ptr<StreamState>& stream) {
  // Arrays and dims entries are numbered as emit_layer's signature names them.
  const int np = L.v.n_params;
  std::uint64_t ptrs[codegen::kMaxParams + codegen::kMaxOutputs];
  const std::int64_t* dims[codegen::layer_row_stride(codegen::kMaxParams + codegen::kMaxOutputs)];
  for (int p = 0; p < np; ++p) ptrs[p] = L.params[p]->data_ptr();
  for (int o = 0; o < K; ++o) ptrs[np + o] = outs[o]->data_ptr();
  dims[codegen::kLayerKeptShape] = L.kshape.begin();
  for (int op = 0; op < np + K; ++op) {
    dims[codegen::layer_kept_strides(op)] = L.kst[op].begin();
    dims[codegen::layer_row_stride(op)] = &L.rst[op];
  }
  LaunchArgs a;
  a.pointers = {ptrs, static_cast<std::size_t>(np + K)};
  a.scalars = {c.scalars, static_cast<std::size_t>(c.n_scalars)};
  a.dims = {dims, codegen::layer_row_stride(np + K - 1) + 1};
  a.count(codegen::Count::n_out) = L.n_rows;
  a.count(codegen::Count::n_red) = L.n_red;
  a.divisors = L.divisors;
  launch_kernel(k.kernel->function, k.signature, a, {L.blocks, 1, L.v.block, L.shared_bytes}, *stream);
  note_launch({L.params, static_cast<std::size_t>(np)}, {outs, static_cast<std::size_t>(K)}, stream);
}

}  // namespace

bool evaluate_layer(const Call& c, ArrayBase* const* outs, int K, AssignMode mode) {
  LayerShapes S;
  if (!layer_shapes(c, S)) return false;
  for (int k = 0; k < K; ++k) {
    // a layer kernel writes each result once: no broadcasting into a larger array, no shared outputs
    if (mode == AssignMode::into && outs[k]->has_storage() && outs[k]->shape() != S.out[static_cast<std::size_t>(k)]) return false;
    for (int j = 0; j < k; ++j)
      if (outs[k] == outs[j] || (mode != AssignMode::fresh && outs[k]->has_storage() && outs[j]->has_storage() &&
                                 shares_memory(*outs[k], *outs[j])))
        return false;
  }
  const auto& stream = current_stream_state();
  bool any = false;
  for (int k = 0; k < K; ++k) any = prepare_output(c, *outs[k], mode, stream->device, S.out[static_cast<std::size_t>(k)]) || any;
  if (!any || S.n_rows == 0) return true;  // nothing to compute: no launch
  LayerLayout L;
  if (!analyze_layer(c, S, outs, K, stream->device, L)) return false;
  launch(kernel_for(*c.lowered, L.v, stream->device, c.name), L, c, outs, K, stream);
  return true;
}

bool inspect_layer(const Call& c, KernelInfo& info) {
  LayerShapes S;
  if (!layer_shapes(c, S)) return false;
  const int K = static_cast<int>(c.lowered->graph.outputs.size());
  std::vector<ArrayBase> outs;
  ArrayBase* ptrs[codegen::kMaxOutputs];
  for (int k = 0; k < K; ++k)
    outs.push_back(ArrayBase::make_placeholder(c.lowered->graph.dtype(c.lowered->graph.outputs[static_cast<std::size_t>(k)]),
                                               S.out[static_cast<std::size_t>(k)]));
  for (int k = 0; k < K; ++k) ptrs[k] = &outs[static_cast<std::size_t>(k)];
  LayerLayout L;
  const int device = device_count() > 0 ? enter_current_device() : -1;
  if (!analyze_layer(c, S, ptrs, K, device, L)) return false;
  info = finish_inspect(codegen::emit_layer(merged_graph(*c.lowered, L.v.param_of_slot), L.v, c.name),
                        fmt::format("{}; {}", L.v.describe(), L.why));
  return true;
}

}  // namespace fusion::detail
