// SPDX-License-Identifier: Apache-2.0
// The registers a kernel uses, read from the cubin itself. ptxas' report ("Used N registers", which
// `--ptxas-options=-v` puts in NVRTC's log) is missing whenever NVRTC serves a compile from its own cache: since
// 12.9 it keeps one beside the driver's (~/.nv/ComputeCache) wherever a driver is loaded, and a hit runs no ptxas
// (on the GPU machine every Hopper kernel inspected twice read -1 registers; here, with no driver, never).
#pragma once
#include <string_view>

namespace fusion::detail {

/// `kernel`'s register count from the EIATTR_REGCOUNT attribute of `cubin`'s .nv.info section (a 64-bit,
/// little-endian ELF image as NVRTC writes it); the only kernel's where `kernel` names none of them; -1 where the
/// image is not such an ELF file or holds no count for it.
int registers_in_cubin(std::string_view cubin, std::string_view kernel);

}  // namespace fusion::detail
