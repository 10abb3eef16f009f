// SPDX-License-Identifier: Apache-2.0
// Faults without a GPU: a disk cache holding an entry of another architecture, a disk that fills up,
// and processes killed while they write the cache. Each is a miss or a warning, never a failure or a
// half-written entry.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "runtime/compile/disk_cache.hpp"
#include "runtime/compile/kernel_cache.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using fz::detail::CacheEntry;
using fz::detail::CacheKey;
using fz::detail::DiskCache;

namespace {

fs::path fresh_dir(const std::string& tag) {
  return fs::temp_directory_path() / fmt::format("fusion-faults-{}-{}-{}", tag, getpid(), std::random_device{}());
}

/// A real kernel, compiled by NVRTC: `id` makes its source unique.
CacheEntry compiled(const std::string& id) {
  const std::string name = "fz_fault_" + id;
  const std::string source = "extern \"C\" __global__ void " + name + "(float* p) { p[threadIdx.x] += 1.0f; }\n";
  const auto t = fz::detail::default_target();
  std::string options;
  for (const auto& o : fz::detail::compile_options(t)) options += o + " ";
  auto out = fz::detail::compile(source, name, t);
  return CacheEntry{
      CacheKey{source, name, fz::detail::nvrtc_version(), options, t.name()}, out.binary, false, out.registers, {}};
}

/// Runs `body` in a child process; its exit code (or 128 + the signal that ended it).
int in_child(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (...) {
      code = 98;
    }
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool has_temp_files(const fs::path& dir) {
  std::error_code ec;
  for (auto& f : fs::recursive_directory_iterator(dir, ec))
    if (f.path().filename().string().rfind(".tmp-", 0) == 0) return true;
  return false;
}

}  // namespace

TEST_CASE("faults: an entry built for another architecture is a miss, never a wrong binary", "[faults][cache]") {
  DiskCache cache(fresh_dir("arch"));
  CacheEntry mine{CacheKey{"extern \"C\" __global__ void k() {}", "k", "13.0", "-arch=sm_90", "sm_90"},
                  "binary for sm_90", false, 8};
  CacheEntry other = mine;
  other.key.target = "sm_80";
  other.key.options = "-arch=sm_80";
  other.binary = "binary for sm_80";
  CHECK(cache.path_for(mine.key) != cache.path_for(other.key));  // the architecture is part of the key
  cache.store(other);
  CHECK_FALSE(cache.load(mine.key));
  // even copied over this architecture's path (a foreign cache directory), it is refused
  fs::create_directories(cache.path_for(mine.key).parent_path());
  fs::copy_file(cache.path_for(other.key), cache.path_for(mine.key));
  CHECK_FALSE(cache.load(mine.key));
  cache.store(mine);
  auto hit = cache.load(mine.key);
  REQUIRE(hit);
  CHECK(hit->binary == "binary for sm_90");
  fs::remove_all(cache.dir());
}

TEST_CASE("faults: a full disk means memory-only caching, with no partial entry left behind",
          "[faults][cache][nvrtc]") {
  const fs::path dir = fresh_dir("full");
  const CacheEntry e = compiled(fmt::format("full_{:x}", std::random_device{}()));
  REQUIRE(e.binary.size() > 1024);
  // The child may write only 512 bytes per file (RLIMIT_FSIZE): every cache write fails part way, as
  // on a full disk. It must go on without the disk cache.
  const int code = in_child([&] {
    signal(SIGXFSZ, SIG_IGN);  // a failed write instead of a signal
    rlimit limit{512, 512};
    setrlimit(RLIMIT_FSIZE, &limit);
    DiskCache cache(dir);
    cache.store(e);  // warns once
    cache.store(e);
    if (cache.load(e.key)) return 2;  // nothing half-written may load
    if (fs::exists(cache.path_for(e.key))) return 3;
    if (has_temp_files(dir)) return 4;
    return 0;
  });
  CHECK(code == 0);
  DiskCache cache(dir);  // with room again, the same directory works
  cache.store(e);
  CHECK(cache.load(e.key));
  fs::remove_all(dir);
}

TEST_CASE("faults: eight processes share a cache, compiling the same and different kernels; three are killed mid-write",
          "[faults][cache][nvrtc]") {
  const fs::path dir = fresh_dir("killed");
  const std::string run = fmt::format("{:x}", std::random_device{}());
  auto kernel_id = [&](int child, int k) {
    return k < 2 ? fmt::format("{}_shared{}", run, k) : fmt::format("{}_{}_{}", run, child, k);
  };
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 0;
      try {
        DiskCache cache(dir);
        for (int k = 0; k < 5; ++k) {
          const CacheEntry e = compiled(kernel_id(i, k));
          if (!cache.load(e.key)) cache.store(e);
          if (!cache.load(e.key)) code = 2;
        }
      } catch (...) {
        code = 3;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  std::mt19937 rng(std::random_device{}());
  for (int i : {1, 4, 6}) {  // killed at random moments: mid-compile, mid-write or between kernels
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 400)(rng)));
    kill(children[static_cast<std::size_t>(i)], SIGKILL);
  }
  int finished = 0;
  for (std::size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    waitpid(children[i], &status, 0);
    if (WIFSIGNALED(status)) {
      CHECK(WTERMSIG(status) == SIGKILL);
      continue;
    }
    CHECK(WEXITSTATUS(status) == 0);  // every process that was not killed succeeded
    ++finished;
  }
  CHECK(finished >= 5);
  // Every entry in the directory loads in full: a killed writer leaves at most a temporary file.
  DiskCache cache(dir);
  std::set<fs::path> entries;
  for (int i = 0; i < 8; ++i)
    for (int k = i == 0 ? 0 : 2; k < 5; ++k) {  // the two shared kernels once
      const CacheEntry e = compiled(kernel_id(i, k));
      if (!fs::exists(cache.path_for(e.key))) continue;
      entries.insert(cache.path_for(e.key));
      const auto hit = cache.load(e.key);
      REQUIRE(hit);
      CHECK(hit->binary == e.binary);
    }
  CHECK(entries.size() >= 2 + 5 * 3);  // the survivors' kernels at least
  CHECK(cache.entries().size() == entries.size());
  fs::remove_all(dir);
}
