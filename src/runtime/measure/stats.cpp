// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <ostream>
#include <string>
#include <string_view>

#include "fusion/inspect.hpp"
#include "runtime/measure/stats_counters.hpp"

namespace fusion {

detail::Counters& detail::counters() {
  static Counters c;
  return c;
}

Stats stats() {
  const auto& c = detail::counters();
  return Stats{c.compiles,   c.memory_hits,   c.disk_hits,  c.launches,
               c.bytes_read, c.bytes_written, c.compile_ms, c.min_bytes};
}

void reset_stats() {
  auto& c = detail::counters();
  c.compiles = c.memory_hits = c.disk_hits = c.launches = c.bytes_read = c.bytes_written = c.min_bytes = 0;
  c.compile_ms = 0;
}

std::ostream& operator<<(std::ostream& os, const Stats& s) {
  return os << fmt::format("compiles: {} ({:.1f} ms)  memory hits: {}  disk hits: {}  launches: {}  "
                           "bytes read: {}  bytes written: {} (at least: {})",
                           s.compiles, s.compile_ms, s.memory_hits, s.disk_hits, s.launches, s.bytes_read,
                           s.bytes_written, s.min_bytes);
}

std::ostream& operator<<(std::ostream& os, const KernelInfo& k) {
  if (k.kernels > 1) {
    os << fmt::format("{} kernels, in launch order:\n", k.kernels);
    for (std::size_t i = 0; i < k.plan.size(); ++i) os << fmt::format("  {}. {}\n", i + 1, k.plan[i]);
    os << "the last one:\n";
  }
  os << fmt::format("kernel {}\n  hash {:016x}, {}, {} register(s), target {}\n", k.name, k.hash, k.variant,
                    k.registers, k.arch);
  // One kernel of a region: what its plan entry says beyond the kernel (the statements it covers, what stays
  // in registers), which the list above gives for several.
  const std::string entry = fmt::format("{} [{:016x}] ({}): ", k.name, k.hash, k.variant);
  if (k.kernels == 1 && k.plan.size() == 1 && k.plan[0].starts_with(entry))
    os << "  " << std::string_view(k.plan[0]).substr(entry.size()) << "\n";
  if (!k.cache_path.empty()) os << "  cached at " << k.cache_path << "\n";
  return os << k.source;
}

}  // namespace fusion
