// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include "fusion/distributed.hpp"
#include "fusion/error.hpp"

namespace fusion {

std::vector<std::int64_t> split_sizes(std::int64_t extent, int parts) {
  if (parts < 1) throw Error(fmt::format("split over {} parts: give one part or more", parts));
  if (extent < 0) throw ShapeError(fmt::format("split of a negative extent ({})", extent));
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(parts), extent / parts);
  for (std::int64_t i = 0; i < extent % parts; ++i) ++sizes[static_cast<std::size_t>(i)];
  return sizes;
}

void check_split(std::int64_t extent, const std::vector<std::int64_t>& sizes) {
  if (sizes.empty()) throw Error("a split needs one part or more");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) throw ShapeError(fmt::format("split part {} has a negative size ({})", i, sizes[i]));
    total += sizes[i];
  }
  if (total != extent)
    throw ShapeError(fmt::format("split sizes add up to {} but the axis has {} elements", total, extent));
}

}  // namespace fusion
