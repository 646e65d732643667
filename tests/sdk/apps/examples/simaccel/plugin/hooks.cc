// SPDX-License-Identifier: Apache-2.0
#include "hooks.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace backplane {
namespace simaccel_testing {

std::atomic<int64_t> TestingDeviceAPI::delay_us_{0};

TestingDeviceAPI* TestingDeviceAPI::Global() {
  static TestingDeviceAPI* const instance = new TestingDeviceAPI();
  return instance;
}

void TestingDeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to,
                                      bp_stream_t stream) {
  // A side in simaccel_host memory is host memory to simaccel once it is checked: the copy
  // goes on as one with the cpu, in stream order.
  HostDeviceAPI* pinned = HostDeviceAPI::Global();
  const auto is_pinned = [&](const DLTensor* t) {
    return t->device.device_type == pinned->device_type();
  };
  DLTensor src = *from;
  DLTensor dst = *to;
  if (is_pinned(from) || is_pinned(to)) {
    const size_t nbytes = sdk::CheckCopy(from, to, device_type()).nbytes;
    const auto as_host = [&](DLTensor* t, const char* what) {
      t->data = pinned->Bytes(t, nbytes, what);
      t->byte_offset = 0;
      t->device = DLDevice{kDLCPU, 0};
    };
    if (is_pinned(from)) as_host(&src, "copy source");
    if (is_pinned(to)) as_host(&dst, "copy destination");
    ++pinned_copies_;
  }
  const int64_t delay = delay_us_.load();
  if (delay > 0) {
    // The stream simaccel queues the copy on: the destination device's, or the source's for a
    // copy to the host.
    const DLDevice on = dst.device.device_type == device_type() ? dst.device : src.device;
    GetStream(on, stream)->Submit([delay] {
      std::this_thread::sleep_for(std::chrono::microseconds(delay));
    });
  }
  SimAccelDeviceAPI::CopyDataFromTo(&src, &dst, stream);
}

void TestingDeviceAPI::HoldStream(DLDevice dev, bp_stream_t stream) {
  std::shared_ptr<::simaccel::Stream> s = GetStream(dev, stream);
  std::shared_ptr<::simaccel::Event> gate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<::simaccel::Event>& held = holds_[{dev.device_id, stream}];
    if (!held) held = std::make_shared<::simaccel::Event>();
    gate = held;
  }
  s->WaitFor(std::move(gate));
}

void TestingDeviceAPI::ReleaseStream(DLDevice dev, bp_stream_t stream) {
  GetStream(dev, stream);  // checks the handle
  std::shared_ptr<::simaccel::Event> gate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = holds_.find({dev.device_id, stream});
    if (it == holds_.end()) return;
    gate = std::move(it->second);
    holds_.erase(it);
  }
  gate->Signal();
}

int64_t TestingDeviceAPI::LiveAllocations(DLDevice dev) {
  const Any live = GetProperty(dev, "live_allocations");
  BACKPLANE_REQUIRE(!live.is_none(), BP_ERR_NOT_FOUND,
                    "device " + sdk::DeviceString(dev) + " does not exist; simaccel has " +
                        std::to_string(NumDevices()) + " device(s)");
  return live.AsInt();
}

HostDeviceAPI::HostDeviceAPI()
    : sdk::DeviceAPI(Entries{
          .property = false, .workspace = false, .streams = false, .sync_stream_from_to = false}) {}

HostDeviceAPI* HostDeviceAPI::Global() {
  static HostDeviceAPI* const api = new HostDeviceAPI();  // lives until the end
  return api;
}

void HostDeviceAPI::CheckDevice(DLDevice dev) const {
  BACKPLANE_REQUIRE(dev.device_type == device_type() && dev.device_id == 0, BP_ERR_NOT_FOUND,
                    sdk::DeviceString(dev) + " does not exist; simaccel_host has device 0 only");
}

Any HostDeviceAPI::GetAttr(DLDevice dev, bp_device_attr_kind_t kind) {
  if (kind == BP_ATTR_EXIST) return sdk::IntValue(dev.device_id == 0 ? 1 : 0);
  if (kind == BP_ATTR_DEVICE_NAME && dev.device_id == 0) {
    return sdk::StringValue("simaccel pinned host memory");
  }
  return sdk::NoneValue();
}

void HostDeviceAPI::SetDevice(DLDevice dev) { CheckDevice(dev); }

void* HostDeviceAPI::AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType) {
  CheckDevice(dev);
  const size_t align = std::max<size_t>(alignment, 64);
  void* p = std::aligned_alloc(align, (std::max<size_t>(nbytes, 1) + align - 1) / align * align);
  BACKPLANE_REQUIRE(p != nullptr, BP_ERR_OUT_OF_MEMORY,
                    "simaccel_host: no host memory for " + std::to_string(nbytes) + " bytes");
  handles_.Add(dev, p, nbytes, /*workspace=*/false);
  return p;
}

void HostDeviceAPI::FreeDataSpace(DLDevice dev, void* ptr) {
  CheckDevice(dev);
  if (ptr == nullptr) return;
  handles_.Remove(dev, ptr, /*workspace=*/false);
  std::free(ptr);
}

uint8_t* HostDeviceAPI::Bytes(const DLTensor* t, size_t nbytes, const char* what) {
  CheckDevice(t->device);
  const uintptr_t p = reinterpret_cast<uintptr_t>(t->data) + t->byte_offset;
  sdk::HandleTable<>::Entry e;
  BACKPLANE_REQUIRE(handles_.Containing(p, &e), BP_ERR_INVALID_ARGUMENT,
                    std::string(what) + " " + sdk::PointerString(t->data) +
                        " is not live simaccel_host memory; pass data from its alloc_data_space");
  handles_.Resolve(t->device, e.handle(), p - e.key, nbytes, what);  // the bounds
  return reinterpret_cast<uint8_t*>(p);
}

void HostDeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) {
  // Both types are this plugin's: the core sends a copy with simaccel here or there alike.
  TestingDeviceAPI* acc = TestingDeviceAPI::Global();
  if (from->device.device_type == acc->device_type() ||
      to->device.device_type == acc->device_type()) {
    acc->CopyDataFromTo(from, to, stream);
    return;
  }
  const size_t nbytes = sdk::CheckCopy(from, to, device_type()).nbytes;
  auto host = [&](const DLTensor* t, const char* what) {
    BACKPLANE_REQUIRE(
        t->device.device_type == kDLCPU || t->device.device_type == device_type(),
        BP_ERR_INVALID_ARGUMENT,
        "simaccel_host copies to and from host memory only; got " + sdk::DeviceString(t->device));
    return t->device.device_type == kDLCPU ? static_cast<uint8_t*>(t->data) + t->byte_offset
                                           : Bytes(t, nbytes, what);
  };
  uint8_t* src = host(from, "copy source");
  uint8_t* dst = host(to, "copy destination");
  if (nbytes != 0) std::memmove(dst, src, nbytes);
}

void HostDeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  CheckDevice(dev);
  BACKPLANE_REQUIRE(stream == nullptr, BP_ERR_INVALID_ARGUMENT,
                    "simaccel_host has no streams; synchronize the simaccel stream instead");
}

}  // namespace simaccel_testing
}  // namespace backplane
