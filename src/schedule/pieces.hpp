// SPDX-License-Identifier: Apache-2.0
// Where a concatenate's pieces lie in a kernel's index space. A join packs, for each test of where an element
// lies (ir::Op::leading), the axes after the joined one, a bound along it and its own extent there; the kernel
// tests `i % period < bound` on its flat index i. The launcher turns the first two into that period and bound
// for the index space it launches over, which may be larger than the join's own shape: in
// `concatenate(1, a, b) + c` with c of shape (8, n, m) and the join of (n, m), the kernel numbers c's elements.
#pragma once
#include <vector>

#include "fusion/evaluate.hpp"
#include "fusion/shape.hpp"

namespace fusion::detail {

/// The scalar arguments of `c` with its joins' positions resolved for index space `space`, in `storage` (the
/// launcher calls it only for a call that joins: exec's Lowered::has_join).
const ScalarArg* place_pieces(const Call& c, const Shape& space, std::vector<ScalarArg>& storage);

/// Whether every join test of `c`, resolved for index space `space`, has a period of a whole number of rows of
/// `row` elements: a rows kernel then knows an element's position from its row's and its column (layout.cpp asks
/// before it chooses one for a call that joins).
bool periods_whole_rows(const Call& c, const Shape& space, std::int64_t row);

/// Whether every join test of `c`, resolved for index space `space`, has a bound of a whole number of vectors of
/// `width` elements: in a rows kernel whose periods are whole rows of whole vectors, every column limit is then a
/// whole number of vectors, and a vector's elements all lie in one piece (layout.cpp: Variant::vector_joins).
bool bounds_whole_vectors(const Call& c, const Shape& space, std::int64_t width);

/// Per scalar slot of `g`: whether a join's position reads it (the launcher rewrites it: never shared).
std::vector<bool> position_scalars(const ir::Graph& g);

}  // namespace fusion::detail
