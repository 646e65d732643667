// SPDX-License-Identifier: Apache-2.0
// simaccel_testing: the simaccel example plugin (sdk/apps/examples/simaccel), linked from the
// same sources, with what Backplane's tests need beside it (hooks.h). It registers what
// simaccel's entry point does -- device_api.simaccel, the target kind simaccel,
// target.build.simaccel and its module loader -- plus device_api.simaccel_host (pinned host
// memory of its own) and the test helpers:
//   simaccel_testing.set_delay_us(us)                each copy queued from now on sleeps `us` first
//   simaccel_testing.stream_hold(device_id, stream)  parks the stream after its queued work
//   simaccel_testing.stream_release(device_id, stream)
//   simaccel_testing.live_allocations(device_id)     data spaces alive on the device
//   simaccel_testing.pinned_copies()                 simaccel <-> simaccel_host copies it made
// Its DeviceAPI has no event entries (hooks.h says why), and two devices unless
// SIMACCEL_DEVICES says otherwise, so that tests see copies across devices.
#include <backplane/sdk/codegen.hpp>
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cstdlib>
#include <string>

#include "codegen.h"
#include "hooks.h"
#include "target.h"

namespace {

using backplane::PackedArgs;
using backplane::simaccel_testing::TestingDeviceAPI;

DLDevice DeviceArg(const TestingDeviceAPI* api, const PackedArgs& args) {
  return DLDevice{static_cast<DLDeviceType>(api->device_type()), static_cast<int32_t>(args.Int(0))};
}

}  // namespace

BACKPLANE_PLUGIN_ENTRY("simaccel_testing", "0.1.0") {
  namespace sdk = backplane::sdk;
  setenv("SIMACCEL_DEVICES", "2", /*overwrite=*/0);  // read once, when the DeviceAPI is made
  TestingDeviceAPI* api = TestingDeviceAPI::Global();
  sdk::RegisterDeviceAPI("simaccel", api);
  sdk::RegisterDeviceAPI("simaccel_host", backplane::simaccel_testing::HostDeviceAPI::Global());
  simaccel::RegisterTargetKind();
  sdk::RegisterCodegen("simaccel", [api](const std::string& ir_text, const backplane::Target& t) {
    return simaccel::BuildModule(api, ir_text, t);
  });
  sdk::RegisterModuleLoader(
      "simaccel", [api](const std::string& bytes) { return simaccel::LoadModule(api, bytes); });

  sdk::RegisterFunction("simaccel_testing.set_delay_us", [](PackedArgs args) {
    TestingDeviceAPI::SetDelayUs(args.Int(0));
    return sdk::NoneValue();
  });
  sdk::RegisterFunction("simaccel_testing.stream_hold", [api](PackedArgs args) {
    api->HoldStream(DeviceArg(api, args), args.Ptr(1));
    return sdk::NoneValue();
  });
  sdk::RegisterFunction("simaccel_testing.stream_release", [api](PackedArgs args) {
    api->ReleaseStream(DeviceArg(api, args), args.Ptr(1));
    return sdk::NoneValue();
  });
  sdk::RegisterFunction("simaccel_testing.live_allocations", [api](PackedArgs args) {
    return sdk::IntValue(api->LiveAllocations(DeviceArg(api, args)));
  });
  sdk::RegisterFunction("simaccel_testing.pinned_copies",
                        [api](PackedArgs) { return sdk::IntValue(api->PinnedCopies()); });
}
