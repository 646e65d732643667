// SPDX-License-Identifier: Apache-2.0
// The build driver behind bp_build, and the module kind the core itself implements.
#ifndef BACKPLANE_CORE_BUILD_H_
#define BACKPLANE_CORE_BUILD_H_

#include <cstddef>
#include <string>
#include <vector>

#include "object.h"

namespace backplane {
namespace core {

// The largest IR text bp_build takes (docs/host-guide.md, "Input limits"); `backplane build` reads
// kernel files with the same cap.
constexpr size_t kMaxIRTextBytes = size_t{16} << 20;  // 16 MiB

// bp_build: IR text for `target` (and an optional CPU `host` Target) to a module. Parse errors
// name the input `source_name` ("bp_build input" when empty).
Ref Build(const std::string& text, const bp_object_t* target, const bp_object_t* host,
          const std::string& source_name);

// Module kinds the core loads itself, without a plugin ("ir_host").
bool IsBuiltinModuleKind(const std::string& kind);
// Loads module `at` ("module 2") of a built-in kind from a saved file's payload, given the
// modules it imports there (it checks against them what the build established;
// docs/security.md). With `imports_only` (BP_MODULE_LOAD_NO_GLOBAL_CALLS) its host code may call
// only functions of those modules: another name is refused here, and a call never looks in the
// global registry.
Ref LoadBuiltinModule(const std::string& at, const std::string& kind, const void* data, size_t size,
                      const std::vector<Ref>& imports, bool imports_only);

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_BUILD_H_
