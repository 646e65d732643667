// SPDX-License-Identifier: Apache-2.0
// Tensor objects: a DLTensor that owns its data space, freed through its DeviceAPI when the
// last reference goes (bp_tensor_empty makes one), or a producer's DLPack tensor, whose deleter
// runs then (bp_tensor_from_dlpack*), or an application's native buffer, unwrapped then
// (bp_tensor_from_native); and the export of any to a DLPack consumer.
#include <cstdio>
#include <string>
#include <vector>

#include "device_api.h"
#include "object.h"

namespace backplane {
namespace core {
namespace {

constexpr size_t kTensorAlignment = 64;
constexpr int32_t kMaxDims = 64;

struct TensorObject final : bp_object {
  TensorObject() : bp_object(BP_OBJECT_TENSOR) {}
  ~TensorObject() override {
    if (imported) {
      if (versioned != nullptr && versioned->deleter != nullptr) versioned->deleter(versioned);
      if (legacy != nullptr && legacy->deleter != nullptr) legacy->deleter(legacy);
      return;
    }
    if (wrapped) {
      if (dl.data != nullptr) UnwrapNative(dl.device, dl.data);
      if (release != nullptr) {
        // The application's callback: whatever it throws stops here (a destructor), said.
        try {
          release(release_ctx);
        } catch (...) {
          std::fprintf(stderr, "backplane: a wrapped buffer's release callback threw\n");
        }
      }
      return;
    }
    if (dl.data == nullptr) return;
    if (bp_device_free_data_space(dl.device, dl.data) != BP_OK) {
      // A destructor cannot return the failure; say it rather than lose it.
      const char* msg = nullptr;
      bp_error_last(nullptr, &msg);
      std::fprintf(stderr, "backplane: freeing a tensor's data space failed: %s\n",
                   msg != nullptr ? msg : "");
    }
  }
  DLTensor dl{};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  uint64_t flags = 0;
  // The producer's memory (never freed here), and its tensor once taken over: its deleter
  // runs instead of a free.
  bool imported = false;
  DLManagedTensorVersioned* versioned = nullptr;
  DLManagedTensor* legacy = nullptr;
  // An application's native buffer (bp_tensor_from_native): unwrapped, then `release` called.
  bool wrapped = false;
  void (*release)(void*) = nullptr;
  void* release_ctx = nullptr;
};

// Copies a producer's DLTensor into `t` (shape and strides into the object's own storage, so
// the view stays valid whatever the producer does with its arrays), checked.
void Adopt(const DLTensor& in, const char* who, TensorObject* t) {
  t->imported = true;
  if (in.ndim < 0 || in.ndim > kMaxDims) {
    Fail(BP_ERR_INVALID_ARGUMENT, std::string(who) + ": ndim is " + std::to_string(in.ndim) +
                                      "; a tensor has 0 to 64 dimensions");
  }
  if (in.ndim > 0 && in.shape == nullptr) {
    Fail(BP_ERR_INVALID_ARGUMENT, std::string(who) + ": the shape is null for " +
                                      std::to_string(in.ndim) +
                                      " dimensions; the producer must pass its shape");
  }
  t->dl = in;
  t->shape.assign(in.shape, in.shape + in.ndim);
  t->dl.shape = t->shape.data();
  if (in.strides != nullptr) {
    t->strides.assign(in.strides, in.strides + in.ndim);
    t->dl.strides = t->strides.data();
  }
  const size_t bytes = TensorBytes(t->dl, who);  // dtype and extents checked
  if (t->dl.data == nullptr && bytes != 0) {
    Fail(BP_ERR_INVALID_ARGUMENT, std::string(who) + ": the data is null for a tensor of " +
                                      std::to_string(bytes) +
                                      " bytes; only an empty tensor may have no data");
  }
}

// A new compact tensor object of `ndim` extents and `dtype` on `dev`, without data yet, its
// arguments checked (`who` names the call in errors); its size in bytes in *nbytes.
Ref NewCompact(int32_t ndim, const int64_t* shape, DLDataType dtype, DLDevice dev, const char* who,
               size_t* nbytes) {
  if (ndim < 0 || ndim > kMaxDims) {
    Fail(BP_ERR_INVALID_ARGUMENT, std::string(who) + ": ndim must be between 0 and 64");
  }
  if (shape == nullptr && ndim != 0) {
    Fail(BP_ERR_INVALID_ARGUMENT, std::string(who) + ": shape is null but ndim is not 0");
  }
  auto* t = new TensorObject();
  Ref owner = Ref::Adopt(t);
  t->shape.assign(shape, shape + ndim);
  t->dl.ndim = ndim;
  t->dl.shape = t->shape.data();
  t->dl.dtype = dtype;
  t->dl.device = dev;
  *nbytes = TensorBytes(t->dl, who);
  return owner;
}

// The exported views: each holds a reference to the tensor it shows.
void DeleteVersioned(DLManagedTensorVersioned* self) {
  if (self == nullptr) return;
  bp_object_release(static_cast<bp_object_t*>(self->manager_ctx));
  delete self;
}
void DeleteLegacy(DLManagedTensor* self) {
  if (self == nullptr) return;
  bp_object_release(static_cast<bp_object_t*>(self->manager_ctx));
  delete self;
}

}  // namespace
}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT bp_status_t bp_tensor_empty(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                      DLDevice dev, bp_object_t** out_tensor) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_tensor != nullptr, "out_tensor is null");
  size_t nbytes = 0;
  Ref owner = NewCompact(ndim, shape, dtype, dev, "bp_tensor_empty", &nbytes);
  auto* t = static_cast<TensorObject*>(owner.get());
  void* data = nullptr;
  bp_status_t st = bp_device_alloc_data_space(dev, nbytes, kTensorAlignment, dtype, &data);
  if (st != BP_OK) return st;
  t->dl.data = data;
  *out_tensor = owner.release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_tensor_from_native(DLDevice dev, const bp_native_buffer_t* buffer,
                                            int32_t ndim, const int64_t* shape, DLDataType dtype,
                                            void (*release)(void*), void* release_ctx,
                                            bp_object_t** out_tensor) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_tensor != nullptr, "out_tensor is null");
  BP_REQUIRE_ARG(buffer != nullptr, "buffer is null");
  BP_REQUIRE_ARG(buffer->struct_size >= sizeof(bp_native_buffer_t),
                 "buffer->struct_size is " + std::to_string(buffer->struct_size) +
                     "; set it to sizeof(bp_native_buffer_t)");
  size_t nbytes = 0;
  Ref owner = NewCompact(ndim, shape, dtype, dev, "bp_tensor_from_native", &nbytes);
  auto* t = static_cast<TensorObject*>(owner.get());
  if (nbytes > buffer->size) {
    Fail(BP_ERR_INVALID_ARGUMENT, "bp_tensor_from_native: the tensor needs " +
                                      std::to_string(nbytes) + " bytes, but the buffer has " +
                                      std::to_string(buffer->size) +
                                      " (buffer->size); pass a smaller shape or a larger buffer");
  }
  t->wrapped = true;  // from here the destructor unwraps (data set) but calls no release
  t->dl.data = WrapNative(dev, *buffer);
  t->release = release;  // nothing below can fail
  t->release_ctx = release_ctx;
  *out_tensor = owner.release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_tensor_get(const bp_object_t* tensor, DLTensor** out_dltensor) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_dltensor != nullptr, "out_dltensor is null");
  const auto& t = As<TensorObject>(tensor, BP_OBJECT_TENSOR, "bp_tensor_get");
  *out_dltensor = const_cast<DLTensor*>(&t.dl);
  BP_API_END
}

BP_EXPORT bp_status_t bp_tensor_from_dlpack_versioned(DLManagedTensorVersioned* managed,
                                                      bp_object_t** out_tensor) {
  BP_API_BEGIN
  constexpr const char* kWho = "bp_tensor_from_dlpack_versioned";
  BP_REQUIRE_ARG(out_tensor != nullptr, "out_tensor is null");
  BP_REQUIRE_ARG(managed != nullptr, "managed is null");
  if (managed->version.major != 1) {
    Fail(BP_ERR_UNSUPPORTED,
         std::string(kWho) + ": the tensor is DLPack " + std::to_string(managed->version.major) +
             "." + std::to_string(managed->version.minor) +
             ", and this Backplane reads DLPack 1.x; ask the producer for a 1.x tensor "
             "(max_version=(1, 0))");
  }
  auto* t = new TensorObject();
  Ref owner = Ref::Adopt(t);
  Adopt(managed->dl_tensor, kWho, t);
  t->flags = managed->flags;
  t->versioned = managed;  // taken over: nothing below can fail
  *out_tensor = owner.release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_tensor_from_dlpack(DLManagedTensor* managed, bp_object_t** out_tensor) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_tensor != nullptr, "out_tensor is null");
  BP_REQUIRE_ARG(managed != nullptr, "managed is null");
  auto* t = new TensorObject();
  Ref owner = Ref::Adopt(t);
  Adopt(managed->dl_tensor, "bp_tensor_from_dlpack", t);
  t->legacy = managed;
  *out_tensor = owner.release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_tensor_to_dlpack_versioned(bp_object_t* tensor,
                                                    DLManagedTensorVersioned** out_managed) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_managed != nullptr, "out_managed is null");
  const auto& t = As<TensorObject>(tensor, BP_OBJECT_TENSOR, "bp_tensor_to_dlpack_versioned");
  auto* m = new DLManagedTensorVersioned();
  m->version = DLPackVersion{1, 0};
  m->manager_ctx = tensor;
  m->deleter = DeleteVersioned;
  m->flags = t.flags & (DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED);
  m->dl_tensor = t.dl;
  bp_object_retain(tensor);
  *out_managed = m;
  BP_API_END
}

BP_EXPORT bp_status_t bp_tensor_to_dlpack(bp_object_t* tensor, DLManagedTensor** out_managed) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_managed != nullptr, "out_managed is null");
  const auto& t = As<TensorObject>(tensor, BP_OBJECT_TENSOR, "bp_tensor_to_dlpack");
  if ((t.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "bp_tensor_to_dlpack: the tensor is read-only, and a DLPack 0.x DLManagedTensor cannot "
         "say so (a consumer could write it); export it with bp_tensor_to_dlpack_versioned, or "
         "copy it first");
  }
  auto* m = new DLManagedTensor();
  m->dl_tensor = t.dl;
  m->manager_ctx = tensor;
  m->deleter = DeleteLegacy;
  bp_object_retain(tensor);
  *out_managed = m;
  BP_API_END
}

BP_EXPORT bp_status_t bp_tensor_flags(const bp_object_t* tensor, uint64_t* out_flags) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_flags != nullptr, "out_flags is null");
  *out_flags = As<TensorObject>(tensor, BP_OBJECT_TENSOR, "bp_tensor_flags").flags;
  BP_API_END
}

}  // extern "C"
