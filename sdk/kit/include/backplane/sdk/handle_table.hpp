// SPDX-License-Identifier: Apache-2.0
// The live memory handles of a DeviceAPI: what AllocDataSpace and AllocWorkspace returned and
// no free has taken back. Every handle a caller passes is looked up here before the plugin
// touches it, so a freed, made-up or foreign handle is BP_ERR_INVALID_ARGUMENT with one set of
// messages, never a dereference, and a free of the wrong kind or on the wrong device changes
// nothing.
//
//   sdk::HandleTable<Buffer*> handles_{"opencl"};
//   void* AllocDataSpace(...) { ...; handles_.Add(dev, b, nbytes, /*workspace=*/false, b); }
//   void FreeDataSpace(DLDevice dev, void* p) { Destroy(handles_.Remove(dev, p, false).info); }
//   Buffer* b = handles_.Resolve(dev, t->data, t->byte_offset, nbytes, "copy source").info;
//
// A handle is any pointer-sized value (an object of the plugin's, a tagged number, a device
// address). Where handles are device addresses and a tensor may point inside an allocation
// (the cuda plugin's), Containing finds the allocation that holds an address.
//
// `Info` is what the plugin keeps with each handle (its buffer object, the address the driver
// returned); lookups return a copy of the entry, taken under the table's lock. Thread-safe.
// Header-only, in Backplane::sdk (it includes backplane/sdk/plugin.hpp): it calls the core
// through the host table, and a plugin never links libbackplane (docs/plugin-guide.md).
#ifndef BACKPLANE_SDK_HANDLE_TABLE_HPP_
#define BACKPLANE_SDK_HANDLE_TABLE_HPP_

#include <backplane/sdk/plugin.hpp>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace backplane {
namespace sdk {

// The Info of a table whose plugin keeps nothing beside the handle.
struct NoInfo {};

template <typename Info = NoInfo>
class HandleTable {
 public:
  struct Entry {
    uintptr_t key = 0;  // the handle, as a number
    size_t size = 0;    // the bytes asked for: copies and kernels stay inside [0, size)
    int32_t device_id = 0;
    bool workspace = false;  // from AllocWorkspace, freed by FreeWorkspace only
    bool wrapped = false;    // an application's buffer (AddWrapped), ended by RemoveWrapped only
    Info info{};
    void* handle() const { return reinterpret_cast<void*>(key); }
  };

  // `backend` names the plugin in messages ("opencl", "cuda_host").
  explicit HandleTable(std::string backend) : backend_(std::move(backend)) {}
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // Records `handle`, just allocated on `dev` with `size` bytes, as live.
  void Add(DLDevice dev, const void* handle, size_t size, bool workspace, Info info = {}) {
    const uintptr_t key = reinterpret_cast<uintptr_t>(handle);
    std::lock_guard<std::mutex> lock(mu_);
    live_[key] = Entry{key, size, dev.device_id, workspace, false, std::move(info)};
  }

  // Records `handle` of `dev` over an application's buffer of `size` bytes (WrapNative): it
  // resolves as data space, and only RemoveWrapped takes it out.
  void AddWrapped(DLDevice dev, const void* handle, size_t size, Info info = {}) {
    const uintptr_t key = reinterpret_cast<uintptr_t>(handle);
    std::lock_guard<std::mutex> lock(mu_);
    live_[key] = Entry{key, size, dev.device_id, false, true, std::move(info)};
  }
  // Takes a handle from AddWrapped out (UnwrapNative); the error says what it is otherwise.
  Entry RemoveWrapped(DLDevice dev, const void* handle) {
    std::lock_guard<std::mutex> lock(mu_);
    const Entry& e = LiveLocked(dev, handle, "unwrap_native");
    if (!e.wrapped) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "unwrap_native: " + PointerString(handle) + " is " + Kind(e) +
                      " Backplane allocated, not a wrapped native buffer; free it with " +
                      (e.workspace ? "free_workspace" : "free_data_space"));
    }
    Entry out = e;
    live_.erase(out.key);
    return out;
  }

  // The entry of `handle`, a live handle of `dev` whose allocation holds bytes
  // [offset, offset + nbytes). Otherwise throws Error(BP_ERR_INVALID_ARGUMENT) that starts with
  // `what` ("copy source"; "" for none) and says which check failed and what to pass.
  Entry Resolve(DLDevice dev, const void* handle, uint64_t offset, size_t nbytes,
                const std::string& what) const {
    std::lock_guard<std::mutex> lock(mu_);
    const Entry& e = LiveLocked(dev, handle, what);
    if (offset > e.size || nbytes > e.size - offset) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  Prefix(what) + std::to_string(nbytes) + " bytes at byte_offset " +
                      std::to_string(offset) + " run past the end of the " +
                      std::to_string(e.size) + "-byte " + Kind(e) + " " + PointerString(handle) +
                      " on " + DeviceString(dev) + "; keep byte_offset plus the size inside it");
    }
    return e;
  }
  Entry Get(DLDevice dev, const void* handle, const std::string& what) const {
    return Resolve(dev, handle, 0, 0, what);
  }

  // Takes `handle` out, for FreeDataSpace (workspace false) or FreeWorkspace: it must be live
  // on `dev` and of that kind, else the error says which and nothing changes. Two threads
  // freeing one handle: one gets the entry, the other the error.
  Entry Remove(DLDevice dev, const void* handle, bool workspace) {
    std::lock_guard<std::mutex> lock(mu_);
    const char* call = workspace ? "free_workspace" : "free_data_space";
    const Entry& e = LiveLocked(dev, handle, call);
    if (e.wrapped) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  std::string(call) + ": " + PointerString(handle) +
                      " is an application's native buffer (bp_tensor_from_native), which "
                      "Backplane never frees; release the tensor that wraps it");
    }
    if (e.workspace != workspace) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  std::string(call) + ": " + PointerString(handle) + " is " +
                      (workspace ? "data space from alloc_data_space, not a workspace; free it "
                                   "with free_data_space"
                                 : "a workspace from alloc_workspace, not data space; free it "
                                   "with free_workspace"));
    }
    Entry out = e;
    live_.erase(out.key);
    return out;
  }

  // The live entry whose bytes hold `address` (one past the end counts, so that an empty
  // range at the end is found), on any device; false when none does.
  bool Containing(uintptr_t address, Entry* out) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(address);
    if (it == live_.begin()) return false;
    --it;
    if (address - it->first > std::max<size_t>(it->second.size, 1)) return false;
    *out = it->second;
    return true;
  }

  // Takes every live entry of device `device_id` out (when the device is torn down).
  std::vector<Entry> RemoveAll(int32_t device_id) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Entry> out;
    for (auto it = live_.begin(); it != live_.end();) {
      if (it->second.device_id != device_id) {
        ++it;
        continue;
      }
      out.push_back(std::move(it->second));
      it = live_.erase(it);
    }
    return out;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }

 private:
  static std::string Prefix(const std::string& what) { return what.empty() ? what : what + ": "; }
  static const char* Kind(const Entry& e) {
    return e.workspace ? "workspace" : e.wrapped ? "wrapped native buffer" : "data space";
  }

  const Entry& LiveLocked(DLDevice dev, const void* handle, const std::string& what) const {
    auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == live_.end()) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  Prefix(what) + PointerString(handle) + " is not a live " + backend_ +
                      " data space, workspace or wrapped native buffer (freed or unwrapped "
                      "already, made up, a host pointer, or another backend's); pass a handle "
                      "from alloc_data_space, alloc_workspace or bp_tensor_from_native of " +
                      DeviceString(dev) + " that is still live");
    }
    if (it->second.device_id != dev.device_id) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  Prefix(what) + Kind(it->second) + " " + PointerString(handle) + " belongs to " +
                      backend_ + ":" + std::to_string(it->second.device_id) + ", not " +
                      DeviceString(dev) + "; label the tensor with its device, or copy it there");
    }
    return it->second;
  }

  const std::string backend_;
  mutable std::mutex mu_;
  std::map<uintptr_t, Entry> live_;
};

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_HANDLE_TABLE_HPP_
