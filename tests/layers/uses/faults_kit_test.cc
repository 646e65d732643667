// SPDX-License-Identifier: Apache-2.0
// The faults layer under the conformance kit (docs/layers/faults.md, "Under the conformance kit
// and the remote server"): every injected fault comes back as a named error, nothing crashes.
//
// - The kit on the cpu plugin with faults at a rate: the clauses that meet a fault fail with
//   the "faults: injected" message as their reason (never a crash, a timeout or another
//   error), the others pass.
// - The same on simaccel_testing, whose streams run asynchronously.
// - The same with the validation layer outside faults: the error paths leave no finding.
#include <gtest/gtest.h>

#include <string>

#include "layers/uses/kit_run.h"

namespace backplane {
namespace layers_test {
namespace {

TEST(FaultsUnderTheKit, EveryInjectedFaultFailsItsClauseByName) {
  // The layer's plugin is named with --with: the kit's tests discover only the plugins named.
  const KitRun run =
      RunKit({kPlugins + "/libbackplane_cpu.so", "--with", kPlugins + "/libbackplane_faults.so",
              "--jobs", "2"},
             "kit_cpu_faults", {{"BACKPLANE_LAYERS", "faults:seed=7:rate=0.05"}}, {});
  ExpectNamedFaultsOnly(run);
}

TEST(FaultsUnderTheKit, AnAsynchronousDeviceFailsByNameToo) {
  // simaccel_testing runs its streams on threads of their own: a fault meets work in flight.
  const KitRun run = RunKit(
      {std::string(BACKPLANE_TEST_PLUGIN_DIR) + "/libbackplane_simaccel_testing.so", "--with",
       kPlugins + "/libbackplane_faults.so", "--jobs", "2", "-t", "codegen.kernel.vector_add_gpu"},
      "kit_simaccel_faults", {{"BACKPLANE_LAYERS", "faults:seed=1:rate=0.03"}}, {});
  ExpectNamedFaultsOnly(run);
}

TEST(FaultsUnderTheKit, TheValidationLayerFindsNothingOnTheErrorPaths) {
#ifndef BACKPLANE_FAULTS_USES_VALIDATION
  GTEST_SKIP() << "the validation layer is not built here";
#endif
  // validation outside faults sees every injected error as the host does: a failed
  // allocation is no allocation, a failed copy or launch leaves nothing in flight.
  const KitRun run =
      RunKit({kPlugins + "/libbackplane_cpu.so", "--with", kPlugins + "/libbackplane_faults.so",
              "--with", kPlugins + "/libbackplane_validation.so", "--jobs", "2"},
             "kit_cpu_validation_faults",
             {{"BACKPLANE_LAYERS", "validation,faults:seed=7:rate=0.05"}}, {});
  ExpectNamedFaultsOnly(run);
  if (run.json.is_discarded()) return;
  for (const auto& t : run.json["tests"]) {
    EXPECT_FALSE(Has(t.value("output", ""), "BP-VALID-")) << t;
    EXPECT_FALSE(Has(t.value("message", ""), "BP-VALID-")) << t;
  }
}

}  // namespace
}  // namespace layers_test
}  // namespace backplane
