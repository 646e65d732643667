// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <backplane/ir/text.hpp>
#include <backplane/runner/runner.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace backplane {
namespace runner {

namespace {

DLDataType ToDL(ir::DType t) { return DLDataType{static_cast<uint8_t>(t.code), t.bits, t.lanes}; }

size_t ElementBytes(ir::DType t) { return static_cast<size_t>((t.bits + 7) / 8) * t.lanes; }

template <typename T>
void Pack(const std::vector<double>& in, std::vector<uint8_t>* out) {
  out->resize(in.size() * sizeof(T));
  for (size_t i = 0; i < in.size(); ++i) {
    T v = static_cast<T>(in[i]);
    std::memcpy(out->data() + i * sizeof(T), &v, sizeof(T));
  }
}
template <typename T>
void Unpack(const std::vector<uint8_t>& in, std::vector<double>* out) {
  out->resize(in.size() / sizeof(T));
  for (size_t i = 0; i < out->size(); ++i) {
    T v;
    std::memcpy(&v, in.data() + i * sizeof(T), sizeof(T));
    (*out)[i] = static_cast<double>(v);
  }
}

// Calls `fn(tag)` with a value of the C++ type of dtype `t`.
template <typename Fn>
void Dispatch(ir::DType t, Fn fn) {
  const std::string name = ir::ToString(t);
  if (t.is_float() && t.bits == 32) return fn(float{});
  if (t.is_float() && t.bits == 64) return fn(double{});
  if (t.is_int() && t.bits == 8) return fn(int8_t{});
  if (t.is_int() && t.bits == 16) return fn(int16_t{});
  if (t.is_int() && t.bits == 32) return fn(int32_t{});
  if (t.is_int() && t.bits == 64) return fn(int64_t{});
  if ((t.is_uint() || t.is_bool()) && t.bits == 8) return fn(uint8_t{});
  if (t.is_uint() && t.bits == 16) return fn(uint16_t{});
  if (t.is_uint() && t.bits == 32) return fn(uint32_t{});
  if (t.is_uint() && t.bits == 64) return fn(uint64_t{});
  throw Error(BP_ERR_UNSUPPORTED, "the kernel runner has no host conversion for dtype " + name);
}

}  // namespace

DeviceArgs::DeviceArgs(const std::vector<kernels::Arg>& args, Device dev) {
  tensors_.resize(args.size());
  values_.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const kernels::Arg& a = args[i];
    bp_value_t& v = values_[i];
    v.reserved0 = 0;
    if (!a.is_buffer) {
      if (a.dtype.is_float()) {
        v.type = BP_VALUE_FLOAT;
        v.u.v_float64 = a.scalar;
      } else {
        v.type = BP_VALUE_INT;
        v.u.v_int64 = static_cast<int64_t>(a.scalar);
      }
      continue;
    }
    std::vector<uint8_t> bytes;
    Dispatch(a.dtype, [&](auto tag) { Pack<decltype(tag)>(a.data, &bytes); });
    tensors_[i] = Tensor::Empty(a.shape, ToDL(a.dtype), dev);
    if (!bytes.empty()) tensors_[i].CopyFromBytes(bytes.data(), bytes.size());
    v.type = BP_VALUE_TENSOR;
    v.u.v_tensor = tensors_[i].dl();
  }
}

void DeviceArgs::Download(std::vector<kernels::Arg>* args) const {
  for (size_t i = 0; i < args->size(); ++i) {
    kernels::Arg& a = (*args)[i];
    if (!a.is_buffer || !a.is_output) continue;
    std::vector<uint8_t> bytes(a.data.size() * ElementBytes(a.dtype));
    if (!bytes.empty()) tensors_[i].CopyToBytes(bytes.data(), bytes.size());
    Dispatch(a.dtype, [&](auto tag) { Unpack<decltype(tag)>(bytes, &a.data); });
  }
}

kernels::DeviceTraits DeviceTraitsOf(Device dev) {
  kernels::DeviceTraits t;
  t.type = dev.TypeName();
  // An attribute the device cannot answer (or answers with another type) stays unknown: the
  // choice then falls to the base variant rather than failing the run.
  try {
    const Any kind = DeviceAPI::Get(dev).GetAttr(BP_ATTR_DEVICE_KIND);
    if (!kind.is_none()) t.kind = kind.AsString();
  } catch (const Error&) {
    bp_error_clear();
  }
  try {
    const Any warp = DeviceAPI::Get(dev).GetAttr(BP_ATTR_WARP_SIZE);
    if (!warp.is_none()) t.warp = warp.AsInt();
  } catch (const Error&) {
    bp_error_clear();
  }
  return t;
}

const kernels::Case* ChooseVariant(const kernels::Case& c, Device dev) {
  if (c.variants.empty()) return &c;
  return kernels::ChooseVariant(c, DeviceTraitsOf(dev));
}

kernels::Dims DimsForDevice(const kernels::Case& c, Device dev, kernels::Dims dims) {
  if (!c.grid_param.empty() && dims.count(c.grid_param) == 0) {
    // Blocks for a grid-wide kernel (Case::grid_param): several a multiprocessor.
    const Any warp = DeviceAPI::Get(dev).GetAttr(BP_ATTR_WARP_SIZE);
    const Any units = DeviceAPI::Get(dev).GetAttr(BP_ATTR_MULTI_PROCESSOR_COUNT);
    const bool gpu = !warp.is_none() && warp.AsInt() >= 32;
    const int64_t n = units.is_none() ? 0 : std::min<int64_t>(units.AsInt(), 1 << 16);
    dims[c.grid_param] = gpu ? (n > 0 ? 8 * n : 1024) : (n > 0 ? n : 64);
  }
  if (c.block_param.empty() || dims.count(c.block_param) != 0) return dims;
  int64_t block = kernels::kDefaultBlock;
  const Any warp = DeviceAPI::Get(dev).GetAttr(BP_ATTR_WARP_SIZE);
  if (!warp.is_none() && warp.AsInt() > 0) block = warp.AsInt();
  // A GPU's warp (32 lanes or more) takes the case's block_warps; a CPU's SIMD width one. (A
  // warp so wide that the product overflows stays one warp; the block limit below caps it.)
  int64_t warps_block = 0;
  if (block >= 32 &&
      !__builtin_mul_overflow(block, std::max<int64_t>(c.block_warps, 1), &warps_block)) {
    block = warps_block;
  }
  const Any most = DeviceAPI::Get(dev).GetAttr(BP_ATTR_MAX_THREADS_PER_BLOCK);
  if (!most.is_none() && most.AsInt() > 0) block = std::min(block, most.AsInt());
  dims[c.block_param] = block;
  return dims;
}

Result RunCase(const kernels::Case& c, const Module& m, Device dev, const kernels::Dims& dims,
               int repeats, uint64_t seed) {
  Result r;
  try {
    std::vector<kernels::Arg> args = c.make_args(DimsForDevice(c, dev, dims), seed);
    std::vector<kernels::Arg> want = args;
    c.reference(want);
    DeviceArgs device_args(args, dev);
    const auto first = std::chrono::steady_clock::now();
    Function f = m.GetFunction(c.func);
    const auto& values = device_args.values();
    auto call = [&] {
      f.CallPacked(values.data(), static_cast<int32_t>(values.size()));
      Check(detail::Api()->device_stream_sync(dev.dl, nullptr));
    };
    call();
    r.first_call_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - first).count();
    device_args.Download(&args);
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].is_output) continue;
      const double e = kernels::RelativeError(args[i], want[i]);
      r.max_error = std::max(r.max_error, std::isnan(e) ? INFINITY : e);
    }
    r.ok = r.max_error <= c.tolerance;
    if (!r.ok) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "relative error %.3g exceeds the tolerance %.3g", r.max_error,
                    c.tolerance);
      r.error = buf;
    }
    // Timed runs: a kernel that modifies its input in place (saxpy) keeps running on what it
    // wrote; the time is what matters here, the check above is done.
    std::vector<double> times;
    for (int i = 0; i < std::max(1, repeats); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      call();
      auto t1 = std::chrono::steady_clock::now();
      times.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    r.times = times;
    std::sort(times.begin(), times.end());
    r.seconds = times[times.size() / 2];
    if (r.seconds > 0) {
      const double flops = c.flops ? c.flops(args) : 0;
      const double bytes = c.bytes ? c.bytes(args) : 0;
      r.gflops = flops / r.seconds / 1e9;
      r.gbytes_per_s = bytes / r.seconds / 1e9;
    }
  } catch (const std::exception& e) {
    r.ok = false;
    r.error = e.what();
  }
  return r;
}

std::string KernelSource(const kernels::Case& c) {
  ir::IRModule file = ir::Parse(kernels::ReadKernelFile(c.file), c.file);
  const ir::PrimFunc* f = file.Find(c.func);
  if (f == nullptr) {
    throw Error(BP_ERR_NOT_FOUND, "kernel file " + c.file + " has no function '" + c.func + "'");
  }
  ir::IRModule one;
  one.Add(*f);
  return ir::Print(one);
}

std::string FormatSeconds(double s) {
  char buf[32];
  if (s >= 1) {
    std::snprintf(buf, sizeof(buf), "%.2f s", s);
  } else if (s >= 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.2f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f us", s * 1e6);
  }
  return buf;
}

}  // namespace runner
}  // namespace backplane
