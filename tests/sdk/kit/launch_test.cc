// SPDX-License-Identifier: Apache-2.0
// backplane/launch/launch.hpp, the launch kit every GPU backend launches through: what Bind
// fills in, the messages it refuses a call with, that a BoundLaunch reused across kernels and
// calls (as the plugins keep one per thread) never carries one call's sizes into the next, and
// that Bind's argument check says exactly what ir::CheckArgs says for random calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/launch/launch.hpp>
#include <backplane/sdk/kernel_args.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

namespace launch = backplane::launch;
namespace ir = backplane::ir;
using backplane::PackedArgs;

// A device's memory as the kit sees it: live allocations by address.
class FakeBackend final : public launch::Backend {
 public:
  FakeBackend() {
    limits_.grid[0] = 1000;
    limits_.grid[1] = limits_.grid[2] = 100;
    limits_.grid_per_launch[0] = 300;
    limits_.block[0] = limits_.block[1] = 256;
    limits_.block[2] = 8;
    limits_.threads_per_block = 512;
    limits_.shared_per_block = 1024;
  }
  // A live allocation of `size` bytes on `dev`.
  char* Alloc(size_t size) {
    blocks_.push_back(std::make_unique<char[]>(size + 1));
    sizes_.push_back(size);
    return blocks_.back().get();
  }
  launch::Allocation Find(DLDevice dev, void* handle) override {
    ++finds;
    const char* p = static_cast<const char*>(handle);
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const char* base = blocks_[i].get();
      if (dev.device_id == 0 && p >= base && p < base + std::max<size_t>(sizes_[i], 1)) {
        return {base, static_cast<uint64_t>(p - base), sizes_[i]};
      }
    }
    throw backplane::Error(BP_ERR_INVALID_ARGUMENT, "no live allocation holds it");
  }
  const launch::DeviceLimits& Limits(DLDevice) override { return limits_; }

  launch::DeviceLimits limits_;
  int finds = 0;

 private:
  std::vector<std::unique_ptr<char[]>> blocks_;
  std::vector<size_t> sizes_;
};

const char* kVectorAdd =
    "func vector_add_gpu_kernel(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: "
    "buffer<float32>[n]) attrs(\"kernel\": \"1\", \"launch_params\": "
    "\"blockIdx.x,threadIdx.x\") {\n"
    "  for bx in thread(blockIdx.x, 0, (n + 255) / 256) {\n"
    "    for tx in thread(threadIdx.x, 0, 256) {\n"
    "      if (bx * 256 + tx < n) {\n"
    "        c[bx * 256 + tx] = a[bx * 256 + tx] + b[bx * 256 + tx]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

// Every kind of scalar, a constant shape, a shape of two params and declared strides.
const char* kMixed =
    "func mixed_kernel(m: int32, k: int16, u: uint8, f: float32, h: float16, flag: bool, "
    "w: uint64, a: buffer<float32>[m, k], b: buffer<int32>[4], c: buffer<float32>[k, m] "
    "strides [1, k]) attrs(\"kernel\": \"1\", \"launch_params\": \"blockIdx.x,threadIdx.x\") {\n"
    "  for bx in thread(blockIdx.x, 0, 1) {\n"
    "    for tx in thread(threadIdx.x, 0, 1) {\n"
    "      b[0] = 1\n"
    "    }\n"
    "  }\n"
    "}\n";

// Constant-sized and launch-sized shared arrays.
const char* kShared =
    "func shared_kernel(n: int32, a: buffer<float32>[n]) attrs(\"kernel\": \"1\", "
    "\"launch_params\": \"threadIdx.x\") {\n"
    "  for tx in thread(threadIdx.x, 0, 1) {\n"
    "    alloc t: float32[4] shared\n"
    "    alloc s: float32[n] shared\n"
    "    s[0] = 1.0\n"
    "    t[0] = s[0]\n"
    "    a[0] = t[0]\n"
    "  }\n"
    "}\n";

ir::IRModule ParseKernel(const char* text) {
  return ir::Parse(std::string("# backplane-ir 1\n\n") + text);
}

bp_value_t IntValue(int64_t v) {
  bp_value_t x{};
  x.type = BP_VALUE_INT;
  x.u.v_int64 = v;
  return x;
}
bp_value_t FloatValue(double v) {
  bp_value_t x{};
  x.type = BP_VALUE_FLOAT;
  x.u.v_float64 = v;
  return x;
}
bp_value_t TensorValue(DLTensor* t) {
  bp_value_t x{};
  x.type = BP_VALUE_TENSOR;
  x.u.v_tensor = t;
  return x;
}

// A tensor on cuda:`id` over `data`; `shape` (and `strides`) must outlive it.
DLTensor Tensor(void* data, std::vector<int64_t>* shape, DLDataType dtype = {kDLFloat, 32, 1},
                int32_t id = 0) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCUDA, id};
  t.ndim = static_cast<int32_t>(shape->size());
  t.dtype = dtype;
  t.shape = shape->data();
  return t;
}

// The Error Bind throws ("" and kind BP_OK when it throws none).
struct Outcome {
  bp_status_t kind = BP_OK;
  std::string message;
};
Outcome BindOutcome(const launch::KernelSignature& sig, const std::vector<bp_value_t>& args,
                    launch::Backend& backend, launch::BoundLaunch* out) {
  Outcome o;
  try {
    launch::Bind(sig, PackedArgs(args.data(), static_cast<int32_t>(args.size())), kDLCUDA, backend,
                 out);
  } catch (const backplane::Error& e) {
    o.kind = e.kind();
    o.message = e.what();
  }
  return o;
}

class LaunchKitTest : public ::testing::Test {
 protected:
  // The SDK's calls (device names for messages) go to the core this test links.
  void SetUp() override { backplane::detail::g_host_api = bp_host_api(); }
};

TEST_F(LaunchKitTest, BindsTheVectorAddCall) {
  const ir::IRModule m = ParseKernel(kVectorAdd);
  const launch::KernelSignature sig(m.functions()[0], "cuda");
  EXPECT_EQ(sig.buffer_params(), (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(sig.written_params(), (std::vector<uint32_t>{3}));
  FakeBackend be;
  char* x = be.Alloc(64);
  std::vector<int64_t> shape{3};
  DLTensor a = Tensor(x, &shape), c = Tensor(x + 32, &shape);
  a.byte_offset = 4;
  launch::BoundLaunch b;
  for (int round = 0; round < 2; ++round) {  // cold, then warm
    const Outcome o = BindOutcome(
        sig,
        {IntValue(3), TensorValue(&a), TensorValue(&a), TensorValue(&c), IntValue(2), IntValue(7)},
        be, &b);
    ASSERT_EQ(o.message, "");
    EXPECT_EQ(b.grid[0], 2);
    EXPECT_EQ(b.block[0], 7);
    EXPECT_EQ(b.grid[1] * b.grid[2] * b.block[1] * b.block[2], 1);
    EXPECT_FALSE(b.empty);
    EXPECT_FALSE(b.split);
    EXPECT_EQ(b.limits, &be.limits_);
    EXPECT_EQ(b.device.device_type, kDLCUDA);
    EXPECT_EQ(b.scalar(0).i32, 3);
    EXPECT_EQ(b.scalar(0).bytes, 4u);
    EXPECT_EQ(b.buffer(1).handle, x);
    EXPECT_EQ(b.buffer(1).byte_offset, 4u);
    EXPECT_EQ(b.buffer(1).span, 12u);
    EXPECT_EQ(b.buffer(1).where.offset, 0u);
    EXPECT_EQ(b.buffer(1).where.size, 64u);
    EXPECT_EQ(b.buffer(3).where.offset, 32u);
    EXPECT_EQ(b.views[3].user, &c);
    EXPECT_EQ(b.shared_bytes, 0u);
  }
  // 400 blocks: more than one launch takes (300), fewer than the device allows.
  EXPECT_EQ(BindOutcome(sig,
                        {IntValue(3), TensorValue(&a), TensorValue(&a), TensorValue(&c),
                         IntValue(400), IntValue(1)},
                        be, &b)
                .message,
            "");
  EXPECT_TRUE(b.split);
  // An extent 0: nothing runs, nothing asked of the backend.
  const int finds = be.finds;
  EXPECT_EQ(BindOutcome(sig,
                        {IntValue(3), TensorValue(&a), TensorValue(&a), TensorValue(&c),
                         IntValue(0), IntValue(1)},
                        be, &b)
                .message,
            "");
  EXPECT_TRUE(b.empty);
  EXPECT_EQ(b.limits, nullptr);
  EXPECT_EQ(be.finds, finds);
}

TEST_F(LaunchKitTest, RefusesWithTheMessagesItAlwaysGave) {
  const ir::IRModule m = ParseKernel(kVectorAdd);
  const launch::KernelSignature sig(m.functions()[0], "cuda");
  FakeBackend be;
  char* x = be.Alloc(64);
  std::vector<int64_t> shape{3};
  DLTensor a = Tensor(x, &shape), c = Tensor(x + 32, &shape);
  launch::BoundLaunch b;
  auto call = [&](std::vector<bp_value_t> args) { return BindOutcome(sig, args, be, &b); };
  const bp_value_t n = IntValue(3), ta = TensorValue(&a), tc = TensorValue(&c);
  const std::string k = "cuda kernel 'vector_add_gpu_kernel': ";
  struct Case {
    std::vector<bp_value_t> args;
    bp_status_t kind;
    std::string message;
  };
  DLTensor other = Tensor(x, &shape, {kDLFloat, 32, 1}, 1);
  DLTensor cpu = a;
  cpu.device = DLDevice{kDLCPU, 0};
  DLTensor null_data = Tensor(nullptr, &shape);
  DLTensor stray = Tensor(&shape, &shape);  // not the backend's memory
  DLTensor past = c;
  past.byte_offset = 24;  // 32 + 24 + 12 > 64
  DLTensor over = a;      // overlaps c, which the kernel writes
  over.byte_offset = 24;
  const std::vector<Case> cases = {
      {{n, ta, ta, tc, IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       "cuda kernel 'vector_add_gpu_kernel' takes 4 argument(s) and 2 launch extent(s) "
       "(blockIdx.x, threadIdx.x), got 5 values; call it through the host function bp_build "
       "made, which launches it"},
      {{n, IntValue(1), ta, tc, IntValue(1), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       "cuda function vector_add_gpu_kernel: argument 1 'a' is an integer (1), expected a "
       "buffer<float32>[n]; pass a tensor"},
      {{n, ta, TensorValue(&other), tc, IntValue(1), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       k + "its tensors are on cuda:0 and cuda:1 (argument 2 'b'); put them on one device"},
      {{n, TensorValue(&cpu), ta, tc, IntValue(1), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       k + "argument 1 'a' is a tensor on cpu:0, which this module's code cannot reach; copy it "
           "to cuda:0 first"},
      {{IntValue(4), ta, ta, tc, IntValue(1), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       "cuda function vector_add_gpu_kernel: argument 1 'a' has shape [3], expected [n] = [4] "
       "(n = 4 from the scalar arguments); pass a tensor of that shape"},
      {{n, ta, ta, tc, IntValue(-1), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       k + "launch extent blockIdx.x = -1 is negative; pass a size >= 0"},
      {{n, ta, ta, tc, IntValue(int64_t{1} << 40), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       k + "launch extent blockIdx.x = 1099511627776 is more than its loop variable (int32) can "
           "count (2147483647); call it through the host function bp_build made, or make the "
           "loop variable int64"},
      {{n, ta, ta, tc, IntValue(1001), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       k + "1001 blocks on grid axis x (blockIdx.x) is more than cuda:0 allows (1000); split the "
           "work over several launches, or bind the larger extent to blockIdx.x (up to 1000)"},
      {{n, ta, ta, tc, IntValue(1), IntValue(257)},
       BP_ERR_INVALID_ARGUMENT,
       k + "257 threads on block axis x (threadIdx.x) is more than cuda:0 allows (256); use "
           "smaller blocks"},
      {{n, TensorValue(&null_data), ta, tc, IntValue(1), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       "cuda function vector_add_gpu_kernel: argument 1 'a' has no data (a null pointer); pass an "
       "allocated tensor"},
      {{n, TensorValue(&stray), ta, tc, IntValue(1), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       k + "argument 1 'a': no live allocation holds it"},
      {{n, ta, ta, TensorValue(&past), IntValue(1), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       k + "argument 3 'c' spans bytes [56, 68) of a 64-byte buffer on cuda:0; pass a tensor "
           "inside it"},
      {{n, TensorValue(&over), ta, tc, IntValue(1), IntValue(1)},
       BP_ERR_INVALID_ARGUMENT,
       k + "arguments 3 'c' and 1 'a' overlap in memory and the kernel writes 'c'; pass "
           "separate tensors (its buffers are restrict pointers, which may not alias)"},
  };
  for (int round = 0; round < 2; ++round) {  // each after a good call: warm, and again
    for (const Case& e : cases) {
      ASSERT_EQ(call({n, ta, ta, tc, IntValue(1), IntValue(1)}).message, "");
      const Outcome o = call(e.args);
      EXPECT_EQ(o.kind, e.kind) << o.message;
      EXPECT_EQ(o.message, e.message);
    }
  }
  // A value of no argument kind.
  bp_value_t none{};
  none.type = BP_VALUE_NONE;
  const Outcome o = call({n, none, ta, tc, IntValue(1), IntValue(1)});
  EXPECT_EQ(o.kind, BP_ERR_TYPE);
  EXPECT_EQ(o.message, k + "argument 1 'a' has value type " + std::to_string(BP_VALUE_NONE) +
                           "; expected a tensor");
}

// The threads of a block in all, and shared memory: constant arrays first, then those sized
// at launch, each 16-byte aligned (launch.hpp), checked against the device's bytes.
TEST_F(LaunchKitTest, SizesSharedMemoryPerCall) {
  const ir::IRModule m = ParseKernel(kShared);
  const launch::KernelSignature sig(m.functions()[0], "cuda");
  ASSERT_EQ(sig.shared().size(), 2u);
  EXPECT_EQ(sig.static_shared_bytes(), 16u);
  FakeBackend be;
  char* x = be.Alloc(4096);
  launch::BoundLaunch b;
  for (int64_t n : {1, 5, 0, 200, 5}) {
    std::vector<int64_t> shape{n};
    DLTensor a = Tensor(x, &shape);
    const Outcome o = BindOutcome(sig, {IntValue(n), TensorValue(&a), IntValue(1)}, be, &b);
    if (n * 4 + 16 > 1024) {
      EXPECT_EQ(o.message,
                "cuda kernel 'shared_kernel': shared allocation 's' (float32 with n = 200) takes "
                "800 bytes at this launch, and the kernel's shared memory comes to 816 bytes, "
                "more than a block of cuda:0 has (1024); launch it with a smaller size");
      continue;
    }
    ASSERT_EQ(o.message, "") << n;
    EXPECT_EQ(b.shared_elements, (std::vector<uint64_t>{4, static_cast<uint64_t>(n)}));
    EXPECT_EQ(b.shared_bytes, static_cast<uint64_t>(16 + 4 * n));
  }
}

// One BoundLaunch for several kernels, as a plugin's per-thread one is: each call finds the
// sizes of its own kernel, whatever the call before it bound (another kernel, an empty grid,
// a signature since destroyed).
TEST_F(LaunchKitTest, ABoundLaunchCarriesNothingOverBetweenKernels) {
  const ir::IRModule shared_ir = ParseKernel(kShared);
  const ir::IRModule add_ir = ParseKernel(kVectorAdd);
  const ir::IRModule tile_ir = ParseKernel(
      "func tile_kernel(a: buffer<float32>[4]) attrs(\"kernel\": \"1\", \"launch_params\": "
      "\"threadIdx.x\") {\n"
      "  for tx in thread(threadIdx.x, 0, 1) {\n"
      "    alloc t: float32[2] shared\n"
      "    alloc u: int8[3] shared\n"
      "    t[0] = 1.0\n"
      "    u[0] = int8(1)\n"
      "    a[0] = t[0]\n"
      "  }\n"
      "}\n");
  FakeBackend be;
  char* x = be.Alloc(4096);
  std::vector<int64_t> four{4};
  DLTensor a4 = Tensor(x, &four), c4 = Tensor(x + 64, &four);
  launch::BoundLaunch b;
  std::mt19937 rng(7);
  auto tile = std::make_unique<launch::KernelSignature>(tile_ir.functions()[0], "cuda");
  const launch::KernelSignature shared(shared_ir.functions()[0], "cuda");
  const launch::KernelSignature add(add_ir.functions()[0], "cuda");
  for (int i = 0; i < 300; ++i) {
    const int pick = static_cast<int>(rng() % 4);
    const int64_t extent = rng() % 5 == 0 ? 0 : 1;
    Outcome o;
    if (pick == 0) {
      if (rng() % 3 == 0) {  // a new signature, perhaps where the old one was
        tile.reset();
        tile = std::make_unique<launch::KernelSignature>(tile_ir.functions()[0], "cuda");
      }
      o = BindOutcome(*tile, {TensorValue(&a4), IntValue(extent)}, be, &b);
      ASSERT_EQ(o.message, "");
      const std::vector<uint64_t> want = {extent == 0 ? 0u : 2u, extent == 0 ? 0u : 3u};
      EXPECT_EQ(b.shared_elements, want);
      EXPECT_EQ(b.shared_bytes, extent == 0 ? 0u : 19u);
    } else if (pick == 1) {
      o = BindOutcome(shared, {IntValue(4), TensorValue(&a4), IntValue(extent)}, be, &b);
      ASSERT_EQ(o.message, "");
      const std::vector<uint64_t> want = {extent == 0 ? 0u : 4u, extent == 0 ? 0u : 4u};
      EXPECT_EQ(b.shared_elements, want);
      EXPECT_EQ(b.shared_bytes, extent == 0 ? 0u : 32u);
    } else if (pick == 2) {
      o = BindOutcome(add,
                      {IntValue(4), TensorValue(&a4), TensorValue(&a4), TensorValue(&c4),
                       IntValue(extent), IntValue(1)},
                      be, &b);
      ASSERT_EQ(o.message, "");
      EXPECT_TRUE(b.shared_elements.empty());
      EXPECT_EQ(b.views.size(), 4u);
      EXPECT_EQ(b.shared_bytes, 0u);
    } else {
      // A call that fails half way leaves nothing behind for the next one either.
      o = BindOutcome(add,
                      {IntValue(4), TensorValue(&a4), TensorValue(&a4), TensorValue(&a4),
                       IntValue(1), IntValue(1)},
                      be, &b);
      EXPECT_NE(o.message.find("overlap in memory"), std::string::npos) << o.message;
    }
    EXPECT_EQ(b.empty, extent == 0 && pick != 3);
  }
}

// Bind's argument check against ir::CheckArgs over random calls of a kernel with every kind
// of scalar, shapes from two params, a constant shape and declared strides: both say the
// same (the status and the whole message), and a call CheckArgs passes is bound with its
// values converted to the params' kinds.
TEST_F(LaunchKitTest, ChecksArgumentsAsCheckArgsDoes) {
  const ir::IRModule m = ParseKernel(kMixed);
  const ir::PrimFunc& f = m.functions()[0];
  const launch::KernelSignature sig(f, "cuda");
  FakeBackend be;
  be.limits_ = launch::DeviceLimits();  // no limits: only the arguments decide
  launch::BoundLaunch b;
  std::mt19937_64 rng(39);
  // Mostly `usual` (so that many calls pass), sometimes one of `odd`.
  auto pick = [&](int64_t usual, std::initializer_list<int64_t> odd) {
    if (rng() % 6 != 0) return usual;
    return *(odd.begin() + static_cast<std::ptrdiff_t>(rng() % odd.size()));
  };
  int passed = 0, refused = 0;
  for (int i = 0; i < 4000; ++i) {
    const int64_t mm = pick(static_cast<int64_t>(rng() % 4), {-1, int64_t{1} << 31, 7});
    const int64_t kk = pick(static_cast<int64_t>(rng() % 4), {40000, -2, 1 << 15});
    const int64_t u = pick(static_cast<int64_t>(rng() % 256), {256, -1});
    const int64_t flag = pick(static_cast<int64_t>(rng() % 2), {2, -1});
    const int64_t w = pick(static_cast<int64_t>(rng() % 9), {-1, INT64_MAX, INT64_MIN});
    std::vector<int64_t> a_shape{pick(mm, {2, 0}), pick(kk, {3, 1})};
    std::vector<int64_t> b_shape{pick(4, {3, 1, 0})};
    std::vector<int64_t> c_shape{pick(kk, {1, 2}), pick(mm, {2, 0})};
    std::vector<int64_t> c_strides{pick(1, {2, 0}), pick(kk, {1, 5})};
    std::vector<int64_t> a_strides{pick(kk, {3, 1}), pick(1, {2})};
    char* mem_a = be.Alloc(256);
    char* mem_b = be.Alloc(64);
    char* mem_c = be.Alloc(256);
    DLTensor a = Tensor(rng() % 40 == 0 ? nullptr : mem_a, &a_shape);
    if (rng() % 4 == 0) a.strides = a_strides.data();
    if (rng() % 40 == 0) a.ndim = 1;
    DLTensor bt = Tensor(mem_b, &b_shape,
                         rng() % 40 == 0 ? DLDataType{kDLFloat, 32, 1} : DLDataType{kDLInt, 32, 1});
    DLTensor c = Tensor(mem_c, &c_shape);
    if (rng() % 2 != 0) c.strides = c_strides.data();
    std::vector<bp_value_t> args = {IntValue(mm),
                                    IntValue(kk),
                                    IntValue(u),
                                    rng() % 2 ? FloatValue(1.5) : IntValue(3),
                                    rng() % 2 ? FloatValue(0.25) : IntValue(2),
                                    IntValue(flag),
                                    IntValue(w),
                                    TensorValue(&a),
                                    TensorValue(&bt),
                                    TensorValue(&c),
                                    IntValue(1),
                                    IntValue(1)};
    if (rng() % 40 == 0) args[static_cast<size_t>(rng() % 7)] = FloatValue(2.0);
    if (rng() % 40 == 0) args[7 + static_cast<size_t>(rng() % 3)] = IntValue(1);
    // What CheckArgs says of the same call, from views made as the plugins always made them.
    std::vector<ir::ArgView> views(10);
    for (size_t p = 0; p < 10; ++p) {
      const bp_value_t& v = args[p];
      if (v.type == BP_VALUE_INT) {
        views[p] = ir::IntArg(v.u.v_int64);
      } else if (v.type == BP_VALUE_FLOAT) {
        views[p] = ir::FloatArg(v.u.v_float64);
      } else {
        const DLTensor* t = v.u.v_tensor;
        views[p] = ir::BufferArg(t->data, backplane::sdk::DTypeFromDL(t->dtype), t->ndim, t->shape,
                                 t->strides);
      }
    }
    const std::string want = ir::CheckArgs(f, views);
    const Outcome o = BindOutcome(sig, args, be, &b);
    if (!want.empty()) {
      ++refused;
      EXPECT_EQ(o.kind, BP_ERR_INVALID_ARGUMENT);
      EXPECT_EQ(o.message, "cuda function " + want);
      continue;
    }
    ++passed;
    ASSERT_EQ(o.message, "");
    EXPECT_EQ(b.scalar(0).i32, static_cast<int32_t>(mm));
    EXPECT_EQ(b.scalar(1).i16, static_cast<int16_t>(kk));
    EXPECT_EQ(b.scalar(2).u8, static_cast<uint8_t>(u));
    EXPECT_EQ(b.scalar(3).f32, static_cast<float>(args[3].type == BP_VALUE_FLOAT
                                                      ? args[3].u.v_float64
                                                      : static_cast<double>(args[3].u.v_int64)));
    EXPECT_EQ(b.scalar(4).bytes, 2u);
    EXPECT_EQ(b.scalar(5).b, flag != 0);
    EXPECT_EQ(b.scalar(6).u64, static_cast<uint64_t>(w));
    for (size_t p = 7; p < 10; ++p) EXPECT_EQ(b.views[p].user, args[p].u.v_tensor);
  }
  // Both kinds of call were made, in numbers.
  EXPECT_GT(passed, 400);
  EXPECT_GT(refused, 400);
}

TEST_F(LaunchKitTest, SpanBytesCountsElementsAndGaps) {
  std::vector<int64_t> shape{3, 4};
  DLTensor t = Tensor(nullptr, &shape);
  EXPECT_EQ(launch::SpanBytes(t), 48u);
  std::vector<int64_t> strides{10, -2};
  t.strides = strides.data();
  EXPECT_EQ(launch::SpanBytes(t), (2 * 10 + 3 * 2 + 1) * 4u);
  std::vector<int64_t> zero{3, 0};
  t.shape = zero.data();
  EXPECT_EQ(launch::SpanBytes(t), 0u);
  t.strides = nullptr;
  EXPECT_EQ(launch::SpanBytes(t), 0u);
  // An overflow before a zero extent is still an empty tensor; without one, an error.
  std::vector<int64_t> huge{INT64_MAX, INT64_MAX, 0};
  t.shape = huge.data();
  t.ndim = 3;
  EXPECT_EQ(launch::SpanBytes(t), 0u);
  t.ndim = 2;
  EXPECT_THROW(launch::SpanBytes(t), backplane::Error);
  std::vector<int64_t> big{int64_t{1} << 62};
  t.shape = big.data();
  t.ndim = 1;
  EXPECT_THROW(launch::SpanBytes(t), backplane::Error);  // 2^62 elements of 4 bytes
  std::vector<int64_t> big_strides{int64_t{1} << 62};
  std::vector<int64_t> two{2};
  t.shape = two.data();
  t.strides = big_strides.data();
  EXPECT_THROW(launch::SpanBytes(t), backplane::Error);
  // The most negative stride has no int64 magnitude: counted without overflow (UBSan runs this).
  std::vector<int64_t> min_stride{INT64_MIN};
  t.strides = min_stride.data();
  EXPECT_THROW(launch::SpanBytes(t), backplane::Error);
}

// A one-thread kernel taking a scalar and a buffer of `dtype`.
std::string DtypeKernel(const std::string& dtype) {
  return "func k(s: " + dtype + ", a: buffer<" + dtype +
         ">[4]) attrs(\"kernel\": \"1\", \"launch_params\": \"threadIdx.x\") {\n"
         "  for tx in thread(threadIdx.x, 0, 1) {\n"
         "    a[0] = s\n"
         "  }\n"
         "}\n";
}

// Every dtype a kernel's scalar or buffer may have. Random values in each dtype's range are
// bound converted to the param's kind (float16 checked against the compiler's _Float16), a
// tensor of the dtype is bound and one of any other dtype is refused, a float for an integer
// param is refused, each message naming the argument and what was expected.
TEST_F(LaunchKitTest, BindsScalarsAndBuffersOfEveryDtype) {
  struct Kind {
    const char* name;
    launch::ParamKind kind;
    DLDataType dl;
    int64_t lo, hi;  // the range of the random values
  };
  const Kind kinds[] = {
      {"bool", launch::ParamKind::kBool, {6, 8, 1}, 0, 1},  // DLPack's kDLBool
      {"int8", launch::ParamKind::kInt8, {kDLInt, 8, 1}, INT8_MIN, INT8_MAX},
      {"int16", launch::ParamKind::kInt16, {kDLInt, 16, 1}, INT16_MIN, INT16_MAX},
      {"int32", launch::ParamKind::kInt32, {kDLInt, 32, 1}, INT32_MIN, INT32_MAX},
      {"int64", launch::ParamKind::kInt64, {kDLInt, 64, 1}, INT64_MIN, INT64_MAX},
      {"uint8", launch::ParamKind::kUInt8, {kDLUInt, 8, 1}, 0, UINT8_MAX},
      {"uint16", launch::ParamKind::kUInt16, {kDLUInt, 16, 1}, 0, UINT16_MAX},
      {"uint32", launch::ParamKind::kUInt32, {kDLUInt, 32, 1}, 0, UINT32_MAX},
      {"uint64", launch::ParamKind::kUInt64, {kDLUInt, 64, 1}, 0, INT64_MAX},
      {"float16", launch::ParamKind::kFloat16, {kDLFloat, 16, 1}, -65504, 65504},
      {"float32",
       launch::ParamKind::kFloat32,
       {kDLFloat, 32, 1},
       -(int64_t{1} << 40),
       int64_t{1} << 40},
      {"float64",
       launch::ParamKind::kFloat64,
       {kDLFloat, 64, 1},
       -(int64_t{1} << 60),
       int64_t{1} << 60},
  };
  FakeBackend be;
  be.limits_ = launch::DeviceLimits();
  char* mem = be.Alloc(64);
  std::mt19937_64 rng(43);
  for (const Kind& kind : kinds) {
    SCOPED_TRACE(kind.name);
    const ir::IRModule m = ParseKernel(DtypeKernel(kind.name).c_str());
    const launch::KernelSignature sig(m.functions()[0], "cuda");
    ASSERT_EQ(sig.param(0), kind.kind);
    EXPECT_EQ(sig.param(1), launch::ParamKind::kBuffer);
    EXPECT_EQ(std::string(launch::ToString(kind.kind)), kind.name);
    std::vector<int64_t> shape{4};
    DLTensor a = Tensor(mem, &shape, kind.dl);
    launch::BoundLaunch b;
    const bool is_float = kind.dl.code == kDLFloat;
    std::uniform_int_distribution<int64_t> ints(kind.lo, kind.hi);
    std::uniform_real_distribution<double> reals(static_cast<double>(kind.lo),
                                                 static_cast<double>(kind.hi));
    for (int i = 0; i < 200; ++i) {
      const int64_t iv = ints(rng);
      const double fv = reals(rng);
      const bool pass_float = is_float && i % 2 == 0;
      const bp_value_t s = pass_float ? FloatValue(fv) : IntValue(iv);
      const Outcome o = BindOutcome(sig, {s, TensorValue(&a), IntValue(1)}, be, &b);
      ASSERT_EQ(o.message, "");
      const launch::ScalarArg& got = b.scalar(0);
      EXPECT_EQ(got.bytes, std::max<uint32_t>(kind.dl.bits / 8, 1));
      const double as_double = pass_float ? fv : static_cast<double>(iv);
      switch (kind.kind) {
        case launch::ParamKind::kBool:
          EXPECT_EQ(got.b, iv != 0);
          break;
        case launch::ParamKind::kInt8:
          EXPECT_EQ(got.i8, iv);
          break;
        case launch::ParamKind::kInt16:
          EXPECT_EQ(got.i16, iv);
          break;
        case launch::ParamKind::kInt32:
          EXPECT_EQ(got.i32, iv);
          break;
        case launch::ParamKind::kInt64:
          EXPECT_EQ(got.i64, iv);
          break;
        case launch::ParamKind::kUInt8:
          EXPECT_EQ(got.u8, static_cast<uint64_t>(iv));
          break;
        case launch::ParamKind::kUInt16:
          EXPECT_EQ(got.u16, static_cast<uint64_t>(iv));
          break;
        case launch::ParamKind::kUInt32:
          EXPECT_EQ(got.u32, static_cast<uint64_t>(iv));
          break;
        case launch::ParamKind::kUInt64:
          EXPECT_EQ(got.u64, static_cast<uint64_t>(iv));
          break;
        case launch::ParamKind::kFloat16: {
          const _Float16 h = static_cast<_Float16>(static_cast<float>(as_double));
          uint16_t bits = 0;
          std::memcpy(&bits, &h, 2);
          EXPECT_EQ(got.f16, bits) << as_double;
          break;
        }
        case launch::ParamKind::kFloat32:
          EXPECT_EQ(got.f32, static_cast<float>(as_double));
          break;
        case launch::ParamKind::kFloat64:
          EXPECT_EQ(got.f64, as_double);
          break;
        case launch::ParamKind::kBuffer:
          FAIL();
      }
      EXPECT_EQ(b.buffer(1).handle, mem);
      EXPECT_EQ(b.buffer(1).span, 4u * std::max<uint32_t>(kind.dl.bits / 8, 1));
    }
    // A tensor of each other dtype: refused, naming the argument and both dtypes.
    for (const Kind& other : kinds) {
      if (other.name == kind.name) continue;
      DLTensor wrong = Tensor(mem, &shape, other.dl);
      const Outcome o = BindOutcome(sig, {IntValue(0), TensorValue(&wrong), IntValue(1)}, be, &b);
      EXPECT_EQ(o.kind, BP_ERR_INVALID_ARGUMENT);
      EXPECT_EQ(o.message, std::string("cuda function k: argument 1 'a' has dtype ") + other.name +
                               ", expected " + kind.name + "; pass a " + kind.name + " tensor");
    }
    // A float for an integer or bool param.
    if (!is_float) {
      const Outcome o = BindOutcome(sig, {FloatValue(0.5), TensorValue(&a), IntValue(1)}, be, &b);
      EXPECT_EQ(o.kind, BP_ERR_INVALID_ARGUMENT);
      EXPECT_NE(o.message.find("argument 0 's' is a float"), std::string::npos) << o.message;
      EXPECT_NE(o.message.find(std::string("expected ")), std::string::npos) << o.message;
    }
  }
}

// The number of values a call passes: the params and one extent per launch axis, or a message
// saying both numbers, naming the axes.
TEST_F(LaunchKitTest, RefusesTheWrongNumberOfValues) {
  const ir::IRModule m = ParseKernel(kMixed);
  const launch::KernelSignature sig(m.functions()[0], "vulkan");
  FakeBackend be;
  launch::BoundLaunch b;
  for (size_t n : {0, 1, 10, 11, 13, 40}) {
    const std::vector<bp_value_t> args(n, IntValue(1));
    const Outcome o = BindOutcome(sig, args, be, &b);
    EXPECT_EQ(o.kind, BP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(o.message,
              "vulkan kernel 'mixed_kernel' takes 10 argument(s) and 2 launch extent(s) "
              "(blockIdx.x, threadIdx.x), got " +
                  std::to_string(n) +
                  " values; call it through the host function bp_build made, which launches it");
  }
}

// A kernel binding all six axes, listed in an order of their own: each random extent lands
// on its axis of the grid or the block; a negative one, or one past what its loop variable
// counts, is refused naming the axis.
TEST_F(LaunchKitTest, PutsEachExtentOnItsAxis) {
  const char* text =
      "func axes_kernel(a: buffer<float32>[1]) attrs(\"kernel\": \"1\", \"launch_params\": "
      "\"threadIdx.z,blockIdx.y,threadIdx.x,blockIdx.z,threadIdx.y,blockIdx.x\") {\n"
      "  for bx in thread(blockIdx.x, 0, 1) {\n"
      "    for by in thread(blockIdx.y, 0, 1) {\n"
      "      for bz in thread(blockIdx.z, 0, 1) {\n"
      "        for tx in thread(threadIdx.x, 0, 1) {\n"
      "          for ty in thread(threadIdx.y, 0, 1) {\n"
      "            for tz: int16 in thread(threadIdx.z, 0, 1) {\n"
      "              a[0] = 1.0\n"
      "            }\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  const ir::IRModule m = ParseKernel(text);
  const launch::KernelSignature sig(m.functions()[0], "cuda");
  const ir::ThreadTag order[6] = {ir::ThreadTag::kThreadIdxZ, ir::ThreadTag::kBlockIdxY,
                                  ir::ThreadTag::kThreadIdxX, ir::ThreadTag::kBlockIdxZ,
                                  ir::ThreadTag::kThreadIdxY, ir::ThreadTag::kBlockIdxX};
  ASSERT_EQ(sig.axes().size(), 6u);
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(sig.axes()[k].tag, order[k]);
    EXPECT_EQ(sig.axes()[k].block, order[k] <= ir::ThreadTag::kBlockIdxZ);
  }
  EXPECT_EQ(sig.axes()[0].max_extent, INT16_MAX);
  EXPECT_EQ(sig.axes()[0].var_type, "int16");
  EXPECT_EQ(sig.axes()[1].max_extent, INT32_MAX);
  FakeBackend be;
  be.limits_ = launch::DeviceLimits();
  char* mem = be.Alloc(4);
  std::vector<int64_t> shape{1};
  DLTensor a = Tensor(mem, &shape);
  launch::BoundLaunch b;
  std::mt19937_64 rng(6);
  for (int i = 0; i < 300; ++i) {
    int64_t e[6];
    std::vector<bp_value_t> args = {TensorValue(&a)};
    for (int k = 0; k < 6; ++k) {
      e[k] = static_cast<int64_t>(rng() % (k == 0 ? 30000 : 100000));
      args.push_back(IntValue(e[k]));
    }
    ASSERT_EQ(BindOutcome(sig, args, be, &b).message, "");
    EXPECT_EQ(b.block[2], e[0]);
    EXPECT_EQ(b.grid[1], e[1]);
    EXPECT_EQ(b.block[0], e[2]);
    EXPECT_EQ(b.grid[2], e[3]);
    EXPECT_EQ(b.block[1], e[4]);
    EXPECT_EQ(b.grid[0], e[5]);
    EXPECT_EQ(b.empty, std::find(e, e + 6, 0) != e + 6);
  }
  const std::string k = "cuda kernel 'axes_kernel': ";
  std::vector<bp_value_t> args = {TensorValue(&a), IntValue(1), IntValue(1), IntValue(1),
                                  IntValue(-3),    IntValue(1), IntValue(1)};
  EXPECT_EQ(BindOutcome(sig, args, be, &b).message,
            k + "launch extent blockIdx.z = -3 is negative; pass a size >= 0");
  args[4] = IntValue(1);
  args[1] = IntValue(40000);
  EXPECT_EQ(BindOutcome(sig, args, be, &b).message,
            k + "launch extent threadIdx.z = 40000 is more than its loop variable (int16) can "
                "count (32767); call it through the host function bp_build made, or make the "
                "loop variable int64");
}

// The launch axes are the PrimFunc's typed field: the parser reads them from the attribute
// launch_params (an unknown name is a parse error that names it and lists the axes), the
// printer writes them back in the attribute's place, a builder sets the field, and the kit
// reads it (a function without it is not a kernel; an axis listed twice is refused).
TEST_F(LaunchKitTest, ReadsTheLaunchAxesField) {
  const std::string text = std::string("# backplane-ir 1\n\n") +
                           "func f(a: buffer<float32>[1]) attrs(\"a\": \"x\", \"kernel\": \"1\", "
                           "\"launch_params\": \"threadIdx.y,blockIdx.x\", \"z\": \"\") {\n"
                           "  a[0] = 1.0\n"
                           "}\n";
  const ir::IRModule m = ir::Parse(text);
  const ir::PrimFunc& f = m.functions()[0];
  ASSERT_TRUE(f.launch_axes.has_value());
  EXPECT_EQ(*f.launch_axes,
            (std::vector<ir::ThreadTag>{ir::ThreadTag::kThreadIdxY, ir::ThreadTag::kBlockIdxX}));
  EXPECT_EQ(f.attrs.count("launch_params"), 0u);
  EXPECT_EQ(f.attrs.size(), 3u);
  EXPECT_EQ(ir::Print(m), text);
  const launch::KernelSignature sig(f, "opencl");
  ASSERT_EQ(sig.axes().size(), 2u);
  EXPECT_EQ(sig.axes()[0].tag, ir::ThreadTag::kThreadIdxY);
  EXPECT_EQ(sig.axes()[0].dim, 1);
  EXPECT_FALSE(sig.axes()[0].block);
  EXPECT_EQ(sig.axes()[1].dim, 0);
  EXPECT_TRUE(sig.axes()[1].block);

  // An empty list is a kernel with no axes, and prints as it came.
  const std::string none = std::string("# backplane-ir 1\n\n") +
                           "func g() attrs(\"launch_params\": \"\") {\n  barrier\n}\n";
  const ir::IRModule n = ir::Parse(none);
  ASSERT_TRUE(n.functions()[0].launch_axes.has_value());
  EXPECT_TRUE(n.functions()[0].launch_axes->empty());
  EXPECT_EQ(ir::Print(n), none);

  // Unknown names, empty entries: parse errors naming the name and listing the axes.
  for (const std::string& list :
       {std::string("threadIdx.w"), std::string("blockIdx.x,,threadIdx.x"),
        std::string("threadidx.x"), std::string("blockIdx.x ")}) {
    std::string message;
    try {
      ir::Parse("# backplane-ir 1\n\nfunc h() attrs(\"launch_params\": \"" + list +
                "\") {\n  barrier\n}\n");
    } catch (const ir::Error& e) {
      message = e.what();
    }
    const std::string name = list == "blockIdx.x,,threadIdx.x" ? "" : list;
    EXPECT_NE(
        message.find("attribute 'launch_params' lists '" + name + "', which is no thread axis"),
        std::string::npos)
        << message;
    EXPECT_NE(message.find("each one of blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, "
                           "threadIdx.y, threadIdx.z"),
              std::string::npos)
        << message;
  }

  // Built, not parsed: the builder sets the field and the printer writes the attribute.
  ir::IRModule built;
  ir::PrimFunc k = f;
  k.name = "built_kernel";
  k.attrs = {{"kernel", "1"}};
  k.launch_axes = std::vector<ir::ThreadTag>{ir::ThreadTag::kBlockIdxZ};
  built.Add(k);
  EXPECT_NE(ir::Print(built).find("attrs(\"kernel\": \"1\", \"launch_params\": \"blockIdx.z\") {"),
            std::string::npos)
      << ir::Print(built);

  // Not a kernel, an axis twice: the kit says which.
  auto refusal = [](const ir::PrimFunc& func) {
    try {
      launch::KernelSignature s(func, "cuda");
    } catch (const ir::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  k.launch_axes.reset();
  EXPECT_NE(refusal(k).find("cuda kernel 'built_kernel' is not a kernel (no launch_params "
                            "attribute); build through bp_build"),
            std::string::npos)
      << refusal(k);
  k.launch_axes =
      std::vector<ir::ThreadTag>{ir::ThreadTag::kThreadIdxX, ir::ThreadTag::kThreadIdxX};
  EXPECT_NE(refusal(k).find("cuda kernel 'built_kernel' lists launch param 'threadIdx.x' twice"),
            std::string::npos)
      << refusal(k);

  // The attribute spelled in attrs by a builder is refused by the verifier, naming the field.
  k.launch_axes.reset();
  k.attrs["launch_params"] = "threadIdx.x";
  ir::IRModule wrong;
  wrong.Add(k);
  const std::vector<std::string> errors = ir::VerifyErrors(wrong, ir::VerifyOptions());
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("in function 'built_kernel': attrs holds \"launch_params\", which is "
                           "the typed field PrimFunc::launch_axes"),
            std::string::npos)
      << errors[0];
}

// CheckWrittenApart, the one overlap check (the launch kit's and the cpu plugin's): over
// random byte ranges in two memories it refuses exactly the calls where a written buffer meets
// another buffer of the same memory (a brute-force reference), naming the first such pair.
TEST_F(LaunchKitTest, RefusesAWrittenBufferOverlappingAnother) {
  const ir::IRModule m = ParseKernel(
      "func o_kernel(n: int32, a: buffer<float32>[4], b: buffer<float32>[4], "
      "c: buffer<float32>[4], d: buffer<float32>[4]) attrs(\"kernel\": \"1\", \"launch_params\": "
      "\"threadIdx.x\") {\n"
      "  for tx in thread(threadIdx.x, 0, 1) {\n"
      "    b[0] = a[0]\n"
      "    d[0] = c[0]\n"
      "  }\n"
      "}\n");
  const ir::PrimFunc& f = m.functions()[0];
  const std::vector<uint32_t> buffers = {1, 2, 3, 4}, written = {2, 4};
  std::mt19937_64 rng(7);
  char memories[2];
  int refused = 0;
  for (int i = 0; i < 5000; ++i) {
    launch::ByteRange r[5];
    for (uint32_t p : buffers) {
      const uint64_t begin = rng() % 64;
      const uint64_t size = rng() % 3 == 0 ? 0 : rng() % 16;
      r[p] = {&memories[rng() % 2], begin, begin + size};
    }
    // The reference: the first written buffer, in order, that meets another, and that other.
    std::string want;
    for (uint32_t w : written) {
      for (uint32_t o : buffers) {
        if (!want.empty() || o == w || r[w].memory != r[o].memory) continue;
        const uint64_t lo = std::max(r[w].begin, r[o].begin);
        const uint64_t hi = std::min(r[w].end, r[o].end);
        if (lo < hi) {
          const char* names = "nabcd";
          want = std::string("c function 'o_kernel': arguments ") + std::to_string(w) + " '" +
                 names[w] + "' and " + std::to_string(o) + " '" + names[o] +
                 "' overlap in memory and the function writes '" + names[w] +
                 "'; pass separate tensors (its buffers are restrict pointers, which may not "
                 "alias)";
        }
      }
    }
    std::string got;
    try {
      launch::CheckWrittenApart("c", "function", f, written, buffers,
                                [&r](uint32_t p) { return r[p]; });
    } catch (const backplane::Error& e) {
      EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
      got = e.what();
    }
    EXPECT_EQ(got, want);
    refused += !got.empty();
  }
  EXPECT_GT(refused, 500);
  EXPECT_LT(refused, 4500);
}

}  // namespace
