// SPDX-License-Identifier: Apache-2.0
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "runtime/compile/background_build.hpp"
#include "runtime/compile/cache_commands.hpp"
#include "runtime/compile/cubin_registers.hpp"
#include "runtime/compile/disk_cache.hpp"
#include "runtime/compile/kernel_cache.hpp"
#include "runtime/compile/nvrtc.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using fz::detail::CacheEntry;
using fz::detail::CacheKey;
using fz::detail::DiskCache;

namespace {

fs::path fresh_dir(const std::string& tag) {
  const fs::path d =
      fs::temp_directory_path() / fmt::format("fusion-test-{}-{}-{}", tag, getpid(), std::random_device{}());
  fs::remove_all(d);
  return d;
}

CacheEntry sample(const std::string& source = "extern \"C\" __global__ void k() {}") {
  return CacheEntry{CacheKey{source, "k", "13.0", "--gpu-architecture=sm_90", "sm_90"},
                    std::string("\x7f"
                                "ELF binary\0bytes",
                                16),
                    false,
                    12,
                    {}};
}

void rewrite(const fs::path& p, const std::function<void(std::string&)>& edit) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  edit(s);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

}  // namespace

TEST_CASE("disk cache: an entry round-trips and is found only by its full key", "[cache]") {
  DiskCache cache(fresh_dir("roundtrip"));
  const CacheEntry e = sample();
  CHECK_FALSE(cache.load(e.key));
  cache.store(e);
  auto hit = cache.load(e.key);
  REQUIRE(hit);
  CHECK(hit->binary == e.binary);
  CHECK(hit->registers == 12);
  CHECK(cache.path_for(e.key).parent_path().filename().string().size() == 2);  // sharded by hash prefix
  CacheKey other = e.key;
  other.options += " -O0";
  CHECK_FALSE(cache.load(other));
  other = e.key;
  other.nvrtc_version = "12.9";
  CHECK_FALSE(cache.load(other));
  fs::remove_all(cache.dir());
}

TEST_CASE("disk cache: corrupt, truncated or foreign entries are misses and get replaced", "[cache]") {
  DiskCache cache(fresh_dir("corrupt"));
  const CacheEntry e = sample();
  const fs::path p = cache.path_for(e.key);
  for (const auto& [what, edit] : std::vector<std::pair<std::string, std::function<void(std::string&)>>>{
           {"bit flip", [](std::string& s) { s[s.size() / 2] ^= 0x10; }},
           {"truncated", [](std::string& s) { s.resize(s.size() - 7); }},
           {"empty", [](std::string& s) { s.clear(); }},
           {"foreign version", [](std::string& s) { s[4] = 99; }},
           {"bad magic", [](std::string& s) { s[0] = 'X'; }}}) {
    INFO(what);
    cache.store(e);
    rewrite(p, edit);
    CHECK_FALSE(cache.load(e.key));
    cache.store(e);  // replaces the damaged file
    CHECK(cache.load(e.key));
  }
  // another key whose file landed at this path (a hash collision) is a miss, never a wrong binary
  CacheEntry imposter = sample("different source");
  cache.store(imposter);
  fs::copy_file(cache.path_for(imposter.key), p, fs::copy_options::overwrite_existing);
  CHECK_FALSE(cache.load(e.key));
  fs::remove_all(cache.dir());
}

TEST_CASE("disk cache: an unwritable directory means memory-only caching, never a failure", "[cache]") {
  if (geteuid() == 0) {
    // root ignores permissions; a path under a regular file is unwritable for everyone
    const fs::path file = fresh_dir("file");
    std::ofstream(file) << "not a directory";
    DiskCache cache(file / "sub");
    CHECK_NOTHROW(cache.store(sample()));
    CHECK_FALSE(cache.load(sample().key));
    CHECK(cache.location(sample().key).empty());  // no path to a file that was never written
    CHECK_NOTHROW(cache.store(sample()));  // warned once, then silent
    fs::remove(file);
  } else {
    const fs::path d = fresh_dir("readonly");
    fs::create_directories(d);
    fs::permissions(d, fs::perms::owner_read | fs::perms::owner_exec);
    DiskCache cache(d);
    CHECK_NOTHROW(cache.store(sample()));
    CHECK_FALSE(cache.load(sample().key));
    CHECK(cache.location(sample().key).empty());
    fs::permissions(d, fs::perms::owner_all);
    fs::remove_all(d);
  }
  DiskCache off(fresh_dir("off"), /*enabled=*/false);
  off.store(sample());
  CHECK_FALSE(off.load(sample().key));
  CHECK_FALSE(fs::exists(off.dir()));
}

TEST_CASE("disk cache: a directory at one entry path skips that entry and keeps the cache on", "[cache]") {
  const fs::path d = fresh_dir("blocked");
  DiskCache cache(d);
  CacheEntry blocked = sample();
  fs::create_directories(cache.path_for(blocked.key));  // a directory at the entry's own path
  CHECK_NOTHROW(cache.store(blocked));
  CHECK_FALSE(cache.load(blocked.key));
  CHECK(cache.location(blocked.key).empty());  // no path to an entry that was never written
  CacheEntry other = sample();
  other.key.kernel_name += "_other";
  cache.store(other);  // the cache is still on: other entries are written
  REQUIRE(cache.load(other.key));
  CHECK(cache.location(other.key) == cache.path_for(other.key).string());
  fs::remove_all(d);
}

TEST_CASE("disk cache: eight processes compiling the same new kernel all succeed", "[cache][nvrtc]") {
  const fs::path dir = fresh_dir("procs");
  // A kernel no earlier run has seen, so every process starts with a miss.
  const std::string tag = fmt::format("{:x}", std::random_device{}());
  fz::codegen::GeneratedKernel k{
      "fz_race_" + tag, 0, "extern \"C\" __global__ void fz_race_" + tag + "(float* p) { p[threadIdx.x] *= 2.0f; }\n"};
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 1;
      try {
        DiskCache cache(dir);
        std::string options;
        for (const auto& o : fz::detail::compile_options(fz::detail::default_target())) options += o + " ";
        CacheKey key{k.source, k.name, fz::detail::nvrtc_version(), options, fz::detail::default_target().name()};
        auto hit = cache.load(key);
        if (!hit) {
          auto out = fz::detail::compile(k.source, k.name, fz::detail::default_target());
          cache.store(CacheEntry{key, out.binary, false, out.registers, {}});
        }
        code = cache.load(key) ? 0 : 2;
      } catch (...) {
        code = 3;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  DiskCache cache(dir);
  const auto files = cache.entries();
  CHECK(files.size() == 1);
  for (auto& f : fs::recursive_directory_iterator(dir)) CHECK(f.path().filename().string().rfind(".tmp-", 0) != 0);
  fs::remove_all(dir);
}

TEST_CASE("the engine compiles a kernel once, then finds it in a cache", "[cache][nvrtc]") {
  auto x = fz::placeholder<double>({64});
  fz::reset_stats();
  const auto first = fz::inspect(fz::atan2(x, x + 1.0) * fz::hypot(x, 2.0) - fz::cbrt(x));
  const auto s1 = fz::stats();
  const auto second = fz::inspect(fz::atan2(x, x + 1.0) * fz::hypot(x, 2.0) - fz::cbrt(x));
  const auto s2 = fz::stats();
  CHECK(first.source == second.source);
  CHECK(s1.compiles + s1.disk_hits == 1);
  CHECK(s2.compiles == s1.compiles);
  // without a GPU inspect reads the disk cache; with one, the loaded module is found in memory
  CHECK(s2.disk_hits + s2.memory_hits == s1.disk_hits + s1.memory_hits + 1);
  CHECK(fs::exists(second.cache_path));
}

TEST_CASE("a kernel's registers are read from its cubin, as ptxas reports them, whatever NVRTC's log holds",
          "[cache][nvrtc]") {
  // Two kernels of different register needs. `--no-cache`: NVRTC's own cache (12.9 on, wherever a driver is
  // loaded) answers a compile it has seen with no ptxas report in the log, which is why the cubin is read.
  const std::string source = R"(
extern "C" __global__ void fz_light(float* x, int n) { const int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
extern "C" __global__ void fz_heavy(float* x, int n) {
  float a[24];
  for (int j = 0; j < 24; ++j) a[j] = x[j * n + threadIdx.x];
  float s = 0.0f;
  for (int j = 0; j < 24; ++j)
    for (int k = 0; k < 24; ++k) s += a[j] * a[k] * x[k];
  x[threadIdx.x] = s;
})";
  const fz::detail::Target sm90{90, false, false};
  const auto out = fz::detail::compile(source, "fz_heavy", sm90, {"--no-cache"});
  // ptxas' report for one entry function: "Compiling entry function 'NAME'", then "Used N registers"
  const auto reported = [&](const std::string& name) {
    const std::size_t entry = out.log.find("entry function '" + name + "'");
    const std::size_t used = out.log.find("Used ", entry);
    return entry == std::string::npos || used == std::string::npos ? -1 : std::stoi(out.log.substr(used + 5));
  };
  INFO(out.log);
  const int light = reported("fz_light"), heavy = reported("fz_heavy");
  REQUIRE(light > 0);
  REQUIRE(heavy > light);
  CHECK(fz::detail::registers_in_cubin(out.binary, "fz_light") == light);
  CHECK(fz::detail::registers_in_cubin(out.binary, "fz_heavy") == heavy);
  CHECK(out.registers == heavy);
  CHECK(fz::detail::registers_in_cubin(out.binary, "fz_other") == -1);  // two kernels, neither of them named
  // one kernel under another name (a user module's): its count
  const auto one = fz::detail::compile(source.substr(0, source.find("extern", 10)), "module", sm90, {"--no-cache"});
  CHECK(fz::detail::registers_in_cubin(one.binary, "module") == light);
  // not an image of that kind, or cut short: no count, and no read past its end
  CHECK(fz::detail::registers_in_cubin("", "fz_heavy") == -1);
  CHECK(fz::detail::registers_in_cubin(std::string_view(out.binary).substr(0, 200), "fz_heavy") == -1);
  std::uint64_t headers = 0;  // e_shoff: the section headers' offset
  std::memcpy(&headers, out.binary.data() + 0x28, sizeof headers);
  REQUIRE(headers + 64 < out.binary.size());
  CHECK(fz::detail::registers_in_cubin(std::string_view(out.binary).substr(0, headers + 32), "fz_heavy") == -1);
  std::string foreign = out.binary;
  foreign[4] = 1;  // a 32-bit ELF
  CHECK(fz::detail::registers_in_cubin(foreign, "fz_heavy") == -1);
  CHECK(fz::detail::registers_in_cubin(std::string(4096, '\x7f'), "fz_heavy") == -1);
}

TEST_CASE("a cached kernel stored without its register count (NVRTC's log had none) reports the cubin's",
          "[cache][nvrtc]") {
  auto x = fz::placeholder<float>({1000});
  const auto expr = fz::sin(x * 1.25f) * fz::sqrt(x + 7.0f) - fz::exp2(x);
  const auto first = fz::inspect(expr);
  REQUIRE(first.registers > 0);
  REQUIRE_FALSE(first.cache_path.empty());
  auto entry = DiskCache::read_file(first.cache_path);
  REQUIRE(entry);
  entry->registers = -1;  // as an entry written from a log without ptxas' report reads
  DiskCache::instance().store(*entry);
  REQUIRE(DiskCache::read_file(first.cache_path)->registers == -1);
  // without a GPU inspect reads the entry again (with one, the module loaded above answers)
  CHECK(fz::inspect(expr).registers == first.registers);
  entry->registers = first.registers;  // (the cache as it was)
  DiskCache::instance().store(*entry);
}

TEST_CASE("cache management: ls, show, stats, clear and prune", "[cache]") {
  DiskCache cache(fresh_dir("admin"));
  for (int i = 0; i < 4; ++i) {
    CacheEntry e = sample(fmt::format("extern \"C\" __global__ void k{}() {{}}", i));
    e.key.kernel_name = fmt::format("fz_kernel_{}", i);
    cache.store(e);
  }
  std::ostringstream ls, show, stats;
  fz::detail::cache_ls(cache, ls);
  CHECK_THAT(ls.str(), Catch::Contains("fz_kernel_0") && Catch::Contains("fz_kernel_3"));
  CHECK(fz::detail::cache_show(cache, "fz_kernel_2", show));
  CHECK(fz::detail::cache_show(cache, cache.entries().front().stem().string().substr(0, 6), show));  // by file hash
  CHECK_THAT(show.str(), Catch::Contains("void k2()"));
  CHECK_FALSE(fz::detail::cache_show(cache, "nothing_like_this", show));
  fz::detail::cache_stats(cache, stats);
  CHECK_THAT(stats.str(), Catch::Contains("entries:   4"));
  const auto one = fs::file_size(cache.entries().front());
  CHECK(fz::detail::cache_prune(cache, 2 * one) == 2);
  CHECK(cache.entries().size() == 2);
  CHECK(fz::detail::cache_clear(cache) == 2);
  CHECK(cache.entries().empty());
  fs::remove_all(cache.dir());
  DiskCache races(fresh_dir("verdicts"));
  // a product race's verdict (runtime/exec/product_race.cpp) shows the route and the kernel it keeps
  races.store(CacheEntry{CacheKey{"fz_matmul_add_bf16_0123456789abcdef\n8192x8192x8192 batch 1\n", "verdict fz_matmul_add_bf16",
                                  "13.0", fz::detail::kVerdictOptions, "sm_90"},
                         "generated fz_matmul_add_bf16_0123456789abcdef 1324.000 1252.000", false, -1, {}});
  std::ostringstream verdict;
  CHECK(fz::detail::cache_show(races, "verdict fz_matmul_add_bf16", verdict));
  CHECK_THAT(verdict.str(), Catch::Contains("// verdict (route, the fastest generated kernel, cuBLASLt us, its us): generated "
                                            "fz_matmul_add_bf16_0123456789abcdef 1324.000 1252.000"));
  fs::remove_all(races.dir());
}

TEST_CASE("a chained store reads a shared read-only store first and writes only its own", "[cache]") {
  const fs::path shared_dir = fresh_dir("shared"), own_dir = fresh_dir("own");
  auto shared = std::make_shared<DiskCache>(shared_dir);
  auto own = std::make_shared<DiskCache>(own_dir);
  const CacheEntry prebuilt = sample("// prebuilt\nextern \"C\" __global__ void k() {}");
  shared->store(prebuilt);
  fz::detail::ChainedStore chain(shared, own);

  const auto hit = chain.load(prebuilt.key);
  REQUIRE(hit);
  CHECK(hit->binary == prebuilt.binary);
  CHECK(hit->location == shared->path_for(prebuilt.key).string());  // where it was found, read once
  CHECK_FALSE(own->load(prebuilt.key));

  const CacheEntry fresh = sample("// compiled here\nextern \"C\" __global__ void k() {}");
  CHECK_FALSE(chain.load(fresh.key));
  chain.store(fresh);
  CHECK(own->load(fresh.key));
  CHECK_FALSE(shared->load(fresh.key));  // the shared store is never written
  CHECK(chain.location(fresh.key) == own->path_for(fresh.key).string());
  fs::remove_all(shared_dir);
  fs::remove_all(own_dir);
}

TEST_CASE("precompile fills the disk cache for several architectures without a GPU or a launch",
          "[cache][precompile]") {
  auto x = fz::placeholder<float>({1 << 20});
  auto m = fz::placeholder<float>({256, 65536});
  const auto seed = fz::exp(x) * 2.f + 1.f;
  const auto softmax = fz::exp(m - fz::max(m, -1, true)) / fz::sum(fz::exp(m - fz::max(m, -1, true)), -1, true);
  const std::vector<fz::KernelInfo> k = fz::precompile({80, 90}, seed, softmax);
  REQUIRE(k.size() == 4);  // per architecture, per expression
  CHECK(k[0].arch == "sm_80");
  CHECK(k[2].arch == "sm_90");
  CHECK(k[0].name == k[2].name);  // the same kernel, compiled twice
  CHECK_THAT(k[1].variant, !Catch::Contains("cluster"));  // sm_80 has no thread block clusters
  CHECK_THAT(k[3].variant, Catch::Contains("cluster"));   // sm_90 has
  if (!k[0].cache_path.empty()) {
    CHECK(std::filesystem::exists(k[0].cache_path));
    CHECK(k[0].cache_path != k[2].cache_path);
  }
  CHECK_THROWS_AS(fz::precompile({0}, seed), fz::Error);
}

TEST_CASE("cache warm compiles another cache's kernels for new architectures, once", "[cache][nvrtc]") {
  using fz::detail::cache_key;
  using fz::detail::target_for_arch;
  DiskCache from(fresh_dir("warm-from")), into(fresh_dir("warm-into"));
  // What another machine's cache holds: a generated kernel, a user kernel with its own options, a kernel
  // that only compiles for sm_90, and an entry whose options this fusion never writes.
  const std::string generated = fz::inspect(fz::placeholder<float>({4096}) * 3.f + 1.f).source;
  const std::string generated_name = fz::inspect(fz::placeholder<float>({4096}) * 3.f + 1.f).name;
  const std::string user = "extern \"C\" __global__ void scaled(float* x) { x[threadIdx.x] *= SCALE; }";
  const std::string hopper = "#if __CUDA_ARCH__ < 900\n#error needs sm_90\n#endif\nextern \"C\" __global__ void h() {}";
  const auto put = [&](const std::string& src, const std::string& name, std::vector<std::string> extra, bool minimal) {
    const auto t = target_for_arch(90);
    auto out = fz::detail::compile(src, name, t, extra, minimal);
    from.store(CacheEntry{cache_key(src, name, t, extra, minimal), out.binary, false, out.registers, {}});
  };
  put(generated, generated_name, {}, true);
  put(user, "scaled", {"-DSCALE=2"}, false);
  put(hopper, "h", {}, true);
  from.store(sample());  // options "--gpu-architecture=sm_90" alone: not what fusion writes
  std::ostringstream log;
  const auto r = fz::detail::cache_warm(from, into, {80, 90}, 2, log);
  CHECK(r.compiled == 5);  // 3 kernels for sm_90, 2 for sm_80
  CHECK(r.present == 0);
  CHECK(r.failed == 2);    // h for sm_80, and the foreign entry
  CHECK_THAT(log.str(), Catch::Contains("failed h for sm_80"));
  CHECK_THAT(log.str(), Catch::Contains("not ones this fusion writes"));
  const auto found = into.load(cache_key(user, "scaled", target_for_arch(80), {"-DSCALE=2"}, false));
  REQUIRE(found);
  CHECK(found->binary.rfind("\x7f" "ELF", 0) == 0);
  CHECK(into.load(cache_key(generated, generated_name, target_for_arch(80), {}, true)));
  // Again: everything is there. Without --arch: each entry's own architecture.
  const auto again = fz::detail::cache_warm(from, into, {80, 90}, 2, log);
  CHECK(again.compiled == 0);
  CHECK(again.present == 5);
  const auto own = fz::detail::cache_warm(from, into, {}, 1, log);
  CHECK(own.compiled == 0);
  CHECK(own.present == 3);
}

using test::ScopedEnv;

TEST_CASE("FUSION_CACHE and FUSION_ARCH take the spellings people write and refuse the rest", "[cache]") {
  for (const char* off : {"0", "off", "no", "false", "OFF", "False"}) {
    ScopedEnv env("FUSION_CACHE", off);
    CHECK_FALSE(fz::detail::cache_enabled_by_environment());
  }
  for (const char* on : {"1", "on", "yes", "true", ""}) {
    ScopedEnv env("FUSION_CACHE", on);
    CHECK(fz::detail::cache_enabled_by_environment());
  }
  {
    ScopedEnv env("FUSION_CACHE", "maybe");
    CHECK_THROWS_WITH(fz::detail::cache_enabled_by_environment(), Catch::Contains("give 0, off, no or false"));
  }
  {
    ScopedEnv env("FUSION_ARCH", "90");
    CHECK(fz::detail::default_target().arch == 90);
  }
  for (const char* typo : {"7", "999", "sm90"}) {
    ScopedEnv env("FUSION_ARCH", typo);
    CHECK_THROWS_AS(fz::detail::default_target(), fz::Error);
  }
  ScopedEnv env("FUSION_ARCH", "7");
  CHECK_THROWS_WITH(fz::detail::default_target(), Catch::Contains("give one like 90"));
}

TEST_CASE("a kernel built on a worker thread is asked for until ready, then is in the kernel cache; a failed build "
          "says why", "[cache][nvrtc]") {
  using fz::detail::artifact_in_background;
  const fz::detail::Target t = fz::detail::target_for_arch(90);
  auto kernel = [](const std::string& body) {
    fz::codegen::GeneratedKernel k;
    k.name = fmt::format("fz_background_{}_{}", getpid(), std::random_device{}());  // new to the cache
    k.source = fmt::format("extern \"C\" __global__ void {}(float* x) {{ {} }}\n", k.name, body);
    return k;
  };
  auto wait = [&](const fz::codegen::GeneratedKernel& k) {
    fz::detail::BackgroundArtifact b;
    for (int i = 0; i < 12000 && !b.artifact && b.failed.empty(); ++i) {
      b = artifact_in_background(k, t);
      if (!b.artifact && b.failed.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return b;
  };
  const auto k = kernel("x[threadIdx.x] *= 2.0f;");
  const auto first = artifact_in_background(k, t);
  CHECK_FALSE(first.artifact);  // the build has only begun: the caller does not wait for it
  CHECK(first.failed.empty());
  const auto done = wait(k);
  REQUIRE(done.artifact);
  CHECK(done.artifact->binary.size() > 100);
  CHECK(done.artifact->registers >= 0);
  CHECK(fz::detail::stored_artifact(k, t));  // in the kernel cache: a later process finds it at once
  CHECK(artifact_in_background(k, t).artifact->binary == done.artifact->binary);
  // a kernel that does not compile: its error comes back as words, nothing is thrown on either thread
  const auto broken = kernel("x[threadIdx.x] = undeclared_name;");
  const auto failed = wait(broken);
  CHECK_FALSE(failed.artifact);
  CHECK_THAT(failed.failed, Catch::Contains("undeclared_name"));
  CHECK_FALSE(fz::detail::stored_artifact(broken, t));
}
