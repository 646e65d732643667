// SPDX-License-Identifier: Apache-2.0
// The c target's packed entries (CEmitter::EmitPackedEntry): a call's argument check compiled
// into the kernel library. It must accept exactly the calls the runtime's check accepts and
// leave every other to it, so no check is weaker and every message stays the runtime's.
//
// The same call goes two ways: with its buffers as DLTensor pointers (BP_VALUE_TENSOR, which
// the packed entry takes) and as tensor objects (which it leaves to the runtime's check). Both
// must agree on the status, the message and what the kernel wrote.
#include <dlfcn.h>
#include <stdlib.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Module;
using backplane::Target;

const std::string& CacheHome() {
  static bptest::ScratchDir dir;
  return dir.path();
}

// f: every kind of param the packed entry checks (ranges of int32, uint16, int64 and bool, a
// float, declared strides, extents from params); g: an extent computed from a param, which no
// packed entry checks; h: a written buffer that must overlap no other.
const char* kFuncs = R"(# backplane-ir 1
func f(n: int32, m: uint16, s: int64, b: bool, x: float32, a: buffer<float32>[n, m], c: buffer<int8>[4, n] strides [s, 1], d: buffer<uint8>[m]) {
  for i in serial(0, n) {
    for j in serial(0, int32(m)) {
      a[i, j] = x + float32(c[3, i]) * 2.0 + float32(d[j])
    }
  }
}
func g(n: int8, a: buffer<float64>[n], q: buffer<float64>[(n + 1) / 2]) {
  for i in serial(0, int32((n + 1) / 2)) {
    q[i] = a[i] * 3.0
  }
}
func h(n: int64, a: buffer<float32>[n], o: buffer<float32>[n]) {
  for i in serial(0, int32(n)) {
    o[i] = a[i] * 0.5 + 1.0
  }
}
)";

// One argument of a call, described so that it can be passed either way.
struct Arg {
  bool tensor = false;
  bp_value_t scalar{};  // !tensor
  DLTensor dl{};        // tensor: its shape and strides point into the arrays below
  std::array<int64_t, 4> shape{};
  std::array<int64_t, 4> strides{};
  bool has_strides = false;
};

// What a call did: its status, its message and the bytes of the arena it may write.
struct Outcome {
  bp_status_t status = BP_OK;
  std::string message;
  std::vector<unsigned char> arena;
};

class PackedEntry : public ::testing::Test {
 protected:
  void SetUp() override { setenv("XDG_CACHE_HOME", CacheHome().c_str(), 1); }

  // Runs `args` against `func`, its buffers in `arena` (a copy of `initial`), as DLTensor
  // pointers (`objects` false) or as tensor objects.
  Outcome Run(const backplane::Function& func, std::vector<Arg> args,
              const std::vector<unsigned char>& initial, bool objects) {
    Outcome out;
    out.arena = initial;
    std::vector<bp_value_t> values(args.size());
    std::vector<bp_object_t*> owned;
    std::vector<DLManagedTensor> managed(args.size());
    for (size_t k = 0; k < args.size(); ++k) {
      Arg& a = args[k];
      if (!a.tensor) {
        values[k] = a.scalar;
        continue;
      }
      a.dl.shape = a.shape.data();
      a.dl.strides = a.has_strides ? a.strides.data() : nullptr;
      if (a.dl.data != nullptr) {  // an offset into the arena, made a pointer to this copy
        a.dl.data = out.arena.data() + (reinterpret_cast<uintptr_t>(a.dl.data) - 1);
      }
      values[k].type = BP_VALUE_TENSOR;
      values[k].u.v_tensor = &a.dl;
      if (objects) {
        managed[k].dl_tensor = a.dl;
        managed[k].deleter = nullptr;
        bp_object_t* t = nullptr;
        if (bp_tensor_from_dlpack(&managed[k], &t) != BP_OK) {
          out.status = -100;  // no object of this tensor: the round compares nothing
          for (bp_object_t* o : owned) bp_object_release(o);
          return out;
        }
        owned.push_back(t);
        values[k].type = BP_VALUE_OBJECT;
        values[k].u.v_obj = t;
      }
    }
    bp_value_t result;
    out.status = bp_function_call(func.object().get(), values.data(),
                                  static_cast<int32_t>(values.size()), &result);
    if (out.status != BP_OK) {
      const char* message = nullptr;
      bp_error_last(nullptr, &message);
      out.message = message != nullptr ? message : "";
    }
    for (bp_object_t* o : owned) bp_object_release(o);
    return out;
  }
};

bp_value_t Int(int64_t v) {
  bp_value_t x{};
  x.type = BP_VALUE_INT;
  x.u.v_int64 = v;
  return x;
}
bp_value_t Float(double v) {
  bp_value_t x{};
  x.type = BP_VALUE_FLOAT;
  x.u.v_float64 = v;
  return x;
}

// A tensor argument over the arena at byte `offset` (stored as offset + 1: 0 is a null data).
Arg TensorArg(DLDataType dtype, std::vector<int64_t> shape, size_t offset) {
  Arg a;
  a.tensor = true;
  a.dl.data = reinterpret_cast<void*>(offset + 1);
  a.dl.device = DLDevice{kDLCPU, 0};
  a.dl.ndim = static_cast<int32_t>(shape.size());
  a.dl.dtype = dtype;
  for (size_t d = 0; d < shape.size(); ++d) a.shape[d] = shape[d];
  return a;
}

// The library of a c module, from its saved bytes, opened for a direct look at its symbols.
void* OpenLibrary(const Module& m, const std::string& dir) {
  const std::string bytes = m.SaveToBytes();
  const size_t eol = bytes.find('\n', bytes.find('\n') + 1);
  const std::string path = dir + "/packed_entry_test.so";
  std::ofstream(path, std::ios::binary) << bytes.substr(eol + 1);
  return dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
}

TEST_F(PackedEntry, OnlyFunctionsWithSimpleExtentsAndNoCallPackedHaveOne) {
  Module m = backplane::Build(kFuncs, Target::Parse("c -num-cores=1"));
  void* lib = OpenLibrary(m, CacheHome());
  ASSERT_NE(lib, nullptr) << dlerror();
  EXPECT_NE(dlsym(lib, "bp_packed_f"), nullptr);
  EXPECT_NE(dlsym(lib, "bp_packed_h"), nullptr);
  EXPECT_EQ(dlsym(lib, "bp_packed_g"), nullptr) << "(n + 1) / 2 is left to the runtime's check";
  EXPECT_NE(dlsym(lib, "bp_func_g"), nullptr);
  dlclose(lib);
}

TEST_F(PackedEntry, AcceptsWhatTheRuntimeCheckAcceptsWithTheSameMessagesAndResults) {
  Module m = backplane::Build(kFuncs, Target::Parse("c -num-cores=1"));
  void* lib = OpenLibrary(m, CacheHome());
  ASSERT_NE(lib, nullptr) << dlerror();
  using Packed = int32_t (*)(const bp_value_t*, int32_t, void*);
  const auto packed_f = reinterpret_cast<Packed>(dlsym(lib, "bp_packed_f"));
  ASSERT_NE(packed_f, nullptr);
  const DLDataType f32{kDLFloat, 32, 1}, f64{kDLFloat, 64, 1}, i8{kDLInt, 8, 1}, u8{kDLUInt, 8, 1};
  std::mt19937_64 rng(39);
  std::vector<unsigned char> initial(4096);
  for (unsigned char& b : initial) b = static_cast<unsigned char>(rng() % 7);
  int compared = 0, accepted = 0, refused = 0, direct_accepted = 0;
  for (const char* name : {"f", "g", "h"}) {
    backplane::Function func = m.GetFunction(name);
    for (int round = 0; round < 1500; ++round) {
      std::vector<Arg> args;
      const int64_t n = static_cast<int64_t>(rng() % 5), mm = static_cast<int64_t>(rng() % 4);
      if (std::string(name) == "f") {
        const int64_t s = n + static_cast<int64_t>(rng() % 2);  // the declared row stride
        for (bp_value_t v : {Int(n), Int(mm), Int(s), Int(static_cast<int64_t>(rng() % 2)),
                             Float(0.25 * static_cast<double>(rng() % 9))}) {
          Arg a;
          a.scalar = v;
          args.push_back(a);
        }
        args.push_back(TensorArg(f32, {n, mm}, 0));
        Arg c = TensorArg(i8, {4, n}, 1024);
        c.has_strides = true;
        c.strides = {s, 1, 0, 0};
        args.push_back(c);
        args.push_back(TensorArg(u8, {mm}, 2048));
      } else if (std::string(name) == "g") {
        Arg a;
        a.scalar = Int(n);
        args.push_back(a);
        args.push_back(TensorArg(f64, {n}, 0));
        args.push_back(TensorArg(f64, {(n + 1) / 2}, 512));
      } else {
        Arg a;
        a.scalar = Int(n);
        args.push_back(a);
        args.push_back(TensorArg(f32, {n}, 64 * (rng() % 3)));
        args.push_back(TensorArg(f32, {n}, 4 * (rng() % 40)));  // may overlap a
      }
      // Up to three random changes of the kinds a wrong call makes.
      const int changes = static_cast<int>(rng() % 4);
      for (int c = 0; c < changes; ++c) {
        Arg& a = args[rng() % args.size()];
        switch (rng() % 12) {
          case 0:
            a = Arg();
            a.scalar = Int(static_cast<int64_t>(rng() % 7) - 2 + (rng() % 3 == 0 ? 70000 : 0));
            break;
          case 1:
            a = Arg();
            a.scalar = Float(1.5);
            break;
          case 2:
            if (a.tensor && a.dl.ndim > 0) a.shape[rng() % a.dl.ndim] += 1;
            break;
          case 3:
            if (a.tensor) a.dl.dtype = rng() % 2 ? f64 : i8;
            break;
          case 4:
            if (a.tensor) a.dl.ndim = static_cast<int32_t>(rng() % 3);
            break;
          case 5:
            if (a.tensor) {
              a.has_strides = true;
              for (int d = 0; d < 4; ++d) a.strides[d] = static_cast<int64_t>(rng() % 4) - 1;
            }
            break;
          case 6:
            if (a.tensor) a.dl.data = nullptr;
            break;
          case 7:
            if (a.tensor) a.dl.byte_offset = 4 * (rng() % 8);
            break;
          case 8:
            if (a.tensor) a.dl.device = DLDevice{rng() % 2 ? kDLCUDAHost : kDLCUDA, 0};
            break;
          case 9:
            if (!a.tensor) a.scalar.type = BP_VALUE_PTR;
            break;
          case 10:
            if (a.tensor && a.dl.ndim > 0) {  // a strides array that is compact: still accepted
              a.has_strides = true;
              int64_t st = 1;
              for (int d = a.dl.ndim - 1; d >= 0; --d) {
                a.strides[d] = st;
                st *= a.shape[d];
              }
            }
            break;
          default:
            args.pop_back();  // too few arguments
            if (args.empty()) args.push_back(Arg());
            break;
        }
      }
      const Outcome fast = Run(func, args, initial, /*objects=*/false);
      const Outcome slow = Run(func, args, initial, /*objects=*/true);
      if (slow.status == -100) continue;  // the core would not make an object of this tensor
      ++compared;
      ASSERT_EQ(fast.status, slow.status)
          << name << " round " << round << ": " << fast.message << " | " << slow.message;
      ASSERT_EQ(fast.message, slow.message) << name << " round " << round;
      ASSERT_EQ(fast.arena, slow.arena) << name << " round " << round << ": different results";
      (fast.status == BP_OK ? accepted : refused) += 1;
      if (std::string(name) == "f" && fast.status == BP_OK) {
        // The packed entry itself took it (not the runtime's check after a refusal).
        std::vector<unsigned char> arena = initial;
        std::vector<bp_value_t> values(args.size());
        for (size_t k = 0; k < args.size(); ++k) {
          if (!args[k].tensor) {
            values[k] = args[k].scalar;
            continue;
          }
          args[k].dl.shape = args[k].shape.data();
          args[k].dl.strides = args[k].has_strides ? args[k].strides.data() : nullptr;
          if (args[k].dl.data != nullptr) {
            args[k].dl.data = arena.data() + (reinterpret_cast<uintptr_t>(args[k].dl.data) - 1);
          }
          values[k].type = BP_VALUE_TENSOR;
          values[k].u.v_tensor = &args[k].dl;
        }
        alignas(8) unsigned char fault[32] = {};
        struct {
          void* call_packed;
          void* fault;
        } ctx{nullptr, fault};
        const int32_t rc = packed_f(values.data(), static_cast<int32_t>(values.size()), &ctx);
        direct_accepted += rc == 0;
        if (rc == 0) {
          EXPECT_EQ(arena, fast.arena) << "round " << round;
        }
      }
    }
  }
  // Both kinds of outcome were seen often enough for the comparison to mean something.
  EXPECT_GT(compared, 3000);
  EXPECT_GT(accepted, 500);
  EXPECT_GT(refused, 500);
  EXPECT_GT(direct_accepted, 100) << "the packed entry of f accepted too few valid calls";
  dlclose(lib);
}

TEST_F(PackedEntry, OverlappingBuffersAreRefusedWithTheRuntimesMessage) {
  Module m = backplane::Build(kFuncs, Target::Parse("c -num-cores=1"));
  backplane::Function h = m.GetFunction("h");
  std::vector<float> data = bptest::RandomFloats(64, 7);
  int64_t shape[1] = {16};
  DLTensor a{data.data(), DLDevice{kDLCPU, 0}, 1, DLDataType{kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor o = a;
  o.byte_offset = 4 * 15;  // the last element of a is the first of o
  const bptest::Status s = bptest::CaptureError([&] { h(int64_t{16}, &a, &o); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("overlap in memory"), std::string::npos) << s.message;
  o.byte_offset = 4 * 16;  // adjacent, not overlapping: runs
  h(int64_t{16}, &a, &o);
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(data[16 + i], data[i] * 0.5f + 1.0f) << i;
}

// A hostile shape whose span in bytes does not fit in 64 bits: both checks refuse it (the
// arithmetic is overflow-checked, never undefined: this test runs under UBSan too), and the
// kernel never runs.
TEST_F(PackedEntry, AShapeWhoseSpanOverflowsIsRefused) {
  Module m = backplane::Build(kFuncs, Target::Parse("c -num-cores=1"));
  backplane::Function h = m.GetFunction("h");
  std::vector<float> data = bptest::RandomFloats(8, 8);
  const std::vector<float> before = data;
  for (int64_t n : {int64_t{1} << 62, INT64_MAX}) {
    int64_t shape[1] = {n};
    DLTensor a{data.data(), DLDevice{kDLCPU, 0}, 1, DLDataType{kDLFloat, 32, 1}, shape, nullptr, 0};
    DLTensor o = a;
    o.data = data.data() + 4;
    const bptest::Status s = bptest::CaptureError([&] { h(n, &a, &o); });
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << n;
    EXPECT_NE(s.message.find("spans more bytes than an address can reach"), std::string::npos)
        << s.message;
  }
  EXPECT_EQ(data, before);
}

}  // namespace
