// SPDX-License-Identifier: Apache-2.0
// Running an IR kernel through bp_build on each kind here and comparing its buffers with the IR
// interpreter's, bit for bit (deep_ir_test, ir_language_test).
#ifndef BACKPLANE_TESTS_PLUGINS_IR_RUN_UTIL_H_
#define BACKPLANE_TESTS_PLUGINS_IR_RUN_UTIL_H_

#include <stdio.h>
#include <stdlib.h>

#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "test_util.h"

namespace irtest {

namespace ir = backplane::ir;
using backplane::Device;
using backplane::Function;
using backplane::Module;
using backplane::Target;
using backplane::Tensor;

inline const DLDataType kF32{kDLFloat, 32, 1};
inline const DLDataType kI32{kDLInt, 32, 1};

inline const int kValidationOn = setenv("BACKPLANE_VULKAN_VALIDATION", "1", /*overwrite=*/0);

// The plugins pick their cache folder once per process: one scratch folder for all tests.
inline void UseScratchCache() {
  static bptest::ScratchDir dir;
  setenv("XDG_CACHE_HOME", dir.path().c_str(), 1);
}

// ---- Running them -------------------------------------------------------------------------

// A buffer argument: its dtype and elements (float32, float64, int32 or int64), read back after
// a call.
struct Buf {
  DLDataType dtype;
  std::vector<uint32_t> bits;  // the elements' bits (two words an int64)
  std::vector<int64_t> shape;  // empty: 1-D, Elements() long
  int64_t Elements() const { return static_cast<int64_t>(bits.size() * 32 / dtype.bits); }
  std::vector<int64_t> Shape() const {
    return shape.empty() ? std::vector<int64_t>{Elements()} : shape;
  }
  ir::DType IrType() const {
    if (dtype.code == kDLFloat) return dtype.bits == 64 ? ir::Float64() : ir::Float32();
    return dtype.code == kDLUInt ? ir::UInt(dtype.bits) : ir::Int(dtype.bits);
  }
};
inline Buf Floats(const std::vector<float>& v) {
  Buf b{kF32, std::vector<uint32_t>(v.size()), {}};
  std::memcpy(b.bits.data(), v.data(), v.size() * 4);
  return b;
}
inline Buf Ints(const std::vector<int32_t>& v) {
  Buf b{kI32, std::vector<uint32_t>(v.size()), {}};
  std::memcpy(b.bits.data(), v.data(), v.size() * 4);
  return b;
}
inline Buf Doubles(const std::vector<double>& v) {
  Buf b{DLDataType{kDLFloat, 64, 1}, std::vector<uint32_t>(v.size() * 2), {}};
  std::memcpy(b.bits.data(), v.data(), v.size() * 8);
  return b;
}
inline Buf Longs(const std::vector<int64_t>& v) {
  Buf b{DLDataType{kDLInt, 64, 1}, std::vector<uint32_t>(v.size() * 2), {}};
  std::memcpy(b.bits.data(), v.data(), v.size() * 8);
  return b;
}

// Whether this build has the code generator of `kind`.
inline bool HasKind(const std::string& kind) {
  try {
    Function::Get("target.build." + kind);
    return true;
  } catch (const backplane::Error&) {
    return false;
  }
}

// The device the kernels of `kind` run on here; false when there is none.
inline bool DeviceOf(const std::string& kind, Device* dev) {
  const DLDevice d = kind == "c"        ? DLDevice{kDLCPU, 0}
                     : kind == "opencl" ? DLDevice{kDLOpenCL, 0}
                     : kind == "vulkan" ? DLDevice{kDLVulkan, 0}
                                        : DLDevice{kDLCUDA, 0};
  try {
    if (!backplane::DeviceAPI::Get(Device(d)).Exists()) return false;
  } catch (const backplane::Error&) {
    return false;
  }
  *dev = Device(d);
  return true;
}

// Calls `func` of `m` on `dev` with `args` (every param a buffer) and reads them back.
// Calls `func` of `m` on `dev`: the int scalars `ints` first, then `args` as 1-D tensors;
// returns `args` with what the call left in them.
inline std::vector<Buf> Call(const Module& m, const std::string& func, Device dev,
                             std::vector<Buf> args, const std::vector<int64_t>& ints = {}) {
  std::vector<Tensor> tensors;
  std::vector<bp_value_t> values;
  for (int64_t i : ints) {
    bp_value_t v{};
    v.type = BP_VALUE_INT;
    v.u.v_int64 = i;
    values.push_back(v);
  }
  for (const Buf& b : args) {
    tensors.push_back(Tensor::Empty(b.Shape(), b.dtype, dev));
    tensors.back().CopyFromBytes(b.bits.data(), b.bits.size() * 4);
  }
  for (const Tensor& t : tensors) {
    bp_value_t v{};
    v.type = BP_VALUE_TENSOR;
    v.u.v_tensor = t.dl();
    values.push_back(v);
  }
  m.GetFunction(func).CallPacked(values.data(), static_cast<int32_t>(values.size()));
  for (size_t k = 0; k < args.size(); ++k) {
    tensors[k].CopyToBytes(args[k].bits.data(), args[k].bits.size() * 4);
  }
  return args;
}

// The interpreter's result for the same call.
inline std::vector<Buf> Interpret(const ir::IRModule& module, const std::string& func,
                                  std::vector<Buf> args) {
  std::vector<std::vector<int64_t>> shapes;
  shapes.reserve(args.size());
  std::vector<ir::ArgView> views;
  for (Buf& b : args) {
    shapes.push_back(b.Shape());
    views.push_back(ir::BufferArg(b.bits.data(), b.IrType(), static_cast<int>(shapes.back().size()),
                                  shapes.back().data()));
  }
  ir::Interpreter(module).Run(func, views);
  return args;
}

// Expects `got` to hold `want`'s elements bit for bit, but any NaN matches any NaN: docs/ir.md
// leaves a NaN's sign (and payload) to the hardware, as the conformance kit does (NVIDIA's
// Vulkan driver makes 0x7fffffff).
inline void ExpectSameBits(const std::vector<Buf>& got, const std::vector<Buf>& want) {
  for (size_t k = 0; k < want.size(); ++k) {
    size_t wrong = 0, first = 0;
    const bool is_float = want[k].dtype.code == kDLFloat;
    const size_t words = is_float && want[k].dtype.bits == 64 ? 2 : 1;
    auto is_nan = [&](const uint32_t* p) {
      if (!is_float) return false;
      if (words == 1) return (p[0] & 0x7fffffffu) > 0x7f800000u;
      // little-endian: p[1] holds the sign and exponent
      return (p[1] & 0x7fffffffu) > 0x7ff00000u ||
             ((p[1] & 0x7fffffffu) == 0x7ff00000u && p[0] != 0u);
    };
    for (size_t i = 0; i < want[k].bits.size(); i += words) {
      bool same = true;
      for (size_t w = 0; w < words; ++w) same = same && got[k].bits[i + w] == want[k].bits[i + w];
      if (!same) same = is_nan(&got[k].bits[i]) && is_nan(&want[k].bits[i]);
      if (!same && wrong++ == 0) first = i / words;
    }
    EXPECT_EQ(wrong, 0u) << "buffer " << k << ": " << wrong << " elements differ from the "
                         << "interpreter's, the first at " << first;
  }
}

// A call: the function, its arguments, the Target's options after its kind.
struct Case {
  std::string func;
  std::vector<Buf> args;
  std::string options;  // " -bounds-check"
};

// Builds `text` for `kind`, runs the call on the kind's device and expects the interpreter's
// results (on `reference_text` when given) bit for bit. Returns the module; nothing when this
// build has no such code generator or this machine no such device.
inline std::optional<Module> ExpectTheInterpretersResults(const std::string& kind,
                                                          const std::string& text, const Case& c,
                                                          const std::string& reference_text = "") {
  Device dev(DLDevice{kDLCPU, 0});
  if (!HasKind(kind) || !DeviceOf(kind, &dev)) {
    std::cout << "[ SKIPPED  ] " << kind << ": no code generator or no device here\n";
    return std::nullopt;
  }
  SCOPED_TRACE(kind + c.options);
  Module m = backplane::Build(text, Target::Parse(kind + c.options));
  const std::vector<Buf> got = Call(m, c.func, dev, c.args);
  const std::vector<Buf> want =
      Interpret(ir::Parse(reference_text.empty() ? text : reference_text), c.func, c.args);
  ExpectSameBits(got, want);
  if (kind == "vulkan") {
    const int64_t errors = Function::Get("vulkan.validation_errors")().AsInt();
    if (errors >= 0) {
      EXPECT_EQ(errors, 0) << "the Vulkan validation layer reported errors";
    }
  }
  return m;
}

// Builds `text` for cuda and checks that ptxas accepts the PTX (at -O0: at -O3 ptxas takes
// 80 s on the 30,000-term chain, its optimizer on one block of 30,000 instructions).
inline void ExpectPtxasAccepts(const std::string& text, const std::string& name,
                               const std::string& options = "") {
#ifdef BACKPLANE_CUDA_PTXAS
  if (!HasKind("cuda")) return;
  SCOPED_TRACE("cuda" + options);
  Module m = backplane::Build(text, Target::Parse("cuda -arch=sm_90" + options));
  const std::string dir = std::string(BACKPLANE_TEST_SCRATCH_DIR) + "/deep_ir";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name + ".ptx";
  std::ofstream(path) << m.Imports()[0].InspectSource("ptx");
  std::string out;
  const std::string command = std::string(BACKPLANE_CUDA_PTXAS) + " -O0 -arch=sm_90 " + path +
                              " -o " + path + ".cubin 2>&1";
  FILE* p = popen(command.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  EXPECT_EQ(pclose(p), 0) << "ptxas refused the PTX of " << name << ":\n" << out;
#else
  (void)text;
  (void)name;
  (void)options;
#endif
}

}  // namespace irtest

#endif  // BACKPLANE_TESTS_PLUGINS_IR_RUN_UTIL_H_
