// SPDX-License-Identifier: Apache-2.0
// The DeviceAPI manager: finds the table for a device type through "device_api.<name>",
// checks it once, and keeps a full-size copy so missing trailing entries read as null.
#ifndef BACKPLANE_CORE_DEVICE_API_H_
#define BACKPLANE_CORE_DEVICE_API_H_

#include "common.h"

namespace backplane {
namespace core {

// The table for `device_type`; throws NOT_FOUND naming the type and the plugins seen.
const bp_device_api_t& GetDeviceAPI(int32_t device_type);

// Bytes of a compact tensor; throws on overflow or a bad dtype.
size_t TensorBytes(const DLTensor& t, const char* what);

// A data handle of `dev` over an application's buffer (the plugin's wrap_native, checked);
// BP_ERR_UNSUPPORTED naming the backend where it wraps nothing.
void* WrapNative(DLDevice dev, const bp_native_buffer_t& buffer);
// Forgets a handle from WrapNative. Never throws: a failure is written to stderr.
void UnwrapNative(DLDevice dev, void* data) noexcept;

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_DEVICE_API_H_
