// SPDX-License-Identifier: Apache-2.0
// The c code generator: target.build.c and runtime.module.load_from_bytes.c.
#ifndef BACKPLANE_PLUGINS_CPU_CODEGEN_H_
#define BACKPLANE_PLUGINS_CPU_CODEGEN_H_

#include <backplane/backplane.hpp>
#include <string>

namespace backplane {
namespace cpu {

// Builds `ir_text` (the IR's text form, "# backplane-ir 1") for the `c` Target `target`:
// parses and verifies it (thread-bound loops are an error on a CPU), emits C, compiles it
// with the Target's cc and flags (reusing the disk cache) and returns a module of kind "c".
Module BuildC(const std::string& ir_text, const Target& target);

// Registers target.build.c and runtime.module.load_from_bytes.c.
void RegisterCodegen();

}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_CODEGEN_H_
