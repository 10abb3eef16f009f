// SPDX-License-Identifier: Apache-2.0
// Named activations and layers, as the peers name them (PyTorch, JAX): each is a composition of fusion's
// ops and reductions, so an expression like any other. A pointwise one fuses into whatever surrounds it;
// one that reduces rows and reads them again (softmax, the norms) is one layer kernel where the rows fit.
//
//   y = fz::softmax(logits);                         // one kernel: max, exp, sum and divide per row
//   h = fz::rms_norm(x + residual, weight, 1e-6f);   // the add fused into the norm's kernel
//   a = fz::silu(fz::matmul(x, w_gate)) * fz::matmul(x, w_up);
#pragma once
#include <concepts>
#include <string>
#include <utility>

#include "fusion/random.hpp"
#include "fusion/reductions.hpp"

namespace fusion {

/// max(x, 0). (`fz::max(x, 0)` is NumPy's reduction over axis 0, not this.)
template <Operand A>
auto relu(A&& a) {
  return maximum(detail::to_node(std::forward<A>(a)), 0);
}

/// Inverted dropout, as PyTorch's in training: each element zero with probability p, the others scaled by
/// 1 / (1 - p). The mask comes from the counter-based stream (seed, offset) at each element's flat index in
/// the result: the same seed and offset give the same mask (a step's backward pass can redraw it).
template <Operand A, std::integral Seed>
auto dropout(A&& a, double p, Seed seed, random::Offset offset = random::Offset{0}) {
  if (!(p >= 0 && p <= 1)) throw Error("dropout: p is a probability in [0, 1]; it is " + std::to_string(p));
  const auto x = detail::to_node(std::forward<A>(a));
  return where(random::uniform<float>(seed, offset) < static_cast<float>(p), 0, x * (p < 1 ? 1 / (1 - p) : 0.0));
}

/// 1 / (1 + exp(-x)): 0 and 1 at the far ends, no overflow.
template <Operand A>
auto sigmoid(A&& a) {
  return 1 / (1 + exp(-detail::to_node(std::forward<A>(a))));
}

/// x * sigmoid(x) (also called swish).
template <Operand A>
auto silu(A&& a) {
  const auto x = detail::to_node(std::forward<A>(a));  // (copies of a node share its arrays)
  return x / (1 + exp(-x));
}

/// log(1 + exp(x)), without overflow for large x (NumPy's logaddexp(x, 0)).
template <Operand A>
auto softplus(A&& a) {
  return logaddexp(detail::to_node(std::forward<A>(a)), 0);
}

/// exp(x) / sum(exp(x)) along `axis`, shifted by the maximum first so that no exp overflows.
template <Operand A>
auto softmax(A&& a, int axis = -1) {
  const auto x = detail::to_node(std::forward<A>(a));
  const auto e = exp(x - max(x, axis, true));
  return e / sum(e, axis, true);
}

/// log(softmax(x)) along `axis`, computed as x - max - log(sum(exp(x - max))) (no log of 0 for tiny terms).
template <Operand A>
auto log_softmax(A&& a, int axis = -1) {
  const auto x = detail::to_node(std::forward<A>(a));
  const auto shifted = x - max(x, axis, true);
  return shifted - log(sum(exp(shifted), axis, true));
}

/// log(sum(exp(x))) over `axes`, as scipy.special.logsumexp: shifted by the maximum (0 where that is not
/// finite, so a row of -inf gives -inf and a row holding +inf gives +inf).
template <Operand A>
auto logsumexp(A&& a, const Axes& axes = {}, KeepDims keepdims = false) {
  const auto x = detail::to_node(std::forward<A>(a));
  const auto kept = max(x, axes, true), top = max(x, axes, keepdims);
  return log(sum(exp(x - where(isfinite(kept), kept, 0)), axes, keepdims)) + where(isfinite(top), top, 0);
}

/// x / sqrt(mean(x^2) + eps) along the last axis, times `weight` (broadcast along it).
template <Operand A, Operand W, CppScalar E>
auto rms_norm(A&& a, W&& weight, E eps) {
  const auto x = detail::to_node(std::forward<A>(a));
  return x * rsqrt(mean(square(x), -1, true) + eps) * detail::to_node(std::forward<W>(weight));
}
/// The same without a weight.
template <Operand A, CppScalar E>
auto rms_norm(A&& a, E eps) {
  const auto x = detail::to_node(std::forward<A>(a));
  return x * rsqrt(mean(square(x), -1, true) + eps);
}

/// (x - mean) / sqrt(var + eps) along the last axis (the biased variance, as PyTorch's), times `weight`
/// plus `bias`.
template <Operand A, Operand W, Operand B, CppScalar E>
auto layer_norm(A&& a, W&& weight, B&& bias, E eps) {
  const auto x = detail::to_node(std::forward<A>(a));
  return (x - mean(x, -1, true)) * rsqrt(var(x, -1, true) + eps) * detail::to_node(std::forward<W>(weight)) +
         detail::to_node(std::forward<B>(bias));
}
/// The same without weight and bias.
template <Operand A, CppScalar E>
auto layer_norm(A&& a, E eps) {
  const auto x = detail::to_node(std::forward<A>(a));
  return (x - mean(x, -1, true)) * rsqrt(var(x, -1, true) + eps);
}

}  // namespace fusion
