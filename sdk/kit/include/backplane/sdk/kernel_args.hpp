// SPDX-License-Identifier: Apache-2.0
// Plugin-author helper for code generators: turns the packed arguments of a kernel call into
// the IR's ArgViews and checks them against the PrimFunc's parameters, so every backend
// refuses a wrong call with the same clear message instead of reading out of bounds.
//
//   std::vector<ir::ArgView> views = sdk::BindKernelArgs(func, args, n, "c", IsHost);
//
// Needs Backplane::ir (backplane/ir/signature.hpp).
#ifndef BACKPLANE_SDK_KERNEL_ARGS_HPP_
#define BACKPLANE_SDK_KERNEL_ARGS_HPP_

#include <backplane/backplane.hpp>
#include <backplane/ir/signature.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace backplane {
namespace sdk {

// The IR dtype of a DLPack dtype (DLPack's codes are the IR's).
inline ir::DType DTypeFromDL(DLDataType t) {
  return ir::DType{static_cast<ir::DTypeCode>(t.code), t.bits, t.lanes};
}

// The DLTensor an argument carries (BP_VALUE_TENSOR, or a tensor object), else nullptr.
inline DLTensor* TensorOf(const bp_value_t& v) {
  if (v.type == BP_VALUE_TENSOR) return v.u.v_tensor;
  if (v.type != BP_VALUE_OBJECT || v.u.v_obj == nullptr) return nullptr;
  int32_t type = 0;
  if (::backplane::detail::Api()->object_type(v.u.v_obj, &type) != BP_OK ||
      type != BP_OBJECT_TENSOR) {
    ::backplane::detail::Api()->error_clear();
    return nullptr;
  }
  DLTensor* t = nullptr;
  Check(::backplane::detail::Api()->tensor_get(v.u.v_obj, &t));
  return t;
}

// True when `v` is a tensor object that its DLPack producer marked read-only (a kernel must not
// write it). Hosts older than ABI 1.6 import no DLPack tensors: there none is.
inline bool IsReadOnlyTensor(const bp_value_t& v) {
  if (v.type != BP_VALUE_OBJECT || v.u.v_obj == nullptr) return false;
  if (!::backplane::detail::HostHas(BACKPLANE_HOST_ENTRY_END(tensor_flags))) return false;
  const bp_host_api_t* api = ::backplane::detail::Api();
  uint64_t flags = 0;
  if (api->tensor_flags(v.u.v_obj, &flags) != BP_OK) {
    api->error_clear();
    return false;
  }
  return (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
}

// Throws Error(BP_ERR_INVALID_ARGUMENT) when argument `i` of a call of `func`, a buffer the
// function writes, is a read-only tensor. `who` names the code generator ("c", "opencl").
inline void CheckWritable(const ir::PrimFunc& func, const bp_value_t& v, size_t i,
                          const char* who) {
  if (!IsReadOnlyTensor(v)) return;
  throw Error(BP_ERR_INVALID_ARGUMENT,
              std::string(who) + " function '" + func.name + "': argument " + std::to_string(i) +
                  " '" + func.params[i].buffer().name() +
                  "' is a read-only tensor (its DLPack producer said so), and the function "
                  "writes it; pass a copy");
}

// Converts and checks the arguments of a call of `func` (ir::CheckArgs). A buffer argument
// is a tensor (BP_VALUE_TENSOR or a tensor object) whose device `device_ok` accepts; its
// ArgView has the byte offset applied and `user` = the DLTensor*. `who` names the code
// generator in messages ("c", "opencl"). Throws Error(BP_ERR_INVALID_ARGUMENT or
// BP_ERR_TYPE) naming the function, the argument and what to do.
//
// This form writes into `*out` (its capacity kept: a function called often reuses one per
// thread and allocates nothing) and takes `check` = ir::ArgCheck(func), prepared once per
// function (any `check(views)` that answers what ir::CheckArgs answers will do).
template <typename DeviceOk, typename Check>
void BindKernelArgs(const ir::PrimFunc& func, const bp_value_t* args, int32_t num_args,
                    const char* who, DeviceOk device_ok, const Check& check,
                    std::vector<ir::ArgView>* out) {
  std::vector<ir::ArgView>& views = *out;
  views.resize(static_cast<size_t>(num_args < 0 ? 0 : num_args));
  const size_t num_params = func.params.size();
  for (size_t i = 0; i < views.size(); ++i) {
    const bp_value_t& v = args[i];
    views[i] = ir::ArgView();  // nothing of an earlier call's view stays
    const bool want_buffer = i < num_params && func.params[i].is_buffer();
    // Built only for a message: every kernel launch runs this loop.
    auto arg = [&] {
      return "argument " + std::to_string(i) +
             (i < num_params ? " '" +
                                   (want_buffer ? func.params[i].buffer().name()
                                                : func.params[i].var().name()) +
                                   "'"
                             : std::string());
    };
    if (v.type == BP_VALUE_INT) {
      views[i].kind = ir::ArgView::Kind::kInt;
      views[i].i = v.u.v_int64;
    } else if (v.type == BP_VALUE_FLOAT) {
      views[i].kind = ir::ArgView::Kind::kFloat;
      views[i].f = v.u.v_float64;
    } else if (DLTensor* t = TensorOf(v)) {
      if (!device_ok(t->device)) {
        throw Error(BP_ERR_INVALID_ARGUMENT,
                    std::string(who) + " function '" + func.name + "': " + arg() +
                        " is a tensor on device type " + std::to_string(t->device.device_type) +
                        ":" + std::to_string(t->device.device_id) +
                        ", which this module's code cannot reach; copy it to the device the "
                        "module runs on first");
      }
      ir::ArgView& a = views[i];
      a.kind = ir::ArgView::Kind::kBuffer;
      a.data = t->data == nullptr ? nullptr : static_cast<char*>(t->data) + t->byte_offset;
      a.dtype = DTypeFromDL(t->dtype);
      a.ndim = t->ndim;
      a.shape = t->shape;
      a.strides = t->strides;
      a.user = t;
    } else {
      throw Error(BP_ERR_TYPE, std::string(who) + " function '" + func.name + "': " + arg() +
                                   " has value type " + std::to_string(v.type) + "; expected " +
                                   (want_buffer ? "a tensor" : "an int or a float"));
    }
  }
  std::string problem = check(views);
  if (!problem.empty()) {
    throw Error(BP_ERR_INVALID_ARGUMENT, std::string(who) + " function " + problem);
  }
}
template <typename DeviceOk>
std::vector<ir::ArgView> BindKernelArgs(const ir::PrimFunc& func, const bp_value_t* args,
                                        int32_t num_args, const char* who, DeviceOk device_ok) {
  std::vector<ir::ArgView> views;
  // Called once: CheckArgs itself, not an ArgCheck prepared for one use.
  auto check = [&func](const std::vector<ir::ArgView>& v) { return ir::CheckArgs(func, v); };
  BindKernelArgs(func, args, num_args, who, device_ok, check, &views);
  return views;
}

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_KERNEL_ARGS_HPP_
