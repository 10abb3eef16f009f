// The entry point every benchmark binary shares: run its body, and turn what stops it into one line and an exit status
// instead of std::terminate. No GPU (this machine, CI) is not a failure: the binary says why and exits 0, so scripts
// that run every benchmark go on. A fusion error (a bad --tune value, a kernel that fails to compile) exits 2.
#pragma once

#include <fmt/core.h>

#include <cstddef>
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

/// A flag a benchmark reads by hand, and how many values follow it.
struct Flag {
  const char* name;
  int values = 0;
};

/// argv[i] when it is none of `known` or lacks its values, else nullptr: a misspelt flag stops the run instead of
/// silently measuring the default.
template <std::size_t N>
const char* unknown_flag(int argc, char** argv, const Flag (&known)[N]) {
  for (int i = 1; i < argc; ++i) {
    const Flag* hit = nullptr;
    for (const Flag& f : known)
      if (!std::strcmp(argv[i], f.name)) hit = &f;
    if (!hit || i + hit->values >= argc) return argv[i];
    i += hit->values;
  }
  return nullptr;
}

}  // namespace bench
