// SPDX-License-Identifier: Apache-2.0
// Tensor objects: a DLTensor that owns its data space, freed through its DeviceAPI when the
// last reference goes (bp_tensor_empty makes one).
#include <cstdio>
#include <vector>

#include "device_api.h"
#include "object.h"

namespace backplane::core {
namespace {

constexpr size_t kTensorAlignment = 64;
constexpr int32_t kMaxDims = 64;

struct TensorObject final : bp_object {
  TensorObject() : bp_object(BP_OBJECT_TENSOR) {}
  ~TensorObject() override {
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
};

}  // namespace
}  // namespace backplane::core

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT bp_status_t bp_tensor_empty(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                      DLDevice dev, bp_object_t** out_tensor) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_tensor != nullptr, "out_tensor is null");
  BP_REQUIRE_ARG(ndim >= 0 && ndim <= kMaxDims, "ndim must be between 0 and 64");
  BP_REQUIRE_ARG(shape != nullptr || ndim == 0, "shape is null but ndim is not 0");
  auto* t = new TensorObject();
  Ref owner = Ref::Adopt(t);
  t->shape.assign(shape, shape + ndim);
  t->dl.ndim = ndim;
  t->dl.shape = t->shape.data();
  t->dl.dtype = dtype;
  t->dl.device = dev;
  t->dl.strides = nullptr;
  t->dl.byte_offset = 0;
  const size_t nbytes = TensorBytes(t->dl, "bp_tensor_empty");
  void* data = nullptr;
  bp_status_t st = bp_device_alloc_data_space(dev, nbytes, kTensorAlignment, dtype, &data);
  if (st != BP_OK) return st;
  t->dl.data = data;
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

}  // extern "C"
