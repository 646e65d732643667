// SPDX-License-Identifier: Apache-2.0
// The launch kit: the one path from a kernel call (the packed arguments bp_build's host code
// passes) to what a backend hands its vendor's launch call. A plugin keeps only the vendor
// calls; binding, checking and decoding are done here, the same way for every backend
// (docs/plugin-guide.md, "Launching kernels").
//
//   // once per kernel, when the module is made or loaded:
//   launch::KernelSignature sig(func, "cuda");
//   // per call:
//   thread_local launch::BoundLaunch b;          // reused: no allocation after the first call
//   launch::Bind(sig, args, device_type, backend, &b);
//   if (b.empty) return;                          // an extent is 0: nothing runs
//   for (size_t i = 0; i < sig.num_params(); ++i)
//     if (sig.param(i) == launch::ParamKind::kBuffer) use(b.buffer(i).handle,
//     b.buffer(i).byte_offset); else use(&b.scalar(i));                     // the value, converted
//     to the param's type
//   if (!b.split) vendor_launch(b.grid, b.block, ...);     // one launch: the common case
//   else ForEachGridPart(b, [&](const GridPart& p) {  // a grid larger than one launch
//     vendor_launch(p.grid, b.block, p.offset, ...);           // the kernel adds p.offset to
//   });                                                        // its block index
//
// What Bind guarantees when it returns (else it throws Error(BP_ERR_INVALID_ARGUMENT or
// BP_ERR_TYPE) naming the kernel, the argument and what to do):
//   - one value per parameter, then one int64 extent per launch axis;
//   - each value fits its parameter (ir::CheckArgs: dtypes, ranks, shapes and strides against
//     the scalar parameters they name);
//   - every buffer is a tensor on a device of `device_type`, all on one device: the device the
//     kernel runs on (a kernel without buffers runs on device 0 of the type);
//   - each buffer's bytes [byte_offset, byte_offset + span) lie inside the live allocation its
//     handle names (Backend::Find), and a buffer the kernel writes overlaps no other buffer
//     argument (a kernel's buffers may not alias);
//   - every extent is >= 0, within what the loop variable bound to its axis can count (its
//     dtype), and within the device's limits (Backend::Limits), and the threads of one block
//     within its limit per block;
//   - `split` says whether the grid is larger than one vendor launch takes
//     (DeviceLimits::grid_per_launch), so the backend launches it in parts (ForEachGridPart);
//   - every shared allocation has its size for this call (`shared_elements`: a launch-sized
//     one's shape evaluated from the arguments, >= 0, without overflow), and the kernel's
//     shared memory in all (`shared_bytes`, laid out as SharedArray says) is within the
//     device's DeviceLimits::shared_per_block.
// Handles are never offset: a buffer reaches the plugin as the tensor's `data` (the handle its
// DeviceAPI's AllocDataSpace returned) plus the tensor's byte offset, so opaque handles work
// as well as addresses.
//
// Needs Backplane::ir; link Backplane::launch (a static library whose symbols stay private to
// the plugin that links it).
#ifndef BACKPLANE_LAUNCH_LAUNCH_HPP_
#define BACKPLANE_LAUNCH_LAUNCH_HPP_

#include <backplane/backplane.hpp>
#include <backplane/ir/ir.hpp>
#include <backplane/ir/signature.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace backplane {
namespace launch {

// How a parameter reaches the kernel, from its IR dtype.
enum class ParamKind : uint8_t {
  kBuffer,
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kFloat32,
  kFloat64,
};
// "buffer", "bool", "int8", ..., "float64".
const char* ToString(ParamKind kind);

// A launch axis: blockIdx.{x,y,z} (a grid axis) or threadIdx.{x,y,z} (a block axis).
struct Axis {
  bool block = true;  // blockIdx (grid) rather than threadIdx
  int dim = 0;        // 0, 1, 2 for x, y, z
  ir::ThreadTag tag = ir::ThreadTag::kBlockIdxX;
  // The largest extent the loop variable bound to the axis can count: its dtype's maximum (the
  // smallest of them where several loops bind the axis), INT64_MAX for int64 and uint64.
  int64_t max_extent = INT64_MAX;
  std::string var_type = "int64";  // that variable's dtype, for messages
};

// Shared memory is laid out the same way by every backend that puts a kernel's shared arrays
// in one region (cuda): each array starts at a multiple of kSharedAlign bytes; the arrays
// sized when the kernel was built come first, in the order of their statements, then those
// sized at launch, in that order.
constexpr uint64_t kSharedAlign = 16;

// A `shared` allocation of a kernel, in the order its statements come (pre-order). Its shape
// is either numbers (its size is known when the kernel is built) or expressions over the
// kernel's scalar parameters (docs/ir.md, "Shared memory sized at launch"): the launch kit
// evaluates them at each call.
struct SharedArray {
  const ir::AllocateNode* alloc = nullptr;
  uint64_t elem_bytes = 1;  // bytes an element takes (its dtype's, lanes included)
  int64_t elements = -1;    // the constant element count, or -1: sized at launch
  uint64_t offset = 0;      // where a constant-sized array starts (the layout above)
  // Index among the launch-sized arrays (0, 1, ...), or -1 for a constant-sized one: the
  // specialization constant id (vulkan) or the extra __local argument (opencl).
  int launch_index = -1;
  bool at_launch() const { return elements < 0; }
};

// What a launch needs of one kernel, made once: the parameters' kinds, the launch axes (the
// function's launch_axes, the text form's attribute launch_params), which buffers it writes,
// and what checking a call costs, its shared arrays. `who` names the backend in messages
// ("cuda"). Throws ir::Error (kValue) when `func` is not a kernel (no launch_axes, an axis
// listed twice, a parameter type no kernel can take, a shared array sized by anything but its
// scalar parameters).
class KernelSignature {
 public:
  KernelSignature(const ir::PrimFunc& func, std::string who);

  const ir::PrimFunc& func() const { return *func_; }
  const std::string& name() const { return func_->name; }
  const std::string& who() const { return who_; }
  size_t num_params() const { return params_.size(); }
  ParamKind param(size_t i) const { return params_[i]; }
  const std::vector<ParamKind>& params() const { return params_; }
  const std::vector<Axis>& axes() const { return axes_; }
  bool written(size_t i) const { return written_[i]; }
  // The argument check of every call, prepared once.
  const ir::ArgCheck& check() const { return check_; }
  // Its shared arrays (above), and the bytes the constant-sized ones take in the layout.
  const std::vector<SharedArray>& shared() const { return shared_; }
  uint64_t static_shared_bytes() const { return static_shared_bytes_; }
  size_t num_launch_sized() const { return num_launch_sized_; }
  // The index in shared() of the array `alloc` allocates, or -1.
  int SharedIndex(const ir::AllocateNode* alloc) const;
  // The kernel as messages name it: "<who> kernel '<name>'".
  std::string Describe() const;

  // What Bind walks on every call, prepared here so that a call does not search for it: the
  // indices of the buffer params, and of those the kernel writes, in param order.
  const std::vector<uint32_t>& buffer_params() const { return buffer_params_; }
  const std::vector<uint32_t>& written_params() const { return written_params_; }
  // A number no other KernelSignature of the process has: a BoundLaunch remembers the
  // signature it was last bound for by it (an address may be reused by a later signature).
  uint64_t serial() const { return serial_; }

 private:
  const ir::PrimFunc* func_;
  std::string who_;
  std::vector<ParamKind> params_;
  std::vector<Axis> axes_;
  std::vector<bool> written_;
  ir::ArgCheck check_;
  std::vector<SharedArray> shared_;
  uint64_t static_shared_bytes_ = 0;
  size_t num_launch_sized_ = 0;
  std::vector<uint32_t> buffer_params_;
  std::vector<uint32_t> written_params_;
  uint64_t serial_ = 0;
};

// The device's launch limits (0 or less: no limit on that axis).
struct DeviceLimits {
  // Blocks per grid axis a kernel call may have in all (Bind refuses more).
  int64_t grid[3] = {0, 0, 0};
  int64_t block[3] = {0, 0, 0};  // threads per block axis
  int64_t threads_per_block = 0;
  // Blocks per grid axis one vendor launch takes, where the backend launches a larger grid in
  // parts, each with the offset of its first block (ForEachGridPart); 0 or less: as many as
  // `grid` (a call is never split on that axis). CUDA: MAX_GRID_DIM_* (2^31-1, 65535, 65535),
  // with `grid` what the kernel's block index plus offset counts.
  int64_t grid_per_launch[3] = {0, 0, 0};
  // Bytes of shared memory a block may have, the kernel's own arrays and those sized at
  // launch together (0 or less: no limit).
  int64_t shared_per_block = 0;
};

// One part of a grid launched in parts: the blocks it launches per axis, and the index of its
// first block per axis (the kernel adds it to its block index, so the parts together run
// every block of the whole grid once).
struct GridPart {
  int64_t grid[3] = {1, 1, 1};
  int64_t offset[3] = {0, 0, 0};
};

// Where a handle lies: the allocation holding it. `id` is the same for every handle into one
// allocation (the alias check compares it); `offset` is where the handle points inside it
// (0 for an opaque handle naming a whole buffer); `size` its size in bytes.
struct Allocation {
  const void* id = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// What the kit asks of the backend's memory and device.
class Backend {
 public:
  // The allocation that `handle` (a tensor's data) names on `dev`; throws Error
  // (BP_ERR_INVALID_ARGUMENT) saying why when it is not live memory of `dev` (the kit puts the
  // kernel and the argument in front of the message).
  virtual Allocation Find(DLDevice dev, void* handle) = 0;
  // `dev`'s limits (queried once and kept, by the backend).
  virtual const DeviceLimits& Limits(DLDevice dev) = 0;

 protected:
  ~Backend() = default;
};

// A buffer argument: the handle (the tensor's data, unchanged), the byte offset into it (the
// tensor's), how many bytes from there the tensor spans, and the tensor.
struct BufferArg {
  void* handle = nullptr;
  uint64_t byte_offset = 0;
  uint64_t span = 0;
  const DLTensor* tensor = nullptr;
  Allocation where;  // Backend::Find's answer (size 0 when span is 0 and nothing was asked)
};

// A scalar argument converted to its parameter's kind; `bytes` is how many of `raw` the
// kernel takes (1, 2, 4 or 8). Pass &ScalarArg::raw (or the member of the kind).
struct ScalarArg {
  union {
    uint64_t raw;
    bool b;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    uint16_t f16;  // IEEE binary16 bits
    float f32;
    double f64;
  };
  uint32_t bytes = 0;
  ScalarArg() : raw(0) {}
};

// One bound call. Keep one per thread and pass it to every Bind: its vectors keep their
// capacity, so a launch allocates nothing once warm.
struct BoundLaunch {
  DLDevice device{kDLCPU, 0};
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  bool empty = false;  // an extent is 0: the launch does nothing
  bool split = false;  // the grid is larger than one vendor launch takes: use ForEachGridPart
  // The device's limits the call was checked against (what Backend::Limits returned); null
  // when `empty`. Read it only for the launch it was bound for: a BoundLaunch kept per thread
  // outlives the backend and the module that made it.
  const DeviceLimits* limits = nullptr;
  std::vector<ir::ArgView> views;  // per param, as ir::CheckArgs saw them
  std::vector<BufferArg> buffers;  // per param (meaningful for buffers)
  std::vector<ScalarArg> scalars;  // per param (meaningful for scalars)
  // Per shared array of the signature: its element count for this call (a constant-sized
  // one's constant), and the bytes of the whole layout (SharedArray); both 0-filled when
  // `empty`.
  std::vector<uint64_t> shared_elements;
  uint64_t shared_bytes = 0;
  const BufferArg& buffer(size_t i) const { return buffers[i]; }
  const ScalarArg& scalar(size_t i) const { return scalars[i]; }
  // Bind's own: the serial() of the signature whose sizes and constant shared_elements the
  // vectors above hold (0: none), so a warm call of the same kernel does not refill them.
  uint64_t bound_serial = 0;
};

// Binds and checks one call of the kernel (see the top of this file). `device_type` is the
// backend's device type; `out` is overwritten.
void Bind(const KernelSignature& sig, PackedArgs args, int32_t device_type, Backend& backend,
          BoundLaunch* out);

// Calls `visit(const GridPart&)` for each part of `b`'s grid (a call Bind checked, not empty)
// when one vendor launch takes at most `b.limits->grid_per_launch` blocks per axis: x fastest,
// then y, then z; each part as large as a launch takes, the last on an axis what is left. One
// part (the whole grid, offsets 0) when it fits. Offsets and sizes are int64 and never
// overflow (each offset plus its part's size is at most the grid's extent). An exception from
// `visit` stops the walk.
template <typename Visit>
void ForEachGridPart(const BoundLaunch& b, Visit&& visit) {
  int64_t most[3];
  for (int d = 0; d < 3; ++d) {
    const int64_t per_launch = b.limits != nullptr ? b.limits->grid_per_launch[d] : 0;
    most[d] = per_launch > 0 ? per_launch : b.grid[d];
  }
  GridPart p;
  for (int64_t z = 0; z < b.grid[2]; z += p.grid[2]) {
    p.offset[2] = z;
    p.grid[2] = b.grid[2] - z < most[2] ? b.grid[2] - z : most[2];
    for (int64_t y = 0; y < b.grid[1]; y += p.grid[1]) {
      p.offset[1] = y;
      p.grid[1] = b.grid[1] - y < most[1] ? b.grid[1] - y : most[1];
      for (int64_t x = 0; x < b.grid[0]; x += p.grid[0]) {
        p.offset[0] = x;
        p.grid[0] = b.grid[0] - x < most[0] ? b.grid[0] - x : most[0];
        visit(static_cast<const GridPart&>(p));
      }
    }
  }
}

// The bytes one buffer argument covers, for the written-buffer check below: [begin, end) inside
// the memory `memory` names (one id per allocation; host memory: nullptr, with addresses).
// begin == end: it covers nothing.
struct ByteRange {
  const void* memory = nullptr;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Throws Error (BP_ERR_INVALID_ARGUMENT) naming both arguments: written buffer `written` of
// `func` overlaps buffer argument `other`. `who` and `noun` name the function as messages do
// ("cuda", "kernel": "cuda kernel 'f'").
[[noreturn]] void FailOverlap(const char* who, const char* noun, const ir::PrimFunc& func,
                              uint32_t written, uint32_t other);

// The check every backend makes of a call's buffers: generated code takes them as restrict
// (non-aliasing) pointers, so no buffer the function writes may overlap another buffer
// argument. `written` and `buffers` are param indices (KernelSignature's written_params and
// buffer_params); `range(i)` is param i's ByteRange. Throws as FailOverlap.
template <typename RangeOf>
void CheckWrittenApart(const char* who, const char* noun, const ir::PrimFunc& func,
                       const std::vector<uint32_t>& written, const std::vector<uint32_t>& buffers,
                       RangeOf&& range) {
  for (const uint32_t i : written) {
    const ByteRange a = range(i);
    if (a.begin == a.end) continue;
    for (const uint32_t j : buffers) {
      if (j == i) continue;
      const ByteRange b = range(j);
      if (b.begin == b.end || b.memory != a.memory) continue;
      if (a.begin < b.end && b.begin < a.end) FailOverlap(who, noun, func, i, j);
    }
  }
}

// The bytes a tensor spans from its data + byte_offset: its elements and the gaps its strides
// leave (0 when an extent is 0). Throws Error (BP_ERR_INVALID_ARGUMENT) when that overflows.
uint64_t SpanBytes(const DLTensor& t);

}  // namespace launch
}  // namespace backplane

#endif  // BACKPLANE_LAUNCH_LAUNCH_HPP_
