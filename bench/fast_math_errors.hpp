// SPDX-License-Identifier: Apache-2.0
// fusion-bench --fast-math: each float32 op's error against float64, precise and under fz::FastMath.
#pragma once

namespace bench {

/// Prints, per op and input domain, the largest and mean error in float32 ulps (and the largest absolute
/// error) of the precise kernel and of the fast-math one, over 2^20 inputs spread over the domain.
void print_fast_math_errors();

}  // namespace bench
