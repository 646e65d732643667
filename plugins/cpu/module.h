// SPDX-License-Identifier: Apache-2.0
// The module the c code generator makes: generated C compiled to a shared library, loaded on
// first use. Kind "c"; saved with its IR, source and library, so a module built here loads
// and runs on another machine of the same architecture without a compiler.
#ifndef BACKPLANE_PLUGINS_CPU_MODULE_H_
#define BACKPLANE_PLUGINS_CPU_MODULE_H_

#include <backplane/backplane.hpp>
#include <string>
#include <vector>

#include "c_emitter.h"
#include "compiler.h"

namespace backplane {
namespace cpu {

// A module for `ir` (verified; parsed once, by the build), whose C `source` was compiled with
// `options` into the shared library at `library_path`; `sites` are the emitter's fault sites
// (the messages of the run-time checks the source carries).
Module MakeCModule(ir::IRModule ir, std::string source, CompileOptions options,
                   std::string library_path, std::vector<codegen::FaultSite> sites);

// Reads what a c module's SaveToBytes wrote (runtime.module.load_from_bytes.c). Malformed
// input is an Error naming what is wrong.
Module LoadCModule(const std::string& bytes);

}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_MODULE_H_
