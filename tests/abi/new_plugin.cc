// SPDX-License-Identifier: Apache-2.0
// A plugin built today with the SDK that declares it works with any 1.x host
// (min_host_minor = 0): it registers a DeviceAPI on every host, a TargetKind only where the host
// table has Targets (1.1), and its probe functions use 1.5's entries only where the host table
// reaches them. old_host.cc loads it into hosts that offer 1.0 ... 1.5 and checks that it never
// calls past the table it was given.
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/target.hpp>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using backplane::Any;
namespace sdk = backplane::sdk;

// One device whose data space is host memory.
class HostMemoryDeviceAPI final : public sdk::DeviceAPI {
 public:
  void set_type(int32_t type) { type_ = type; }

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override {
    if (kind == BP_ATTR_EXIST) return sdk::IntValue(Exists(dev) ? 1 : 0);
    if (Exists(dev) && kind == BP_ATTR_DEVICE_NAME) return sdk::StringValue("abinew host memory");
    return sdk::NoneValue();
  }
  Any GetProperty(DLDevice dev, const std::string& key) override {
    if (Exists(dev) && key == "built_with") {
      return sdk::StringValue(std::to_string(BP_ABI_VERSION_MAJOR) + "." +
                              std::to_string(BP_ABI_VERSION_MINOR));
    }
    return sdk::NoneValue();
  }
  std::vector<std::string> ListProperties(DLDevice dev) override {
    if (!Exists(dev)) return {};
    return {"built_with"};
  }
  void SetDevice(DLDevice dev) override { Check(dev); }
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType) override {
    Check(dev);
    const size_t align = alignment < sizeof(void*) ? sizeof(void*) : alignment;
    void* p = std::aligned_alloc(align, (nbytes + align - 1) / align * align + align);
    BACKPLANE_REQUIRE(p != nullptr, BP_ERR_OUT_OF_MEMORY, "abinew: out of host memory");
    return p;
  }
  void FreeDataSpace(DLDevice dev, void* ptr) override {
    Check(dev);
    std::free(ptr);
  }
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t) override {
    std::memmove(static_cast<char*>(to->data) + to->byte_offset,
                 static_cast<const char*>(from->data) + from->byte_offset, sdk::TensorBytes(from));
  }
  void StreamSync(DLDevice dev, bp_stream_t) override { Check(dev); }

 private:
  bool Exists(DLDevice dev) const { return dev.device_type == type_ && dev.device_id == 0; }
  void Check(DLDevice dev) const {
    BACKPLANE_REQUIRE(Exists(dev), BP_ERR_NOT_FOUND, "abinew has one device, abinew:0");
  }
  int32_t type_ = -1;
};

HostMemoryDeviceAPI* Global() {
  static HostMemoryDeviceAPI* api = new HostMemoryDeviceAPI;  // lives until the process ends
  return api;
}

}  // namespace

BACKPLANE_PLUGIN_ENTRY_WITH((sdk::PluginDescription{"abinew", "1.0.0", "Backplane ABI tests", 0})) {
  Global()->set_type(sdk::RegisterDeviceAPI("abinew", Global()));
  // The host's version as this plugin saw it at init.
  sdk::RegisterFunction("abinew.host_version", [](backplane::PackedArgs) {
    const bp_host_api_t* host = backplane::detail::Api();
    return sdk::StringValue(std::to_string(host->abi_major) + "." +
                            std::to_string(host->abi_minor));
  });
  // 1.5's bp_device_list through the C++ helper, which checks the host table first: the number
  // of devices, or -1 where the host is older than 1.5.
  sdk::RegisterFunction("abinew.count_devices", [](backplane::PackedArgs) {
    try {
      return sdk::IntValue(static_cast<int64_t>(backplane::ListDevices().size()));
    } catch (const backplane::Error& e) {
      if (e.kind() != BP_ERR_UNSUPPORTED) throw;
      return sdk::IntValue(-1);
    }
  });
  // TargetKinds came in 1.1: registered only where the host table reaches them (docs/abi.md,
  // rule 2: check struct_size before using an entry added after 1.0).
  const bp_host_api_t* host = backplane::detail::Api();
  if (host->struct_size >= offsetof(bp_host_api_t, target_get_attr) + sizeof(void*)) {
    sdk::TargetKindBuilder("abinew", "abinew").Register();
  }
}
