// SPDX-License-Identifier: Apache-2.0
// The kinds of fused kernel and the one lookup for all of them: a kind is a variant type (how its
// kernel is laid out), an emitter and a slot list in Lowered. A new kind of kernel is a row of
// KernelKind and a list in Lowered::Slots; kernel_for and generate serve it unchanged.
#pragma once
#include <string_view>
#include <tuple>

#include "codegen/emit_elementwise.hpp"
#include "codegen/emit_layer.hpp"
#include "codegen/emit_product.hpp"
#include "codegen/emit_reduction.hpp"
#include "codegen/emit_scan.hpp"
#include "runtime/exec/evaluate_internal.hpp"

namespace fusion::detail {

template <class V> struct KernelKind;
template <> struct KernelKind<codegen::Variant> {  // elementwise: linear, vectorized or strided
  static constexpr auto emit = &codegen::emit_elementwise;
};
template <> struct KernelKind<codegen::ReduceVariant> {  // one or several reductions over the same axes
  static constexpr auto emit = &codegen::emit_reduction;
};
template <> struct KernelKind<codegen::LayerVariant> {  // row layers: reductions that meet their rows again
  static constexpr auto emit = &codegen::emit_layer;
};
template <> struct KernelKind<codegen::ScanVariant> {  // running reductions along an axis
  static constexpr auto emit = &codegen::emit_scan;
};
template <> struct KernelKind<codegen::ProductVariant> {  // a matrix product with its epilogue (product_race)
  static constexpr auto emit = &codegen::emit_product;
};

/// The source of `lw`'s kernel in variant `v` (its inputs merged as the variant reads them).
template <class V> codegen::GeneratedKernel generate(const Lowered& lw, const V& v, std::string_view name) {
  return KernelKind<V>::emit(merged_graph(lw, v.param_of_slot), v, name);
}

/// `lw`'s kernel in variant `v` on `device`, compiled and loaded once, then found without a lock.
template <class V>
const KernelSlot<V>& kernel_for(const Lowered& lw, const V& v, int device, std::string_view name) {
  return find_or_build(std::get<std::atomic<KernelSlot<V>*>>(lw.slots), v, device, name,
                       [&] { return new_slot(v, device, name, generate(lw, v, name)); });
}

/// ... if it can be had without waiting for NVRTC: found, loaded from the kernel store, or built on a worker
/// thread since an earlier ask (`k`: its source, generate(lw, v, name)); null while it builds, with `failed` set
/// where the build failed.
template <class V>
const KernelSlot<V>* kernel_if_ready(const Lowered& lw, const V& v, int device, std::string_view name,
                                     const codegen::GeneratedKernel& k, std::string* failed) {
  const auto& head = std::get<std::atomic<KernelSlot<V>*>>(lw.slots);
  if (const auto* s = find_slot(head, v, device, name, context_generation(device))) return s;
  if (!load_module_if_ready(k, device, failed)) return nullptr;
  return &kernel_for(lw, v, device, name);  // (generated once more, then the module found in memory)
}

}  // namespace fusion::detail
