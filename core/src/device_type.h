// SPDX-License-Identifier: Apache-2.0
// Device-type registry: names and DLPack ids, both ways.
#ifndef BACKPLANE_CORE_DEVICE_TYPE_H_
#define BACKPLANE_CORE_DEVICE_TYPE_H_

#include <string>
#include <vector>

#include "common.h"

namespace backplane {
namespace core {

// Id of `name`, registering a fresh one for a new name.
int32_t RegisterDeviceType(const std::string& name);
// Registers every name of `names`, or none: when one is invalid or the ids left cannot hold
// the new ones, throws and registers nothing.
void RegisterDeviceTypes(const std::vector<std::string>& names);
// Id of `name`, or -1.
int32_t FindDeviceType(const std::string& name);
// Name of `type`, or null (static storage).
const char* DeviceTypeName(int32_t type);
// A "cpu(1), cuda(2), ..." listing for messages.
std::string KnownDeviceTypes();
std::vector<int32_t> ListDeviceTypes();

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_DEVICE_TYPE_H_
