// SPDX-License-Identifier: Apache-2.0
// Device types. DLPack's types keep their ids; a new name gets the next free id from
// BP_DEVICE_TYPE_FIRST_DYNAMIC, with no edit of the core (no enum of device types to extend).
#include "device_type.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "plugin_loader.h"
#include "runtime.h"

namespace backplane {
namespace core {
namespace {

class DeviceTypes {
 public:
  DeviceTypes() {
    static const std::pair<const char*, int32_t> kDLPack[] = {{"cpu", kDLCPU},
                                                              {"cuda", kDLCUDA},
                                                              {"cuda_host", kDLCUDAHost},
                                                              {"opencl", kDLOpenCL},
                                                              {"vulkan", kDLVulkan},
                                                              {"metal", kDLMetal},
                                                              {"vpi", kDLVPI},
                                                              {"rocm", kDLROCM},
                                                              {"rocm_host", kDLROCMHost},
                                                              {"ext_dev", kDLExtDev},
                                                              {"cuda_managed", kDLCUDAManaged},
                                                              {"oneapi", 14},
                                                              {"webgpu", 15},
                                                              {"hexagon", 16}};
    for (const auto& [name, id] : kDLPack) Add(name, id);
  }

  int32_t Register(const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    if (next_ >= BP_DEVICE_TYPE_MAX) {
      Fail(BP_ERR_OUT_OF_MEMORY,
           "cannot register device type '" + name + "': all " +
               std::to_string(BP_DEVICE_TYPE_MAX - BP_DEVICE_TYPE_FIRST_DYNAMIC) +
               " dynamic device type ids are taken");
    }
    Add(name, next_);
    return next_++;
  }

  // All of `names` or none (they are valid names).
  void RegisterAll(const std::vector<std::string>& names) {
    std::lock_guard lock(mu_);
    std::vector<std::string> fresh;
    for (const auto& n : names) {
      if (ids_.count(n) == 0 && std::find(fresh.begin(), fresh.end(), n) == fresh.end()) {
        fresh.push_back(n);
      }
    }
    const int32_t left = BP_DEVICE_TYPE_MAX - next_;
    if (static_cast<int64_t>(fresh.size()) > left) {
      Fail(BP_ERR_OUT_OF_MEMORY,
           "cannot register its " + std::to_string(fresh.size()) + " new device types: only " +
               std::to_string(left) + " of the " +
               std::to_string(BP_DEVICE_TYPE_MAX - BP_DEVICE_TYPE_FIRST_DYNAMIC) +
               " dynamic device type ids are left; none was registered");
    }
    for (const auto& n : fresh) Add(n, next_++);
  }

  int32_t Find(const std::string& name) const {
    std::lock_guard lock(mu_);
    auto it = ids_.find(name);
    return it == ids_.end() ? -1 : it->second;
  }

  const char* Name(int32_t type) const {
    if (type < 0 || type >= BP_DEVICE_TYPE_MAX) return nullptr;
    // Published with release order after the string was written; never rewritten.
    return names_[type].load(std::memory_order_acquire);
  }

  std::vector<int32_t> List() const {
    std::vector<int32_t> out;
    for (int32_t i = 0; i < BP_DEVICE_TYPE_MAX; ++i) {
      if (Name(i) != nullptr) out.push_back(i);
    }
    return out;
  }

 private:
  void Add(const std::string& name, int32_t id) {
    storage_[id] = name;
    ids_.emplace(name, id);
    names_[id].store(storage_[id].c_str(), std::memory_order_release);
  }

  mutable std::mutex mu_;
  std::unordered_map<std::string, int32_t> ids_;
  std::array<std::string, BP_DEVICE_TYPE_MAX> storage_;
  std::array<std::atomic<const char*>, BP_DEVICE_TYPE_MAX> names_{};
  int32_t next_ = BP_DEVICE_TYPE_FIRST_DYNAMIC;
};

DeviceTypes& Types() {
  static DeviceTypes* types = new DeviceTypes();  // never destroyed: names are handed out
  return *types;
}

void CheckTypeName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 63;
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!ok) {
    Fail(BP_ERR_INVALID_ARGUMENT, "device type name '" + name +
                                      "' is invalid: expected 1 to 63 characters of a-z, 0-9 "
                                      "and _, e.g. 'myaccel'");
  }
}

}  // namespace

int32_t RegisterDeviceType(const std::string& name) {
  CheckTypeName(name);
  CheckPluginMayRegisterDeviceType(name);
  return Types().Register(name);
}
void RegisterDeviceTypes(const std::vector<std::string>& names) {
  for (const auto& n : names) CheckTypeName(n);
  Types().RegisterAll(names);
}
int32_t FindDeviceType(const std::string& name) { return Types().Find(name); }
const char* DeviceTypeName(int32_t type) { return Types().Name(type); }
std::vector<int32_t> ListDeviceTypes() { return Types().List(); }

std::string KnownDeviceTypes() {
  std::string out;
  for (int32_t id : Types().List()) {
    if (!out.empty()) out += ", ";
    out += std::string(Types().Name(id)) + "(" + std::to_string(id) + ")";
  }
  return out;
}

}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT bp_status_t bp_device_type_register(const char* name, int32_t* out_type) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(name != nullptr, "name is null");
  int32_t id = RegisterDeviceType(name);
  if (out_type != nullptr) *out_type = id;
  BP_REGISTRATION_END
}

BP_EXPORT bp_status_t bp_device_type_from_name(const char* name, int32_t* out_type) {
  BP_API_BEGIN
  // Manifests declare device types: a host whose first call this is must see them.
  Runtime::Get().loader.EnsureDiscovered();
  BP_REQUIRE_ARG(name != nullptr, "name is null");
  BP_REQUIRE_ARG(out_type != nullptr, "out_type is null");
  int32_t id = FindDeviceType(name);
  if (id < 0) {
    Fail(BP_ERR_NOT_FOUND, std::string("device type '") + name +
                               "' is not known; known: " + KnownDeviceTypes() +
                               ". A plugin registers new types; is it on the plugin path?");
  }
  *out_type = id;
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_type_name(int32_t type, const char** out_name) {
  BP_API_BEGIN
  // Manifests declare device types: a host whose first call this is must see them.
  Runtime::Get().loader.EnsureDiscovered();
  BP_REQUIRE_ARG(out_name != nullptr, "out_name is null");
  const char* name = DeviceTypeName(type);
  if (name == nullptr) {
    Fail(BP_ERR_NOT_FOUND,
         "device type id " + std::to_string(type) + " is not known; known: " + KnownDeviceTypes());
  }
  *out_name = name;
  BP_API_END
}

BP_EXPORT bp_status_t bp_device_type_list(int32_t* out_types, size_t capacity, size_t* out_count) {
  BP_API_BEGIN
  // Manifests declare device types: a host whose first call this is must see them.
  Runtime::Get().loader.EnsureDiscovered();
  BP_REQUIRE_ARG(out_count != nullptr, "out_count is null");
  BP_REQUIRE_ARG(out_types != nullptr || capacity == 0, "out_types is null but capacity is not 0");
  std::vector<int32_t> ids = ListDeviceTypes();
  for (size_t i = 0; i < ids.size() && i < capacity; ++i) out_types[i] = ids[i];
  *out_count = ids.size();
  BP_API_END
}

}  // extern "C"
