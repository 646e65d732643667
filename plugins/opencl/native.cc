// SPDX-License-Identifier: Apache-2.0
// Native handles of device_api.opencl (ABI 1.6): the OpenCL objects behind Backplane's, and an
// application's cl_mem wrapped as a data handle.
//
// A wrapped cl_mem gets a Buffer like data space (so copies, kernels and the launch kit take it
// unchanged), registered with HandleTable::AddWrapped: FreeDataSpace and FreeWorkspace refuse
// it, and only UnwrapNative ends it. The plugin holds one reference to the cl_mem
// (clRetainMemObject) while it is wrapped, so the buffer outlives work still queued on it even
// if the application releases its own reference early.
#include <cstdint>
#include <memory>
#include <string>

#include "device_api.h"

namespace backplane {
namespace opencl {

namespace {

template <typename T>
cl_int MemInfo(cl_mem mem, cl_mem_info what, T* out) {
  return clGetMemObjectInfo(mem, what, sizeof(T), out, nullptr);
}

// "bp_tensor_from_native on opencl:0: " and the reason: BP_ERR_INVALID_ARGUMENT.
[[noreturn]] void BadWrap(DLDevice dev, const std::string& why) {
  throw Error(BP_ERR_INVALID_ARGUMENT,
              "bp_tensor_from_native on " + sdk::DeviceString(dev) + ": " + why);
}

}  // namespace

uint64_t OpenCLDeviceAPI::NativeHandle(DLDevice dev, bp_native_kind_t kind, void* object) {
  const Device& d = CheckDevice(dev);
  switch (kind) {
    case BP_NATIVE_BUFFER:
    case BP_NATIVE_BUFFER_OFFSET: {
      const Buffer* b = handles_.Get(dev, object, "bp_native_handle: the tensor's data").info;
      // Each handle is a whole cl_mem (no sub-buffers): its bytes start at 0.
      return kind == BP_NATIVE_BUFFER ? reinterpret_cast<uint64_t>(b->mem) : 0;
    }
    case BP_NATIVE_QUEUE:
      return reinterpret_cast<uint64_t>(Queue(dev, static_cast<bp_stream_t>(object)));
    case BP_NATIVE_CONTEXT:
      return reinterpret_cast<uint64_t>(d.context);
    case BP_NATIVE_DEVICE:
      return reinterpret_cast<uint64_t>(d.id);
    case BP_NATIVE_PLATFORM:
      return reinterpret_cast<uint64_t>(d.platform);
    default:
      UnsupportedNative(dev, kind,
                        "BP_NATIVE_BUFFER (the cl_mem), BP_NATIVE_BUFFER_OFFSET (0), "
                        "BP_NATIVE_QUEUE (the cl_command_queue), BP_NATIVE_CONTEXT (the "
                        "cl_context), BP_NATIVE_DEVICE (the cl_device_id) and BP_NATIVE_PLATFORM "
                        "(the cl_platform_id)");
  }
}

void* OpenCLDeviceAPI::WrapNative(DLDevice dev, const bp_native_buffer_t& buffer) {
  const Device& d = CheckDevice(dev);
  if (buffer.buffer == 0) {
    BadWrap(dev,
            "buffer->buffer is 0; pass a cl_mem created on the cl_context that "
            "bp_native_handle(BP_NATIVE_CONTEXT) gives");
  }
  if (buffer.memory != 0 || buffer.memory_offset != 0) {
    BadWrap(dev,
            "a cl_mem has no separate memory object; set buffer->memory and "
            "buffer->memory_offset to 0");
  }
  auto mem = reinterpret_cast<cl_mem>(static_cast<uintptr_t>(buffer.buffer));
  cl_mem_object_type type = 0;
  const cl_int err = MemInfo(mem, CL_MEM_TYPE, &type);
  if (err != CL_SUCCESS) {
    BadWrap(dev, "clGetMemObjectInfo refuses buffer->buffer (" + std::string(ErrorName(err)) +
                     "); pass a live cl_mem");
  }
  if (type != CL_MEM_OBJECT_BUFFER) {
    BadWrap(dev, "buffer->buffer is an image or pipe (CL_MEM_TYPE " + std::to_string(type) +
                     "), not a buffer; pass a cl_mem from clCreateBuffer");
  }
  cl_context context = nullptr;
  size_t size = 0;
  Check(MemInfo(mem, CL_MEM_CONTEXT, &context), "clGetMemObjectInfo(CL_MEM_CONTEXT)");
  Check(MemInfo(mem, CL_MEM_SIZE, &size), "clGetMemObjectInfo(CL_MEM_SIZE)");
  if (context != d.context) {
    BadWrap(dev,
            "the cl_mem belongs to another cl_context; create it on the one "
            "bp_native_handle(BP_NATIVE_CONTEXT) gives for this device");
  }
  if (buffer.size > size) {
    BadWrap(dev, "buffer->size is " + std::to_string(buffer.size) + " bytes but the cl_mem has " +
                     std::to_string(size) + " (CL_MEM_SIZE); pass at most its size");
  }
  // Destroyed unless handed out: Destroy releases the reference taken below.
  std::unique_ptr<Buffer, void (*)(Buffer*)> b(new Buffer(), &Destroy);
  b->capacity = size;
  Check(clRetainMemObject(mem), "clRetainMemObject (wrapping a cl_mem)");
  b->mem = mem;
  handles_.AddWrapped(dev, b.get(), static_cast<size_t>(buffer.size), b.get());
  return b.release();
}

void OpenCLDeviceAPI::UnwrapNative(DLDevice dev, void* data) {
  CheckDevice(dev);
  // Queued work that still uses the cl_mem keeps it alive: OpenCL frees a memory object only
  // once the commands using it have completed.
  Destroy(handles_.RemoveWrapped(dev, data).info);
}

}  // namespace opencl
}  // namespace backplane
