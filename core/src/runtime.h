// SPDX-License-Identifier: Apache-2.0
// The process's function registry and plugin loader, made together and wired by reference:
// the loader registers into (and rolls back from) the registry it was given, and a lookup
// that may load a plugin asks the loader. Neither reaches the other through a global; the C
// entry points, which carry no context, reach both through Runtime::Get().
#ifndef BACKPLANE_CORE_RUNTIME_H_
#define BACKPLANE_CORE_RUNTIME_H_

#include <string>

#include "plugin_loader.h"
#include "registry.h"

namespace backplane {
namespace core {

struct Runtime {
  // Never destroyed: function objects may point into plugins, and loaded plugins stay mapped
  // until the process ends (objects and threads they made may run their code during static
  // destruction).
  static Runtime& Get();

  Registry registry;
  PluginLoader loader{registry};

  // The function `name`, loading a discovered plugin that declares it on first use. Null if
  // none provides it; then *looked_at says which plugins were looked at (for the caller's
  // error message).
  Ref FindOrLoad(const std::string& name, std::string* looked_at);
};

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_RUNTIME_H_
