// SPDX-License-Identifier: Apache-2.0
// fusion's version: the headers' (macros, for #if) and the library's (fusion::version(), compiled in), so a
// program can tell that it was built against one and linked against another.
// CMakeLists.txt checks that project(fusion VERSION ...) says the same.
#pragma once
#include <compare>

#define FUSION_VERSION_MAJOR 0
#define FUSION_VERSION_MINOR 1
#define FUSION_VERSION_PATCH 0
/// One number for comparisons: 10000 * major + 100 * minor + patch.
#define FUSION_VERSION (FUSION_VERSION_MAJOR * 10000 + FUSION_VERSION_MINOR * 100 + FUSION_VERSION_PATCH)

namespace fusion {

/// A major.minor.patch version (fusion's, NCCL's), ordered as versions are.
struct Version {
  int major = 0, minor = 0, patch = 0;
  friend constexpr auto operator<=>(const Version&, const Version&) = default;
};

/// The headers' version.
inline constexpr Version header_version{FUSION_VERSION_MAJOR, FUSION_VERSION_MINOR, FUSION_VERSION_PATCH};

/// The version of the library this program is linked against.
Version version();

}  // namespace fusion
