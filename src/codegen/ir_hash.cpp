// SPDX-License-Identifier: Apache-2.0
// The IR's stable identity: the hash in every kernel's name and cache key. It hashes what a graph computes
// (an fz::function call by its definition, not its process-local id), so names agree across processes.
#include "codegen/device_functions.hpp"
#include "common/hash.hpp"
#include "fusion/ir.hpp"

namespace fusion::ir {

std::uint64_t hash(const Graph& g) {
  StableHasher h;
  h.add_u32(static_cast<std::uint32_t>(g.nodes.size()));
  for (const Node& n : g.nodes) {
    h.add_byte(static_cast<std::uint8_t>(n.op));
    h.add_byte(static_cast<std::uint8_t>(n.dtype));
    h.add_u32(n.a);
    h.add_u32(n.b);
    h.add_u32(n.c);
    if (n.op == Op::call && g.n_functions == 0) {  // a resolved call: its definition
      const codegen::DeviceFunction& f = codegen::device_function(n.slot);
      h.add(f.name);
      h.add(f.body);
      for (DType d : f.params) h.add_byte(static_cast<std::uint8_t>(d));
    } else {
      h.add_u32(n.slot);
    }
  }
  h.add_u32(static_cast<std::uint32_t>(g.outputs.size()));
  for (std::uint32_t o : g.outputs) h.add_u32(o);
  if (g.fast_math) h.add("fast math");  // appended, so precise graphs keep their hashes
  return h.digest();
}

}  // namespace fusion::ir
