// SPDX-License-Identifier: Apache-2.0
#include "device_api.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

namespace backplane {
namespace opencl {

namespace {

template <typename T>
T DeviceInfo(cl_device_id id, cl_device_info what) {
  T value{};
  Check(clGetDeviceInfo(id, what, sizeof(T), &value, nullptr), "clGetDeviceInfo");
  return value;
}

std::string DeviceInfoString(cl_device_id id, cl_device_info what) {
  size_t n = 0;
  Check(clGetDeviceInfo(id, what, 0, nullptr, &n), "clGetDeviceInfo");
  std::string s(n, '\0');
  Check(clGetDeviceInfo(id, what, n, s.data(), nullptr), "clGetDeviceInfo");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

// "OpenCL 3.0 PoCL ..." -> "3.0".
std::string VersionNumber(const std::string& version) {
  const size_t start = version.find(' ');
  if (start == std::string::npos) return version;
  const size_t end = version.find(' ', start + 1);
  return version.substr(start + 1, end == std::string::npos ? end : end - start - 1);
}

// CL_DEVICE_EXTENSIONS as a sorted list of names.
std::vector<std::string> Extensions(cl_device_id id) {
  std::istringstream words(DeviceInfoString(id, CL_DEVICE_EXTENSIONS));
  std::set<std::string> names;
  for (std::string w; words >> w;) names.insert(w);
  return std::vector<std::string>(names.begin(), names.end());
}

bool HasExtension(cl_device_id id, const char* name) {
  for (const std::string& e : Extensions(id)) {
    if (e == name) return true;
  }
  return false;
}

// "cpu", "gpu", "accelerator" or "other" from CL_DEVICE_TYPE (a bit field; the first match).
const char* DeviceKind(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (type & (CL_DEVICE_TYPE_ACCELERATOR | CL_DEVICE_TYPE_CUSTOM)) return "accelerator";
  return "other";
}

}  // namespace

const char* ErrorName(cl_int status) {
  switch (status) {
    case CL_DEVICE_NOT_FOUND:
      return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE:
      return "CL_DEVICE_NOT_AVAILABLE";
    case CL_COMPILER_NOT_AVAILABLE:
      return "CL_COMPILER_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
      return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES:
      return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY:
      return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE:
      return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE:
      return "CL_INVALID_VALUE";
    case CL_INVALID_DEVICE:
      return "CL_INVALID_DEVICE";
    case CL_INVALID_CONTEXT:
      return "CL_INVALID_CONTEXT";
    case CL_INVALID_COMMAND_QUEUE:
      return "CL_INVALID_COMMAND_QUEUE";
    case CL_INVALID_MEM_OBJECT:
      return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_BUFFER_SIZE:
      return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_KERNEL_NAME:
      return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL_ARGS:
      return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_GROUP_SIZE:
      return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_WORK_ITEM_SIZE:
      return "CL_INVALID_WORK_ITEM_SIZE";
    case CL_INVALID_EVENT:
      return "CL_INVALID_EVENT";
    case CL_INVALID_PLATFORM:
      return "CL_INVALID_PLATFORM";
    case CL_INVALID_OPERATION:
      return "CL_INVALID_OPERATION";
    case CL_INVALID_EVENT_WAIT_LIST:
      return "CL_INVALID_EVENT_WAIT_LIST";
    case CL_PROFILING_INFO_NOT_AVAILABLE:
      return "CL_PROFILING_INFO_NOT_AVAILABLE";
    case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST:
      return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
    default:
      return "OpenCL error";
  }
}

void Check(cl_int status, const std::string& what) {
  if (status == CL_SUCCESS) return;
  const bp_status_t kind =
      (status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES ||
       status == CL_OUT_OF_HOST_MEMORY || status == CL_INVALID_BUFFER_SIZE)
          ? BP_ERR_OUT_OF_MEMORY
          : BP_ERR_DEVICE;
  throw Error(kind, what + " failed: " + ErrorName(status) + " (" + std::to_string(status) +
                        ") from the OpenCL driver; check the sizes and the device's limits "
                        "(backplane info lists them)");
}

OpenCLDeviceAPI* OpenCLDeviceAPI::Global() {
  static OpenCLDeviceAPI* instance = new OpenCLDeviceAPI();  // lives until the process ends
  return instance;
}

OpenCLDeviceAPI::OpenCLDeviceAPI()
    : sdk::DeviceAPI(Entries{.events = true, .native_handles = true, .wrap_native = true}) {}

cl_command_queue OpenCLDeviceAPI::NewQueue(const Device& d, cl_int* err) {
  // Profiling costs a clock read per command: on PoCL here 20,000 small writes took 0.8 us
  // each with and without it. Events need it to time work.
  const cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
  return clCreateCommandQueueWithProperties(d.context, d.id, d.profiling ? props : nullptr, err);
}

void OpenCLDeviceAPI::Enumerate() {
  // Platforms in clGetPlatformIDs order, devices in clGetDeviceIDs order: the documented,
  // stable order of opencl:N. No platform (no ICD installed) means no devices, not an error.
  cl_uint num_platforms = 0;
  if (clGetPlatformIDs(0, nullptr, &num_platforms) != CL_SUCCESS || num_platforms == 0) return;
  std::vector<cl_platform_id> platforms(num_platforms);
  if (clGetPlatformIDs(num_platforms, platforms.data(), nullptr) != CL_SUCCESS) return;
  for (cl_platform_id p : platforms) {
    cl_uint n = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
    std::vector<cl_device_id> ids(n);
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr) != CL_SUCCESS) continue;
    for (cl_device_id id : ids) {
      Device d;
      d.platform = p;
      d.id = id;
      devices_.push_back(d);
    }
  }
  for (Device& d : devices_) {
    cl_int err = CL_SUCCESS;
    d.context = clCreateContext(nullptr, 1, &d.id, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) continue;  // CheckDevice reports it on use
    cl_command_queue_properties queue_props = 0;
    d.profiling = clGetDeviceInfo(d.id, CL_DEVICE_QUEUE_ON_HOST_PROPERTIES, sizeof(queue_props),
                                  &queue_props, nullptr) == CL_SUCCESS &&
                  (queue_props & CL_QUEUE_PROFILING_ENABLE) != 0;
    d.queue = NewQueue(d, &err);
    if (err != CL_SUCCESS) d.queue = nullptr;
    if (clGetDeviceInfo(d.id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(d.max_alloc), &d.max_alloc,
                        nullptr) != CL_SUCCESS) {
      d.max_alloc = 0;  // every allocation then fails with the limit in its message
    }
    // A limit the driver does not report is 1: a launch of more then fails, naming it.
    size_t group = 1;
    cl_uint dims = 0;
    if (clGetDeviceInfo(d.id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(group), &group, nullptr) !=
        CL_SUCCESS) {
      group = 1;
    }
    d.limits.threads_per_block = static_cast<int64_t>(group);
    cl_ulong local_mem = 0;  // unknown: no limit here, the driver refuses the launch itself
    if (clGetDeviceInfo(d.id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(local_mem), &local_mem, nullptr) ==
        CL_SUCCESS) {
      d.limits.shared_per_block =
          static_cast<int64_t>(std::min<cl_ulong>(local_mem, static_cast<cl_ulong>(INT64_MAX)));
    }
    std::vector<size_t> items;
    if (clGetDeviceInfo(d.id, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof(dims), &dims, nullptr) ==
        CL_SUCCESS) {
      items.resize(std::max<cl_uint>(dims, 3), 1);
      if (clGetDeviceInfo(d.id, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof(size_t), items.data(),
                          nullptr) != CL_SUCCESS) {
        items.assign(3, 1);
      }
    } else {
      items.assign(3, 1);
    }
    for (int axis = 0; axis < 3; ++axis) d.limits.block[axis] = static_cast<int64_t>(items[axis]);
  }
  for (size_t i = 0; i < devices_.size(); ++i) pools_.push_back(std::make_unique<Pool>());
}

OpenCLDeviceAPI::~OpenCLDeviceAPI() {
  for (size_t i = 0; i < pools_.size(); ++i) {
    for (Buffer* b : DrainPool(static_cast<int32_t>(i))) Destroy(b);
  }
  for (Device& d : devices_) {
    if (d.queue != nullptr) clReleaseCommandQueue(d.queue);
    if (d.context != nullptr) clReleaseContext(d.context);
  }
}

const OpenCLDeviceAPI::Device& OpenCLDeviceAPI::CheckDevice(DLDevice dev) const {
  BACKPLANE_REQUIRE(
      dev.device_type == device_type() && dev.device_id >= 0 && dev.device_id < DeviceCount(),
      BP_ERR_NOT_FOUND,
      "device " + sdk::DeviceString(dev) + " does not exist; OpenCL has " +
          std::to_string(DeviceCount()) +
          " device(s) here (opencl:0 ...); `backplane info` lists them");
  const Device& d = devices_[dev.device_id];
  BACKPLANE_REQUIRE(d.context != nullptr && d.queue != nullptr, BP_ERR_DEVICE,
                    sdk::DeviceString(dev) +
                        ": the OpenCL driver could not create a context or queue for it; "
                        "check the driver with clinfo");
  return d;
}

Any OpenCLDeviceAPI::GetAttr(DLDevice dev, bp_device_attr_kind_t kind) {
  const bool exists =
      dev.device_type == device_type() && dev.device_id >= 0 && dev.device_id < DeviceCount();
  if (kind == BP_ATTR_EXIST) return sdk::IntValue(exists ? 1 : 0);
  if (!exists) return sdk::NoneValue();
  cl_device_id id = devices_[dev.device_id].id;
  switch (kind) {
    case BP_ATTR_MAX_THREADS_PER_BLOCK:
      return sdk::IntValue(
          static_cast<int64_t>(DeviceInfo<size_t>(id, CL_DEVICE_MAX_WORK_GROUP_SIZE)));
    case BP_ATTR_WARP_SIZE:
      // The vendors' own queries where they exist; otherwise the preferred work-group size
      // multiple of a kernel (what clinfo reports), the SIMD width the driver packs
      // work-items into.
      if (HasExtension(id, "cl_nv_device_attribute_query")) {
        return sdk::IntValue(DeviceInfo<cl_uint>(id, CL_DEVICE_WARP_SIZE_NV));
      }
      if (HasExtension(id, "cl_amd_device_attribute_query")) {
        return sdk::IntValue(DeviceInfo<cl_uint>(id, CL_DEVICE_WAVEFRONT_WIDTH_AMD));
      }
      return sdk::IntValue(PreferredMultiple(dev.device_id));
    case BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK:
      return sdk::IntValue(
          static_cast<int64_t>(DeviceInfo<cl_ulong>(id, CL_DEVICE_LOCAL_MEM_SIZE)));
    case BP_ATTR_COMPUTE_VERSION:
      return sdk::StringValue(VersionNumber(DeviceInfoString(id, CL_DEVICE_VERSION)));
    case BP_ATTR_DEVICE_NAME:
      return sdk::StringValue(DeviceInfoString(id, CL_DEVICE_NAME));
    case BP_ATTR_MAX_CLOCK_RATE:
      return sdk::IntValue(int64_t{1000} * DeviceInfo<cl_uint>(id, CL_DEVICE_MAX_CLOCK_FREQUENCY));
    case BP_ATTR_MULTI_PROCESSOR_COUNT:
      return sdk::IntValue(DeviceInfo<cl_uint>(id, CL_DEVICE_MAX_COMPUTE_UNITS));
    case BP_ATTR_MAX_THREAD_DIMENSIONS: {
      const cl_uint dims = DeviceInfo<cl_uint>(id, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS);
      std::vector<size_t> sizes(dims);
      Check(clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof(size_t), sizes.data(),
                            nullptr),
            "clGetDeviceInfo(CL_DEVICE_MAX_WORK_ITEM_SIZES)");
      std::string s = "[";
      for (cl_uint i = 0; i < dims; ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
      return sdk::StringValue(s + "]");
    }
    case BP_ATTR_API_VERSION:
      return sdk::StringValue(DeviceInfoString(id, CL_DEVICE_VERSION));
    case BP_ATTR_DRIVER_VERSION:
    case BP_ATTR_DRIVER_INFO:
      // OpenCL's CL_DRIVER_VERSION is the driver's own text ("6.0", "3.0 PoCL ..."): both.
      return sdk::StringValue(DeviceInfoString(id, CL_DRIVER_VERSION));
    case BP_ATTR_TOTAL_GLOBAL_MEMORY:
      return sdk::IntValue(
          static_cast<int64_t>(DeviceInfo<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE)));
    case BP_ATTR_DEVICE_KIND:
      return sdk::StringValue(DeviceKind(DeviceInfo<cl_device_type>(id, CL_DEVICE_TYPE)));
    case BP_ATTR_VENDOR:
      return sdk::StringValue(DeviceInfoString(id, CL_DEVICE_VENDOR));
    case BP_ATTR_VENDOR_ID:
      return sdk::IntValue(DeviceInfo<cl_uint>(id, CL_DEVICE_VENDOR_ID));
    case BP_ATTR_UUID: {
      if (!HasExtension(id, "cl_khr_device_uuid")) return sdk::NoneValue();
      unsigned char uuid[CL_UUID_SIZE_KHR] = {};
      Check(clGetDeviceInfo(id, CL_DEVICE_UUID_KHR, sizeof(uuid), uuid, nullptr),
            "clGetDeviceInfo(CL_DEVICE_UUID_KHR)");
      return sdk::StringValue(sdk::UuidString(uuid));
    }
    case BP_ATTR_PCI_BUS_ID: {
      if (!HasExtension(id, "cl_khr_pci_bus_info")) return sdk::NoneValue();
      const auto pci = DeviceInfo<cl_device_pci_bus_info_khr>(id, CL_DEVICE_PCI_BUS_INFO_KHR);
      return sdk::StringValue(
          sdk::PciBusIdString(pci.pci_domain, pci.pci_bus, pci.pci_device, pci.pci_function));
    }
    case BP_ATTR_MAX_ALLOCATION_SIZE:
      return sdk::IntValue(
          static_cast<int64_t>(DeviceInfo<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE)));
    case BP_ATTR_SUPPORTS_FP64:
      // Optional before and after OpenCL 1.2; a device without it reports no config.
      return sdk::IntValue(DeviceInfo<cl_device_fp_config>(id, CL_DEVICE_DOUBLE_FP_CONFIG) != 0 ||
                                   HasExtension(id, "cl_khr_fp64")
                               ? 1
                               : 0);
    case BP_ATTR_SUPPORTS_FP16:
      return sdk::IntValue(HasExtension(id, "cl_khr_fp16") ? 1 : 0);
    case BP_ATTR_SUBGROUP_SIZES: {
      // Core OpenCL reports no subgroup sizes; Intel's extension lists them.
      if (!HasExtension(id, "cl_intel_required_subgroup_size")) return sdk::NoneValue();
      size_t n = 0;
      Check(clGetDeviceInfo(id, CL_DEVICE_SUB_GROUP_SIZES_INTEL, 0, nullptr, &n),
            "clGetDeviceInfo(CL_DEVICE_SUB_GROUP_SIZES_INTEL)");
      std::vector<size_t> sizes(n / sizeof(size_t));
      Check(clGetDeviceInfo(id, CL_DEVICE_SUB_GROUP_SIZES_INTEL, n, sizes.data(), nullptr),
            "clGetDeviceInfo(CL_DEVICE_SUB_GROUP_SIZES_INTEL)");
      return sdk::IntArrayValue(std::vector<int64_t>(sizes.begin(), sizes.end()));
    }
    case BP_ATTR_EXTENSIONS:
      return sdk::StringArrayValue(Extensions(id));
    default:
      // No OpenCL query: registers, GCN arch, free memory, the L2 (CL_DEVICE_GLOBAL_MEM_CACHE_SIZE
      // is whichever level caches global memory: the L3 on a CPU; the property
      // global_mem_cache_size_bytes has it), ISA flags, clock-independent kinds.
      return sdk::NoneValue();
  }
}

int64_t OpenCLDeviceAPI::PreferredMultiple(int32_t device_id) {
  std::lock_guard<std::mutex> lock(warp_mu_);
  auto it = preferred_multiple_.find(device_id);
  if (it != preferred_multiple_.end()) return it->second;
  const Device& d = CheckDevice(DLDevice{static_cast<DLDeviceType>(device_type()), device_id});
  const char* source = "__kernel void bp_probe(__global int* p) { p[get_global_id(0)] = 0; }";
  cl_int err = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(d.context, 1, &source, nullptr, &err);
  Check(err, "clCreateProgramWithSource (the warp_size probe kernel)");
  std::unique_ptr<std::remove_pointer_t<cl_program>, decltype(&clReleaseProgram)> program_ref(
      program, &clReleaseProgram);
  Check(clBuildProgram(program, 1, &d.id, "", nullptr, nullptr),
        "clBuildProgram (the warp_size probe kernel)");
  cl_kernel kernel = clCreateKernel(program, "bp_probe", &err);
  Check(err, "clCreateKernel (the warp_size probe kernel)");
  std::unique_ptr<std::remove_pointer_t<cl_kernel>, decltype(&clReleaseKernel)> kernel_ref(
      kernel, &clReleaseKernel);
  size_t multiple = 0;
  Check(clGetKernelWorkGroupInfo(kernel, d.id, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                 sizeof(multiple), &multiple, nullptr),
        "clGetKernelWorkGroupInfo(CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE)");
  preferred_multiple_[device_id] = static_cast<int64_t>(multiple);
  return static_cast<int64_t>(multiple);
}

Any OpenCLDeviceAPI::GetProperty(DLDevice dev, const std::string& key) {
  if (dev.device_type != device_type() || dev.device_id < 0 || dev.device_id >= DeviceCount()) {
    return sdk::NoneValue();
  }
  cl_device_id id = devices_[dev.device_id].id;
  if (key == "vendor") return sdk::StringValue(DeviceInfoString(id, CL_DEVICE_VENDOR));
  if (key == "opencl_c_version") {
    return sdk::StringValue(DeviceInfoString(id, CL_DEVICE_OPENCL_C_VERSION));
  }
  if (key == "workspace_cached_bytes") {
    return sdk::IntValue(static_cast<int64_t>(WorkspaceCachedBytes(dev)));
  }
  if (key == "max_mem_alloc_size") {
    return sdk::IntValue(
        static_cast<int64_t>(DeviceInfo<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE)));
  }
  if (key == "global_mem_cache_size_bytes") {
    return sdk::IntValue(
        static_cast<int64_t>(DeviceInfo<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE)));
  }
  if (key == "global_mem_cacheline_size_bytes") {
    return sdk::IntValue(DeviceInfo<cl_uint>(id, CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE));
  }
  if (key == "profiling_timer_resolution_ns") {
    return sdk::IntValue(
        static_cast<int64_t>(DeviceInfo<size_t>(id, CL_DEVICE_PROFILING_TIMER_RESOLUTION)));
  }
  if (key == "address_bits") return sdk::IntValue(DeviceInfo<cl_uint>(id, CL_DEVICE_ADDRESS_BITS));
  if (key == "svm_capabilities") {
    // OpenCL 2.0 and later; an older device has no such query (none, and not listed).
    cl_device_svm_capabilities svm = 0;
    if (clGetDeviceInfo(id, CL_DEVICE_SVM_CAPABILITIES, sizeof(svm), &svm, nullptr) != CL_SUCCESS) {
      return sdk::NoneValue();
    }
    std::vector<std::string> names;
    if (svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) names.push_back("COARSE_GRAIN_BUFFER");
    if (svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) names.push_back("FINE_GRAIN_BUFFER");
    if (svm & CL_DEVICE_SVM_FINE_GRAIN_SYSTEM) names.push_back("FINE_GRAIN_SYSTEM");
    if (svm & CL_DEVICE_SVM_ATOMICS) names.push_back("ATOMICS");
    return sdk::StringArrayValue(names);
  }
  if (key == "platform_name") {
    size_t n = 0;
    const cl_platform_id p = devices_[dev.device_id].platform;
    Check(clGetPlatformInfo(p, CL_PLATFORM_NAME, 0, nullptr, &n), "clGetPlatformInfo");
    std::string name(n, '\0');
    Check(clGetPlatformInfo(p, CL_PLATFORM_NAME, n, name.data(), nullptr), "clGetPlatformInfo");
    while (!name.empty() && name.back() == '\0') name.pop_back();
    return sdk::StringValue(name);
  }
  return sdk::NoneValue();
}

std::vector<std::string> OpenCLDeviceAPI::ListProperties(DLDevice dev) {
  if (dev.device_type != device_type() || dev.device_id < 0 || dev.device_id >= DeviceCount()) {
    return {};
  }
  std::vector<std::string> keys;
  for (const char* key :
       {"vendor", "opencl_c_version", "workspace_cached_bytes", "max_mem_alloc_size",
        "global_mem_cache_size_bytes", "global_mem_cacheline_size_bytes",
        "profiling_timer_resolution_ns", "address_bits", "svm_capabilities", "platform_name"}) {
    if (!GetProperty(dev, key).is_none()) keys.push_back(key);
  }
  return keys;
}

void OpenCLDeviceAPI::SetDevice(DLDevice dev) { CheckDevice(dev); }

cl_mem OpenCLDeviceAPI::CreateMem(DLDevice dev, const Device& d, size_t bytes) {
  BACKPLANE_REQUIRE(bytes <= d.max_alloc, BP_ERR_OUT_OF_MEMORY,
                    "allocating " + std::to_string(bytes) + " bytes on " + sdk::DeviceString(dev) +
                        ": the device allows at most " + std::to_string(d.max_alloc) +
                        " bytes in one buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE); allocate less");
  // OpenCL has no zero-size buffers: a zero-size request gets one byte.
  const size_t n = bytes == 0 ? 1 : bytes;
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(d.context, CL_MEM_READ_WRITE, n, nullptr, &err);
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
      err == CL_OUT_OF_HOST_MEMORY) {
    std::vector<Buffer*> cached = DrainPool(dev.device_id);
    if (!cached.empty()) {
      for (Buffer* b : cached) Destroy(b);
      err = CL_SUCCESS;
      mem = clCreateBuffer(d.context, CL_MEM_READ_WRITE, n, nullptr, &err);
    }
  }
  Check(err, "clCreateBuffer of " + std::to_string(bytes) + " bytes on " + sdk::DeviceString(dev));
  return mem;
}

std::vector<Buffer*> OpenCLDeviceAPI::DrainPool(int32_t device_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Buffer*> all;
  for (Pool::Entry& e : pools_[static_cast<size_t>(device_id)]->TakeAll()) all.push_back(e.buffer);
  return all;
}

void OpenCLDeviceAPI::Destroy(Buffer* b) {
  if (b->mem != nullptr) clReleaseMemObject(b->mem);
  delete b;
}

void* OpenCLDeviceAPI::AllocDataSpace(DLDevice dev, size_t nbytes, size_t, DLDataType) {
  const Device& d = CheckDevice(dev);
  // Destroyed unless handed out (CreateMem or the table may fail; Destroy takes a null mem).
  std::unique_ptr<Buffer, void (*)(Buffer*)> b(new Buffer(), &Destroy);
  b->capacity = nbytes == 0 ? 1 : nbytes;
  b->mem = CreateMem(dev, d, nbytes);
  handles_.Add(dev, b.get(), nbytes, /*workspace=*/false, b.get());
  return b.release();
}

void* OpenCLDeviceAPI::AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType) {
  const Device& d = CheckDevice(dev);
  Pool& pool = *pools_[static_cast<size_t>(dev.device_id)];
  size_t class_bytes = pool.ClassBytes(nbytes);
  if (class_bytes > d.max_alloc) class_bytes = 0;  // the rounding must not pass the limit
  Buffer* kept = nullptr;
  if (class_bytes != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    pool.Take(class_bytes, &kept);
  }
  std::unique_ptr<Buffer, void (*)(Buffer*)> b(kept, &Destroy);  // as in AllocDataSpace
  if (b == nullptr) {
    b.reset(new Buffer());
    const size_t bytes = class_bytes != 0 ? class_bytes : nbytes;
    b->mem = CreateMem(dev, d, bytes);
    b->capacity = bytes == 0 ? 1 : bytes;
  }
  handles_.Add(dev, b.get(), nbytes, /*workspace=*/true, b.get());
  return b.release();
}

sdk::HandleTable<Buffer*>::Entry OpenCLDeviceAPI::Resolve(DLDevice dev, const void* handle,
                                                          uint64_t offset, size_t nbytes,
                                                          const std::string& what) {
  CheckDevice(dev);
  return handles_.Resolve(dev, handle, offset, nbytes, what);
}

void OpenCLDeviceAPI::FreeDataSpace(DLDevice dev, void* ptr) {
  CheckDevice(dev);
  if (ptr == nullptr) return;
  Destroy(handles_.Remove(dev, ptr, /*workspace=*/false).info);
}

void OpenCLDeviceAPI::FreeWorkspace(DLDevice dev, void* ptr) {
  CheckDevice(dev);
  if (ptr == nullptr) return;
  Buffer* b = handles_.Remove(dev, ptr, /*workspace=*/true).info;
  {
    Pool& pool = *pools_[static_cast<size_t>(dev.device_id)];
    std::lock_guard<std::mutex> lock(mu_);
    if (pool.ClassBytes(b->capacity) == b->capacity && pool.Keep(b->capacity, b)) return;
  }
  Destroy(b);
}

size_t OpenCLDeviceAPI::WorkspaceCachedBytes(DLDevice dev) {
  CheckDevice(dev);
  std::lock_guard<std::mutex> lock(mu_);
  return pools_[static_cast<size_t>(dev.device_id)]->CachedBytes();
}

cl_command_queue OpenCLDeviceAPI::Queue(DLDevice dev, bp_stream_t stream) {
  const Device& d = CheckDevice(dev);
  if (stream == nullptr) return d.queue;
  return static_cast<cl_command_queue>(streams_.Check(dev, stream));
}

cl_command_queue OpenCLDeviceAPI::ActiveQueue(DLDevice dev) {
  const Device& d = CheckDevice(dev);
  bp_stream_t active = streams_.Active(dev);
  return active == nullptr ? d.queue : static_cast<cl_command_queue>(active);
}

void OpenCLDeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) {
  const auto [nbytes, from_dev, to_dev] = sdk::CheckCopy(from, to, device_type());
  auto buffer_of = [&, n = nbytes](const DLTensor* t) {
    return Resolve(t->device, t->data, t->byte_offset, n,
                   t == from ? "the source" : "the destination")
        .info;
  };
  if (from_dev && to_dev) {
    Buffer* src = buffer_of(from);
    Buffer* dst = buffer_of(to);
    if (nbytes == 0) return;
    if (from->device.device_id == to->device.device_id) {
      Check(clEnqueueCopyBuffer(Queue(to->device, stream), src->mem, dst->mem, from->byte_offset,
                                to->byte_offset, nbytes, 0, nullptr, nullptr),
            "clEnqueueCopyBuffer");
      return;
    }
    // Different contexts: through the host.
    std::vector<char> staging(nbytes);
    Check(clEnqueueReadBuffer(Queue(from->device, nullptr), src->mem, CL_TRUE, from->byte_offset,
                              nbytes, staging.data(), 0, nullptr, nullptr),
          "clEnqueueReadBuffer (cross-device copy)");
    Check(clEnqueueWriteBuffer(Queue(to->device, stream), dst->mem, CL_TRUE, to->byte_offset,
                               nbytes, staging.data(), 0, nullptr, nullptr),
          "clEnqueueWriteBuffer (cross-device copy)");
    return;
  }
  if (from_dev) {
    Buffer* src = buffer_of(from);
    if (nbytes == 0) return;
    Check(clEnqueueReadBuffer(Queue(from->device, stream), src->mem, CL_TRUE, from->byte_offset,
                              nbytes, static_cast<char*>(to->data) + to->byte_offset, 0, nullptr,
                              nullptr),
          "clEnqueueReadBuffer");
    return;
  }
  Buffer* dst = buffer_of(to);
  if (nbytes == 0) return;
  // Blocking: the host side must be read before returning.
  Check(clEnqueueWriteBuffer(Queue(to->device, stream), dst->mem, CL_TRUE, to->byte_offset, nbytes,
                             static_cast<const char*>(from->data) + from->byte_offset, 0, nullptr,
                             nullptr),
        "clEnqueueWriteBuffer");
}

bp_stream_t OpenCLDeviceAPI::CreateStream(DLDevice dev) {
  const Device& d = CheckDevice(dev);
  cl_int err = CL_SUCCESS;
  cl_command_queue q = NewQueue(d, &err);
  Check(err, "clCreateCommandQueueWithProperties on " + sdk::DeviceString(dev));
  streams_.Add(q, dev);
  return q;
}

void OpenCLDeviceAPI::FreeStream(DLDevice dev, bp_stream_t stream) {
  if (stream == nullptr) return;
  cl_command_queue q = Queue(dev, stream);
  clFinish(q);
  streams_.Remove(stream);
  clReleaseCommandQueue(q);
}

void OpenCLDeviceAPI::SetStream(DLDevice dev, bp_stream_t stream) {
  CheckDevice(dev);
  streams_.SetActive(dev, stream);
}

void OpenCLDeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  Check(clFinish(Queue(dev, stream)), "clFinish on " + sdk::DeviceString(dev));
}

void OpenCLDeviceAPI::SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) {
  cl_command_queue from = Queue(dev, src);
  cl_command_queue to = Queue(dev, dst);
  if (from == to) return;
  cl_event marker = nullptr;
  Check(clEnqueueMarkerWithWaitList(from, 0, nullptr, &marker), "clEnqueueMarkerWithWaitList");
  const cl_int err = clEnqueueBarrierWithWaitList(to, 1, &marker, nullptr);
  clFlush(from);
  clReleaseEvent(marker);
  Check(err, "clEnqueueBarrierWithWaitList");
}

}  // namespace opencl
}  // namespace backplane
