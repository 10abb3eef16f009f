// SPDX-License-Identifier: Apache-2.0
// Inputs that step through an array at a small stride (`x[..., ::2]`, `x[..., 1::2]`): codegen::Access::stepped. A
// kernel loads `step` whole 16-byte vectors of the array such an input steps through and picks its elements from
// them, so its loads are as wide and as many in flight as a contiguous input's; the sectors read are the same, as
// every 32 bytes hold an element it needs. H200, `m[:, ::2] + 1` of 8192^2 float32: element by element 87.2% of the
// limit counted in the sectors read, so 106.6% (bench/results/layouts/h200-2026-11-29-stepped.txt).
#pragma once
#include <cstdint>

#include "fusion/array_base.hpp"
#include "fusion/evaluate.hpp"
#include "schedule/layout.hpp"

namespace fusion::detail {

/// The one step of every input of `L` (not broadcast) that walks dimension `d` at a stride other than 0 and 1: 2 to
/// 4 elements, at most 16 bytes together; 0 where there is none; -1 where one cannot be read so (a gather's source,
/// a negative or larger stride, two different steps).
std::int64_t common_step(const Call& c, int K, const Layout& L, int d);

/// Whether stepped input `a` can be read as vectors of `width` of its elements: its first element lies past a vector
/// boundary by less than `step` (`phase`, set here; 0 on a boundary), so each vector loaded from the boundary
/// still holds the elements its outputs need.
bool stepped_phase(const ArrayBase& a, std::int64_t width, std::int64_t step, std::uint8_t& phase);

/// A linear kernel instead of N-d indexing where the strided inputs all step through an array at one step (one
/// dimension after collapsing: `x[..., ::2]` of a contiguous x); a rows kernel takes them along its rows
/// (layout.cpp, try_rows).
void try_stepped(const Call& c, int K, Layout& L);

}  // namespace fusion::detail
