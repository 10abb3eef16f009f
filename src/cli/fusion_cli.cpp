// SPDX-License-Identifier: Apache-2.0
// The `fusion` command: manages the persistent kernel cache.
//   fusion cache ls | show <name-or-hash> | stats | clear | prune --max-bytes N
//   fusion cache warm [--arch N]... [--from DIR] [--jobs J]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/compile/cache_commands.hpp"
#include "runtime/compile/kernel_store.hpp"

namespace {

int usage() {
  std::fprintf(
      stderr,
      "usage: fusion cache ls                  list cached kernels\n"
      "       fusion cache show <name-or-hash> print a kernel's stored source\n"
      "       fusion cache stats               directory, entries, bytes\n"
      "       fusion cache clear               remove every entry\n"
      "       fusion cache prune --max-bytes N remove least recently used entries down to N bytes\n"
      "       fusion cache warm [--arch N]... [--from DIR] [--jobs J]\n"
      "                                        compile every kernel cached in DIR (default: the cache itself)\n"
      "                                        with this CUDA's NVRTC, for each architecture N (default: the\n"
      "                                        one each entry was built for, e.g. after a CUDA upgrade), into\n"
      "                                        the cache; what it holds already is skipped\n"
      "The directory is FUSION_CACHE_DIR, else $XDG_CACHE_HOME/fusion, else ~/.cache/fusion.\n");
  return 2;
}

/// `fusion cache warm [--arch N]... [--from DIR] [--jobs J]`
int warm(const fusion::detail::DiskCache& cache, int argc, char** argv) {
  using namespace fusion::detail;
  std::vector<int> archs;
  std::string from = cache.dir().string();
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const char* value = argv[++i];
    if (a == "--arch" && std::atoi(value) > 0) archs.push_back(std::atoi(value));
    else if (a == "--from") from = value;
    else if (a == "--jobs" && std::atoi(value) > 0) jobs = std::atoi(value);
    else return usage();
  }
  if (!cache.enabled()) {
    std::fprintf(stderr, "fusion: the disk cache is disabled (FUSION_CACHE=0): nothing to warm\n");
    return 1;
  }
  const DiskCache source(from);
  const WarmResult r = cache_warm(source, kernel_store(), archs, jobs, std::cout);
  std::printf("warmed %s from %s: %zu compiled, %zu already cached, %zu failed, in %.1f s on %d threads\n",
              cache.dir().c_str(), from.c_str(), r.compiled, r.present, r.failed, r.seconds, jobs);
  return r.failed == 0 ? 0 : 1;
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
  } else if (cmd == "warm") {
    return warm(cache, argc, argv);
  } else {
    return usage();
  }
  return 0;
}
