// SPDX-License-Identifier: Apache-2.0
// The fake accelerator's target kind and code generator (codegen.cc).
#ifndef BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_CODEGEN_H_
#define BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_CODEGEN_H_

#include "device_api.h"

namespace backplane {
namespace fakeacc {

// Registers the target kind `fakeacc`, target.build.fakeacc and its module loader.
void RegisterCodegen(FakeAccDeviceAPI* api);

}  // namespace fakeacc
}  // namespace backplane

#endif  // BACKPLANE_TESTS_PLUGINS_TESTING_FAKEACC_CODEGEN_H_
