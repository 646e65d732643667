// SPDX-License-Identifier: Apache-2.0
#include "device_api.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace backplane {
namespace cuda {

namespace {

// The NVIDIA kernel module's version from /proc/driver/nvidia/version ("NVRM version: NVIDIA
// UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ..."), or "" when it cannot be read.
std::string KernelModuleVersion() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return "";
  const std::string marker = "Kernel Module";
  const size_t at = line.find(marker);
  if (at == std::string::npos) return "";
  std::istringstream rest(line.substr(at + marker.size()));
  std::string version;
  rest >> version;
  return version;
}

CUdeviceptr Ptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

}  // namespace

// ---- CUDADeviceAPI ---------------------------------------------------------------------

CUDADeviceAPI* CUDADeviceAPI::Global() {
  static CUDADeviceAPI* instance = new CUDADeviceAPI();  // lives until the process ends
  return instance;
}

CUDADeviceAPI::CUDADeviceAPI()
    : sdk::DeviceAPI(Entries{.events = true, .native_handles = true, .wrap_native = true}),
      driver_(&Driver::Get()) {
  if (!driver_->ok) {
    reason_ = driver_->reason;
    return;
  }
  int count = 0;
  const CUresult r = driver_->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    reason_ = "cuDeviceGetCount failed: " + ResultName(r);
    return;
  }
  for (int i = 0; i < count; ++i) {
    Device d;
    if (driver_->cuDeviceGet(&d.handle, i) != CUDA_SUCCESS) break;
    devices_.push_back(std::move(d));
  }
  if (devices_.empty()) {
    reason_ = "the CUDA driver reports no devices (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
  }
}

void CUDADeviceAPI::RequireDevice(DLDevice dev) const {
  if (dev.device_type == device_type() && dev.device_id >= 0 && dev.device_id < DeviceCount()) {
    return;
  }
  if (devices_.empty()) {
    throw Error(BP_ERR_NOT_FOUND,
                "device " + sdk::DeviceString(dev) +
                    " does not exist: there are no CUDA devices here: " + reason_);
  }
  throw Error(BP_ERR_NOT_FOUND, "device " + sdk::DeviceString(dev) + " does not exist; CUDA has " +
                                    std::to_string(DeviceCount()) +
                                    " device(s) here (cuda:0 ...); `backplane info` lists them");
}

CUcontext CUDADeviceAPI::Activate(DLDevice dev) {
  RequireDevice(dev);
  const CUcontext ctx = Context(dev.device_id);
  CUcontext current = nullptr;
  if (driver_->cuCtxGetCurrent(&current) != CUDA_SUCCESS || current != ctx) {
    Check(driver_->cuCtxSetCurrent(ctx),
          [&] { return "cuCtxSetCurrent on " + sdk::DeviceString(dev); });
  }
  return ctx;
}

CUcontext CUDADeviceAPI::Context(int32_t device_id) {
  const DLDevice dev{static_cast<DLDeviceType>(device_type()), device_id};
  RequireDevice(dev);
  Device& d = devices_[static_cast<size_t>(device_id)];
  // Retained once, on first use, and kept until the process ends: after that a read.
  if (CUcontext ctx = d.context.load(std::memory_order_acquire)) return ctx;
  std::lock_guard<std::mutex> lock(mu_);
  CUcontext ctx = d.context.load(std::memory_order_relaxed);
  if (ctx == nullptr) {
    Check(driver_->cuDevicePrimaryCtxRetain(&ctx, d.handle),
          [&] { return "cuDevicePrimaryCtxRetain on " + sdk::DeviceString(dev); });
    d.context.store(ctx, std::memory_order_release);
  }
  return ctx;
}

const CUDADeviceAPI::LaunchLimits& CUDADeviceAPI::Limits(int32_t device_id) {
  RequireDevice(DLDevice{static_cast<DLDeviceType>(device_type()), device_id});
  Device& d = devices_[static_cast<size_t>(device_id)];
  if (const LaunchLimits* ready = d.limits_ready.load(std::memory_order_acquire)) return *ready;
  auto limits = std::make_unique<LaunchLimits>();
  const CUdevice_attribute grid[3] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                                      CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                      CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
  const CUdevice_attribute block[3] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                                       CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                       CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
  for (int axis = 0; axis < 3; ++axis) {
    // One cuLaunchKernel takes MAX_GRID_DIM_* blocks (2^31-1, 65535, 65535); a larger grid is
    // launched in parts, each kernel adding its part's int64 block offset to blockIdx, so a
    // call may have as many blocks as an int64 counts (module.cc).
    limits->grid[axis] = INT64_MAX;
    limits->grid_per_launch[axis] = Attribute(device_id, grid[axis]);
    limits->block[axis] = Attribute(device_id, block[axis]);
  }
  limits->threads_per_block = Attribute(device_id, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  limits->shared_optin =
      Attribute(device_id, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  limits->shared_per_block = limits->shared_optin;  // what the launch kit checks
  std::lock_guard<std::mutex> lock(mu_);
  if (d.limits == nullptr) {
    d.limits = std::move(limits);
    d.limits_ready.store(d.limits.get(), std::memory_order_release);
  }
  return *d.limits;
}

int CUDADeviceAPI::Attribute(int32_t id, CUdevice_attribute attr) {
  int v = 0;
  Check(driver_->cuDeviceGetAttribute(&v, attr, devices_[id].handle),
        "cuDeviceGetAttribute(" + std::to_string(static_cast<int>(attr)) +
            ") on cuda:" + std::to_string(id));
  return v;
}

Any CUDADeviceAPI::GetAttr(DLDevice dev, bp_device_attr_kind_t kind) {
  const bool exists =
      dev.device_type == device_type() && dev.device_id >= 0 && dev.device_id < DeviceCount();
  if (kind == BP_ATTR_EXIST) return sdk::IntValue(exists ? 1 : 0);
  if (!exists) return sdk::NoneValue();
  const int32_t id = dev.device_id;
  switch (kind) {
    case BP_ATTR_MAX_THREADS_PER_BLOCK:
      return sdk::IntValue(Attribute(id, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
    case BP_ATTR_WARP_SIZE:
      return sdk::IntValue(Attribute(id, CU_DEVICE_ATTRIBUTE_WARP_SIZE));
    case BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK:
      return sdk::IntValue(Attribute(id, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
    case BP_ATTR_COMPUTE_VERSION:
      return sdk::StringValue(
          std::to_string(Attribute(id, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)) + "." +
          std::to_string(Attribute(id, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)));
    case BP_ATTR_DEVICE_NAME: {
      char name[256] = {0};
      Check(driver_->cuDeviceGetName(name, sizeof(name) - 1, devices_[id].handle),
            "cuDeviceGetName");
      return sdk::StringValue(name);
    }
    case BP_ATTR_MAX_CLOCK_RATE:
      return sdk::IntValue(Attribute(id, CU_DEVICE_ATTRIBUTE_CLOCK_RATE));  // kHz
    case BP_ATTR_MULTI_PROCESSOR_COUNT:
      return sdk::IntValue(Attribute(id, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
    case BP_ATTR_MAX_THREAD_DIMENSIONS:
      return sdk::StringValue(
          "[" + std::to_string(Attribute(id, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)) + ", " +
          std::to_string(Attribute(id, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)) + ", " +
          std::to_string(Attribute(id, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)) + "]");
    case BP_ATTR_MAX_REGISTERS_PER_BLOCK:
      return sdk::IntValue(Attribute(id, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK));
    case BP_ATTR_API_VERSION:
      return sdk::IntValue(CUDA_VERSION);  // the driver API version the plugin was built for
    case BP_ATTR_DRIVER_VERSION: {
      const int v = driver_->version;
      return sdk::StringValue(std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10));
    }
    case BP_ATTR_L2_CACHE_SIZE_BYTES:
      return sdk::IntValue(Attribute(id, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
    case BP_ATTR_TOTAL_GLOBAL_MEMORY: {
      size_t bytes = 0;
      Check(driver_->cuDeviceTotalMem(&bytes, devices_[id].handle), "cuDeviceTotalMem");
      return sdk::IntValue(static_cast<int64_t>(bytes));
    }
    case BP_ATTR_AVAILABLE_GLOBAL_MEMORY: {
      Activate(dev);
      size_t free_bytes = 0, total = 0;
      Check(driver_->cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
      return sdk::IntValue(static_cast<int64_t>(free_bytes));
    }
    case BP_ATTR_IMAGE_PITCH_ALIGNMENT:
      return sdk::IntValue(Attribute(id, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT));
    case BP_ATTR_DEVICE_KIND:
      return sdk::StringValue("gpu");
    case BP_ATTR_VENDOR:
      return sdk::StringValue("NVIDIA");
    case BP_ATTR_VENDOR_ID:
      return sdk::IntValue(0x10de);  // NVIDIA's PCI vendor id
    case BP_ATTR_UUID: {
      CUuuid uuid{};
      Check(driver_->cuDeviceGetUuid(&uuid, devices_[id].handle), "cuDeviceGetUuid");
      return sdk::StringValue(sdk::UuidString(reinterpret_cast<const unsigned char*>(uuid.bytes)));
    }
    case BP_ATTR_PCI_BUS_ID: {
      // "0000:17:00.0": domain, bus, device and function in hex (lowercased as lspci and the
      // other backends write them).
      char text[64] = {0};
      Check(driver_->cuDeviceGetPCIBusId(text, sizeof(text) - 1, devices_[id].handle),
            "cuDeviceGetPCIBusId");
      std::string bus(text);
      for (char& c : bus) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return sdk::StringValue(bus);
    }
    case BP_ATTR_MAX_ALLOCATION_SIZE: {
      // cuMemAlloc has no per-allocation limit below the device's memory.
      size_t bytes = 0;
      Check(driver_->cuDeviceTotalMem(&bytes, devices_[id].handle), "cuDeviceTotalMem");
      return sdk::IntValue(static_cast<int64_t>(bytes));
    }
    case BP_ATTR_SUPPORTS_FP64:
      return sdk::IntValue(1);  // every compute capability this driver API supports has it
    case BP_ATTR_SUPPORTS_FP16: {
      // "Kernels can compute in float16": the hardware's half arithmetic, compute capability
      // 5.3 and later. The code generator computes float16 in float rounded to half after
      // every operation (docs/cuda.md, "float16"), the same values on every device.
      const int major = Attribute(id, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
      const int minor = Attribute(id, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
      return sdk::IntValue(major > 5 || (major == 5 && minor >= 3) ? 1 : 0);
    }
    case BP_ATTR_SUBGROUP_SIZES:
      return sdk::IntArrayValue({Attribute(id, CU_DEVICE_ATTRIBUTE_WARP_SIZE)});
    case BP_ATTR_DRIVER_INFO: {
      // The kernel module's own version ("535.104.05", what nvidia-smi shows); the driver
      // API reports only the CUDA version it implements.
      const std::string version = KernelModuleVersion();
      return version.empty() ? sdk::NoneValue() : sdk::StringValue("NVIDIA " + version);
    }
    default:
      // kGcnArch, extensions, ISA flags and anything else CUDA has no query for.
      return sdk::NoneValue();
  }
}

std::vector<std::string> CUDADeviceAPI::ListProperties(DLDevice dev) {
  std::vector<std::string> keys = {"status"};
  if (dev.device_type != device_type() || dev.device_id < 0 || dev.device_id >= DeviceCount()) {
    return keys;
  }
  for (const char* key :
       {"compute_capability_major", "compute_capability_minor", "max_shared_memory_per_block_optin",
        "max_registers_per_multiprocessor"}) {
    keys.push_back(key);
  }
  return keys;
}

Any CUDADeviceAPI::GetProperty(DLDevice dev, const std::string& key) {
  if (key == "status") {
    if (devices_.empty()) return sdk::StringValue("no devices: " + reason_);
    return sdk::StringValue("ok: " + std::to_string(DeviceCount()) + " device(s), driver " +
                            driver_->library + " version " + std::to_string(driver_->version));
  }
  if (dev.device_type != device_type() || dev.device_id < 0 || dev.device_id >= DeviceCount()) {
    return sdk::NoneValue();
  }
  if (key == "compute_capability_major") {
    return sdk::IntValue(Attribute(dev.device_id, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
  }
  if (key == "compute_capability_minor") {
    return sdk::IntValue(Attribute(dev.device_id, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
  }
  if (key == "max_shared_memory_per_block_optin") {
    return sdk::IntValue(
        Attribute(dev.device_id, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  }
  if (key == "max_registers_per_multiprocessor") {
    return sdk::IntValue(
        Attribute(dev.device_id, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR));
  }
  return sdk::NoneValue();
}

void CUDADeviceAPI::SetDevice(DLDevice dev) { Activate(dev); }

void* CUDADeviceAPI::Allocate(DLDevice dev, size_t nbytes, size_t alignment,
                              size_t workspace_class) {
  Activate(dev);
  // cuMemAlloc memory is 256-byte aligned (cuMemAlloc's documentation); a larger alignment gets
  // that much more, and the first aligned address. cuMemAlloc refuses 0 bytes: a zero-size
  // request gets the smallest allocation.
  const size_t extra = alignment > 256 ? alignment - 256 : 0;
  BACKPLANE_REQUIRE(nbytes <= SIZE_MAX - extra - 1, BP_ERR_OUT_OF_MEMORY,
                    "alloc_data_space of " + std::to_string(nbytes) + " bytes on " +
                        sdk::DeviceString(dev) + ": no device holds that many; allocate less");
  CUdeviceptr base = 0;
  Check(driver_->cuMemAlloc(&base, nbytes == 0 ? 1 : nbytes + extra), [&] {
    return "cuMemAlloc of " + std::to_string(nbytes) + " bytes on " + sdk::DeviceString(dev);
  });
  const uintptr_t start = static_cast<uintptr_t>(base);
  const uintptr_t p = extra == 0 ? start : (start + alignment - 1) / alignment * alignment;
  AddOrFree(dev, p, nbytes, workspace_class != 0, start);
  return reinterpret_cast<void*>(p);
}

void CUDADeviceAPI::AddOrFree(DLDevice dev, uintptr_t handle, size_t nbytes, bool workspace,
                              uintptr_t base) {
  try {
    handles_.Add(dev, reinterpret_cast<void*>(handle), nbytes, workspace, base);
  } catch (...) {  // out of host memory: the device memory goes back rather than leaks
    driver_->cuMemFree(static_cast<CUdeviceptr>(base));
    throw;
  }
}

void* CUDADeviceAPI::AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType) {
  BACKPLANE_REQUIRE(alignment != 0 && (alignment & (alignment - 1)) == 0, BP_ERR_INVALID_ARGUMENT,
                    "alloc_data_space on " + sdk::DeviceString(dev) + ": alignment " +
                        std::to_string(alignment) + " is not a power of two; pass 1, 2, 4, ...");
  return Allocate(dev, nbytes, alignment, 0);
}

void CUDADeviceAPI::FreeDataSpace(DLDevice dev, void* ptr) {
  RequireDevice(dev);
  if (ptr == nullptr) return;
  frees_.fetch_add(1, std::memory_order_acq_rel);  // before: a launch after it looks again
  const uintptr_t base = handles_.Remove(dev, ptr, /*workspace=*/false).info;
  Activate(dev);
  Check(driver_->cuMemFree(static_cast<CUdeviceptr>(base)),
        [&] { return "cuMemFree on " + sdk::DeviceString(dev); });
}

void* CUDADeviceAPI::AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType) {
  Activate(dev);
  CUstream stream = ActiveStream(dev);
  WorkspacePool& pool = *devices_[static_cast<size_t>(dev.device_id)].pool;
  size_t size_class = 0;
  CUdeviceptr ptr = 0;
  FreedOn freed;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    size_class = pool.kept.ClassBytes(nbytes);
    auto usable = [this, stream](const FreedOn& f) {
      return (!f.any_stream && f.stream == stream) ||
             driver_->cuEventQuery(f.event) == CUDA_SUCCESS;
    };
    if (size_class != 0) pool.kept.Take(size_class, usable, &ptr, &freed);
  }
  if (ptr != 0) {
    if (freed.event != nullptr) driver_->cuEventDestroy(freed.event);
    AddOrFree(dev, static_cast<uintptr_t>(ptr), size_class, /*workspace=*/true,
              static_cast<uintptr_t>(ptr));
    return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  }
  // Larger than any class: a buffer of its own size, released at its free.
  if (size_class == 0) size_class = nbytes;
  return Allocate(dev, size_class, 256, size_class);
}

void CUDADeviceAPI::FreeWorkspace(DLDevice dev, void* ptr) {
  RequireDevice(dev);
  if (ptr == nullptr) return;
  frees_.fetch_add(1, std::memory_order_acq_rel);  // before: a launch after it looks again
  const size_t size_class = handles_.Remove(dev, ptr, /*workspace=*/true).size;
  // Work queued on the active stream may still use the buffer: an event recorded there tells
  // when another stream may take it (WorkspacePool).
  Activate(dev);
  FreedOn freed;
  freed.stream = ActiveStream(dev);
  CUresult r = driver_->cuEventCreate(&freed.event, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = driver_->cuEventRecord(freed.event, freed.stream);
  if (r == CUDA_SUCCESS) {
    WorkspacePool& pool = *devices_[static_cast<size_t>(dev.device_id)].pool;
    std::lock_guard<std::mutex> lock(pool.mu);
    if (pool.kept.ClassBytes(size_class) == size_class &&
        pool.kept.Keep(size_class, Ptr(ptr), freed)) {
      return;
    }
  }
  // Not kept (the pool is full, or without an event it could not be handed on safely): back
  // to the driver (cuMemFree waits for the work that uses it).
  if (freed.event != nullptr) driver_->cuEventDestroy(freed.event);
  Check(driver_->cuMemFree(Ptr(ptr)), [&] { return "cuMemFree on " + sdk::DeviceString(dev); });
  if (r != CUDA_SUCCESS)
    Fail(r, "cuEventRecord for a freed workspace on " + sdk::DeviceString(dev));
}

CUDADeviceAPI::Range CUDADeviceAPI::Locate(DLDevice dev, uintptr_t ptr,
                                           const std::function<std::string()>& what) {
  // The core names the call and the device first; `what` adds the argument, if any.
  auto prefix = [&] {
    std::string w = what();
    return w.empty() ? w : w + ": ";
  };
  Range r;
  int32_t owner = dev.device_id;
  sdk::HandleTable<uintptr_t>::Entry e;
  if (handles_.Containing(ptr, &e)) {
    r = Range{e.key, e.size, true};
    owner = e.device_id;
  } else {
    // Memory from elsewhere (another library's cuMemAlloc): the driver knows its range. An
    // address it does not know (made up, freed, host memory) would fault on the device.
    Activate(dev);
    CUdeviceptr driver_base = 0;
    if (driver_->cuMemGetAddressRange(&driver_base, &r.size, static_cast<CUdeviceptr>(ptr)) !=
        CUDA_SUCCESS) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  prefix() + sdk::PointerString(reinterpret_cast<void*>(ptr)) +
                      " is not device memory of " + sdk::DeviceString(dev) +
                      " (freed, made up, or host memory; cuMemGetAddressRange does not know "
                      "it); pass data from alloc_data_space or a live CUDA allocation");
    }
    r.base = static_cast<uintptr_t>(driver_base);
    // With unified addressing, another device's memory is known too: which device holds it
    // is a pointer attribute.
    int ordinal = dev.device_id;
    if (driver_->cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                       static_cast<CUdeviceptr>(ptr)) == CUDA_SUCCESS) {
      owner = ordinal;
    }
  }
  BACKPLANE_REQUIRE(owner == dev.device_id, BP_ERR_INVALID_ARGUMENT,
                    prefix() + "the data of a tensor on " + sdk::DeviceString(dev) +
                        " was allocated on cuda:" + std::to_string(owner) +
                        "; label the tensor with its device");
  return r;
}

void CUDADeviceAPI::CheckDeviceRange(DLDevice dev, uintptr_t ptr, size_t nbytes,
                                     const std::function<std::string()>& what) {
  const Range r = Locate(dev, ptr, what);
  if (ptr + nbytes > r.base + r.size) {
    const std::string w = what();
    throw Error(BP_ERR_INVALID_ARGUMENT, (w.empty() ? w : w + ": ") + std::to_string(nbytes) +
                                             " bytes at byte " + std::to_string(ptr - r.base) +
                                             " run past the end of the " + std::to_string(r.size) +
                                             "-byte buffer on " + sdk::DeviceString(dev) +
                                             "; use less or start earlier");
  }
}

CUstream CUDADeviceAPI::Stream(DLDevice dev, bp_stream_t stream) {
  RequireDevice(dev);
  return static_cast<CUstream>(streams_.Check(dev, stream));
}

CUstream CUDADeviceAPI::ActiveStream(DLDevice dev) {
  RequireDevice(dev);
  return static_cast<CUstream>(streams_.Active(dev));
}

void CUDADeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) {
  const auto [nbytes, from_dev, to_dev] = sdk::CheckCopy(from, to, device_type());
  // The device side's address, checked to be device memory of its device, bounds included.
  auto device_address = [&](const DLTensor* t) {
    RequireDevice(t->device);
    const uintptr_t p = reinterpret_cast<uintptr_t>(t->data) + t->byte_offset;
    CheckDeviceRange(t->device, p, nbytes, [] { return std::string(); });
    return static_cast<CUdeviceptr>(p);
  };
  // The host side: cpu memory is the caller's to vouch for; pinned cuda_host memory is
  // checked against its allocations like device memory.
  auto host_address = [&](const DLTensor* t) {
    if (t->device.device_type != kDLCPU) {
      CUDAHostDeviceAPI::Global()->CheckRange(t, nbytes, "");
    }
    return static_cast<char*>(t->data) + t->byte_offset;
  };
  if (from_dev && to_dev) {
    const CUdeviceptr src = device_address(from);
    const CUdeviceptr dst = device_address(to);
    const CUcontext src_ctx = Activate(from->device);
    CUstream s = Stream(from->device, stream);
    if (nbytes == 0) return;
    if (from->device.device_id == to->device.device_id) {
      Check(driver_->cuMemcpyDtoDAsync(dst, src, nbytes, s), "cuMemcpyDtoDAsync");
    } else {
      const CUcontext dst_ctx = Activate(to->device);
      Activate(from->device);
      Check(driver_->cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, nbytes, s),
            "cuMemcpyPeerAsync from " + sdk::DeviceString(from->device) + " to " +
                sdk::DeviceString(to->device));
    }
    return;
  }
  if (from_dev) {
    const CUdeviceptr src = device_address(from);
    Activate(from->device);
    CUstream s = Stream(from->device, stream);
    if (nbytes == 0) return;
    Check(driver_->cuMemcpyDtoHAsync(host_address(to), src, nbytes, s), "cuMemcpyDtoHAsync");
    // Into cpu memory the host reads on return: wait. Into pinned cuda_host memory the copy
    // stays asynchronous on the stream.
    if (to->device.device_type == kDLCPU) {
      Check(driver_->cuStreamSynchronize(s), "cuStreamSynchronize after a copy to the host");
    }
    return;
  }
  const CUdeviceptr dst = device_address(to);
  Activate(to->device);
  CUstream s = Stream(to->device, stream);
  if (nbytes == 0) return;
  const void* src = host_address(from);
  Check(driver_->cuMemcpyHtoDAsync(dst, src, nbytes, s), "cuMemcpyHtoDAsync");
  // The Driver API promises that an asynchronous copy has read pageable memory on return only
  // "might" (its API synchronization behavior notes); the caller may reuse its buffer once
  // this returns, so from memory that is not page-locked, wait for the copy. Pinned memory
  // (cuda_host, or host memory registered with CUDA) stays asynchronous on the stream.
  // cuPointerGetAttributes, not cuPointerGetAttribute: for memory CUDA does not know it
  // answers 0 with success, where the singular call returns an error (which compute-sanitizer
  // reports, and which is no error here).
  unsigned int memory_type = 0;
  CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
  void* values[1] = {&memory_type};
  const bool pinned =
      driver_->cuPointerGetAttributes(1, &attr, values,
                                      static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(src))) ==
          CUDA_SUCCESS &&
      memory_type == CU_MEMORYTYPE_HOST;
  if (!pinned) {
    Check(driver_->cuStreamSynchronize(s), "cuStreamSynchronize after a copy from pageable memory");
  }
}

bp_stream_t CUDADeviceAPI::CreateStream(DLDevice dev) {
  Activate(dev);
  CUstream s = nullptr;
  Check(driver_->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING),
        "cuStreamCreate on " + sdk::DeviceString(dev));
  streams_.Add(s, dev);
  return s;
}

void CUDADeviceAPI::FreeStream(DLDevice dev, bp_stream_t stream) {
  if (stream == nullptr) return;
  CUstream s = Stream(dev, stream);
  Activate(dev);
  streams_.Remove(stream);
  // A pooled workspace freed on this stream may no longer be matched by its address (a new
  // stream can get it): only its event says when it is free.
  {
    WorkspacePool& pool = *devices_[static_cast<size_t>(dev.device_id)].pool;
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.kept.ForEachReady([s](FreedOn& f) { f.any_stream = f.any_stream || f.stream == s; });
  }
  // Work still queued completes first; the driver releases the stream afterwards.
  Check(driver_->cuStreamDestroy(s), "cuStreamDestroy on " + sdk::DeviceString(dev));
}

void CUDADeviceAPI::SetStream(DLDevice dev, bp_stream_t stream) {
  RequireDevice(dev);
  streams_.SetActive(dev, stream);
}

void CUDADeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  Activate(dev);
  Check(driver_->cuStreamSynchronize(Stream(dev, stream)),
        [&] { return "cuStreamSynchronize on " + sdk::DeviceString(dev); });
}

void CUDADeviceAPI::SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) {
  Activate(dev);
  CUstream from = Stream(dev, src);
  CUstream to = Stream(dev, dst);
  if (from == to) return;
  CUevent event = nullptr;
  Check(driver_->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  CUresult r = driver_->cuEventRecord(event, from);
  if (r == CUDA_SUCCESS) r = driver_->cuStreamWaitEvent(to, event, 0);
  driver_->cuEventDestroy(event);  // released once the wait is satisfied
  Check(r, "cuEventRecord/cuStreamWaitEvent between streams of " + sdk::DeviceString(dev));
}

// ---- events ------------------------------------------------------------------------------

namespace {
CUevent Ev(void* event) { return static_cast<CUevent>(event); }
}  // namespace

void* CUDADeviceAPI::CreateEvent(DLDevice dev) {
  Activate(dev);
  CUevent e = nullptr;
  Check(driver_->cuEventCreate(&e, CU_EVENT_DEFAULT),
        [&] { return "cuEventCreate on " + sdk::DeviceString(dev); });
  return e;
}

void CUDADeviceAPI::FreeEvent(DLDevice dev, void* event) {
  Activate(dev);
  // An event whose recorded work is still queued may be destroyed: the driver releases it
  // once that work is done.
  Check(driver_->cuEventDestroy(Ev(event)),
        [&] { return "cuEventDestroy on " + sdk::DeviceString(dev); });
}

void CUDADeviceAPI::RecordEvent(DLDevice dev, void* event, bp_stream_t stream) {
  Activate(dev);
  Check(driver_->cuEventRecord(Ev(event), Stream(dev, stream)),
        [&] { return "cuEventRecord on " + sdk::DeviceString(dev); });
}

void CUDADeviceAPI::StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) {
  Activate(dev);
  Check(driver_->cuStreamWaitEvent(Stream(dev, stream), Ev(event), 0),
        [&] { return "cuStreamWaitEvent on " + sdk::DeviceString(dev); });
}

bool CUDADeviceAPI::EventDone(DLDevice dev, void* event) {
  Activate(dev);
  const CUresult r = driver_->cuEventQuery(Ev(event));
  if (r == CUDA_ERROR_NOT_READY) return false;
  Check(r, [&] { return "cuEventQuery on " + sdk::DeviceString(dev); });
  return true;
}

void CUDADeviceAPI::SyncEvent(DLDevice dev, void* event) {
  Activate(dev);
  Check(driver_->cuEventSynchronize(Ev(event)),
        [&] { return "cuEventSynchronize on " + sdk::DeviceString(dev); });
}

double CUDADeviceAPI::EventElapsedMs(DLDevice dev, void* start, void* end) {
  Activate(dev);
  if (driver_->cuEventElapsedTime == nullptr) {
    throw Error(BP_ERR_UNSUPPORTED, "timing events on " + sdk::DeviceString(dev) +
                                        ": the CUDA driver " + driver_->library +
                                        " has no cuEventElapsedTime; update the NVIDIA driver");
  }
  float ms = 0;
  Check(driver_->cuEventElapsedTime(&ms, Ev(start), Ev(end)),
        [&] { return "cuEventElapsedTime on " + sdk::DeviceString(dev); });
  return ms;
}

// ---- native handles --------------------------------------------------------------------

uint64_t CUDADeviceAPI::NativeHandle(DLDevice dev, bp_native_kind_t kind, void* object) {
  RequireDevice(dev);
  switch (kind) {
    case BP_NATIVE_BUFFER:
    case BP_NATIVE_BUFFER_OFFSET: {
      const auto ptr = reinterpret_cast<uintptr_t>(object);
      Locate(dev, ptr, [] { return std::string("bp_native_handle: the tensor's data"); });
      return kind == BP_NATIVE_BUFFER ? static_cast<uint64_t>(ptr) : 0;
    }
    case BP_NATIVE_QUEUE:
      Activate(dev);
      return reinterpret_cast<uint64_t>(Stream(dev, static_cast<bp_stream_t>(object)));
    case BP_NATIVE_CONTEXT:
      return reinterpret_cast<uint64_t>(Context(dev.device_id));
    case BP_NATIVE_DEVICE:
      return static_cast<uint64_t>(devices_[static_cast<size_t>(dev.device_id)].handle);
    default:
      UnsupportedNative(dev, kind,
                        "BP_NATIVE_BUFFER (the CUdeviceptr), BP_NATIVE_BUFFER_OFFSET (0), "
                        "BP_NATIVE_QUEUE (the CUstream), BP_NATIVE_CONTEXT (the primary "
                        "CUcontext) and BP_NATIVE_DEVICE (the CUdevice)");
  }
}

void* CUDADeviceAPI::WrapNative(DLDevice dev, const bp_native_buffer_t& buffer) {
  Activate(dev);
  if (buffer.buffer == 0) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                "bp_tensor_from_native on " + sdk::DeviceString(dev) +
                    ": buffer->buffer is 0; pass the CUdeviceptr of memory on that device");
  }
  if (buffer.memory != 0 || buffer.memory_offset != 0) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                "bp_tensor_from_native on " + sdk::DeviceString(dev) +
                    ": CUDA memory has no separate memory object; set buffer->memory and "
                    "buffer->memory_offset to 0");
  }
  if (buffer.size > SIZE_MAX) {
    throw Error(BP_ERR_INVALID_ARGUMENT, "bp_tensor_from_native: buffer->size " +
                                             std::to_string(buffer.size) + " is too large");
  }
  const auto ptr = static_cast<uintptr_t>(buffer.buffer);
  CheckDeviceRange(dev, ptr, static_cast<size_t>(buffer.size),
                   [] { return std::string("bp_tensor_from_native"); });
  return reinterpret_cast<void*>(ptr);
}

void CUDADeviceAPI::UnwrapNative(DLDevice dev, void*) {
  // The address was the application's all along: nothing is kept for it.
  RequireDevice(dev);
}

}  // namespace cuda
}  // namespace backplane
