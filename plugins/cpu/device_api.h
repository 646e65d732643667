// SPDX-License-Identifier: Apache-2.0
// The CPU DeviceAPI: host memory, memcpy copies, a single synchronous queue.
//
// The CPU is one device, cpu:0, standing for every core of the machine; other device ids
// do not exist (kExist answers 0 and the other attributes none; allocating or setting them
// is BP_ERR_NOT_FOUND). Copies run on the calling thread before copy_data_from_to returns,
// so every stream handle is null and stream_sync has nothing to wait for.
#ifndef BACKPLANE_PLUGINS_CPU_DEVICE_API_H_
#define BACKPLANE_PLUGINS_CPU_DEVICE_API_H_

#include <backplane/sdk/device_api.hpp>
#include <string>

namespace backplane {
namespace cpu {

class CpuDeviceAPI final : public sdk::DeviceAPI {
 public:
  // The one instance, alive until the plugin is unloaded.
  static CpuDeviceAPI* Global();

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  // Keys: "arch", "vendor", "kernel_release", "num_threads" (CPUs this process may use),
  // "online_cores", "page_size", "l1d_cache_size_bytes", "l3_cache_size_bytes",
  // "workspace_reserved_bytes". Other keys are none.
  Any GetProperty(DLDevice dev, const std::string& key) override;
  std::vector<std::string> ListProperties(DLDevice dev) override;
  void SetDevice(DLDevice dev) override;
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override;
  void FreeDataSpace(DLDevice dev, void* ptr) override;
  void* AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType type_hint) override;
  void FreeWorkspace(DLDevice dev, void* ptr) override;
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  void FreeStream(DLDevice dev, bp_stream_t stream) override;
  void SetStream(DLDevice dev, bp_stream_t stream) override;
  void StreamSync(DLDevice dev, bp_stream_t stream) override;
  void SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override;

 private:
  // Throws BP_ERR_NOT_FOUND unless `dev` is cpu:0. (Messages do not repeat the entry's
  // name: the core prefixes the device and the entry.)
  static void CheckDevice(DLDevice dev);
  // Throws BP_ERR_INVALID_ARGUMENT unless `stream` is null.
  static void CheckStream(bp_stream_t stream);
};

}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_DEVICE_API_H_
