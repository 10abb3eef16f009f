// SPDX-License-Identifier: Apache-2.0
// A scatter's bins in shared memory (Variant::private_bins): each block adds into its own copy of a small target,
// then adds that copy into the target once, a global atomic per bin and block instead of per element.
#pragma once
#include <string>

#include "codegen/source_writer.hpp"
#include "fusion/dtype.hpp"
#include "fusion/ir.hpp"

namespace fusion::codegen {

/// The block's bins (`fz_bins`, `words` of type `bins_t`, named from the kernel's `fz_nbins`) set to `identity`.
void write_bins_open(SourceWriter& w, const std::string& bins_t, const std::string& words, const std::string& identity);

/// After the elements: every bin the block changed added into the target `out` with `op` (of dtype `d`); with
/// exact sums (`exact_words` W > 0), word k of each bin added into the target's plane k, the last (flags) or-ed.
void write_bins_flush(SourceWriter& w, int exact_words, const std::string& bins_t, const std::string& words,
                      ir::Op op, DType d);

}  // namespace fusion::codegen
