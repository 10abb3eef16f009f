// SPDX-License-Identifier: Apache-2.0
// The `fusion` command: manages the persistent kernel cache.
//   fusion cache ls | show <name-or-hash> | stats | clear | prune --max-bytes N
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "runtime/compile/cache_commands.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: fusion cache ls                  list cached kernels\n"
               "       fusion cache show <name-or-hash> print a kernel's stored source\n"
               "       fusion cache stats               directory, entries, bytes\n"
               "       fusion cache clear               remove every entry\n"
               "       fusion cache prune --max-bytes N remove least recently used entries down to N bytes\n"
               "The directory is FUSION_CACHE_DIR, else $XDG_CACHE_HOME/fusion, else ~/.cache/fusion.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fusion::detail;
  if (argc < 3 || std::string(argv[1]) != "cache") return usage();
  const std::string cmd = argv[2];
  const DiskCache cache(default_cache_dir());
  if (cmd == "ls") {
    cache_ls(cache, std::cout);
  } else if (cmd == "show" && argc == 4) {
    if (!cache_show(cache, argv[3], std::cout)) {
      std::fprintf(stderr, "fusion: no cached kernel matches '%s' (see `fusion cache ls`)\n", argv[3]);
      return 1;
    }
  } else if (cmd == "stats") {
    cache_stats(cache, std::cout);
  } else if (cmd == "clear") {
    std::printf("removed %zu entries\n", cache_clear(cache));
  } else if (cmd == "prune" && argc == 5 && std::string(argv[3]) == "--max-bytes") {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(argv[4], &end, 10);
    if (!end || *end) return usage();
    std::printf("removed %zu entries\n", cache_prune(cache, n));
  } else {
    return usage();
  }
  return 0;
}
