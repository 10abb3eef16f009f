// SPDX-License-Identifier: Apache-2.0
#include "runtime/cuda/shared_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <glob.h>

#include <cstdlib>

namespace fusion::detail {

std::vector<std::string> library_candidates(const char* override_env, const std::string& soname, const char* wheel) {
  if (const char* p = std::getenv(override_env); p && *p) return {p};  // exactly this one
  std::vector<std::string> c{soname};
  std::vector<std::string> roots;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* p = std::getenv(env); p && *p) roots.push_back(p);
  std::string include = FUSION_CUDA_INCLUDE_DIR;  // the toolkit fusion was built with
  if (const auto at = include.rfind("/include"); at != std::string::npos) roots.push_back(include.substr(0, at));
  roots.push_back("/usr/local/cuda");
  for (const std::string& r : roots)
    for (const char* lib : {"/lib64/", "/lib/"}) c.push_back(r + lib + soname);
  std::vector<std::string> patterns = {"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                                       "/usr/lib/python3*/dist-packages"};
  for (const char* env : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* p = std::getenv(env); p && *p) patterns.push_back(std::string(p) + "/lib/python3*/site-packages");
  if (const char* home = std::getenv("HOME"); home && *home)
    patterns.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
  for (const std::string& pattern : patterns) {
    glob_t found{};
    if (glob(fmt::format("{}/nvidia/{}/lib/{}", pattern, wheel, soname).c_str(), 0, nullptr, &found) == 0)
      for (std::size_t i = 0; i < found.gl_pathc; ++i) c.push_back(found.gl_pathv[i]);
    globfree(&found);
  }
  return c;
}

OpenedLibrary open_first(const std::vector<std::string>& candidates) {
  OpenedLibrary l;
  for (const std::string& c : candidates) {
    if ((l.handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL))) {
      l.path = c;
      return l;
    }
    const char* why = dlerror();
    l.tried += fmt::format("\n  {}: {}", c, why ? why : "not loadable");
  }
  return l;
}

void* find_symbol(void* lib, const char* name) { return dlsym(lib, name); }

}  // namespace fusion::detail
