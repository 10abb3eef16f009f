// The entry point every benchmark binary shares: run its body, and turn what stops it into one line and an exit status
// instead of std::terminate. No GPU (this machine, CI) is not a failure: the binary says why and exits 0, so scripts
// that run every benchmark go on. A fusion error (a bad --tune value, a kernel that fails to compile) exits 2.
#pragma once

#include <fmt/core.h>

#include <cstring>
#include <fusion/fusion.hpp>

namespace bench {

template <typename Body>
int guarded_main(const char* name, Body&& body) {
  try {
    if (fusion::device_count() == 0) {
      fmt::print("{} needs a GPU: {}\n", name, fusion::no_device_reason());
      return 0;
    }
    return body();
  } catch (const fusion::Error& e) {
    fmt::print(stderr, "{}: {}\n", name, e.what());
    return 2;
  }
}

/// For mains that read their flags by hand: argv[i] when it is none of `known` (a null-terminated list), else nullptr,
/// so that a misspelt flag stops the run instead of silently measuring the default.
inline const char* unknown_flag(int argc, char** argv, const char* const* known, const char* const* with_value) {
  for (int i = 1; i < argc; ++i) {
    bool found = false;
    for (const char* const* k = with_value; *k && !found; ++k)
      if (!std::strcmp(argv[i], *k)) found = true, ++i;
    for (const char* const* k = known; *k && !found; ++k)
      if (!std::strcmp(argv[i], *k)) found = true;
    if (!found) return argv[i];
  }
  return nullptr;
}

}  // namespace bench
