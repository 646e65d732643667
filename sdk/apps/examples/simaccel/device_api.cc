// SPDX-License-Identifier: Apache-2.0
#include "device_api.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace simaccel {

namespace sdk = backplane::sdk;
using backplane::Any;

namespace {

// Stream handle layout, as for data space (memory.cc): tag | device id | serial number.
constexpr uint64_t kStreamTag = 0x5Eull << 56;

// SetDevice is per thread (CUDA's rule): the device this thread made active. The active
// stream per device is the registry's (SetStream).
thread_local int32_t t_device_id = 0;

int32_t DeviceCountFromEnvironment() {
  const char* env = std::getenv("SIMACCEL_DEVICES");
  if (env == nullptr || *env == '\0') return SimAccelDeviceAPI::kDefaultDevices;
  return std::clamp(std::atoi(env), 0, SimAccelDeviceAPI::kMaxDevices);
}

std::string TensorString(const DLTensor* t) {
  return sdk::DeviceString(t->device) + " tensor " + sdk::PointerString(t->data) +
         " (byte_offset " + std::to_string(t->byte_offset) + ")";
}

}  // namespace

SimAccelDeviceAPI* SimAccelDeviceAPI::Global() {
  // Deliberately never deleted (and its worker threads never joined): the core may free a
  // tensor or sync a stream from a static destructor of the host, after ours would have run.
  static SimAccelDeviceAPI* const instance = new SimAccelDeviceAPI();
  return instance;
}

SimAccelDeviceAPI::SimAccelDeviceAPI(const Entries& entries)
    : sdk::DeviceAPI(entries), num_devices_(DeviceCountFromEnvironment()) {
  for (int32_t i = 0; i < num_devices_; ++i) {
    devices_[i].memory = std::make_unique<DeviceMemory>(i, kMemoryBytes);
  }
}

bool SimAccelDeviceAPI::Exists(DLDevice dev) const {
  return dev.device_type == device_type() && dev.device_id >= 0 && dev.device_id < num_devices_;
}

SimAccelDeviceAPI::Device& SimAccelDeviceAPI::CheckDevice(DLDevice dev) {
  BACKPLANE_REQUIRE(
      Exists(dev), BP_ERR_NOT_FOUND,
      "device " + sdk::DeviceString(dev) + " does not exist; simaccel has " +
          (num_devices_ == 0 ? std::string("no devices here (SIMACCEL_DEVICES=0)")
                             : "simaccel:0 to simaccel:" + std::to_string(num_devices_ - 1)));
  return devices_[dev.device_id];
}

std::shared_ptr<Stream> SimAccelDeviceAPI::GetStream(DLDevice dev, bp_stream_t handle) {
  Device& d = CheckDevice(dev);
  if (handle == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!d.default_stream) {
      d.default_stream =
          std::make_shared<Stream>(dev.device_id, DeviceName(dev.device_id) + " null stream");
    }
    return d.default_stream;
  }
  registry_.Check(dev, handle);  // a live stream of `dev`, or the SDK's message
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(handle);
  // Freed by another thread since the check: say so as the registry does.
  BACKPLANE_REQUIRE(it != streams_.end(), BP_ERR_INVALID_ARGUMENT,
                    sdk::PointerString(handle) +
                        " is not a live simaccel stream (freed already); pass a stream from "
                        "create_stream or the null stream");
  return it->second;
}

// ---- attributes -------------------------------------------------------------------------

Any SimAccelDeviceAPI::GetAttr(DLDevice dev, bp_device_attr_kind_t kind) {
  if (kind == BP_ATTR_EXIST) return sdk::IntValue(Exists(dev) ? 1 : 0);
  if (!Exists(dev)) return sdk::NoneValue();
  const DeviceMemory& memory = *devices_[dev.device_id].memory;
  switch (kind) {
    case BP_ATTR_MAX_THREADS_PER_BLOCK:
      return sdk::IntValue(kMaxThreadsPerBlock);
    case BP_ATTR_WARP_SIZE:
      return sdk::IntValue(kWarpSize);
    case BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK:
      return sdk::IntValue(kSharedMemoryPerBlock);
    case BP_ATTR_COMPUTE_VERSION:
      return sdk::StringValue("1.0");
    case BP_ATTR_DEVICE_NAME:
      return sdk::StringValue("simaccel simulated accelerator " + std::to_string(dev.device_id));
    case BP_ATTR_MULTI_PROCESSOR_COUNT:
      return sdk::IntValue(1);  // one worker thread runs a stream's kernels
    case BP_ATTR_MAX_THREAD_DIMENSIONS:
      return sdk::StringValue("[1024, 1024, 64]");
    case BP_ATTR_API_VERSION:
      return sdk::IntValue(1);
    case BP_ATTR_DRIVER_VERSION:
      return sdk::StringValue(SIMACCEL_VERSION);
    case BP_ATTR_TOTAL_GLOBAL_MEMORY:
      return sdk::IntValue(static_cast<int64_t>(memory.capacity()));
    case BP_ATTR_AVAILABLE_GLOBAL_MEMORY:
      return sdk::IntValue(static_cast<int64_t>(memory.capacity() - memory.used()));
    case BP_ATTR_DEVICE_KIND:
      return sdk::StringValue("accelerator");
    case BP_ATTR_MAX_ALLOCATION_SIZE:
      return sdk::IntValue(static_cast<int64_t>(memory.capacity()));
    case BP_ATTR_SUBGROUP_SIZES:
      return sdk::IntArrayValue({kWarpSize});
    default:
      // A simulation has no clock rate, registers, L2 or image pitch to report, and the GCN
      // architecture is AMD's: none, never a made-up 0.
      return sdk::NoneValue();
  }
}

Any SimAccelDeviceAPI::GetProperty(DLDevice dev, const std::string& key) {
  if (!Exists(dev)) return sdk::NoneValue();
  if (key == "memory") return sdk::StringValue("opaque handles");
  if (key == "live_allocations") return sdk::IntValue(devices_[dev.device_id].memory->live());
  return sdk::NoneValue();
}

std::vector<std::string> SimAccelDeviceAPI::ListProperties(DLDevice dev) {
  if (GetProperty(dev, "memory").is_none()) return {};  // no such device
  return {"memory", "live_allocations"};
}

void SimAccelDeviceAPI::SetDevice(DLDevice dev) {
  CheckDevice(dev);
  t_device_id = dev.device_id;
}

DLDevice SimAccelDeviceAPI::ActiveDevice() const {
  return DLDevice{static_cast<DLDeviceType>(device_type()), t_device_id};
}

// ---- memory -----------------------------------------------------------------------------

void* SimAccelDeviceAPI::AllocDataSpace(DLDevice dev, size_t nbytes, size_t /*alignment*/,
                                        DLDataType /*type_hint*/) {
  // Handles are opaque, so alignment is the device's business: every allocation starts at
  // the beginning of a host allocation, aligned for any scalar type.
  return CheckDevice(dev).memory->Alloc(dev, nbytes);
}

void SimAccelDeviceAPI::FreeDataSpace(DLDevice dev, void* ptr) {
  Device& d = CheckDevice(dev);
  if (ptr != nullptr) d.memory->Free(dev, ptr);
}

std::shared_ptr<Allocation> SimAccelDeviceAPI::Resolve(DLDevice dev, const void* handle,
                                                       uint64_t offset, size_t nbytes,
                                                       const char* what) {
  return CheckDevice(dev).memory->Resolve(dev, handle, offset, nbytes, what);
}

void SimAccelDeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to,
                                       bp_stream_t stream) {
  const auto [nbytes, from_dev, to_dev] = sdk::CheckCopy(from, to, device_type());
  const bool from_host = from->device.device_type == kDLCPU;
  const bool to_host = to->device.device_type == kDLCPU;
  BACKPLANE_REQUIRE((from_host || from_dev) && (to_host || to_dev), BP_ERR_INVALID_ARGUMENT,
                    "cannot copy " + TensorString(from) + " to " + TensorString(to) +
                        ": simaccel copies between cpu and simaccel or within simaccel; copy "
                        "through bp_device_copy_data_from_to, which stages other pairs");

  if (from_host) {
    // Host to device. The caller may reuse its buffer as soon as we return, so the bytes are
    // taken now; the write into device memory happens in stream order.
    auto dst = Resolve(to->device, to->data, to->byte_offset, nbytes, "copy destination");
    auto s = GetStream(to->device, stream);
    if (nbytes == 0) return;
    BACKPLANE_REQUIRE(from->data != nullptr, BP_ERR_INVALID_ARGUMENT,
                      "the host source of a copy to " + sdk::DeviceString(to->device) +
                          " is null; pass host memory");
    const uint8_t* src = static_cast<const uint8_t*>(from->data) + from->byte_offset;
    auto staged = std::make_shared<std::vector<uint8_t>>(src, src + nbytes);
    s->Submit([dst, staged, offset = to->byte_offset] {
      std::memcpy(dst->bytes.get() + offset, staged->data(), staged->size());
    });
    return;
  }

  auto src = Resolve(from->device, from->data, from->byte_offset, nbytes, "copy source");
  if (to_host) {
    // Device to host: the host buffer is written when the stream gets there.
    auto s = GetStream(from->device, stream);
    if (nbytes == 0) return;
    BACKPLANE_REQUIRE(to->data != nullptr, BP_ERR_INVALID_ARGUMENT,
                      "the host destination of a copy from " + sdk::DeviceString(from->device) +
                          " is null; pass host memory");
    uint8_t* host = static_cast<uint8_t*>(to->data) + to->byte_offset;
    s->Submit([src, offset = from->byte_offset, host, nbytes] {
      std::memcpy(host, src->bytes.get() + offset, nbytes);
    });
    return;
  }

  // Device to device, on `stream` of the destination's device. Across devices the copy also
  // waits for the work queued so far on the source device's null stream, which is where
  // the data usually comes from (work on its other streams is the caller's to order).
  auto dst = Resolve(to->device, to->data, to->byte_offset, nbytes, "copy destination");
  auto s = GetStream(to->device, stream);
  if (nbytes == 0) return;
  if (from->device.device_id != to->device.device_id) {
    s->WaitFor(GetStream(from->device, nullptr)->Record());
  }
  s->Submit([src, src_offset = from->byte_offset, dst, dst_offset = to->byte_offset, nbytes] {
    std::memmove(dst->bytes.get() + dst_offset, src->bytes.get() + src_offset, nbytes);
  });
}

// ---- streams ----------------------------------------------------------------------------

bp_stream_t SimAccelDeviceAPI::CreateStream(DLDevice dev) {
  CheckDevice(dev);
  bp_stream_t handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t id = kStreamTag | (static_cast<uint64_t>(dev.device_id & 0xFF) << 48) |
                        (next_stream_serial_++ & ((1ull << 48) - 1));
    handle = reinterpret_cast<bp_stream_t>(static_cast<uintptr_t>(id));
    streams_.emplace(
        handle, std::make_shared<Stream>(dev.device_id, DeviceName(dev.device_id) + " stream " +
                                                            sdk::PointerString(handle)));
  }
  registry_.Add(handle, dev);
  return handle;
}

void SimAccelDeviceAPI::FreeStream(DLDevice dev, bp_stream_t stream) {
  BACKPLANE_REQUIRE(stream != nullptr, BP_ERR_INVALID_ARGUMENT,
                    "the null stream of " + sdk::DeviceString(dev) +
                        " belongs to the device and cannot be freed");
  std::shared_ptr<Stream> s = GetStream(dev, stream);
  // The registry first: from here on the handle is refused, and a thread that has it active
  // gets an error at its next launch instead of queuing on a stream nobody owns.
  registry_.Remove(stream);
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.erase(stream);
  }
  // The last reference may be here: destroying the stream runs its queued work first, so
  // streams waiting on its events see them complete.
}

void SimAccelDeviceAPI::SetStream(DLDevice dev, bp_stream_t stream) {
  CheckDevice(dev);
  registry_.SetActive(dev, stream);  // checks the handle
}

void SimAccelDeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  GetStream(dev, stream)->Synchronize();
}

void SimAccelDeviceAPI::SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) {
  std::shared_ptr<Stream> from = GetStream(dev, src);
  std::shared_ptr<Stream> to = GetStream(dev, dst);
  if (from == to) return;  // a stream is already ordered with itself
  to->WaitFor(from->Record());
}

void SimAccelDeviceAPI::Launch(DLDevice dev, std::function<void()> work) {
  GetStream(dev, registry_.Active(dev))->Submit(std::move(work));
}

// ---- events -----------------------------------------------------------------------------
// An event is a mark in a stream (Stream::Record): the stream's worker signals it when it gets
// there and notes the time. Recording again makes a new mark, so a stream already waiting for
// the old one is not held back by the new one.

std::shared_ptr<Event> SimAccelDeviceAPI::MarkOf(DLDevice dev, void* event, const char* what) {
  CheckDevice(dev);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = events_.find(event);
  BACKPLANE_REQUIRE(it != events_.end() && it->second->device_id == dev.device_id,
                    BP_ERR_INVALID_ARGUMENT,
                    std::string("simaccel ") + what + ": " + sdk::PointerString(event) +
                        " is not a live event of " + sdk::DeviceString(dev) +
                        " (freed already, made up, or another device's); pass one from "
                        "bp_event_create on that device");
  return it->second->mark;
}

void* SimAccelDeviceAPI::CreateEvent(DLDevice dev) {
  CheckDevice(dev);
  auto event = std::make_unique<HostEvent>(HostEvent{dev.device_id, nullptr});
  void* handle = event.get();
  std::lock_guard<std::mutex> lock(mu_);
  events_.emplace(handle, std::move(event));
  return handle;
}

void SimAccelDeviceAPI::FreeEvent(DLDevice dev, void* event) {
  MarkOf(dev, event, "FreeEvent");
  // Streams waiting for its mark hold the mark itself, so they go on as recorded.
  std::lock_guard<std::mutex> lock(mu_);
  events_.erase(event);
}

void SimAccelDeviceAPI::RecordEvent(DLDevice dev, void* event, bp_stream_t stream) {
  MarkOf(dev, event, "RecordEvent");
  std::shared_ptr<Event> mark = GetStream(dev, stream)->Record();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = events_.find(event);
  if (it != events_.end()) it->second->mark = std::move(mark);
}

void SimAccelDeviceAPI::StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) {
  std::shared_ptr<Event> mark = MarkOf(dev, event, "StreamWaitEvent");
  std::shared_ptr<Stream> s = GetStream(dev, stream);
  if (mark) s->WaitFor(std::move(mark));  // never recorded: nothing to wait for
}

bool SimAccelDeviceAPI::EventDone(DLDevice dev, void* event) {
  std::shared_ptr<Event> mark = MarkOf(dev, event, "EventDone");
  return !mark || mark->Done();
}

void SimAccelDeviceAPI::SyncEvent(DLDevice dev, void* event) {
  std::shared_ptr<Event> mark = MarkOf(dev, event, "SyncEvent");
  if (mark) mark->Wait();
}

double SimAccelDeviceAPI::EventElapsedMs(DLDevice dev, void* start, void* end) {
  std::shared_ptr<Event> from = MarkOf(dev, start, "EventElapsedMs");
  std::shared_ptr<Event> to = MarkOf(dev, end, "EventElapsedMs");
  BACKPLANE_REQUIRE(from && to, BP_ERR_INVALID_ARGUMENT,
                    "simaccel EventElapsedMs: an event on " + sdk::DeviceString(dev) +
                        " was never recorded; record both with bp_event_record first");
  return std::chrono::duration<double, std::milli>(to->Time() - from->Time()).count();
}

}  // namespace simaccel
