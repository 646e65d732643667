// SPDX-License-Identifier: Apache-2.0
// The cuda plugin on a real GPU: every GPU kernel of the catalog runs on cuda:0 and matches
// the float64 reference (also after save and load), copies in every direction (host, pinned
// cuda_host, device, peer) on random data with offsets, streams with SyncStreamFromTo, the
// workspace pool, the attributes, events and native handles. Skipped, with the reason, where no
// CUDA device exists; tests/plugins/cuda/gpu_checks.sh runs it on a GPU machine.
#include <dlfcn.h>

#include <backplane/runner/runner.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Device;
using backplane::Module;
using backplane::Target;
using bptest::Capture;
namespace kernels = backplane::kernels;

class CudaGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string lib = std::string(BACKPLANE_CUDA_PLUGIN_DIR) + "/libbackplane_cuda.so";
    ASSERT_TRUE(Capture(bp_plugin_load(lib.c_str())).ok());
    backplane::DeviceAPI api = backplane::DeviceAPI::Get(Device(DLDevice{kDLCUDA, 0}));
    if (!api.Exists()) GTEST_SKIP() << "no CUDA device: " << api.GetProperty("status").ToString();
  }
  static DLDevice Gpu(int32_t id = 0) { return DLDevice{kDLCUDA, id}; }
  static void* Alloc(DLDevice dev, size_t n) {
    void* p = nullptr;
    backplane::Check(bp_device_alloc_data_space(dev, n, 64, backplane::UInt8(), &p));
    return p;
  }
  static void Copy(void* from, DLDevice fd, uint64_t fo, void* to, DLDevice td, uint64_t to_off,
                   int64_t n, bp_stream_t stream = nullptr) {
    int64_t shape[1] = {n};
    DLTensor a = bptest::ByteView(from, fd, shape, fo);
    DLTensor b = bptest::ByteView(to, td, shape, to_off);
    backplane::Check(bp_device_copy_data_from_to(&a, &b, stream));
  }
};

std::vector<std::string> GpuKernels() {
  std::vector<std::string> names;
  for (const kernels::Case& c : kernels::Catalog()) {
    if (c.needs_threads) names.push_back(c.func);
  }
  return names;
}

class CudaGpuKernelTest : public CudaGpuTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(CudaGpuKernelTest, RunsAndMatchesTheReference) {
  const kernels::Case* c = kernels::Find(GetParam());
  ASSERT_NE(c, nullptr);
  // Built from the device: the arch comes from its compute capability.
  Target target = Target::FromDevice(Device(Gpu()));
  Module m = backplane::Build(backplane::runner::KernelSource(*c), target);
  backplane::runner::Result r = backplane::runner::RunCase(*c, m, Device(Gpu()), c->small, 1);
  EXPECT_TRUE(r.ok) << c->func << ": " << r.error;
  Module loaded = Module::LoadFromBytes(m.SaveToBytes());
  r = backplane::runner::RunCase(*c, loaded, Device(Gpu()), c->demo, 1, 7);
  EXPECT_TRUE(r.ok) << c->func << " after save and load, demo size: " << r.error;
}

INSTANTIATE_TEST_SUITE_P(Catalog, CudaGpuKernelTest, ::testing::ValuesIn(GpuKernels()),
                         [](const auto& param_info) { return param_info.param; });

TEST_F(CudaGpuTest, CopiesInEveryDirectionWithOffsets) {
  const size_t n = (1 << 20) + 37;
  std::vector<uint8_t> src = bptest::RandomBytes(n, 11), back(n + 64, 0);
  void* d0 = Alloc(Gpu(), n + 64);
  void* d1 = Alloc(Gpu(), n + 64);
  void* pinned = Alloc(DLDevice{kDLCUDAHost, 0}, n + 64);
  Copy(src.data(), DLDevice{kDLCPU, 0}, 0, d0, Gpu(), 13, n);  // host -> device
  Copy(d0, Gpu(), 13, d1, Gpu(), 5, n);                        // device -> device
  Copy(d1, Gpu(), 5, pinned, DLDevice{kDLCUDAHost, 0}, 0, n);  // device -> pinned
  backplane::Check(bp_device_stream_sync(Gpu(), nullptr));
  EXPECT_EQ(std::memcmp(pinned, src.data(), n), 0);
  Copy(pinned, DLDevice{kDLCUDAHost, 0}, 0, d0, Gpu(), 0, n);  // pinned -> device
  Copy(d0, Gpu(), 0, back.data(), DLDevice{kDLCPU, 0}, 7, n);  // device -> host
  EXPECT_EQ(std::memcmp(back.data() + 7, src.data(), n), 0);
  backplane::DeviceAPI api1 = backplane::DeviceAPI::Get(Device(Gpu(1)));
  if (api1.Exists()) {  // peer
    void* p1 = Alloc(Gpu(1), n);
    Copy(d0, Gpu(), 0, p1, Gpu(1), 0, n);
    std::vector<uint8_t> peer(n);
    Copy(p1, Gpu(1), 0, peer.data(), DLDevice{kDLCPU, 0}, 0, n);
    EXPECT_EQ(peer, src);
    backplane::Check(bp_device_free_data_space(Gpu(1), p1));
  }
  // Past the end of the buffer: refused with the sizes.
  int64_t shape[1] = {static_cast<int64_t>(n + 64)};
  DLTensor a = bptest::ByteView(src.data(), DLDevice{kDLCPU, 0}, shape, 0);
  shape[0] = static_cast<int64_t>(n);
  DLTensor b = bptest::ByteView(d0, Gpu(), shape, 100);
  EXPECT_EQ(Capture(bp_device_copy_data_from_to(&b, &b, nullptr)).kind, BP_ERR_INVALID_ARGUMENT);
  (void)a;
  backplane::Check(bp_device_free_data_space(Gpu(), d0));
  backplane::Check(bp_device_free_data_space(Gpu(), d1));
  backplane::Check(bp_device_free_data_space(DLDevice{kDLCUDAHost, 0}, pinned));
  EXPECT_EQ(Capture(bp_device_free_data_space(Gpu(), d0)).kind, BP_ERR_INVALID_ARGUMENT);
}

TEST_F(CudaGpuTest, StreamsOrderWorkWithSyncStreamFromTo) {
  const size_t n = 64 << 20;
  std::vector<uint8_t> src = bptest::RandomBytes(n, 3), back(n);
  void* a = Alloc(Gpu(), n);
  void* b = Alloc(Gpu(), n);
  bp_stream_t s1 = nullptr, s2 = nullptr;
  backplane::Check(bp_device_stream_create(Gpu(), &s1));
  backplane::Check(bp_device_stream_create(Gpu(), &s2));
  Copy(src.data(), DLDevice{kDLCPU, 0}, 0, a, Gpu(), 0, n, s1);
  backplane::Check(bp_device_sync_stream_from_to(Gpu(), s1, s2));
  Copy(a, Gpu(), 0, b, Gpu(), 0, n, s2);
  backplane::Check(bp_device_stream_sync(Gpu(), s2));
  Copy(b, Gpu(), 0, back.data(), DLDevice{kDLCPU, 0}, 0, n, s2);
  EXPECT_EQ(back, src);
  backplane::Check(bp_device_stream_free(Gpu(), s1));
  backplane::Check(bp_device_stream_free(Gpu(), s2));
  backplane::Check(bp_device_free_data_space(Gpu(), a));
  backplane::Check(bp_device_free_data_space(Gpu(), b));
}

TEST_F(CudaGpuTest, WorkspacesAreReused) {
  void* w = nullptr;
  backplane::Check(bp_device_alloc_workspace(Gpu(), 5000, backplane::UInt8(), &w));
  backplane::Check(bp_device_free_workspace(Gpu(), w));
  void* again = nullptr;
  backplane::Check(bp_device_alloc_workspace(Gpu(), 5100, backplane::UInt8(), &again));
  EXPECT_EQ(again, w);  // the same 5 KiB class (sdk::WorkspacePool: quarter steps)
  backplane::Check(bp_device_free_workspace(Gpu(), again));
  EXPECT_EQ(Capture(bp_device_free_workspace(Gpu(), again)).kind, BP_ERR_INVALID_ARGUMENT);
}

TEST_F(CudaGpuTest, AttributesHaveTheDocumentedFormats) {
  backplane::DeviceAPI api = backplane::DeviceAPI::Get(Device(Gpu()));
  const std::string cv = api.GetAttr(BP_ATTR_COMPUTE_VERSION).ToString();
  EXPECT_TRUE(cv.size() >= 3 && cv.find('.') != std::string::npos) << cv;
  const std::string dims = api.GetAttr(BP_ATTR_MAX_THREAD_DIMENSIONS).ToString();
  EXPECT_EQ(dims, "[1024, 1024, 64]");
  EXPECT_EQ(api.GetAttr(BP_ATTR_WARP_SIZE).AsInt(), 32);
  EXPECT_GT(api.GetAttr(BP_ATTR_MULTI_PROCESSOR_COUNT).AsInt(), 0);
  EXPECT_GT(api.GetAttr(BP_ATTR_TOTAL_GLOBAL_MEMORY).AsInt(),
            api.GetAttr(BP_ATTR_AVAILABLE_GLOBAL_MEMORY).AsInt() - 1);
  EXPECT_EQ(api.GetAttr(BP_ATTR_GCN_ARCH).type(), BP_VALUE_NONE);
  Target t = Target::FromDevice(Device(Gpu()));
  const std::string arch = t.GetAttr<std::string>("arch").value_or("");
  EXPECT_EQ(arch.rfind("sm_", 0), 0u) << arch;
}

}  // namespace

// Run-time checks on the GPU (docs/codegen-guide.md "Run-time checks"): a division by zero
// and, with -bounds-check, an access out of bounds are the interpreter's errors read from the
// fault record; INT_MIN / -1 wraps; right inputs give right results; a good call after a
// fault runs (the record was cleared).
TEST_F(CudaGpuTest, RunTimeChecksRaiseTheInterpretersErrors) {
  const std::string ir = R"(# backplane-ir 1
func f(n: int32, m: int32, a: buffer<int32>[m], b: buffer<int32>[m], q: buffer<int32>[m]) {
  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {
    for tx in thread(threadIdx.x, 0, 64) {
      let i: int32 = bx * 64 + tx
      if (i < n) {
        q[i] = a[i] / b[i]
      }
    }
  }
}
)";
  Target target = Target::Parse(Target::FromDevice(Device(Gpu())).ToJson());
  Module m = backplane::Build(
      ir, Target::Parse("cuda -bounds-check -arch=" + target.GetAttr<std::string>("arch").value()));
  const int32_t n = 100;
  std::vector<int32_t> a(n), b(n);
  for (int32_t i = 0; i < n; ++i) {
    a[i] = (i * 7919) % 2001 - 1000;
    b[i] = i % 13 - 6 == 0 ? 5 : i % 13 - 6;
  }
  a[3] = INT32_MIN;
  b[3] = -1;
  const DLDataType i32{kDLInt, 32, 1};
  backplane::Tensor ta = backplane::Tensor::Empty({n}, i32, Device(Gpu()));
  backplane::Tensor tb = backplane::Tensor::Empty({n}, i32, Device(Gpu()));
  backplane::Tensor tq = backplane::Tensor::Empty({n}, i32, Device(Gpu()));
  ta.CopyFrom(a);
  tb.CopyFrom(b);
  m.GetFunction("f")(n, n, ta.dl(), tb.dl(), tq.dl());
  std::vector<int32_t> q = tq.ToVector<int32_t>();
  for (int32_t i = 0; i < n; ++i) EXPECT_EQ(q[i], i == 3 ? INT32_MIN : a[i] / b[i]) << i;
  auto error = [&](int32_t count) {
    try {
      m.GetFunction("f")(count, n, ta.dl(), tb.dl(), tq.dl());
    } catch (const backplane::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(n + 1).find("f_kernel: index 100 is out of bounds for dimension 0 of buffer "
                              "'a' (extent 100) in `a[i]`"),
            std::string::npos);
  b[50] = 0;
  tb.CopyFrom(b);
  EXPECT_NE(error(n).find("f_kernel: integer division by zero in `a[i] / b[i]`"),
            std::string::npos);
  b[50] = 1;
  tb.CopyFrom(b);
  EXPECT_EQ(error(n), "no error");
}

// On the hardware: cuda <-> cuda_host copies queued on a created
// (non-blocking) stream are ordered after the work queued there before them.
TEST_F(CudaGpuTest, CopiesWithCudaHostAreOrderedOnACreatedStream) {
  const int64_t n = 64 << 20;  // long enough that an unordered copy would overtake it
  const std::vector<uint8_t> data = bptest::RandomBytes(static_cast<size_t>(n), 5);
  void* a = Alloc(Gpu(), n);
  void* b = Alloc(Gpu(), n);
  void* pinned = Alloc(DLDevice{kDLCUDAHost, 0}, n);
  Copy(const_cast<uint8_t*>(data.data()), DLDevice{kDLCPU, 0}, 0, a, Gpu(), 0, n);
  bp_stream_t s = nullptr;
  backplane::Check(bp_device_stream_create(Gpu(), &s));
  Copy(a, Gpu(), 0, b, Gpu(), 0, n, s);
  Copy(b, Gpu(), 0, pinned, DLDevice{kDLCUDAHost, 0}, 0, n, s);
  backplane::Check(bp_device_stream_sync(Gpu(), s));
  EXPECT_EQ(std::memcmp(pinned, data.data(), static_cast<size_t>(n)), 0);
  backplane::Check(bp_device_stream_free(Gpu(), s));
  backplane::Check(bp_device_free_data_space(Gpu(), a));
  backplane::Check(bp_device_free_data_space(Gpu(), b));
  backplane::Check(bp_device_free_data_space(DLDevice{kDLCUDAHost, 0}, pinned));
}

// On the hardware: a grid of more than 65,535 blocks on y, or on z (one
// cuLaunchKernel's limit), runs as several launches, each kernel adding its part's block
// offset to blockIdx; every element matches the host's sum of random inputs (one float add:
// exact), and none is left at its NaN fill. A grid that fits runs as before.
TEST_F(CudaGpuTest, GridsLargerThanOneLaunchRunInParts) {
  const char* ir = R"(# backplane-ir 1
func add3(n: int32, m: int32, k: int32, x: buffer<float32>[k, m, n], y: buffer<float32>[k, m, n], out: buffer<float32>[k, m, n]) {
  for bz in thread(blockIdx.z, 0, k) {
    for by in thread(blockIdx.y, 0, m) {
      for tx in thread(threadIdx.x, 0, n) {
        out[bz, by, tx] = x[bz, by, tx] + y[bz, by, tx]
      }
    }
  }
}
)";
  Module m = backplane::Build(ir, Target::FromDevice(Device(Gpu())));
  std::mt19937 rng(1810);
  std::uniform_int_distribution<int32_t> past(65536, 3 * 65535 + 1000);
  std::uniform_real_distribution<float> value(-100.0f, 100.0f);
  struct Size {
    int32_t n, m, k;
  };
  const Size sizes[] = {{32, past(rng), 1}, {5, 3, past(rng)}, {7, 65535, 2}};
  const DLDataType f32{kDLFloat, 32, 1};
  for (const Size& s : sizes) {
    const size_t count = static_cast<size_t>(s.n) * s.m * s.k;
    std::vector<float> x(count), y(count);
    for (size_t i = 0; i < count; ++i) {
      x[i] = value(rng);
      y[i] = value(rng);
    }
    const std::vector<int64_t> shape = {s.k, s.m, s.n};
    backplane::Tensor tx = backplane::Tensor::Empty(shape, f32, Device(Gpu()));
    backplane::Tensor ty = backplane::Tensor::Empty(shape, f32, Device(Gpu()));
    backplane::Tensor tout = backplane::Tensor::Empty(shape, f32, Device(Gpu()));
    tx.CopyFrom(x);
    ty.CopyFrom(y);
    tout.CopyFrom(std::vector<float>(count, std::nanf("")));
    m.GetFunction("add3")(s.n, s.m, s.k, tx.dl(), ty.dl(), tout.dl());
    const std::vector<float> got = tout.ToVector<float>();
    ASSERT_EQ(got.size(), count);
    size_t wrong = 0, first = count;
    for (size_t i = 0; i < count; ++i) {
      if (!(got[i] == x[i] + y[i])) {
        ++wrong;
        if (first == count) first = i;
      }
    }
    EXPECT_EQ(wrong, 0u) << "grid (1, " << s.m << ", " << s.k << ") of " << s.n
                         << " threads: the first wrong element is " << first << " (block z "
                         << (first / s.n / s.m) << ", y " << (first / s.n % s.m) << "): got "
                         << (first < count ? got[first] : 0.0f) << ", want "
                         << (first < count ? x[first] + y[first] : 0.0f);
  }
}

// CUevents. A kernel queued on one stream, then a copy on another stream that
// waits for the event recorded after it (no host wait between), reads the kernel's result; the
// time between two events around the work is positive.
TEST_F(CudaGpuTest, EventsOrderStreamsAndTimeAKernel) {
  const int32_t rows = 4096;
  const size_t count = static_cast<size_t>(rows) * 256;
  const std::vector<float> x = bptest::RandomFloats(count, 1901),
                           y = bptest::RandomFloats(count, 1902);
  Module m = backplane::Build(bptest::kScaleAddGpuIr, Target::FromDevice(Device(Gpu())));
  const DLDataType f32{kDLFloat, 32, 1};
  const std::vector<int64_t> shape = {rows, 256};
  backplane::Tensor tx = backplane::Tensor::Empty(shape, f32, Device(Gpu()));
  backplane::Tensor ty = backplane::Tensor::Empty(shape, f32, Device(Gpu()));
  backplane::Tensor tout = backplane::Tensor::Empty(shape, f32, Device(Gpu()));
  tx.CopyFrom(x);
  ty.CopyFrom(y);
  tout.CopyFrom(std::vector<float>(count, std::nanf("")));
  backplane::Stream s{Device(Gpu())}, t{Device(Gpu())};
  backplane::Event start{Device(Gpu())}, end{Device(Gpu())};
  s.SetActive();
  start.Record(s);
  for (int i = 0; i < 20; ++i) m.GetFunction("scale_add")(rows, tx.dl(), ty.dl(), tout.dl());
  end.Record(s);
  end.MakeWait(t);
  std::vector<float> got(count, 0.0f);
  Copy(tout.dl()->data, Gpu(), 0, got.data(), DLDevice{kDLCPU, 0}, 0,
       static_cast<int64_t>(count * sizeof(float)), t.handle());  // waits for t only
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += got[i] == 2.0f * x[i] + y[i] ? 0 : 1;
  EXPECT_EQ(wrong, 0u) << "the copy on the waiting stream ran before the kernel finished";
  EXPECT_TRUE(end.Done());
  const double ms = end.ElapsedMsSince(start);
  EXPECT_GT(ms, 0.0);
  EXPECT_LT(ms, 60000.0);
  backplane::Check(bp_device_stream_set(Gpu(), nullptr));
}

// Native handles out (the CUstream, the primary context, the CUdevice, a
// tensor's CUdeviceptr) and a CUdeviceptr from the application's own cuMemAlloc wrapped as
// tensors that a kernel reads, without a copy; the release runs when the tensor goes.
TEST_F(CudaGpuTest, NativeHandlesAndAWrappedCuMemAlloc) {
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libcuda, nullptr) << "the plugin loaded libcuda.so.1";
  auto mem_alloc = reinterpret_cast<int (*)(uint64_t*, size_t)>(dlsym(libcuda, "cuMemAlloc_v2"));
  auto mem_free = reinterpret_cast<int (*)(uint64_t)>(dlsym(libcuda, "cuMemFree_v2"));
  auto set_current = reinterpret_cast<int (*)(void*)>(dlsym(libcuda, "cuCtxSetCurrent"));
  ASSERT_TRUE(mem_alloc != nullptr && mem_free != nullptr && set_current != nullptr);

  backplane::Stream s{Device(Gpu())};
  EXPECT_EQ(backplane::NativeHandle(Device(Gpu()), BP_NATIVE_QUEUE, s.handle()),
            reinterpret_cast<uint64_t>(s.handle()));
  EXPECT_EQ(backplane::NativeHandle(Device(Gpu()), BP_NATIVE_QUEUE, nullptr), 0u);
  const uint64_t ctx = backplane::NativeHandle(Device(Gpu()), BP_NATIVE_CONTEXT);
  EXPECT_NE(ctx, 0u);
  EXPECT_EQ(backplane::NativeHandle(Device(Gpu()), BP_NATIVE_DEVICE),
            0u);  // the CUdevice of ordinal 0
  const bptest::Status none =
      bptest::CaptureError([] { backplane::NativeHandle(Device(Gpu()), BP_NATIVE_PLATFORM); });
  EXPECT_EQ(none.kind, BP_ERR_UNSUPPORTED) << none;

  const int32_t rows = 1000;
  const size_t count = static_cast<size_t>(rows) * 256, bytes = count * sizeof(float);
  ASSERT_EQ(set_current(reinterpret_cast<void*>(ctx)), 0);
  uint64_t px = 0, py = 0;
  ASSERT_EQ(mem_alloc(&px, bytes), 0);
  ASSERT_EQ(mem_alloc(&py, bytes + 4096), 0);
  const DLDataType f32{kDLFloat, 32, 1};
  const std::vector<int64_t> shape = {rows, 256};
  int released = 0;
  {
    bp_native_buffer_t bx{sizeof(bp_native_buffer_t), px, 0, 0, bytes};
    bp_native_buffer_t by{sizeof(bp_native_buffer_t), py, 0, 0, bytes + 4096};
    backplane::Tensor tx =
        backplane::Tensor::FromNative(Device(Gpu()), bx, shape, f32, [&] { ++released; });
    backplane::Tensor ty =
        backplane::Tensor::FromNative(Device(Gpu()), by, shape, f32, [&] { ++released; });
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_BUFFER), px);
    EXPECT_EQ(reinterpret_cast<uint64_t>(tx.dl()->data), px) << "no copy: the data is the buffer";
    const std::vector<float> x = bptest::RandomFloats(count, 1903),
                             y = bptest::RandomFloats(count, 1904);
    tx.CopyFrom(x);
    ty.CopyFrom(y);
    backplane::Tensor out = backplane::Tensor::Empty(shape, f32, Device(Gpu()));
    EXPECT_NE(out.NativeHandle(BP_NATIVE_BUFFER), 0u);
    Module m = backplane::Build(bptest::kScaleAddGpuIr, Target::FromDevice(Device(Gpu())));
    m.GetFunction("scale_add")(rows, tx.dl(), ty.dl(), out.dl());
    const std::vector<float> got = out.ToVector<float>();
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += got[i] == 2.0f * x[i] + y[i] ? 0 : 1;
    EXPECT_EQ(wrong, 0u);
    // Past the allocation: refused, and the release of a refused wrap never runs.
    bp_native_buffer_t big{sizeof(bp_native_buffer_t), px, 0, 0, bytes + 1};
    const bptest::Status st = bptest::CaptureError([&] {
      backplane::Tensor::FromNative(Device(Gpu()), big, {static_cast<int64_t>(bytes + 1)},
                                    backplane::UInt8(), [&] { released += 100; });
    });
    EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 2) << "each wrapped tensor's release runs once, when it goes";
  ASSERT_EQ(set_current(reinterpret_cast<void*>(ctx)), 0);
  EXPECT_EQ(mem_free(px), 0) << "the buffer stayed the application's";
  EXPECT_EQ(mem_free(py), 0);
}
