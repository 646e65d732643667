// SPDX-License-Identifier: Apache-2.0
#include "device_api.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace backplane {
namespace fakeacc {

namespace {

// The devices that exist: kNumDevices, or fewer when BACKPLANE_FAKEACC_DEVICES says so (tests
// use 0 to show that building code needs no device).
int32_t PresentDevices() {
  static const int32_t count = [] {
    const char* env = std::getenv("BACKPLANE_FAKEACC_DEVICES");
    if (env == nullptr || *env == '\0') return FakeAccDeviceAPI::kNumDevices;
    const int32_t n = std::atoi(env);
    return n < 0 ? 0 : std::min(n, FakeAccDeviceAPI::kNumDevices);
  }();
  return count;
}

}  // namespace
namespace {

constexpr uint64_t kStreamTag = 0x5Eull << 56;
constexpr uint64_t kTagMask = 0xFFull << 56;

thread_local int32_t t_active_device = 0;
// The stream SetStream made active, per device, for this thread (null: the null stream).
// Kernel launches go to it, as set_stream's contract (c_api.h) asks of generated code.
thread_local bp_stream_t t_active_stream[FakeAccDeviceAPI::kNumDevices] = {};

std::string TensorString(const DLTensor* t) {
  return sdk::DeviceString(t->device) + " tensor " + sdk::PointerString(t->data) +
         " (byte_offset " + std::to_string(t->byte_offset) + ")";
}

}  // namespace

FakeAccDeviceAPI::FakeAccDeviceAPI(int32_t device_type)
    // No workspace entries: the core must fall back to data space (the contract's default,
    // docs/abi.md).
    : sdk::DeviceAPI(Entries{
          .property = true, .workspace = false, .streams = true, .sync_stream_from_to = true}),
      device_type_(device_type) {
  for (int32_t i = 0; i < kNumDevices; ++i) {
    devices_[i].arena = std::make_unique<Arena>(i, kCapacityBytes);
  }
}

FakeAccDeviceAPI::~FakeAccDeviceAPI() {
  std::vector<std::shared_ptr<Stream>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& entry : streams_) all.push_back(entry.second);
    for (Device& d : devices_) {
      if (d.null_stream) all.push_back(d.null_stream);
    }
  }
  for (auto& s : all) s->Release();
  for (auto& s : all) s->Stop();
}

FakeAccDeviceAPI* FakeAccDeviceAPI::Global(int32_t device_type) {
  static FakeAccDeviceAPI instance(device_type);
  return &instance;
}

FakeAccDeviceAPI::Device& FakeAccDeviceAPI::CheckDevice(DLDevice dev) {
  BACKPLANE_REQUIRE(
      dev.device_type == device_type_ && dev.device_id >= 0 && dev.device_id < PresentDevices(),
      BP_ERR_NOT_FOUND,
      std::string("device ") + sdk::DeviceString(dev) +
          " does not exist; fakeacc has devices fakeacc:0 and fakeacc:1");
  return devices_[dev.device_id];
}

std::shared_ptr<Stream> FakeAccDeviceAPI::GetStream(DLDevice dev, bp_stream_t handle) {
  Device& d = CheckDevice(dev);
  std::lock_guard<std::mutex> lock(mu_);
  if (handle == nullptr) {
    if (!d.null_stream) {
      d.null_stream = std::make_shared<Stream>(
          dev.device_id, "fakeacc:" + std::to_string(dev.device_id) + " null stream");
    }
    return d.null_stream;
  }
  auto it = streams_.find(reinterpret_cast<uintptr_t>(handle));
  BACKPLANE_REQUIRE(
      it != streams_.end(), BP_ERR_INVALID_ARGUMENT,
      sdk::PointerString(handle) +
          " is not a live stream of fakeacc (freed already, or made by another backend); "
          "pass a stream from create_stream or the null stream");
  BACKPLANE_REQUIRE(
      it->second->device_id() == dev.device_id, BP_ERR_INVALID_ARGUMENT,
      it->second->name() + " belongs to fakeacc:" + std::to_string(it->second->device_id()) +
          ", not " + sdk::DeviceString(dev) + "; use a stream of the device the work runs on");
  return it->second;
}

Any FakeAccDeviceAPI::GetAttr(DLDevice dev, bp_device_attr_kind_t kind) {
  const bool exists =
      dev.device_type == device_type_ && dev.device_id >= 0 && dev.device_id < PresentDevices();
  if (kind == BP_ATTR_EXIST) return sdk::IntValue(exists ? 1 : 0);
  if (!exists) return sdk::NoneValue();
  const Arena& arena = *devices_[dev.device_id].arena;
  switch (kind) {
    case BP_ATTR_MAX_THREADS_PER_BLOCK:
      return sdk::IntValue(256);
    case BP_ATTR_WARP_SIZE:
      return sdk::IntValue(8);
    case BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK:
      return sdk::IntValue(16384);
    case BP_ATTR_COMPUTE_VERSION:
      return sdk::StringValue("1.0");
    case BP_ATTR_DEVICE_NAME:
      return sdk::StringValue("Backplane fake accelerator " + std::to_string(dev.device_id));
    case BP_ATTR_MULTI_PROCESSOR_COUNT:
      return sdk::IntValue(2);
    case BP_ATTR_MAX_THREAD_DIMENSIONS:
      return sdk::StringValue("[256, 256, 64]");
    case BP_ATTR_API_VERSION:
      return sdk::IntValue(1);
    case BP_ATTR_DRIVER_VERSION:
      return sdk::StringValue("fakeacc 1.0");
    case BP_ATTR_TOTAL_GLOBAL_MEMORY:
      return sdk::IntValue(static_cast<int64_t>(arena.capacity()));
    case BP_ATTR_AVAILABLE_GLOBAL_MEMORY:
      return sdk::IntValue(static_cast<int64_t>(arena.capacity() - arena.used()));
    case BP_ATTR_DEVICE_KIND:
      return sdk::StringValue("accelerator");
    case BP_ATTR_MAX_ALLOCATION_SIZE:
      return sdk::IntValue(static_cast<int64_t>(arena.capacity()));
    case BP_ATTR_SUBGROUP_SIZES:
      return sdk::IntArrayValue({8});
    default:  // clock rate, registers, GCN arch, L2, image pitch: not modelled
      return sdk::NoneValue();
  }
}

Any FakeAccDeviceAPI::GetProperty(DLDevice dev, const std::string& key) {
  if (!(dev.device_type == device_type_ && dev.device_id >= 0 &&
        dev.device_id < PresentDevices())) {
    return sdk::NoneValue();
  }
  if (key == "memory") return sdk::StringValue("opaque handles");
  if (key == "live_allocations") return sdk::IntValue(LiveAllocations(dev));
  return sdk::NoneValue();
}

std::vector<std::string> FakeAccDeviceAPI::ListProperties(DLDevice dev) {
  if (GetProperty(dev, "memory").is_none()) return {};  // no such device
  return {"memory", "live_allocations"};
}

void FakeAccDeviceAPI::SetDevice(DLDevice dev) {
  CheckDevice(dev);
  t_active_device = dev.device_id;
}

std::shared_ptr<Buffer> FakeAccDeviceAPI::Resolve(DLDevice dev, const void* handle, uint64_t offset,
                                                  size_t nbytes, const char* what) {
  return CheckDevice(dev).arena->Lookup(handle, offset, nbytes, what);
}

void FakeAccDeviceAPI::Launch(DLDevice dev, std::function<void()> work) {
  CheckDevice(dev);
  // A stream freed while active is an error here, not a launch on the null stream.
  GetStream(dev, t_active_stream[dev.device_id])->Submit(std::move(work));
}

void* FakeAccDeviceAPI::AllocDataSpace(DLDevice dev, size_t nbytes, size_t, DLDataType) {
  return CheckDevice(dev).arena->Alloc(nbytes);
}

void FakeAccDeviceAPI::FreeDataSpace(DLDevice dev, void* ptr) {
  Device& d = CheckDevice(dev);
  if (ptr != nullptr) d.arena->Free(ptr);
}

void FakeAccDeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to,
                                      bp_stream_t stream) {
  const auto [nbytes, from_acc, to_acc] = sdk::CheckCopy(from, to, device_type_);
  // The host side: cpu memory, or this plugin's pinned fakeacc_host memory (checked).
  FakeAccHostDeviceAPI* pinned = FakeAccHostDeviceAPI::Global();
  auto is_pinned = [&](const DLTensor* t) {
    return t->device.device_type == pinned->device_type();
  };
  const bool from_host = from->device.device_type == kDLCPU || is_pinned(from);
  const bool to_host = to->device.device_type == kDLCPU || is_pinned(to);
  BACKPLANE_REQUIRE((from_host || from_acc) && (to_host || to_acc), BP_ERR_INVALID_ARGUMENT,
                    "cannot copy " + TensorString(from) + " to " + TensorString(to) +
                        ": fakeacc copies between cpu or fakeacc_host and fakeacc, or within "
                        "fakeacc only; copy through bp_device_copy_data_from_to, which stages "
                        "other pairs");
  if (is_pinned(from) || is_pinned(to)) {
    if (is_pinned(from)) pinned->Bytes(from, nbytes, "copy source");
    if (is_pinned(to)) pinned->Bytes(to, nbytes, "copy destination");
    ++pinned_copies_;
  }

  if (from_host) {
    // Host to device: snapshot now, because the caller may reuse its buffer at once.
    CheckDevice(to->device);
    auto dst = devices_[to->device.device_id].arena->Lookup(to->data, to->byte_offset, nbytes,
                                                            "copy destination");
    BACKPLANE_REQUIRE(nbytes == 0 || from->data != nullptr, BP_ERR_INVALID_ARGUMENT,
                      "the host source of a copy to fakeacc is null; pass host memory");
    auto s = GetStream(to->device, stream);
    if (nbytes == 0) return;
    const uint8_t* src = static_cast<const uint8_t*>(from->data) + from->byte_offset;
    auto snapshot = std::make_shared<std::vector<uint8_t>>(src, src + nbytes);
    const uint64_t offset = to->byte_offset;
    s->Submit([dst, snapshot, offset] {
      std::memcpy(dst->bytes.get() + offset, snapshot->data(), snapshot->size());
    });
    return;
  }

  CheckDevice(from->device);
  auto src = devices_[from->device.device_id].arena->Lookup(from->data, from->byte_offset, nbytes,
                                                            "copy source");
  const uint64_t src_offset = from->byte_offset;
  if (to_host) {
    // Device to host: the host buffer is written when the worker runs; stream_sync waits.
    BACKPLANE_REQUIRE(nbytes == 0 || to->data != nullptr, BP_ERR_INVALID_ARGUMENT,
                      "the host destination of a copy from fakeacc is null; pass "
                      "host memory");
    auto s = GetStream(from->device, stream);
    if (nbytes == 0) return;
    uint8_t* host = static_cast<uint8_t*>(to->data) + to->byte_offset;
    s->Submit([src, src_offset, host, nbytes] {
      std::memcpy(host, src->bytes.get() + src_offset, nbytes);
    });
    return;
  }

  // Device to device, on a stream of the destination device.
  CheckDevice(to->device);
  auto dst = devices_[to->device.device_id].arena->Lookup(to->data, to->byte_offset, nbytes,
                                                          "copy destination");
  auto s = GetStream(to->device, stream);
  if (nbytes == 0) return;
  const uint64_t dst_offset = to->byte_offset;
  std::shared_ptr<Stream> after;  // across devices: the source device's queued work first
  uint64_t after_n = 0;
  if (from->device.device_id != to->device.device_id) {
    after = GetStream(from->device, nullptr);
    after_n = after->Submitted();
  }
  s->Submit([src, src_offset, dst, dst_offset, nbytes, after, after_n] {
    if (after) after->WaitFor(after_n, false);
    std::memmove(dst->bytes.get() + dst_offset, src->bytes.get() + src_offset, nbytes);
  });
}

bp_stream_t FakeAccDeviceAPI::CreateStream(DLDevice dev) {
  CheckDevice(dev);
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = kStreamTag | (static_cast<uint64_t>(dev.device_id) << 48) |
                      (next_stream_serial_++ & ((1ull << 48) - 1));
  auto handle = reinterpret_cast<bp_stream_t>(static_cast<uintptr_t>(id));
  streams_.emplace(
      id, std::make_shared<Stream>(dev.device_id, "fakeacc:" + std::to_string(dev.device_id) +
                                                      " stream " + sdk::PointerString(handle)));
  return handle;
}

void FakeAccDeviceAPI::FreeStream(DLDevice dev, bp_stream_t stream) {
  BACKPLANE_REQUIRE(stream != nullptr, BP_ERR_INVALID_ARGUMENT,
                    "the null stream of " + sdk::DeviceString(dev) +
                        " belongs to the device and cannot be freed");
  auto s = GetStream(dev, stream);
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.erase(reinterpret_cast<uintptr_t>(stream));
  }
  // Its queued work still runs; streams waiting on it see it finish.
  s->Stop();
}

void FakeAccDeviceAPI::SetStream(DLDevice dev, bp_stream_t stream) {
  GetStream(dev, stream);  // validates
  t_active_stream[dev.device_id] = stream;
}

void FakeAccDeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  auto s = GetStream(dev, stream);
  s->WaitFor(s->Submitted());
}

void FakeAccDeviceAPI::SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) {
  auto from = GetStream(dev, src);
  auto to = GetStream(dev, dst);
  if (from == to) return;  // a stream is ordered with itself
  const uint64_t n = from->Submitted();
  to->Submit([from, n] { from->WaitFor(n, false); });
}

void FakeAccDeviceAPI::HoldStream(DLDevice dev, bp_stream_t stream) {
  GetStream(dev, stream)->Hold();
}

void FakeAccDeviceAPI::ReleaseStream(DLDevice dev, bp_stream_t stream) {
  GetStream(dev, stream)->Release();
}

int64_t FakeAccDeviceAPI::LiveAllocations(DLDevice dev) {
  return static_cast<int64_t>(CheckDevice(dev).arena->live());
}

FakeAccHostDeviceAPI::FakeAccHostDeviceAPI()
    : sdk::DeviceAPI(Entries{
          .property = false, .workspace = false, .streams = false, .sync_stream_from_to = false}) {}

FakeAccHostDeviceAPI* FakeAccHostDeviceAPI::Global() {
  static FakeAccHostDeviceAPI* const api = new FakeAccHostDeviceAPI();  // lives until the end
  return api;
}

void FakeAccHostDeviceAPI::CheckDevice(DLDevice dev) const {
  BACKPLANE_REQUIRE(dev.device_type == device_type() && dev.device_id == 0, BP_ERR_NOT_FOUND,
                    sdk::DeviceString(dev) + " does not exist; fakeacc_host has device 0 only");
}

Any FakeAccHostDeviceAPI::GetAttr(DLDevice dev, bp_device_attr_kind_t kind) {
  if (kind == BP_ATTR_EXIST) return sdk::IntValue(dev.device_id == 0 ? 1 : 0);
  if (kind == BP_ATTR_DEVICE_NAME && dev.device_id == 0) {
    return sdk::StringValue("Backplane fake accelerator pinned host memory");
  }
  return sdk::NoneValue();
}

void FakeAccHostDeviceAPI::SetDevice(DLDevice dev) { CheckDevice(dev); }

void* FakeAccHostDeviceAPI::AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                                           DLDataType) {
  CheckDevice(dev);
  const size_t align = std::max<size_t>(alignment, 64);
  void* p = std::aligned_alloc(align, (std::max<size_t>(nbytes, 1) + align - 1) / align * align);
  BACKPLANE_REQUIRE(p != nullptr, BP_ERR_OUT_OF_MEMORY,
                    "fakeacc_host: no host memory for " + std::to_string(nbytes) + " bytes");
  handles_.Add(dev, p, nbytes, /*workspace=*/false);
  return p;
}

void FakeAccHostDeviceAPI::FreeDataSpace(DLDevice dev, void* ptr) {
  CheckDevice(dev);
  if (ptr == nullptr) return;
  handles_.Remove(dev, ptr, /*workspace=*/false);
  std::free(ptr);
}

uint8_t* FakeAccHostDeviceAPI::Bytes(const DLTensor* t, size_t nbytes, const char* what) {
  CheckDevice(t->device);
  const uintptr_t p = reinterpret_cast<uintptr_t>(t->data) + t->byte_offset;
  sdk::HandleTable<>::Entry e;
  BACKPLANE_REQUIRE(handles_.Containing(p, &e), BP_ERR_INVALID_ARGUMENT,
                    std::string(what) + " " + sdk::PointerString(t->data) +
                        " is not live fakeacc_host memory; pass data from its alloc_data_space");
  handles_.Resolve(t->device, e.handle(), p - e.key, nbytes, what);  // the bounds
  return reinterpret_cast<uint8_t*>(p);
}

void FakeAccHostDeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to,
                                          bp_stream_t stream) {
  // Both types are this plugin's: the core sends a copy with fakeacc here or there alike.
  FakeAccDeviceAPI* acc = FakeAccDeviceAPI::Global(0);
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
        "fakeacc_host copies to and from host memory only; got " + sdk::DeviceString(t->device));
    return t->device.device_type == kDLCPU ? static_cast<uint8_t*>(t->data) + t->byte_offset
                                           : Bytes(t, nbytes, what);
  };
  uint8_t* src = host(from, "copy source");
  uint8_t* dst = host(to, "copy destination");
  if (nbytes != 0) std::memmove(dst, src, nbytes);
}

void FakeAccHostDeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  CheckDevice(dev);
  BACKPLANE_REQUIRE(stream == nullptr, BP_ERR_INVALID_ARGUMENT,
                    "fakeacc_host has no streams; synchronize the fakeacc stream instead");
}

}  // namespace fakeacc
}  // namespace backplane
