// SPDX-License-Identifier: Apache-2.0
// Compiled, never run, by module_kind_test.sh: a module class handed to MakeModule. With
// PROBE_WITH_KIND it declares its kind and compiles; without, MakeModule's static_assert must
// stop the build with a message that says what to add.
#include <backplane/sdk/module.hpp>
#include <memory>
#include <string>
#include <vector>

namespace {

class ProbeModule : public backplane::sdk::ModuleBase {
 public:
#ifdef PROBE_WITH_KIND
  static constexpr const char* kKind = "probe";
#endif
  backplane::Function GetFunction(const std::string&) override { return {}; }
  std::vector<std::string> ListFunctions() override { return {}; }
};

}  // namespace

backplane::Module MakeProbe() {
  return backplane::sdk::MakeModule(std::make_shared<ProbeModule>());
}
