// SPDX-License-Identifier: Apache-2.0
// Arrays over several GPUs (issue 18), first pieces: how an extent splits over devices, and NCCL, the
// collectives library, loaded at run time (dlopen, as the CUDA driver is): fusion builds, and a program
// that never spreads an array over GPUs runs, without it.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fusion/version.hpp"

namespace fusion {

/// NCCL's ncclUniqueId: what every process of a group needs to join it. ProcessGroup::new_id() makes one
/// (on one process); the others get it by any channel (a file, MPI, a socket).
struct NcclId {
  std::array<char, 128> bytes{};
  bool operator==(const NcclId&) const = default;
};

/// How a collective (`all_reduce`) combines the devices' or processes' arrays, element by element.
enum class Combine { sum, prod, max, min };

/// How `extent` elements split over `parts` devices when no sizes are given: as numpy.array_split, the
/// first `extent % parts` parts hold one element more (10 over 3: 4, 3, 3); parts may be empty.
std::vector<std::int64_t> split_sizes(std::int64_t extent, int parts);

/// Checks sizes given for a split: none negative, and they add up to `extent` (a ShapeError says which).
void check_split(std::int64_t extent, const std::vector<std::int64_t>& sizes);

/// The NCCL library fusion uses, loading it on first use: FUSION_NCCL_LIBRARY (a path) when set, else
/// libnccl.so.2 from the loader's search path, else the CUDA toolkit's lib64/ and lib/, else the
/// nvidia-nccl wheel's (site-packages/nvidia/nccl/lib, as PyTorch and JAX install it). Throws NcclError
/// saying what was tried when none loads or it is older than 2.10 (bfloat16 collectives).
/// Loading sets NCCL_NVLS_ENABLE=0 unless the environment sets it: NVLink multicast stays off.
Version nccl_version();

/// Whether NCCL loads, without throwing; nccl_unavailable_reason() says why not.
bool nccl_available();
std::string nccl_unavailable_reason();

}  // namespace fusion
