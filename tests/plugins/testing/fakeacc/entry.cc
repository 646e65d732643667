// SPDX-License-Identifier: Apache-2.0
// The fake accelerator plugin: device type "fakeacc" (a fresh id from the host),
// device_api.fakeacc, and test helpers:
//   fakeacc.set_delay_us(us)                every queued item first sleeps `us`
//   fakeacc.stream_hold(device_id, stream)  parks the stream after its queued work
//   fakeacc.stream_release(device_id, stream)
//   fakeacc.live_allocations(device_id)     data spaces alive on the device
//   fakeacc.pinned_copies()                 fakeacc <-> fakeacc_host copies the plugin made
// and a second device type of its own, "fakeacc_host" (device_api.fakeacc_host: pinned host
// memory, as a vendor's page-locked type is).
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>

#include "codegen.h"
#include "device_api.h"

namespace {

using backplane::PackedArgs;
using backplane::fakeacc::FakeAccDeviceAPI;

DLDevice DeviceArg(const FakeAccDeviceAPI* api, const PackedArgs& args) {
  return DLDevice{static_cast<DLDeviceType>(api->device_type()), static_cast<int32_t>(args.Int(0))};
}

}  // namespace

BACKPLANE_PLUGIN_ENTRY("fakeacc", "0.1.0") {
  namespace sdk = backplane::sdk;
  const int32_t type = sdk::RegisterDeviceType("fakeacc");
  FakeAccDeviceAPI* api = FakeAccDeviceAPI::Global(type);
  sdk::RegisterDeviceAPI("fakeacc", api);
  sdk::RegisterDeviceAPI("fakeacc_host", backplane::fakeacc::FakeAccHostDeviceAPI::Global());
  backplane::fakeacc::RegisterCodegen(api);
  sdk::RegisterFunction("fakeacc.set_delay_us", [](PackedArgs args) {
    backplane::fakeacc::Stream::delay_us.store(args.Int(0));
    return sdk::NoneValue();
  });
  sdk::RegisterFunction("fakeacc.stream_hold", [api](PackedArgs args) {
    api->HoldStream(DeviceArg(api, args), args.Ptr(1));
    return sdk::NoneValue();
  });
  sdk::RegisterFunction("fakeacc.stream_release", [api](PackedArgs args) {
    api->ReleaseStream(DeviceArg(api, args), args.Ptr(1));
    return sdk::NoneValue();
  });
  sdk::RegisterFunction("fakeacc.live_allocations", [api](PackedArgs args) {
    return sdk::IntValue(api->LiveAllocations(DeviceArg(api, args)));
  });
  sdk::RegisterFunction("fakeacc.pinned_copies",
                        [api](PackedArgs) { return sdk::IntValue(api->PinnedCopies()); });
}
