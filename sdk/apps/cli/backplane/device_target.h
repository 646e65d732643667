// SPDX-License-Identifier: Apache-2.0
// A device where a Target is expected: `backplane build -t opencl:0` and `backplane target
// opencl:0` take the device's own Target (Target::FromDevice: its kind and the attributes read
// off the device), so a module is built for the device it will run on, not for the kind's
// generic defaults.
#ifndef BACKPLANE_TOOLS_DEVICE_TARGET_H_
#define BACKPLANE_TOOLS_DEVICE_TARGET_H_

#include <backplane/backplane.hpp>
#include <string>

namespace backplane {
namespace cli {

// Whether `text` has the form of a device, TYPE:INDEX ("opencl:0", "remote:1"): a name, a colon
// and a decimal index, nothing else. No Target kind or tag has that form.
bool LooksLikeDevice(const std::string& text);

// Every device here, "cpu:0, opencl:0, vulkan:0", or "none" (for messages).
std::string DeviceListText();

// The Target of `text`: the device's own (Target::FromDevice) when `text` is TYPE:INDEX of a
// device type known here, else Target::Parse(text). Returns "" and sets *out, or the message
// (without a command prefix): a device that does not exist, named with the devices there are;
// or the parse error, which for a text of the device form also lists the devices. `*from_device`
// (optional) says whether the Target came from a device.
std::string ParseTargetOrDevice(const std::string& text, Target* out, bool* from_device = nullptr);

}  // namespace cli
}  // namespace backplane

#endif  // BACKPLANE_TOOLS_DEVICE_TARGET_H_
