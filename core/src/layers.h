// SPDX-License-Identifier: Apache-2.0
// Layers (c_api.h, "Layers"; docs/layer-guide.md): the chain of bp_layer_t that wraps the
// DeviceAPI tables, the module functions the core hands out and the code generators.
#ifndef BACKPLANE_CORE_LAYERS_H_
#define BACKPLANE_CORE_LAYERS_H_

#include <string>
#include <vector>

#include "common.h"
#include "object.h"

namespace backplane {
namespace core {

// One enabled layer: its name, its options, and its table once the chain is built.
struct EnabledLayer {
  std::string name;
  std::string options;
  std::string origin;  // "BACKPLANE_LAYERS" or "host"
  const bp_layer_t* layer = nullptr;
  std::string owner;  // the plugin that registered layer.<name>
};

// The chain, built on first use (loading each layer's plugin) and fixed from then on. Throws
// the error that stopped it, every time, so a layer that was asked for is never dropped
// silently.
const std::vector<EnabledLayer>& LayerChain();

// Parses `spec` and appends its layers; BP_ERR_INVALID_ARGUMENT once the chain is fixed.
void EnableLayers(const std::string& spec, const std::string& origin);

// `table` (the plugin's, full size) wrapped by every layer of the chain, innermost first; the
// table itself when no layer wraps this type. The result lives until the process exits.
const bp_device_api_t* WrapDeviceTable(int32_t type, const char* type_name,
                                       const bp_device_api_t* table);

// `func`, named `name` in a module of kind `module_kind`, wrapped by the layers that wrap
// functions (itself when none does).
Ref WrapModuleFunction(const char* module_kind, const std::string& name, Ref func);

// Tells the layers with on_module that `module` (of `kind`, static) was made (`alive`) or is
// about to be destroyed. Does nothing until the chain is built (and when it failed); returns
// whether any layer was told, which the module keeps so that its end is told exactly when its
// start was. Never throws.
bool TellLayersOfModule(const bp_object_t* module, const char* kind, bool alive);

// The code generator `codegen` of `target_kind`, wrapped by the layers that wrap builds.
Ref WrapCodegen(const std::string& target_kind, Ref codegen);

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_LAYERS_H_
