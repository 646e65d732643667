// SPDX-License-Identifier: Apache-2.0
#include "device_api.h"

#include <cstring>
#include <string>

#include "memory.h"
#include "openmp.h"
#include "sysinfo.h"
#include "workspace_pool.h"

namespace backplane {
namespace cpu {
namespace {

Any OptionalInt(const std::optional<int64_t>& v) {
  return v ? sdk::IntValue(*v) : sdk::NoneValue();
}

bool IsCpu(DLDevice dev) { return dev.device_type == kDLCPU; }

std::string TensorString(const DLTensor* t) {
  return sdk::DeviceString(t->device) + " tensor at " + sdk::PointerString(t->data) +
         " (byte_offset " + std::to_string(t->byte_offset) + ")";
}

}  // namespace

CpuDeviceAPI* CpuDeviceAPI::Global() {
  static CpuDeviceAPI instance;
  return &instance;
}

void CpuDeviceAPI::CheckDevice(DLDevice dev) {
  BACKPLANE_REQUIRE(dev.device_type == kDLCPU && dev.device_id == 0, BP_ERR_NOT_FOUND,
                    "device " + sdk::DeviceString(dev) +
                        " does not exist; the cpu backend has one device, cpu:0, which "
                        "stands for all cores");
}

void CpuDeviceAPI::CheckStream(bp_stream_t stream) {
  BACKPLANE_REQUIRE(stream == nullptr, BP_ERR_INVALID_ARGUMENT,
                    "stream " + sdk::PointerString(stream) +
                        " was not made by the cpu backend; cpu:0 has a single queue, pass "
                        "the null stream");
}

Any CpuDeviceAPI::GetAttr(DLDevice dev, bp_device_attr_kind_t kind) {
  const bool exists = dev.device_type == kDLCPU && dev.device_id == 0;
  if (kind == BP_ATTR_EXIST) return sdk::IntValue(exists ? 1 : 0);
  if (!exists) return sdk::NoneValue();
  const MachineInfo& m = Machine();
  switch (kind) {
    case BP_ATTR_DEVICE_NAME:
      return sdk::StringValue(m.model_name);
    case BP_ATTR_MAX_CLOCK_RATE:
      return OptionalInt(m.max_clock_khz);
    case BP_ATTR_MULTI_PROCESSOR_COUNT:
      return sdk::IntValue(m.online_cores);
    case BP_ATTR_L2_CACHE_SIZE_BYTES:
      return OptionalInt(m.l2_cache_bytes);
    case BP_ATTR_TOTAL_GLOBAL_MEMORY:
      return OptionalInt(m.total_memory);
    case BP_ATTR_AVAILABLE_GLOBAL_MEMORY:
      return OptionalInt(AvailableMemoryBytes());
    case BP_ATTR_DEVICE_KIND:
      return sdk::StringValue("cpu");
    case BP_ATTR_VENDOR:
      return m.vendor.empty() ? sdk::NoneValue() : sdk::StringValue(m.vendor);
    case BP_ATTR_MAX_ALLOCATION_SIZE:
      // AllocDataSpace refuses more than RAM plus swap before asking the allocator.
      return sdk::IntValue(static_cast<int64_t>(AllocationLimitBytes()));
    case BP_ATTR_SUPPORTS_FP64:
      return sdk::IntValue(1);
    case BP_ATTR_SUPPORTS_FP16:
      return sdk::IntValue(HasNativeFp16(m.isa_flags) ? 1 : 0);
    case BP_ATTR_ISA_FLAGS:
      return m.isa_flags.empty() ? sdk::NoneValue() : sdk::StringArrayValue(m.isa_flags);
    // GPU notions (thread blocks, warps and subgroups, shared memory, registers, compute
    // capability, GCN arch, image pitch) do not apply to a CPU; it has no device API, driver,
    // PCI address, UUID or numeric vendor id, and no API extensions (its ISA flags say what
    // it can do).
    default:
      return sdk::NoneValue();
  }
}

Any CpuDeviceAPI::GetProperty(DLDevice dev, const std::string& key) {
  if (!(dev.device_type == kDLCPU && dev.device_id == 0)) return sdk::NoneValue();
  const MachineInfo& m = Machine();
  if (key == "arch") return m.arch.empty() ? sdk::NoneValue() : sdk::StringValue(m.arch);
  if (key == "vendor") return m.vendor.empty() ? sdk::NoneValue() : sdk::StringValue(m.vendor);
  if (key == "kernel_release") {
    return m.kernel_release.empty() ? sdk::NoneValue() : sdk::StringValue(m.kernel_release);
  }
  if (key == "num_threads") return sdk::IntValue(AffinityThreads());
  if (key == "online_cores") return sdk::IntValue(m.online_cores);
  if (key == "page_size") return sdk::IntValue(m.page_size);
  if (key == "l1d_cache_size_bytes") return OptionalInt(m.l1d_cache_bytes);
  if (key == "l3_cache_size_bytes") return OptionalInt(m.l3_cache_bytes);
  if (key == "workspace_reserved_bytes") {
    return sdk::IntValue(static_cast<int64_t>(WorkspacePool::ReservedBytes()));
  }
  // The OpenMP runtime's settings that Backplane chooses (openmp.h).
  if (key.rfind("openmp_", 0) == 0) {
    const openmp::State omp = openmp::Current();
    if (key == "openmp_settings") return sdk::StringValue(omp.settings);
    if (key == "openmp_runtime") {
      return omp.runtime.empty() ? sdk::NoneValue() : sdk::StringValue(omp.runtime);
    }
    if (key == "openmp_wait_policy") return sdk::StringValue(omp.wait_policy.value);
    if (key == "openmp_wait_policy_from") return sdk::StringValue(omp.wait_policy.from);
    if (key == "openmp_proc_bind") return sdk::StringValue(omp.proc_bind.value);
    if (key == "openmp_proc_bind_from") return sdk::StringValue(omp.proc_bind.from);
  }
  return sdk::NoneValue();
}

std::vector<std::string> CpuDeviceAPI::ListProperties(DLDevice dev) {
  if (!(dev.device_type == kDLCPU && dev.device_id == 0)) return {};
  std::vector<std::string> keys;
  for (const char* key :
       {"arch", "vendor", "kernel_release", "num_threads", "online_cores", "page_size",
        "l1d_cache_size_bytes", "l3_cache_size_bytes", "workspace_reserved_bytes",
        "openmp_settings", "openmp_runtime", "openmp_wait_policy", "openmp_wait_policy_from",
        "openmp_proc_bind", "openmp_proc_bind_from"}) {
    if (!GetProperty(dev, key).is_none()) keys.push_back(key);
  }
  return keys;
}

void CpuDeviceAPI::SetDevice(DLDevice dev) { CheckDevice(dev); }

void* CpuDeviceAPI::AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType) {
  CheckDevice(dev);
  return AllocAligned(nbytes, alignment);
}

void CpuDeviceAPI::FreeDataSpace(DLDevice dev, void* ptr) {
  CheckDevice(dev);
  FreeAligned(ptr);
}

void* CpuDeviceAPI::AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType) {
  if (dev.device_type != kDLCPU || dev.device_id != 0) CheckDevice(dev);
  return WorkspacePool::Alloc(nbytes);
}

void CpuDeviceAPI::FreeWorkspace(DLDevice dev, void* ptr) {
  if (dev.device_type != kDLCPU || dev.device_id != 0) CheckDevice(dev);
  WorkspacePool::Free(ptr);
}

void CpuDeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) {
  BACKPLANE_REQUIRE(IsCpu(from->device) && IsCpu(to->device), BP_ERR_INVALID_ARGUMENT,
                    "the cpu backend copies only between cpu tensors, not from " +
                        TensorString(from) + " to " + TensorString(to) +
                        "; copy through bp_device_copy_data_from_to, which picks the "
                        "device's backend");
  CheckStream(stream);
  BACKPLANE_REQUIRE(sdk::IsCompact(from) && sdk::IsCompact(to), BP_ERR_INVALID_ARGUMENT,
                    "the " + TensorString(sdk::IsCompact(from) ? to : from) +
                        " has non-compact strides; copy compact tensors only");
  const size_t nbytes = sdk::TensorBytes(from);
  const size_t to_bytes = sdk::TensorBytes(to);
  BACKPLANE_REQUIRE(nbytes == to_bytes, BP_ERR_INVALID_ARGUMENT,
                    "the copy source holds " + std::to_string(nbytes) +
                        " bytes but destination holds " + std::to_string(to_bytes) +
                        "; both sides of a copy must have the same byte size");
  if (nbytes == 0) return;
  BACKPLANE_REQUIRE(from->data != nullptr && to->data != nullptr, BP_ERR_INVALID_ARGUMENT,
                    "the " + TensorString(from->data == nullptr ? from : to) +
                        " has null data for a copy of " + std::to_string(nbytes) +
                        " bytes; allocate the tensor first");
  const char* src = static_cast<const char*>(from->data) + from->byte_offset;
  char* dst = static_cast<char*>(to->data) + to->byte_offset;
  if (src == dst) return;
  // Overlap happens only when a caller copies within one buffer; memmove keeps it defined.
  if (src < dst + nbytes && dst < src + nbytes) {
    std::memmove(dst, src, nbytes);
  } else {
    std::memcpy(dst, src, nbytes);
  }
}

void CpuDeviceAPI::FreeStream(DLDevice dev, bp_stream_t stream) {
  CheckDevice(dev);
  CheckStream(stream);
}

void CpuDeviceAPI::SetStream(DLDevice dev, bp_stream_t stream) {
  CheckDevice(dev);
  CheckStream(stream);
}

// Copies complete before copy_data_from_to returns: nothing is ever pending.
void CpuDeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  CheckDevice(dev);
  CheckStream(stream);
}

void CpuDeviceAPI::SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) {
  CheckDevice(dev);
  CheckStream(src);
  CheckStream(dst);
}

}  // namespace cpu
}  // namespace backplane
