// SPDX-License-Identifier: Apache-2.0
#include "runtime/compile/background_build.hpp"

#include <future>
#include <map>
#include <mutex>

#include "fusion/error.hpp"
#include "runtime/compile/kernel_store.hpp"
#include "runtime/measure/stats_counters.hpp"

namespace fusion::detail {
namespace {

/// The builds of this process by cache key. Destroyed at exit, where each future from std::async waits for its
/// build: everything a build touches is made before this registry (so destroyed after it) or never destroyed.
class Builds {
 public:
  Builds() {
    (void)kernel_store();  // never destroyed
    (void)counters();
    (void)nvrtc_version();
    (void)compile_options(Target{90, false}, {}, false);  // (the toolkit's include directory, found once)
  }
  BackgroundArtifact poll_or_start(const codegen::GeneratedKernel& k, const Target& t) {
    const CacheKey key = cache_key(k.source, k.name, t, k.options, !k.full_headers);
    const std::string id = key.kernel_name + '\n' + key.target + '\n' + key.options + '\n' + key.source;
    std::lock_guard lock(mu_);
    auto it = builds_.find(id);
    if (it == builds_.end()) {
      if (auto a = stored_artifact(k, t)) return {std::move(a), {}};  // on disk already: no thread needed
      it = builds_.emplace(id, std::async(std::launch::async, [k, t] { return build_artifact(k, t); })).first;
    }
    std::future<Artifact>& f = it->second.future;
    if (it->second.done) return it->second.result;
    if (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return {};
    it->second.done = true;
    try {
      it->second.result.artifact = f.get();
    } catch (const std::exception& e) {
      it->second.result.failed = e.what();
    }
    return it->second.result;
  }

 private:
  struct Build {
    explicit Build(std::future<Artifact> f) : future(std::move(f)) {}
    std::future<Artifact> future;
    bool done = false;
    BackgroundArtifact result;
  };
  std::mutex mu_;
  std::map<std::string, Build> builds_;  // by everything the binary depends on
};

}  // namespace

BackgroundArtifact artifact_in_background(const codegen::GeneratedKernel& k, const Target& t) {
  static Builds builds;
  return builds.poll_or_start(k, t);
}

}  // namespace fusion::detail
