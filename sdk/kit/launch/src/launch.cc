// SPDX-License-Identifier: Apache-2.0
// The launch kit (backplane/launch/launch.hpp): binding and checking a kernel call once, the
// same way for every backend.
#include <algorithm>
#include <atomic>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/half.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/launch/launch.hpp>
#include <backplane/sdk/kernel_args.hpp>
#include <backplane/sdk/plugin.hpp>
#include <limits>
#include <new>
#include <string>

namespace backplane {
namespace launch {
namespace {

ParamKind KindOf(const ir::PrimFunc& f, const ir::Param& p, const std::string& who) {
  if (p.is_buffer()) return ParamKind::kBuffer;
  const ir::DType t = p.var().dtype();
  if (t.lanes == 1) {
    if (t.is_bool()) return ParamKind::kBool;
    if (t.is_float()) {
      if (t.bits == 16) return ParamKind::kFloat16;
      if (t.bits == 32) return ParamKind::kFloat32;
      if (t.bits == 64) return ParamKind::kFloat64;
    } else if (t.is_uint()) {
      if (t.bits == 8) return ParamKind::kUInt8;
      if (t.bits == 16) return ParamKind::kUInt16;
      if (t.bits == 32) return ParamKind::kUInt32;
      if (t.bits == 64) return ParamKind::kUInt64;
    } else if (t.is_int()) {
      if (t.bits == 8) return ParamKind::kInt8;
      if (t.bits == 16) return ParamKind::kInt16;
      if (t.bits == 32) return ParamKind::kInt32;
      if (t.bits == 64) return ParamKind::kInt64;
    }
  }
  throw ir::Error(ir::ErrorKind::kValue,
                  who + " kernel '" + f.name + "': parameter '" + p.var().name() + "' has type " +
                      ir::ToString(t) +
                      ", which a kernel cannot take; use a buffer or a scalar of bool, int8..64, "
                      "uint8..64 or float16/32/64");
}

std::vector<Axis> AxesOf(const ir::PrimFunc& f, const std::string& who) {
  if (!f.launch_axes) {
    throw ir::Error(ir::ErrorKind::kValue,
                    who + " kernel '" + f.name +
                        "' is not a kernel (no launch_params attribute); build through bp_build, "
                        "which splits host code from kernels");
  }
  std::vector<Axis> axes;
  for (ir::ThreadTag tag : *f.launch_axes) {
    if (tag == ir::ThreadTag::kNone) {
      throw ir::Error(ir::ErrorKind::kValue,
                      who + " kernel '" + f.name +
                          "' has launch axis ThreadTag::kNone; expected blockIdx.x/y/z or "
                          "threadIdx.x/y/z");
    }
    Axis a;
    a.tag = tag;
    a.block = tag <= ir::ThreadTag::kBlockIdxZ;
    a.dim = static_cast<int>(tag) -
            static_cast<int>(a.block ? ir::ThreadTag::kBlockIdxX : ir::ThreadTag::kThreadIdxX);
    for (const Axis& b : axes) {
      if (b.tag == a.tag) {
        throw ir::Error(
            ir::ErrorKind::kValue,
            who + " kernel '" + f.name + "' lists launch param '" + ir::ToString(tag) + "' twice");
      }
    }
    axes.push_back(a);
  }
  // What each axis's loop variable can count: a call through the host code bp_build made
  // passes extents of the loop's own dtype, but a direct call may pass any int64.
  ir::ForEachStmt(f.body, [&](const ir::Stmt& s) {
    const auto* n = s.As<ir::ForNode>();
    if (n == nullptr || n->for_kind != ir::ForKind::kThreadBinding) return;
    const ir::DType t = n->var.dtype();
    const int bits = t.is_uint() ? t.bits : t.bits - 1;
    const int64_t most = bits >= 63 ? INT64_MAX : (int64_t{1} << bits) - 1;
    for (Axis& a : axes) {
      if (a.tag == n->thread && most < a.max_extent) {
        a.max_extent = most;
        a.var_type = ir::ToString(t);
      }
    }
  });
  return axes;
}

// The kernel's shared arrays in the order their statements come (pre-order, as a code
// generator meets them), with the layout of launch.hpp. A launch-sized shape may read only the
// kernel's scalar parameters: the launch kit evaluates it from the arguments before any thread
// runs.
std::vector<SharedArray> SharedArraysOf(const ir::PrimFunc& f, const std::string& who,
                                        uint64_t* static_bytes, size_t* num_launch_sized) {
  std::vector<SharedArray> arrays;
  ir::ForEachStmt(f.body, [&](const ir::Stmt& s) {
    const auto* n = s.As<ir::AllocateNode>();
    if (n == nullptr || n->scope != ir::StorageScope::kShared) return;
    SharedArray a;
    a.alloc = n;
    const ir::DType t = n->buffer.dtype();
    a.elem_bytes = std::max<uint64_t>((uint64_t{t.bits} * t.lanes + 7) / 8, 1);
    int64_t count = 1;
    bool constant = true;
    for (const ir::Expr& d : n->buffer->shape) {
      const auto* imm = d.As<ir::IntImmNode>();
      if (imm == nullptr) {
        constant = false;
        continue;
      }
      if (imm->value < 0 ||
          (imm->value > 0 && count > INT64_MAX / static_cast<int64_t>(a.elem_bytes) / imm->value)) {
        throw ir::Error(ir::ErrorKind::kValue,
                        who + " kernel '" + f.name + "': shared allocation '" + n->buffer.name() +
                            "' has " + std::to_string(n->buffer->shape.size()) +
                            " dimensions whose product in bytes passes INT64_MAX (or a "
                            "negative one); give it a size that fits a block");
      }
      count *= imm->value;
    }
    if (constant) {
      a.elements = count;
    } else {
      for (const ir::Expr& d : n->buffer->shape) {
        std::string bad;
        ir::AnyExpr(d, [&](const ir::Expr& e) {
          if (e.kind() == ir::ExprKind::kVar) {
            const ir::VarNode* v = e.As<ir::VarNode>();
            for (const ir::Param& p : f.params) {
              if (!p.is_buffer() && (p.var().get() == v || p.var().name() == v->name)) {
                return false;
              }
            }
            bad = "variable '" + v->name + "', which is not a scalar parameter";
            return true;
          }
          if (e.kind() == ir::ExprKind::kLoad) {
            bad = "a load of '" + e.As<ir::LoadNode>()->buffer.name() + "'";
            return true;
          }
          if (e.kind() == ir::ExprKind::kCallPacked || e.kind() == ir::ExprKind::kCall) {
            bad = "a call";
            return true;
          }
          return false;
        });
        if (!bad.empty()) {
          throw ir::Error(ir::ErrorKind::kValue,
                          who + " kernel '" + f.name + "': shared allocation '" + n->buffer.name() +
                              "' is sized by " + bad +
                              "; a block's shared memory is sized before its threads run, "
                              "so its shape may use only the kernel's scalar parameters");
        }
      }
      a.launch_index = static_cast<int>((*num_launch_sized)++);
    }
    arrays.push_back(a);
  });
  uint64_t end = 0;
  for (SharedArray& a : arrays) {
    if (a.at_launch()) continue;
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(a.elements), a.elem_bytes, &bytes) ||
        end > UINT64_MAX - kSharedAlign - bytes) {
      throw ir::Error(ir::ErrorKind::kValue, who + " kernel '" + f.name +
                                                 "': its shared arrays take more bytes than an "
                                                 "int64 counts; give them sizes that fit a block");
    }
    a.offset = (end + kSharedAlign - 1) / kSharedAlign * kSharedAlign;
    end = a.offset + bytes;
  }
  *static_bytes = end;
  return arrays;
}

using sdk::DeviceString;
using sdk::TensorOf;

[[noreturn]] void Fail(bp_status_t kind, const std::string& message) { throw Error(kind, message); }

std::string ArgText(const KernelSignature& sig, size_t i) {
  const ir::Param& p = sig.func().params[i];
  return "argument " + std::to_string(i) + " '" +
         (p.is_buffer() ? p.buffer().name() : p.var().name()) + "'";
}

void ConvertScalar(ParamKind kind, const ir::ArgView& v, ScalarArg* s) {
  const bool is_float = v.kind == ir::ArgView::Kind::kFloat;
  s->raw = 0;
  switch (kind) {
    case ParamKind::kBool:
      s->b = v.i != 0;
      s->bytes = 1;
      break;
    case ParamKind::kInt8:
      s->i8 = static_cast<int8_t>(v.i);
      s->bytes = 1;
      break;
    case ParamKind::kUInt8:
      s->u8 = static_cast<uint8_t>(v.i);
      s->bytes = 1;
      break;
    case ParamKind::kInt16:
      s->i16 = static_cast<int16_t>(v.i);
      s->bytes = 2;
      break;
    case ParamKind::kUInt16:
      s->u16 = static_cast<uint16_t>(v.i);
      s->bytes = 2;
      break;
    case ParamKind::kInt32:
      s->i32 = static_cast<int32_t>(v.i);
      s->bytes = 4;
      break;
    case ParamKind::kUInt32:
      s->u32 = static_cast<uint32_t>(v.i);
      s->bytes = 4;
      break;
    case ParamKind::kInt64:
      s->i64 = v.i;
      s->bytes = 8;
      break;
    case ParamKind::kUInt64:
      s->u64 = static_cast<uint64_t>(v.i);
      s->bytes = 8;
      break;
    case ParamKind::kFloat16:
      s->f16 = is_float ? ir::DoubleToHalf(v.f) : ir::FloatToHalf(static_cast<float>(v.i));
      s->bytes = 2;
      break;
    case ParamKind::kFloat32:
      s->f32 = static_cast<float>(is_float ? v.f : static_cast<double>(v.i));
      s->bytes = 4;
      break;
    case ParamKind::kFloat64:
      s->f64 = is_float ? v.f : static_cast<double>(v.i);
      s->bytes = 8;
      break;
    case ParamKind::kBuffer:
      break;
  }
}

}  // namespace

const char* ToString(ParamKind kind) {
  switch (kind) {
    case ParamKind::kBuffer:
      return "buffer";
    case ParamKind::kBool:
      return "bool";
    case ParamKind::kInt8:
      return "int8";
    case ParamKind::kInt16:
      return "int16";
    case ParamKind::kInt32:
      return "int32";
    case ParamKind::kInt64:
      return "int64";
    case ParamKind::kUInt8:
      return "uint8";
    case ParamKind::kUInt16:
      return "uint16";
    case ParamKind::kUInt32:
      return "uint32";
    case ParamKind::kUInt64:
      return "uint64";
    case ParamKind::kFloat16:
      return "float16";
    case ParamKind::kFloat32:
      return "float32";
    case ParamKind::kFloat64:
      return "float64";
  }
  return "?";
}

KernelSignature::KernelSignature(const ir::PrimFunc& func, std::string who)
    : func_(&func), who_(std::move(who)), check_(func) {
  for (const ir::Param& p : func.params) params_.push_back(KindOf(func, p, who_));
  axes_ = AxesOf(func, who_);
  shared_ = SharedArraysOf(func, who_, &static_shared_bytes_, &num_launch_sized_);
  const std::vector<const ir::BufferNode*> stored = ir::WrittenBuffers(func.body);
  for (const ir::Param& p : func.params) {
    bool w = false;
    for (const ir::BufferNode* b : stored) w = w || (p.is_buffer() && p.buffer().get() == b);
    written_.push_back(w);
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i] != ParamKind::kBuffer) continue;
    buffer_params_.push_back(static_cast<uint32_t>(i));
    if (written_[i]) written_params_.push_back(static_cast<uint32_t>(i));
  }
  static std::atomic<uint64_t> next_serial{1};
  serial_ = next_serial.fetch_add(1, std::memory_order_relaxed);
}

std::string KernelSignature::Describe() const { return who_ + " kernel '" + func_->name + "'"; }

int KernelSignature::SharedIndex(const ir::AllocateNode* alloc) const {
  for (size_t i = 0; i < shared_.size(); ++i) {
    if (shared_[i].alloc == alloc) return static_cast<int>(i);
  }
  return -1;
}

void FailOverlap(const char* who, const char* noun, const ir::PrimFunc& func, uint32_t written,
                 uint32_t other) {
  auto arg = [&func](uint32_t i) {
    const ir::Param& p = func.params[i];
    return std::to_string(i) + " '" + (p.is_buffer() ? p.buffer().name() : p.var().name()) + "'";
  };
  const ir::Param& w = func.params[written];
  Fail(BP_ERR_INVALID_ARGUMENT,
       std::string(who) + " " + noun + " '" + func.name + "': arguments " + arg(written) + " and " +
           arg(other) + " overlap in memory and the " + noun + " writes '" +
           (w.is_buffer() ? w.buffer().name() : w.var().name()) +
           "'; pass separate tensors (its buffers are restrict pointers, which may not alias)");
}

uint64_t SpanBytes(const DLTensor& t) {
  const uint64_t elem = (static_cast<uint64_t>(t.dtype.bits) * t.dtype.lanes + 7) / 8;
  // UINT64_MAX stands for "more than an address can hold" (an overflow saturates there).
  uint64_t elems = 0;
  if (t.strides == nullptr) {
    // Compact (the common case): one pass for the count, the zero test and the overflow.
    uint64_t count = 1;
    bool overflow = false;
    for (int d = 0; d < t.ndim; ++d) {
      const int64_t n = t.shape[d];
      if (n <= 0) return 0;
      overflow |= __builtin_mul_overflow(count, static_cast<uint64_t>(n), &count);
    }
    elems = overflow ? UINT64_MAX : count;
  } else {
    for (int d = 0; d < t.ndim; ++d) {
      if (t.shape[d] <= 0) return 0;
    }
    uint64_t last = 0;  // the index of the last element, in elements
    for (int d = 0; d < t.ndim; ++d) {
      const uint64_t n = static_cast<uint64_t>(t.shape[d]);
      const int64_t s = t.strides[d];
      // |s| in unsigned arithmetic: -INT64_MIN does not fit an int64_t.
      const uint64_t step = s < 0 ? 0 - static_cast<uint64_t>(s) : static_cast<uint64_t>(s);
      uint64_t add = 0;
      if (__builtin_mul_overflow(n - 1, step, &add) || __builtin_add_overflow(last, add, &last)) {
        last = UINT64_MAX;
      }
    }
    elems = last == UINT64_MAX ? UINT64_MAX : last + 1;
  }
  uint64_t bytes = 0;
  if (elems == UINT64_MAX || __builtin_mul_overflow(elems, elem, &bytes)) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                "a tensor's shape and strides span more bytes than an address can hold; "
                "pass a smaller tensor");
  }
  return bytes;
}

namespace {

// The sizes of the shared arrays for this call and the layout's bytes, within the device's
// limit (launch.hpp).
void BindShared(const KernelSignature& sig, DLDevice device, const DeviceLimits& limits,
                BoundLaunch* out) {
  uint64_t end = sig.static_shared_bytes();
  for (size_t i = 0; i < sig.shared().size(); ++i) {
    const SharedArray& a = sig.shared()[i];
    if (!a.at_launch()) {
      out->shared_elements[i] = static_cast<uint64_t>(a.elements);
      continue;
    }
    const ir::Buffer& buffer = a.alloc->buffer;
    // "n = 300, ..." up to dimension `last`, for messages only (a warm launch builds no text).
    auto dims = [&](size_t last) {
      std::string text;
      for (size_t k = 0; k <= last && k < buffer->shape.size(); ++k) {
        const ir::Expr& d = buffer->shape[k];
        text += std::string(k ? ", " : "") + ir::Print(d) + " = " +
                std::to_string(ir::EvalIntExpr(sig.func(), d, out->views));
      }
      return text;
    };
    uint64_t count = 1;
    for (size_t k = 0; k < buffer->shape.size(); ++k) {
      int64_t v = 0;
      try {
        v = ir::EvalIntExpr(sig.func(), buffer->shape[k], out->views);
      } catch (const ir::Error& e) {
        Fail(BP_ERR_INVALID_ARGUMENT, sig.Describe() + ": cannot size shared allocation '" +
                                          buffer.name() + "': " + e.what());
      }
      if (v < 0) {
        Fail(BP_ERR_INVALID_ARGUMENT, sig.Describe() + ": shared allocation '" + buffer.name() +
                                          "' has a negative extent at this launch (" + dims(k) +
                                          "); pass arguments that give it a size >= 0");
      }
      if (__builtin_mul_overflow(count, static_cast<uint64_t>(v), &count)) count = UINT64_MAX;
    }
    uint64_t bytes = 0;
    const uint64_t at = (end + kSharedAlign - 1) / kSharedAlign * kSharedAlign;
    const bool overflow = count == UINT64_MAX || count > static_cast<uint64_t>(INT64_MAX) ||
                          __builtin_mul_overflow(count, a.elem_bytes, &bytes) || at < end ||
                          bytes > static_cast<uint64_t>(INT64_MAX) - at;
    if (overflow || (limits.shared_per_block > 0 &&
                     at + bytes > static_cast<uint64_t>(limits.shared_per_block))) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           sig.Describe() + ": shared allocation '" + buffer.name() + "' (" +
               ir::ToString(buffer.dtype()) + " with " + dims(buffer->shape.size()) + ") " +
               (overflow ? std::string("takes more bytes than an int64 counts")
                         : "takes " + std::to_string(bytes) + " bytes at this launch, and the " +
                               "kernel's shared memory comes to " + std::to_string(at + bytes) +
                               " bytes, more than a block of " + DeviceString(device) + " has (" +
                               std::to_string(limits.shared_per_block) + ")") +
               "; launch it with a smaller size");
    }
    out->shared_elements[i] = count;
    end = at + bytes;
  }
  if (limits.shared_per_block > 0 && end > static_cast<uint64_t>(limits.shared_per_block)) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         sig.Describe() + ": its shared arrays take " + std::to_string(end) +
             " bytes, more than a block of " + DeviceString(device) + " has (" +
             std::to_string(limits.shared_per_block) + "); use smaller tiles");
  }
  out->shared_bytes = end;
}

// Bind's phases, in the order it runs them. Each is called once per call (the compiler
// inlines them: a warm launch pays for no extra calls).

// The call passes the kernel's params and then one extent per launch axis.
void CheckArity(const KernelSignature& sig, PackedArgs args) {
  const size_t num_params = sig.num_params();
  const size_t num_axes = sig.axes().size();
  if (static_cast<size_t>(args.size()) != num_params + num_axes) {
    std::string axes;
    for (const Axis& a : sig.axes())
      axes += std::string(axes.empty() ? "" : ", ") + ToString(a.tag);
    Fail(BP_ERR_INVALID_ARGUMENT,
         sig.Describe() + " takes " + std::to_string(num_params) + " argument(s) and " +
             std::to_string(num_axes) + " launch extent(s) (" + axes + "), got " +
             std::to_string(args.size()) +
             " values; call it through the host function bp_build made, which launches it");
  }
}

// Values to views (buffers: the handle, unchanged; the checker reads only shapes), then the
// argument check; the device the tensors are on. Each view and buffer is built whole in a
// local and stored once: stores of single fields that the checker then reads back wider
// stall the load (store forwarding) on every call.
void BindValues(const KernelSignature& sig, const bp_value_t* values, int32_t device_type,
                BoundLaunch* out) {
  const size_t num_params = sig.num_params();
  ir::ArgView* views = out->views.data();
  BufferArg* buffers = out->buffers.data();
  bool have_device = false;
  DLDevice device{static_cast<DLDeviceType>(device_type), 0};
  for (size_t i = 0; i < num_params; ++i) {
    const bp_value_t& v = values[i];
    ir::ArgView view;
    if (v.type == BP_VALUE_INT) {
      view.kind = ir::ArgView::Kind::kInt;
      view.i = v.u.v_int64;
      views[i] = view;
      buffers[i] = BufferArg();
    } else if (v.type == BP_VALUE_FLOAT) {
      view.kind = ir::ArgView::Kind::kFloat;
      view.f = v.u.v_float64;
      views[i] = view;
      buffers[i] = BufferArg();
    } else if (DLTensor* t = TensorOf(v)) {
      if (t->device.device_type != device_type) {
        Fail(BP_ERR_INVALID_ARGUMENT,
             sig.Describe() + ": " + ArgText(sig, i) + " is a tensor on " +
                 DeviceString(t->device) + ", which this module's code cannot reach; copy it to " +
                 DeviceString(
                     DLDevice{static_cast<DLDeviceType>(device_type), t->device.device_id}) +
                 " first");
      }
      if (have_device && t->device.device_id != device.device_id) {
        Fail(BP_ERR_INVALID_ARGUMENT, sig.Describe() + ": its tensors are on " +
                                          DeviceString(device) + " and " + DeviceString(t->device) +
                                          " (" + ArgText(sig, i) + "); put them on one device");
      }
      device = t->device;
      have_device = true;
      view.kind = ir::ArgView::Kind::kBuffer;
      view.data = t->data;
      view.dtype = sdk::DTypeFromDL(t->dtype);
      view.ndim = t->ndim;
      view.shape = t->shape;
      view.strides = t->strides;
      view.user = t;
      views[i] = view;
      BufferArg buf;
      buf.handle = t->data;
      buf.byte_offset = t->byte_offset;
      buf.tensor = t;
      buffers[i] = buf;
    } else {
      const bool want_buffer = sig.param(i) == ParamKind::kBuffer;
      Fail(BP_ERR_TYPE, sig.Describe() + ": " + ArgText(sig, i) + " has value type " +
                            std::to_string(v.type) + "; expected " +
                            (want_buffer ? "a tensor" : "an int or a float"));
    }
  }
  const std::string problem = sig.check()(out->views);
  if (!problem.empty()) Fail(BP_ERR_INVALID_ARGUMENT, sig.who() + " function " + problem);
  out->device = device;
}

// The grid and block from the launch extents, each within what its loop variable counts;
// sets `out->empty` when one is 0.
void BindExtents(const KernelSignature& sig, PackedArgs args, BoundLaunch* out) {
  const size_t num_params = sig.num_params();
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  bool empty = false;
  for (size_t a = 0; a < sig.axes().size(); ++a) {
    const Axis& axis = sig.axes()[a];
    const int64_t extent = args.Int(static_cast<int32_t>(num_params + a));
    if (extent < 0) {
      Fail(BP_ERR_INVALID_ARGUMENT, sig.Describe() + ": launch extent " + ToString(axis.tag) +
                                        " = " + std::to_string(extent) +
                                        " is negative; pass a size >= 0");
    }
    if (extent > axis.max_extent) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           sig.Describe() + ": launch extent " + ToString(axis.tag) + " = " +
               std::to_string(extent) + " is more than its loop variable (" + axis.var_type +
               ") can count (" + std::to_string(axis.max_extent) +
               "); call it through the host function bp_build made, or make the loop variable "
               "int64");
    }
    if (extent == 0) empty = true;
    (axis.block ? grid : block)[axis.dim] = extent;
  }
  for (int d = 0; d < 3; ++d) {
    out->grid[d] = grid[d];
    out->block[d] = block[d];
  }
  out->empty = empty;
  out->split = false;
  out->limits = nullptr;
  out->shared_bytes = 0;
}

// The grid and block against the device's limits; sets `out->split` when the grid takes more
// than one vendor launch.
void CheckLimits(const KernelSignature& sig, const DeviceLimits& limits, BoundLaunch* out) {
  const DLDevice device = out->device;
  const int64_t* grid = out->grid;
  const int64_t* block = out->block;
  static const char kAxis[3] = {'x', 'y', 'z'};
  bool split = false;
  for (int d = 0; d < 3; ++d) {
    if (limits.grid[d] > 0 && grid[d] > limits.grid[d]) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           sig.Describe() + ": " + std::to_string(grid[d]) + " blocks on grid axis " + kAxis[d] +
               " (blockIdx." + kAxis[d] + ") is more than " + DeviceString(device) + " allows (" +
               std::to_string(limits.grid[d]) +
               "); split the work over several launches, or bind the larger extent to "
               "blockIdx.x (up to " +
               std::to_string(limits.grid[0]) + ")");
    }
    if (limits.grid_per_launch[d] > 0 && grid[d] > limits.grid_per_launch[d]) split = true;
    if (limits.block[d] > 0 && block[d] > limits.block[d]) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           sig.Describe() + ": " + std::to_string(block[d]) + " threads on block axis " + kAxis[d] +
               " (threadIdx." + kAxis[d] + ") is more than " + DeviceString(device) + " allows (" +
               std::to_string(limits.block[d]) + "); use smaller blocks");
    }
  }
  out->split = split;
  const uint64_t threads = static_cast<uint64_t>(block[0]) * static_cast<uint64_t>(block[1]) *
                           static_cast<uint64_t>(block[2]);
  if (limits.threads_per_block > 0 && threads > static_cast<uint64_t>(limits.threads_per_block)) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         sig.Describe() + ": a block of " + std::to_string(block[0]) + " x " +
             std::to_string(block[1]) + " x " + std::to_string(block[2]) + " = " +
             std::to_string(threads) + " threads is more than " + DeviceString(device) +
             " allows (" + std::to_string(limits.threads_per_block) + "); use smaller blocks");
  }
}

// The shared arrays' sizes for this call: all of them on a cold call or when some are sized
// at launch (BindShared); else the constant sizes are in place and only the total is checked.
void BindSharedSizes(const KernelSignature& sig, const DeviceLimits& limits, bool warm,
                     BoundLaunch* out) {
  if (!warm) out->shared_elements.assign(sig.shared().size(), 0);
  if (sig.num_launch_sized() > 0 || !warm) {
    BindShared(sig, out->device, limits, out);
    return;
  }
  // Only constant-sized arrays, their sizes already in place: BindShared's last check.
  const uint64_t end = sig.static_shared_bytes();
  if (limits.shared_per_block > 0 && end > static_cast<uint64_t>(limits.shared_per_block)) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         sig.Describe() + ": its shared arrays take " + std::to_string(end) +
             " bytes, more than a block of " + DeviceString(out->device) + " has (" +
             std::to_string(limits.shared_per_block) + "); use smaller tiles");
  }
  out->shared_bytes = end;
}

// Scalars converted to their params' kinds (nothing to check: ir::ArgCheck did).
void ConvertScalars(const KernelSignature& sig, BoundLaunch* out) {
  const ir::ArgView* checked = out->views.data();
  ScalarArg* scalars = out->scalars.data();
  for (size_t i = 0; i < sig.num_params(); ++i) {
    if (sig.param(i) != ParamKind::kBuffer) ConvertScalar(sig.param(i), checked[i], &scalars[i]);
  }
}

// Buffers: each inside its allocation, the written ones writable and aliasing no other.
void BindBuffers(const KernelSignature& sig, const bp_value_t* values, Backend& backend,
                 BoundLaunch* out) {
  const DLDevice device = out->device;
  BufferArg* buffers = out->buffers.data();
  for (const uint32_t i : sig.buffer_params()) {
    BufferArg& b = buffers[i];
    b.span = SpanBytes(*b.tensor);
    if (b.span == 0) continue;
    if (b.handle == nullptr) {
      Fail(BP_ERR_INVALID_ARGUMENT, sig.Describe() + ": " + ArgText(sig, i) +
                                        " has no data; allocate it on the device first");
    }
    try {
      // Constructed in place (no temporary copied over): the copy's wide load of what Find
      // just stored narrow stalled on every buffer of every call.
      new (&b.where) Allocation(backend.Find(device, b.handle));
    } catch (const Error& e) {
      Fail(e.kind(), sig.Describe() + ": " + ArgText(sig, i) + ": " + e.what());
    }
    const uint64_t at = b.where.offset + b.byte_offset;
    if (at < b.byte_offset || at > b.where.size || b.span > b.where.size - at) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           sig.Describe() + ": " + ArgText(sig, i) + " spans bytes [" + std::to_string(at) + ", " +
               std::to_string(at + b.span) + ") of a " + std::to_string(b.where.size) +
               "-byte buffer on " + DeviceString(device) + "; pass a tensor inside it");
    }
  }
  for (const uint32_t i : sig.written_params()) {
    sdk::CheckWritable(sig.func(), values[i], i, sig.who().c_str());
  }
  CheckWrittenApart(sig.who().c_str(), "kernel", sig.func(), sig.written_params(),
                    sig.buffer_params(), [buffers](uint32_t i) {
                      const BufferArg& b = buffers[i];
                      const uint64_t at = b.where.offset + b.byte_offset;
                      return ByteRange{b.where.id, at, at + b.span};
                    });
}

}  // namespace

void Bind(const KernelSignature& sig, PackedArgs args, int32_t device_type, Backend& backend,
          BoundLaunch* out) {
  CheckArity(sig, args);
  // A warm call of the kernel the BoundLaunch was last bound for finds its vectors sized and
  // the constant shared sizes in place.
  const bool warm = out->bound_serial == sig.serial();
  if (!warm) {
    out->bound_serial = 0;  // until the vectors below are what sig needs
    out->views.resize(sig.num_params());
    out->buffers.resize(sig.num_params());
    out->scalars.resize(sig.num_params());
  }
  const bp_value_t* values = sig.num_params() > 0 ? &args[0] : nullptr;  // arity checked
  BindValues(sig, values, device_type, out);
  BindExtents(sig, args, out);
  if (out->empty) {  // nothing runs: nothing else to check
    out->shared_elements.assign(sig.shared().size(), 0);
    out->bound_serial = 0;  // the constant shared sizes are zeros now
    return;
  }
  const DeviceLimits* limits = &backend.Limits(out->device);
  out->limits = limits;
  CheckLimits(sig, *limits, out);
  BindSharedSizes(sig, *limits, warm, out);
  ConvertScalars(sig, out);
  BindBuffers(sig, values, backend, out);
  out->bound_serial = sig.serial();
}

}  // namespace launch
}  // namespace backplane
