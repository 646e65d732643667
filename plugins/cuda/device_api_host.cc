// SPDX-License-Identifier: Apache-2.0
// device_api.cuda_host: pinned host memory (see device_api.h).
#include <algorithm>
#include <cstring>
#include <string>

#include "device_api.h"

namespace backplane {
namespace cuda {

CUDAHostDeviceAPI* CUDAHostDeviceAPI::Global() {
  static CUDAHostDeviceAPI* instance = new CUDAHostDeviceAPI();  // lives until the process ends
  return instance;
}

void CUDAHostDeviceAPI::RequireDevice(DLDevice dev) {
  CUDADeviceAPI* cuda = CUDADeviceAPI::Global();
  if (cuda->DeviceCount() == 0) {
    throw Error(BP_ERR_NOT_FOUND, "device " + sdk::DeviceString(dev) +
                                      " does not exist: pinned host memory needs a CUDA device, "
                                      "and there is none here: " +
                                      cuda->Reason());
  }
  BACKPLANE_REQUIRE(dev.device_type == device_type() && dev.device_id == 0, BP_ERR_NOT_FOUND,
                    "device " + sdk::DeviceString(dev) +
                        " does not exist; pinned host memory is one device, cuda_host:0");
  // Pinned memory belongs to a context: the first device's primary context, made portable.
  cuda->Activate(DLDevice{static_cast<DLDeviceType>(cuda->device_type()), 0});
}

Any CUDAHostDeviceAPI::GetAttr(DLDevice dev, bp_device_attr_kind_t kind) {
  const bool exists = dev.device_type == device_type() && dev.device_id == 0 &&
                      CUDADeviceAPI::Global()->DeviceCount() > 0;
  if (kind == BP_ATTR_EXIST) return sdk::IntValue(exists ? 1 : 0);
  if (!exists) return sdk::NoneValue();
  if (kind == BP_ATTR_DEVICE_NAME) return sdk::StringValue("pinned host memory (CUDA)");
  if (kind == BP_ATTR_DRIVER_VERSION || kind == BP_ATTR_API_VERSION) {
    CUDADeviceAPI* cuda = CUDADeviceAPI::Global();
    return cuda->GetAttr(DLDevice{static_cast<DLDeviceType>(cuda->device_type()), 0}, kind);
  }
  return sdk::NoneValue();
}

Any CUDAHostDeviceAPI::GetProperty(DLDevice dev, const std::string& key) {
  CUDADeviceAPI* cuda = CUDADeviceAPI::Global();
  if (key == "status") return cuda->GetProperty(dev, key);
  return sdk::NoneValue();
}

void CUDAHostDeviceAPI::SetDevice(DLDevice dev) { RequireDevice(dev); }

void* CUDAHostDeviceAPI::AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType) {
  RequireDevice(dev);
  BACKPLANE_REQUIRE(alignment <= 4096, BP_ERR_INVALID_ARGUMENT,
                    "alloc_data_space on " + sdk::DeviceString(dev) + ": alignment " +
                        std::to_string(alignment) +
                        " is more than the page (4096 bytes) pinned memory is aligned to");
  void* p = nullptr;
  const Driver& d = CUDADeviceAPI::Global()->driver();
  Check(d.cuMemHostAlloc(&p, nbytes == 0 ? 1 : nbytes, CU_MEMHOSTALLOC_PORTABLE),
        "cuMemHostAlloc of " + std::to_string(nbytes) + " pinned bytes");
  try {
    handles_.Add(dev, p, nbytes, /*workspace=*/false);
  } catch (...) {  // out of host memory: the pinned memory goes back rather than leaks
    d.cuMemFreeHost(p);
    throw;
  }
  return p;
}

void CUDAHostDeviceAPI::FreeDataSpace(DLDevice dev, void* ptr) {
  if (ptr == nullptr) return;
  RequireDevice(dev);
  handles_.Remove(dev, ptr, /*workspace=*/false);
  Check(CUDADeviceAPI::Global()->driver().cuMemFreeHost(ptr), "cuMemFreeHost");
}

void CUDAHostDeviceAPI::CheckRange(const DLTensor* t, size_t nbytes, const char* what) {
  const std::string prefix = what[0] == '\0' ? std::string() : std::string(what) + ": ";
  const uintptr_t start = reinterpret_cast<uintptr_t>(t->data);
  const uintptr_t p = start + t->byte_offset;
  BACKPLANE_REQUIRE(p >= start, BP_ERR_INVALID_ARGUMENT,
                    prefix + "byte_offset " + std::to_string(t->byte_offset) +
                        " wraps the address space; pass the offset into the buffer");
  // (One past the end still names the allocation: the bounds check below says what is wrong.)
  sdk::HandleTable<>::Entry e;
  BACKPLANE_REQUIRE(handles_.Containing(p, &e), BP_ERR_INVALID_ARGUMENT,
                    prefix + sdk::PointerString(reinterpret_cast<void*>(p)) +
                        " is not live pinned memory of cuda_host:0 (freed already, made up, or "
                        "not from its alloc_data_space); pass data from alloc_data_space");
  const size_t size = e.size;
  const size_t at = p - e.key;
  BACKPLANE_REQUIRE(nbytes <= size - std::min(at, size), BP_ERR_INVALID_ARGUMENT,
                    prefix + std::to_string(nbytes) + " bytes at byte " + std::to_string(at) +
                        " run past the end of the " + std::to_string(size) +
                        "-byte buffer on cuda_host:0; use less or start earlier");
}

void CUDAHostDeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to,
                                       bp_stream_t stream) {
  // The core sends a copy between cuda_host and a cuda device to this plugin, as both device
  // types are its own: it goes to device_api.cuda, ordered on `stream` (a stream of the cuda
  // device), never staged through other host memory.
  CUDADeviceAPI* cuda = CUDADeviceAPI::Global();
  if (from->device.device_type == cuda->device_type() ||
      to->device.device_type == cuda->device_type()) {
    cuda->CopyDataFromTo(from, to, stream);
    return;
  }
  const size_t nbytes = sdk::CheckCopy(from, to, device_type()).nbytes;
  for (const DLTensor* t : {from, to}) {
    BACKPLANE_REQUIRE(t->device.device_type == kDLCPU || t->device.device_type == device_type(),
                      BP_ERR_INVALID_ARGUMENT,
                      "copy_data_from_to: cuda_host copies to and from host memory only; got " +
                          sdk::DeviceString(t->device));
  }
  for (const DLTensor* t : {from, to}) {
    if (t->device.device_type == device_type()) CheckRange(t, nbytes, "");
  }
  if (nbytes == 0) return;
  std::memmove(static_cast<char*>(to->data) + to->byte_offset,
               static_cast<const char*>(from->data) + from->byte_offset, nbytes);
}

void CUDAHostDeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  RequireDevice(dev);
  BACKPLANE_REQUIRE(stream == nullptr, BP_ERR_INVALID_ARGUMENT,
                    "cuda_host:0 has no streams of its own (its copies are synchronous); "
                    "synchronize the cuda device's stream instead");
}

}  // namespace cuda
}  // namespace backplane
