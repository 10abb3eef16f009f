// SPDX-License-Identifier: Apache-2.0
// What every generated kernel opens with, whatever its kind.
#pragma once
#include "codegen/source_writer.hpp"

namespace fusion::codegen {

/// The first statement of every generated kernel. fusion launches its kernels as programmatic dependents of the
/// kernel before them on the stream (runtime/exec/launch.cpp): the driver may then start this kernel's blocks as
/// that one's last blocks finish, and this wait holds them until it has finished and its writes are visible. Launched
/// without that attribute, or compiled for a device before sm_90, it waits for nothing.
inline void write_wait_for_previous_kernel(SourceWriter& w) {
  w.line("#if __CUDA_ARCH__ >= 900");
  w.line("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");  // the kernel before this one has finished");
  w.line("#endif");
}

}  // namespace fusion::codegen
