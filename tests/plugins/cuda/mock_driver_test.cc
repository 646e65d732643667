// SPDX-License-Identifier: Apache-2.0
// The cuda plugin's memory, copy, stream, module and launch logic, run here without a GPU on
// the MOCK CUDA driver (tests/plugins/cuda/mock_driver: the Driver API's documented contract
// on host memory, with deferred streams). Each test is a regression case: it failed
// before the plugin's fix and passes after. Kernels do not run on the mock; launches are
// checked and counted. Each test runs in a process of its own (gtest_discover_tests), so the
// mock's environment variables set before the plugin loads reach it.
#include <dlfcn.h>
#include <stdlib.h>

#include <algorithm>
#include <backplane/runner/runner.hpp>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Device;
using backplane::Module;
using backplane::Target;
using bptest::Capture;
using bptest::CaptureError;

constexpr DLDevice kGpu{kDLCUDA, 0};
constexpr DLDevice kPinned{kDLCUDAHost, 0};
constexpr DLDevice kCpu{kDLCPU, 0};

// The mock driver, found beside the test like the plugins (in the build tree and in the GPU
// bundle alike).
std::string MockDriverPath() {
  return bptest::RunTimeRoot() + "/lib/backplane/test-mocks/libbackplane_mock_cuda_driver.so";
}

// What the mock counts, read through its bp_mock_cuda_* functions.
struct Mock {
  long long (*launches)() = nullptr;
  void (*last_launch)(unsigned dims[6]) = nullptr;
  long long (*unload_errors)() = nullptr;
  long long (*live_modules)() = nullptr;
  int (*sticky_error)() = nullptr;
  long long (*used_memory)() = nullptr;
  long long (*launch_log_size)() = nullptr;
  int (*launch_log)(long long i, unsigned dims[6], unsigned long long* params, int max) = nullptr;
  void (*clear_launch_log)() = nullptr;
  long long (*calls)(const char* name) = nullptr;  // driver calls by symbol; null: all
};

// Points the plugin at the mock driver, with `env` (name, value pairs) set first, and loads it.
void UseMock(std::initializer_list<std::pair<const char*, const char*>> env = {}) {
  setenv("BACKPLANE_CUDA_DRIVER_LIBRARY", MockDriverPath().c_str(), 1);
  for (const auto& [name, value] : env) setenv(name, value, 1);
  const std::string lib = std::string(BACKPLANE_CUDA_PLUGIN_DIR) + "/libbackplane_cuda.so";
  ASSERT_TRUE(Capture(bp_plugin_load(lib.c_str())).ok()) << lib;
  backplane::DeviceAPI api = backplane::DeviceAPI::Get(Device(kGpu));
  ASSERT_TRUE(api.Exists()) << api.GetProperty("status").ToString();
}

// The mock's counters (the plugin loaded it; this finds the same copy).
Mock Counters() {
  void* h = dlopen(MockDriverPath().c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr) << "the mock driver is not loaded";
  Mock m;
  m.launches = reinterpret_cast<long long (*)()>(dlsym(h, "bp_mock_cuda_launches"));
  m.last_launch = reinterpret_cast<void (*)(unsigned*)>(dlsym(h, "bp_mock_cuda_last_launch"));
  m.unload_errors = reinterpret_cast<long long (*)()>(dlsym(h, "bp_mock_cuda_unload_errors"));
  m.live_modules = reinterpret_cast<long long (*)()>(dlsym(h, "bp_mock_cuda_live_modules"));
  m.sticky_error = reinterpret_cast<int (*)()>(dlsym(h, "bp_mock_cuda_sticky_error"));
  m.used_memory = reinterpret_cast<long long (*)()>(dlsym(h, "bp_mock_cuda_used_memory"));
  m.launch_log_size = reinterpret_cast<long long (*)()>(dlsym(h, "bp_mock_cuda_launch_log_size"));
  m.launch_log = reinterpret_cast<int (*)(long long, unsigned*, unsigned long long*, int)>(
      dlsym(h, "bp_mock_cuda_launch_log"));
  m.clear_launch_log = reinterpret_cast<void (*)()>(dlsym(h, "bp_mock_cuda_clear_launch_log"));
  m.calls = reinterpret_cast<long long (*)(const char*)>(dlsym(h, "bp_mock_cuda_calls"));
  return m;
}

void* Alloc(DLDevice dev, size_t n, size_t alignment = 64) {
  void* p = nullptr;
  backplane::Check(bp_device_alloc_data_space(dev, n, alignment, backplane::UInt8(), &p));
  return p;
}

DLTensor Bytes(void* data, DLDevice dev, int64_t* shape, uint64_t offset = 0) {
  return bptest::ByteView(data, dev, shape, offset);
}

bptest::Status Copy(void* from, DLDevice fd, void* to, DLDevice td, int64_t n,
                    bp_stream_t stream = nullptr, uint64_t from_offset = 0) {
  int64_t shape[1] = {n};
  DLTensor a = Bytes(from, fd, shape, from_offset);
  DLTensor b = Bytes(to, td, shape);
  return Capture(bp_device_copy_data_from_to(&a, &b, stream));
}

bp_stream_t NewStream() {
  bp_stream_t s = nullptr;
  backplane::Check(bp_device_stream_create(kGpu, &s));
  return s;
}

// Item 1: every power-of-two alignment up to 4096 (the kit asks for all of them), with the
// real base kept for cuMemFree.
TEST(CudaMockDriverTest, DataSpaceHonoursEveryAlignmentUpTo4096) {
  UseMock();
  const Mock mock = Counters();
  const long long before = mock.used_memory();
  uint32_t seed = 1;
  for (size_t align = 1; align <= 4096; align *= 2) {
    for (size_t size : {size_t{1}, size_t{1000}, size_t{4097}}) {
      void* p = Alloc(kGpu, size, align);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << size << " bytes, align " << align;
      const std::vector<uint8_t> want = bptest::RandomBytes(size, ++seed);
      std::vector<uint8_t> got(size, 0);
      ASSERT_TRUE(Copy(const_cast<uint8_t*>(want.data()), kCpu, p, kGpu, size).ok());
      ASSERT_TRUE(Copy(p, kGpu, got.data(), kCpu, size).ok());
      EXPECT_EQ(got, want) << size << " bytes, align " << align;
      ASSERT_TRUE(Capture(bp_device_free_data_space(kGpu, p)).ok());
    }
  }
  EXPECT_EQ(mock.used_memory(), before) << "an over-aligned allocation was not freed whole";
  void* odd_ptr = nullptr;
  const bptest::Status odd =
      Capture(bp_device_alloc_data_space(kGpu, 64, 48, backplane::UInt8(), &odd_ptr));
  EXPECT_EQ(odd.kind, BP_ERR_INVALID_ARGUMENT) << odd;
}

// Item 2: cuda <-> cuda_host copies go through the plugin, ordered on the caller's stream
// (the core staged them on the null stream, unordered with it, then synchronised cuda_host).
TEST(CudaMockDriverTest, CopiesWithCudaHostAreOrderedOnTheCallersStream) {
  UseMock();
  const size_t n = 4096;
  const std::vector<uint8_t> data = bptest::RandomBytes(n, 11);
  void* a = Alloc(kGpu, n);
  void* b = Alloc(kGpu, n);
  void* pinned = Alloc(kPinned, n);
  ASSERT_TRUE(Copy(const_cast<uint8_t*>(data.data()), kCpu, a, kGpu, n).ok());
  bp_stream_t s = NewStream();
  // a -> b queued on s; then b -> pinned on s must see b's new bytes.
  ASSERT_TRUE(Copy(a, kGpu, b, kGpu, n, s).ok());
  const bptest::Status to_pinned = Copy(b, kGpu, pinned, kPinned, n, s);
  ASSERT_TRUE(to_pinned.ok()) << to_pinned;
  ASSERT_TRUE(Capture(bp_device_stream_sync(kGpu, s)).ok());
  EXPECT_EQ(std::memcmp(pinned, data.data(), n), 0) << "the copy ran before the one queued ahead";
  // cuda_host -> cuda on s, then back to the CPU.
  const std::vector<uint8_t> more = bptest::RandomBytes(n, 12);
  std::memcpy(pinned, more.data(), n);
  const bptest::Status from_pinned = Copy(pinned, kPinned, a, kGpu, n, s);
  ASSERT_TRUE(from_pinned.ok()) << from_pinned;
  ASSERT_TRUE(Capture(bp_device_stream_sync(kGpu, s)).ok());
  std::vector<uint8_t> back(n, 0);
  ASSERT_TRUE(Copy(a, kGpu, back.data(), kCpu, n).ok());
  EXPECT_EQ(back, more);
  ASSERT_TRUE(Capture(bp_device_stream_free(kGpu, s)).ok());
  for (void* p : {a, b}) ASSERT_TRUE(Capture(bp_device_free_data_space(kGpu, p)).ok());
  ASSERT_TRUE(Capture(bp_device_free_data_space(kPinned, pinned)).ok());
}

// Item 3: a workspace freed while its stream still has work queued is not handed to another
// stream until that work is done; the same stream may take it at once.
TEST(CudaMockDriverTest, APooledWorkspaceWaitsForTheStreamItWasFreedOn) {
  UseMock();
  const Mock mock = Counters();
  bp_stream_t a = NewStream(), b = NewStream();
  void* src = Alloc(kGpu, 4096);
  ASSERT_TRUE(Capture(bp_device_stream_set(kGpu, a)).ok());
  void* w = nullptr;
  ASSERT_TRUE(Capture(bp_device_alloc_workspace(kGpu, 4096, backplane::UInt8(), &w)).ok());
  ASSERT_TRUE(Copy(src, kGpu, w, kGpu, 4096, a).ok());  // still queued on a
  ASSERT_TRUE(Capture(bp_device_free_workspace(kGpu, w)).ok());
  ASSERT_TRUE(Capture(bp_device_stream_set(kGpu, b)).ok());
  void* on_b = nullptr;
  ASSERT_TRUE(Capture(bp_device_alloc_workspace(kGpu, 4096, backplane::UInt8(), &on_b)).ok());
  EXPECT_NE(on_b, w) << "stream b got a buffer stream a's queued copy still writes";
  ASSERT_TRUE(Capture(bp_device_stream_set(kGpu, a)).ok());
  void* on_a = nullptr;
  ASSERT_TRUE(Capture(bp_device_alloc_workspace(kGpu, 4096, backplane::UInt8(), &on_a)).ok());
  EXPECT_EQ(on_a, w) << "the stream that freed it may reuse it at once";
  ASSERT_TRUE(Capture(bp_device_free_workspace(kGpu, on_a)).ok());  // a's copy still queued
  ASSERT_TRUE(Capture(bp_device_stream_set(kGpu, b)).ok());
  ASSERT_TRUE(Capture(bp_device_free_workspace(kGpu, on_b)).ok());
  void* again = nullptr;
  ASSERT_TRUE(Capture(bp_device_alloc_workspace(kGpu, 4096, backplane::UInt8(), &again)).ok());
  EXPECT_EQ(again, on_b) << "b's own buffer is free for b; a's is not yet";
  ASSERT_TRUE(Capture(bp_device_free_workspace(kGpu, again)).ok());
  // Once a's work is done, b may take a's buffer too; no new memory is allocated for it.
  ASSERT_TRUE(Capture(bp_device_stream_sync(kGpu, a)).ok());
  const long long used = mock.used_memory();
  void* x = nullptr;
  void* y = nullptr;
  ASSERT_TRUE(Capture(bp_device_alloc_workspace(kGpu, 4096, backplane::UInt8(), &x)).ok());
  ASSERT_TRUE(Capture(bp_device_alloc_workspace(kGpu, 4096, backplane::UInt8(), &y)).ok());
  EXPECT_EQ(mock.used_memory(), used);
  EXPECT_TRUE((x == w && y == on_b) || (x == on_b && y == w)) << x << " " << y;
  for (void* p : {x, y}) ASSERT_TRUE(Capture(bp_device_free_workspace(kGpu, p)).ok());
  ASSERT_TRUE(Capture(bp_device_stream_set(kGpu, nullptr)).ok());
  for (bp_stream_t s : {a, b}) ASSERT_TRUE(Capture(bp_device_stream_free(kGpu, s)).ok());
  ASSERT_TRUE(Capture(bp_device_free_data_space(kGpu, src)).ok());
}

// Item 4: an address the plugin did not allocate and the driver does not know is refused
// before it reaches the device (where it would break the context); memory another library
// allocated is accepted within its bounds.
TEST(CudaMockDriverTest, CopiesToUnknownAddressesFailCleanlyAndTheDeviceStaysUsable) {
  UseMock();
  const Mock mock = Counters();
  std::vector<uint8_t> host = bptest::RandomBytes(256, 21);
  void* freed = Alloc(kGpu, 256);
  ASSERT_TRUE(Capture(bp_device_free_data_space(kGpu, freed)).ok());
  bp_stream_t s = NewStream();
  for (void* bad : {reinterpret_cast<void*>(uintptr_t{0x7f0012340000}), freed}) {
    for (bool upload : {true, false}) {
      const bptest::Status st = upload ? Copy(host.data(), kCpu, bad, kGpu, 256, s)
                                       : Copy(bad, kGpu, host.data(), kCpu, 256, s);
      EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
      EXPECT_NE(st.message.find("is not device memory of cuda:0"), std::string::npos) << st;
    }
  }
  ASSERT_TRUE(Capture(bp_device_stream_sync(kGpu, s)).ok());
  EXPECT_EQ(mock.sticky_error(), 0) << "a bad address reached the device";
  // Another library's allocation (the driver's own cuMemAlloc): in bounds works, past the end
  // is refused naming the sizes.
  void* h = dlopen(MockDriverPath().c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto mem_alloc = reinterpret_cast<int (*)(uint64_t*, size_t)>(dlsym(h, "cuMemAlloc_v2"));
  ASSERT_NE(mem_alloc, nullptr);
  ASSERT_TRUE(Capture(bp_device_set(kGpu)).ok());  // its context current on this thread
  uint64_t foreign = 0;
  ASSERT_EQ(mem_alloc(&foreign, 256), 0);
  void* f = reinterpret_cast<void*>(static_cast<uintptr_t>(foreign));
  ASSERT_TRUE(Copy(host.data(), kCpu, f, kGpu, 256).ok());
  std::vector<uint8_t> back(256, 0);
  ASSERT_TRUE(Copy(f, kGpu, back.data(), kCpu, 256).ok());
  EXPECT_EQ(back, host);
  std::vector<uint8_t> big(512, 1);
  const bptest::Status past = Copy(big.data(), kCpu, f, kGpu, 512);
  EXPECT_EQ(past.kind, BP_ERR_INVALID_ARGUMENT) << past;
  EXPECT_NE(past.message.find("run past the end of the 256-byte buffer"), std::string::npos)
      << past;
  EXPECT_EQ(mock.sticky_error(), 0);
  ASSERT_TRUE(Capture(bp_device_stream_free(kGpu, s)).ok());
}

// Item 5: an upload from pageable memory has read it when the copy returns, so the caller may
// reuse its buffer; from pinned memory it stays asynchronous on the stream.
TEST(CudaMockDriverTest, UploadsFromPageableMemoryHaveReadItOnReturn) {
  UseMock();
  const size_t n = 1024;
  const std::vector<uint8_t> want = bptest::RandomBytes(n, 31);
  std::vector<uint8_t> host = want;
  void* d = Alloc(kGpu, n);
  bp_stream_t s = NewStream();
  ASSERT_TRUE(Copy(host.data(), kCpu, d, kGpu, n, s).ok());
  std::fill(host.begin(), host.end(), uint8_t{0xEE});  // the caller reuses its buffer
  ASSERT_TRUE(Capture(bp_device_stream_sync(kGpu, s)).ok());
  std::vector<uint8_t> back(n, 0);
  ASSERT_TRUE(Copy(d, kGpu, back.data(), kCpu, n).ok());
  EXPECT_EQ(back, want) << "the copy read the pageable buffer after it returned";
  // Pinned: queued on s, read when s runs (the documented contract; keep it unchanged until
  // StreamSync).
  void* pinned = Alloc(kPinned, n);
  std::memcpy(pinned, want.data(), n);
  ASSERT_TRUE(Copy(pinned, kPinned, d, kGpu, n, s).ok());
  std::memset(pinned, 0x11, n);
  ASSERT_TRUE(Capture(bp_device_stream_sync(kGpu, s)).ok());
  ASSERT_TRUE(Copy(d, kGpu, back.data(), kCpu, n).ok());
  EXPECT_EQ(back, std::vector<uint8_t>(n, 0x11)) << "a pinned upload synchronised needlessly";
  ASSERT_TRUE(Capture(bp_device_stream_free(kGpu, s)).ok());
  ASSERT_TRUE(Capture(bp_device_free_data_space(kGpu, d)).ok());
  ASSERT_TRUE(Capture(bp_device_free_data_space(kPinned, pinned)).ok());
}

const char* kFill = R"(# backplane-ir 1
func fill_rows(n: int32, m: int32, a: buffer<float32>[m, n]) {
  for by in thread(blockIdx.y, 0, m) {
    for tx in thread(threadIdx.x, 0, n) {
      a[by, tx] = 1.0
    }
  }
}
func fill_cols(n: int32, a: buffer<float32>[n]) {
  for bx in thread(blockIdx.x, 0, (n + 255) / 256) {
    for tx in thread(threadIdx.x, 0, 256) {
      if (bx * 256 + tx < n) {
        a[bx * 256 + tx] = 2.0
      }
    }
  }
}
)";

backplane::Tensor Floats(const std::vector<int64_t>& shape) {
  return backplane::Tensor::Empty(shape, DLDataType{kDLFloat, 32, 1}, Device(kGpu));
}

// Item 6: a module built from a compute capability 9.0 device is PTX for compute_90, which
// a later GPU loads; sm_90a is asked for explicitly and loads only on 9.0.
TEST(CudaMockDriverTest, TheDefaultArchRunsOnLaterGpusAndSm90aOnlyOn90) {
  UseMock({{"BACKPLANE_MOCK_CUDA_CC", "9.0"}});
  const Mock mock = Counters();
  const Target from_device = Target::FromDevice(Device(kGpu));
  EXPECT_EQ(from_device.GetAttr<std::string>("arch").value_or(""), "sm_90");
  Module portable = backplane::Build(kFill, from_device);
  Module specific = backplane::Build(kFill, Target::Parse("cuda -arch=sm_90a"));
  backplane::Tensor a = Floats({1000});
  setenv("BACKPLANE_MOCK_CUDA_CC", "10.0", 1);  // the module moves to a later GPU
  portable.GetFunction("fill_cols")(1000, a.dl());
  backplane::Check(bp_device_stream_sync(kGpu, nullptr));
  EXPECT_EQ(mock.launches(), 1);
  const bptest::Status st = CaptureError([&] { specific.GetFunction("fill_cols")(1000, a.dl()); });
  EXPECT_EQ(st.kind, BP_ERR_DEVICE) << st;
  EXPECT_NE(st.message.find("CUDA_ERROR_NO_BINARY_FOR_GPU"), std::string::npos) << st;
  EXPECT_NE(st.message.find("the JIT log says: ptxas fatal"), std::string::npos) << st;
  EXPECT_NE(st.message.find("PTX for sm_XYa only on sm_XY"), std::string::npos) << st;
}

// Item 7: PTX of a newer ISA than the driver JIT-compiles is refused at load naming both
// versions and the driver to install.
TEST(CudaMockDriverTest, PtxNewerThanTheDriverIsRefusedNamingBothVersions) {
  UseMock({{"BACKPLANE_MOCK_CUDA_DRIVER_VERSION", "12020"}});
  const Mock mock = Counters();
  // NVRTC 13 writes PTX ISA 9.0 (`.version 9.0`), which needs a CUDA 13 driver.
  Module m = backplane::Build(kFill, Target::FromDevice(Device(kGpu)));
  backplane::Tensor a = Floats({1000});
  const bptest::Status st = CaptureError([&] { m.GetFunction("fill_cols")(1000, a.dl()); });
  EXPECT_EQ(st.kind, BP_ERR_DEVICE) << st;
  for (const char* part : {"PTX is ISA version 9.", "driver here is for CUDA 12.2", "up to ISA 8.2",
                           "r580 or newer"}) {
    EXPECT_NE(st.message.find(part), std::string::npos) << part << " in " << st;
  }
  EXPECT_EQ(mock.live_modules(), 0);
  EXPECT_EQ(mock.launches(), 0);
}

// Item 8: block sizes are checked against the device's limits, naming the axis, the size and
// the limit (the driver says only CUDA_ERROR_INVALID_VALUE); a grid larger than one launch
// takes runs in parts (AGridLargerThanOneLaunchRunsInParts).
TEST(CudaMockDriverTest, LaunchSizesAreCheckedAgainstTheDevicesLimits) {
  UseMock();
  const Mock mock = Counters();
  Module m = backplane::Build(kFill, Target::FromDevice(Device(kGpu)));
  backplane::Tensor wide = Floats({2, 2000});
  bptest::Status st = CaptureError([&] { m.GetFunction("fill_rows")(2000, 2, wide.dl()); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("2000 threads on block axis x (threadIdx.x) is more than cuda:0 "
                            "allows (1024)"),
            std::string::npos)
      << st;
  EXPECT_EQ(mock.launches(), 0);
  // Within the limits it launches with exactly those sizes.
  backplane::Tensor ok = Floats({65535, 4});
  m.GetFunction("fill_rows")(4, 65535, ok.dl());
  backplane::Check(bp_device_stream_sync(kGpu, nullptr));
  unsigned dims[6];
  mock.last_launch(dims);
  EXPECT_EQ(std::vector<unsigned>(dims, dims + 6), (std::vector<unsigned>{1, 65535, 1, 4, 1, 1}));
}

// Two grid axes past one launch's limit (65,535 blocks on y and z), and one that fits (x).
const char* kLargeGrid = R"(# backplane-ir 1
func fill_yz(ny: int32, nz: int32, n: int32, a: buffer<float32>[n]) {
  for bz in thread(blockIdx.z, 0, nz) {
    for by in thread(blockIdx.y, 0, ny) {
      for tx in thread(threadIdx.x, 0, 32) {
        a[by + bz] = 1.0
      }
    }
  }
}
func fill_x(n: int32, a: buffer<float32>[n]) {
  for bx in thread(blockIdx.x, 0, n) {
    a[bx] = 3.0
  }
}
)";

// A logged launch: its grid, block and params.
struct Logged {
  std::vector<unsigned> dims;
  std::vector<unsigned long long> params;
};
std::vector<Logged> LaunchLog(const Mock& mock) {
  std::vector<Logged> log;
  for (long long i = 0; i < mock.launch_log_size(); ++i) {
    Logged l;
    l.dims.resize(6);
    l.params.resize(16);
    l.params.resize(static_cast<size_t>(mock.launch_log(i, l.dims.data(), l.params.data(), 16)));
    log.push_back(l);
  }
  return log;
}

// A grid larger than one cuLaunchKernel takes (MAX_GRID_DIM_Y/Z: 65,535) is
// launched in parts, in order on the stream, each within the device's limits and passing its
// first block's index per axis (the kernel adds it to blockIdx), so the parts cover every block
// once; a grid that fits is one launch with offsets 0.
TEST(CudaMockDriverTest, AGridLargerThanOneLaunchRunsInParts) {
  UseMock();
  const Mock mock = Counters();
  ASSERT_NE(mock.launch_log, nullptr);
  Module m = backplane::Build(kLargeGrid, Target::FromDevice(Device(kGpu)));
  const std::string cu = m.Imports()[0].InspectSource("cuda");
  EXPECT_NE(cu.find("const int64_t bp_block_offset_y, const int64_t bp_block_offset_z"),
            std::string::npos)
      << cu;
  std::mt19937 rng(18);
  for (int round = 0; round < 4; ++round) {
    // y past one, two or three launches; z past one or two (round 0: z fits exactly).
    const int64_t ny = std::uniform_int_distribution<int64_t>(65536, 3 * 65535 + 100)(rng);
    const int64_t nz =
        round == 0 ? 65535 : std::uniform_int_distribution<int64_t>(65536, 2 * 65535 + 7)(rng);
    const int64_t n = ny + nz;
    backplane::Tensor a = Floats({n});
    mock.clear_launch_log();
    m.GetFunction("fill_yz")(static_cast<int32_t>(ny), static_cast<int32_t>(nz),
                             static_cast<int32_t>(n), a.dl());
    backplane::Check(bp_device_stream_sync(kGpu, nullptr));
    // The parts, z outermost, each as large as a launch takes, the last on an axis the rest.
    std::vector<std::vector<int64_t>> want;  // grid y, grid z, offset y, offset z
    for (int64_t z = 0; z < nz; z += 65535) {
      for (int64_t y = 0; y < ny; y += 65535) {
        want.push_back({std::min<int64_t>(65535, ny - y), std::min<int64_t>(65535, nz - z), y, z});
      }
    }
    const std::vector<Logged> log = LaunchLog(mock);
    ASSERT_EQ(log.size(), want.size()) << "ny " << ny << ", nz " << nz;
    int64_t blocks = 0;
    for (size_t i = 0; i < log.size(); ++i) {
      const Logged& l = log[i];
      EXPECT_EQ(l.dims, (std::vector<unsigned>{1, static_cast<unsigned>(want[i][0]),
                                               static_cast<unsigned>(want[i][1]), 32, 1, 1}))
          << "part " << i << " of ny " << ny << ", nz " << nz;
      ASSERT_GE(l.params.size(), 3u);
      // The offsets are the last params (the kernel has no checks, so no fault record).
      const size_t k = l.params.size();
      EXPECT_EQ(static_cast<int64_t>(l.params[k - 2]), want[i][2]) << "offset y of part " << i;
      EXPECT_EQ(static_cast<int64_t>(l.params[k - 1]), want[i][3]) << "offset z of part " << i;
      // Every other param is the same in every part.
      EXPECT_EQ(std::vector<unsigned long long>(l.params.begin(), l.params.end() - 2),
                std::vector<unsigned long long>(log[0].params.begin(), log[0].params.end() - 2));
      blocks += int64_t{l.dims[0]} * l.dims[1] * l.dims[2];
    }
    EXPECT_EQ(blocks, ny * nz) << "the parts do not cover the grid once";
  }
  // A grid that fits: one launch, offset 0.
  const int64_t n = std::uniform_int_distribution<int64_t>(70000, 1 << 20)(rng);
  backplane::Tensor a = Floats({n});
  mock.clear_launch_log();
  m.GetFunction("fill_x")(static_cast<int32_t>(n), a.dl());
  backplane::Check(bp_device_stream_sync(kGpu, nullptr));
  const std::vector<Logged> log = LaunchLog(mock);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].dims, (std::vector<unsigned>{static_cast<unsigned>(n), 1, 1, 1, 1, 1}));
  ASSERT_EQ(log[0].params.size(), 3u);  // n, a, the x offset
  EXPECT_EQ(log[0].params[2], 0u);
}

// The kernel called directly (not through the host function bp_build made) with an extent its
// int32 loop variable cannot count is refused, naming the kernel and the extent, before
// anything launches: the parts' offsets would count past it.
TEST(CudaMockDriverTest, AnExtentTheLoopVariableCannotCountIsRefused) {
  UseMock();
  const Mock mock = Counters();
  Module m = backplane::Build(kLargeGrid, Target::FromDevice(Device(kGpu)));
  backplane::Tensor a = Floats({1000});
  backplane::Function kernel = m.Imports()[0].GetFunction("fill_x_kernel");
  ASSERT_TRUE(static_cast<bool>(kernel));
  const bptest::Status st =
      CaptureError([&] { kernel(int32_t{1000}, a.dl(), int64_t{3000000000}); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("cuda kernel 'fill_x_kernel': launch extent blockIdx.x = 3000000000 "
                            "is more than its loop variable (int32) can count (2147483647)"),
            std::string::npos)
      << st;
  EXPECT_EQ(mock.launches(), 0);
}

// Item 4 for kernels: a tensor whose data is not device memory is refused before the launch.
TEST(CudaMockDriverTest, KernelArgumentsMustBeDeviceMemory) {
  UseMock();
  const Mock mock = Counters();
  Module m = backplane::Build(kFill, Target::FromDevice(Device(kGpu)));
  std::vector<float> host(300, 0.0f);
  int64_t shape[1] = {300};
  DLTensor t{host.data(), kGpu, 1, DLDataType{kDLFloat, 32, 1}, shape, nullptr, 0};
  const bptest::Status st = CaptureError([&] { m.GetFunction("fill_cols")(300, &t); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("argument 1"), std::string::npos) << st;
  EXPECT_NE(st.message.find("is not device memory of cuda:0"), std::string::npos) << st;
  EXPECT_EQ(mock.launches(), 0);
  EXPECT_EQ(mock.sticky_error(), 0);
}

// A grid in parts whose second launch fails after the first, queued, wrote the fault record
// (a kernel with a run-time check: the integer division): the call reports the failed launch,
// and the record is cleared, so the next call does not report the first part's fault as its
// own. The knobs are the mock's (a launch failure and a failing check cannot be produced here).
TEST(CudaMockDriverTest, AFailedPartLeavesNoStaleFault) {
  UseMock({{"BACKPLANE_MOCK_CUDA_FAULT_LAUNCH", "1"}, {"BACKPLANE_MOCK_CUDA_FAIL_LAUNCH", "2"}});
  Module m = backplane::Build(R"(# backplane-ir 1
func div_y(ny: int32, d: int32, n: int32, a: buffer<int32>[n]) {
  for by in thread(blockIdx.y, 0, ny) {
    for tx in thread(threadIdx.x, 0, 32) {
      a[by] = ny / d
    }
  }
}
)",
                              Target::FromDevice(Device(kGpu)));
  const int32_t ny = 70000;  // two launches on y
  std::vector<int64_t> shape = {ny};
  backplane::Tensor a = backplane::Tensor::Empty(shape, DLDataType{kDLInt, 32, 1}, Device(kGpu));
  const bptest::Status failed = CaptureError([&] { m.GetFunction("div_y")(ny, 7, ny, a.dl()); });
  EXPECT_NE(failed.message.find("the part from block (0, 65535, 0)"), std::string::npos) << failed;
  const bptest::Status next = CaptureError([&] { m.GetFunction("div_y")(100, 7, ny, a.dl()); });
  EXPECT_TRUE(next.ok()) << "the next call reported a stale fault: " << next;
}

// Item 9: a module whose function lookup failed keeps nothing (the next launch fails the same
// way instead of passing a null CUfunction), and a module unloads in its own context from any
// thread.
TEST(CudaMockDriverTest, AFailedLoadLeavesNothingBehind) {
  UseMock({{"BACKPLANE_MOCK_CUDA_FAIL_FUNCTION", "fill_cols_kernel"}});
  const Mock mock = Counters();
  Module m = backplane::Build(kFill, Target::FromDevice(Device(kGpu)));
  backplane::Tensor a = Floats({4, 4});
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bptest::Status st = CaptureError([&] { m.GetFunction("fill_rows")(4, 4, a.dl()); });
    EXPECT_EQ(st.kind, BP_ERR_DEVICE) << "attempt " << attempt << ": " << st;
    EXPECT_NE(st.message.find("cuModuleGetFunction('fill_cols_kernel')"), std::string::npos)
        << "attempt " << attempt << ": " << st;
  }
  EXPECT_EQ(mock.live_modules(), 0) << "a failed load left its module loaded";
  EXPECT_EQ(mock.launches(), 0);
}

TEST(CudaMockDriverTest, AModuleUnloadsInItsContextFromAnyThread) {
  UseMock();
  const Mock mock = Counters();
  {
    Module m = backplane::Build(kFill, Target::FromDevice(Device(kGpu)));
    backplane::Tensor a = Floats({1000});
    m.GetFunction("fill_cols")(1000, a.dl());
    backplane::Check(bp_device_stream_sync(kGpu, nullptr));
    EXPECT_EQ(mock.live_modules(), 1);
    // The last reference goes on a thread that never used CUDA.
    std::thread([moved = std::move(m)]() mutable { moved = Module(); }).join();
  }
  EXPECT_EQ(mock.unload_errors(), 0) << "cuModuleUnload ran without the module's context";
  EXPECT_EQ(mock.live_modules(), 0);
}

}  // namespace

namespace {

// Events, on the mock's deferred streams: an event recorded on one stream after a
// copy, waited for by another stream, orders the copy before that stream's later work (the
// mock runs the first stream's work only when something waits for it, so without the wait
// the read would see nothing); query, sync and timing follow the event.
TEST(CudaMockDriverTest, EventsOrderStreamsWithoutAHostWait) {
  UseMock();
  const size_t n = 4096;
  const std::vector<uint8_t> data = bptest::RandomBytes(n, 1905);
  void* d = Alloc(kGpu, n);
  void* pinned = Alloc(kPinned, n);
  std::memcpy(pinned, data.data(), n);
  backplane::Stream s{Device(kGpu)}, t{Device(kGpu)};
  backplane::Event start{Device(kGpu)}, end{Device(kGpu)};
  start.Record(s);
  ASSERT_TRUE(Copy(pinned, kPinned, d, kGpu, n, s.handle()).ok());  // queued on s, not run
  end.Record(s);
  EXPECT_FALSE(end.Done()) << "the mock has not run s's copy yet";
  end.MakeWait(t);
  std::vector<uint8_t> back(n, 0);
  ASSERT_TRUE(Copy(d, kGpu, back.data(), kCpu, n, t.handle()).ok());  // syncs t only
  EXPECT_EQ(back, data) << "t's read did not wait for the copy recorded before the event";
  EXPECT_TRUE(end.Done());
  end.Sync();
  const double ms = end.ElapsedMsSince(start);
  EXPECT_GE(ms, 0.0);
  EXPECT_LT(ms, 60000.0);
  // Never recorded: done, and refused for timing by the core before the driver sees it.
  backplane::Event never{Device(kGpu)};
  EXPECT_TRUE(never.Done());
  const bptest::Status st = CaptureError([&] { never.ElapsedMsSince(start); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("never recorded"), std::string::npos) << st;
  backplane::Check(bp_device_free_data_space(kGpu, d));
  backplane::Check(bp_device_free_data_space(kPinned, pinned));
}

// Native handles out, and a buffer from the application's own cuMemAlloc
// (the mock's, called directly) wrapped as a tensor: Backplane's copies land in that buffer
// (the mock's device memory is host memory, read here directly), the wrap is checked against
// the allocation, a refused wrap never runs the release, and the release runs once when the
// tensor goes, leaving the buffer the application's to free.
TEST(CudaMockDriverTest, AWrappedCuMemAllocIsUsedInPlaceAndReleasedOnce) {
  UseMock();
  void* h = dlopen(MockDriverPath().c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  auto mem_alloc = reinterpret_cast<int (*)(uint64_t*, size_t)>(dlsym(h, "cuMemAlloc_v2"));
  auto mem_free = reinterpret_cast<int (*)(uint64_t)>(dlsym(h, "cuMemFree_v2"));
  auto set_current = reinterpret_cast<int (*)(void*)>(dlsym(h, "cuCtxSetCurrent"));
  ASSERT_TRUE(mem_alloc != nullptr && mem_free != nullptr && set_current != nullptr);

  backplane::Stream s{Device(kGpu)};
  EXPECT_EQ(backplane::NativeHandle(Device(kGpu), BP_NATIVE_QUEUE, s.handle()),
            reinterpret_cast<uint64_t>(s.handle()));
  const uint64_t ctx = backplane::NativeHandle(Device(kGpu), BP_NATIVE_CONTEXT);
  ASSERT_NE(ctx, 0u);
  for (bp_native_kind_t kind : {BP_NATIVE_MEMORY, BP_NATIVE_PLATFORM, BP_NATIVE_QUEUE_FAMILY}) {
    const bptest::Status st = CaptureError([&] { backplane::NativeHandle(Device(kGpu), kind); });
    EXPECT_EQ(st.kind, BP_ERR_UNSUPPORTED) << st;
    EXPECT_NE(st.message.find("it has BP_NATIVE_BUFFER"), std::string::npos) << st;
  }
  uint64_t bogus = 0;
  EXPECT_EQ(
      Capture(bp_native_handle(kGpu, static_cast<bp_native_kind_t>(42), nullptr, &bogus)).kind,
      BP_ERR_INVALID_ARGUMENT);

  const size_t n = 10000;
  ASSERT_EQ(set_current(reinterpret_cast<void*>(ctx)), 0);
  uint64_t p = 0;
  ASSERT_EQ(mem_alloc(&p, n), 0);
  int released = 0;
  const DLDataType u8 = backplane::UInt8();
  // Refused: larger than the allocation, no buffer, a memory object; the release never runs.
  for (bp_native_buffer_t bad : {bp_native_buffer_t{sizeof(bp_native_buffer_t), p, 0, 0, n + 1},
                                 bp_native_buffer_t{sizeof(bp_native_buffer_t), 0, 0, 0, n},
                                 bp_native_buffer_t{sizeof(bp_native_buffer_t), p, 7, 0, n},
                                 bp_native_buffer_t{8, p, 0, 0, n}}) {
    const bptest::Status st = CaptureError([&] {
      backplane::Tensor::FromNative(Device(kGpu), bad, {static_cast<int64_t>(bad.size)}, u8,
                                    [&] { released += 100; });
    });
    EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  }
  // The tensor must fit the buffer.
  const bptest::Status big = CaptureError([&] {
    backplane::Tensor::FromNative(Device(kGpu), {sizeof(bp_native_buffer_t), p, 0, 0, n},
                                  {static_cast<int64_t>(n + 8)}, u8, [&] { released += 100; });
  });
  EXPECT_NE(big.message.find("the buffer has 10000"), std::string::npos) << big;
  EXPECT_EQ(released, 0);
  {
    backplane::Tensor t =
        backplane::Tensor::FromNative(Device(kGpu), {sizeof(bp_native_buffer_t), p, 0, 0, n},
                                      {static_cast<int64_t>(n)}, u8, [&] { ++released; });
    EXPECT_EQ(reinterpret_cast<uint64_t>(t.dl()->data), p);
    EXPECT_EQ(t.NativeHandle(BP_NATIVE_BUFFER), p);
    EXPECT_EQ(t.NativeHandle(BP_NATIVE_BUFFER_OFFSET), 0u);
    const std::vector<uint8_t> data = bptest::RandomBytes(n, 1906);
    t.CopyFrom(data);
    EXPECT_EQ(std::memcmp(reinterpret_cast<void*>(p), data.data(), n), 0)
        << "the copy did not land in the application's buffer";
    EXPECT_EQ(t.ToVector<uint8_t>(), data);
    // Never Backplane's to free.
    EXPECT_EQ(Capture(bp_device_free_data_space(kGpu, t.dl()->data)).kind, BP_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
  ASSERT_EQ(set_current(reinterpret_cast<void*>(ctx)), 0);
  EXPECT_EQ(mem_free(p), 0) << "the buffer stayed the application's";
}

}  // namespace

// The block the tools give a catalog kernel with a block param (runner::DimsForDevice): on a
// device whose warp is a GPU's (the mock reports 32, as NVIDIA's do), matmul_tiled_gpu gets 4
// warps (Case::block_warps; 1.28 times as fast as one on an H200) and softmax_gpu one; sizes
// the caller gives are kept.
TEST(CudaMockDriverTest, CatalogBlocksAreWarpsOfTheDevice) {
  UseMock();
  namespace bk = backplane::kernels;
  const bk::Case* tiled = bk::Find("matmul_tiled_gpu");
  const bk::Case* softmax = bk::Find("softmax_gpu");
  ASSERT_NE(tiled, nullptr);
  ASSERT_NE(softmax, nullptr);
  EXPECT_EQ(backplane::runner::DimsForDevice(*tiled, Device(kGpu), {}).at("threads"), 128);
  EXPECT_EQ(backplane::runner::DimsForDevice(*softmax, Device(kGpu), {}).at("threads"), 32);
  EXPECT_EQ(backplane::runner::DimsForDevice(*tiled, Device(kGpu), {{"threads", 7}}).at("threads"),
            7);
  // sum_gpu's grid (Case::grid_param): 8 blocks on each of the mock's 132 multiprocessors.
  const bk::Case* sum = bk::Find("sum_gpu");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(backplane::runner::DimsForDevice(*sum, Device(kGpu), {}).at("blocks"), 1056);
  EXPECT_EQ(backplane::runner::DimsForDevice(*sum, Device(kGpu), {{"blocks", 5}}).at("blocks"), 5);
}

// The variant of a catalog kernel the tools run on a CUDA device (runner::ChooseVariant, from
// the device's own attributes): the float32x4 vector_add and sum and the register-tiled matmul; a
// variant's own function and a kernel without variants are themselves.
TEST(CudaMockDriverTest, CatalogVariantsForACudaDevice) {
  UseMock();
  namespace bk = backplane::kernels;
  const bk::DeviceTraits t = backplane::runner::DeviceTraitsOf(Device(kGpu));
  EXPECT_EQ(t.type, "cuda");
  EXPECT_EQ(t.warp, 32);
  EXPECT_EQ(backplane::runner::ChooseVariant(*bk::Find("vector_add_gpu"), Device(kGpu))->func,
            "vector_add4_gpu");
  EXPECT_EQ(backplane::runner::ChooseVariant(*bk::Find("matmul_tiled_gpu"), Device(kGpu))->func,
            "matmul_reg_gpu");
  EXPECT_EQ(backplane::runner::ChooseVariant(*bk::Find("sum_gpu"), Device(kGpu))->func, "sum4_gpu");
  EXPECT_EQ(backplane::runner::ChooseVariant(*bk::Find("softmax_gpu"), Device(kGpu))->func,
            "softmax_gpu");
  EXPECT_EQ(backplane::runner::ChooseVariant(*bk::Find("matmul_smem_gpu"), Device(kGpu))->func,
            "matmul_smem_gpu");
}

namespace {

// A kernel with a run-time check (the integer division), for the fault record's path.
const char* kDivide = R"(# backplane-ir 1
func divide(n: int32, d: int32, a: buffer<int32>[n]) {
  for bx in thread(blockIdx.x, 0, (n + 255) / 256) {
    for tx in thread(threadIdx.x, 0, 256) {
      if (bx * 256 + tx < n) {
        a[bx * 256 + tx] = n / d
      }
    }
  }
}
)";

// A warm launch (the module loaded, the context current) of a kernel without
// checks on the null stream makes two driver calls, cuCtxGetCurrent and cuLaunchKernel; one with
// a run-time check adds the record's read and the wait for it. A regression guard for the hot
// path: a driver call added to every launch fails here.
TEST(CudaMockDriverTest, AWarmLaunchMakesOnlyTheDriverCallsItNeeds) {
  UseMock();
  const Mock mock = Counters();
  ASSERT_NE(mock.calls, nullptr);
  Module m = backplane::Build(kFill, Target::FromDevice(Device(kGpu)));
  backplane::Function fill = m.GetFunction("fill_cols");
  backplane::Tensor a = Floats({1000});
  fill(1000, a.dl());  // cold: loads the module, makes the context current
  constexpr int kLaunches = 10;
  const long long before = mock.calls(nullptr);
  const long long current_before = mock.calls("cuCtxGetCurrent");
  for (int i = 0; i < kLaunches; ++i) fill(1000, a.dl());
  EXPECT_EQ(mock.calls("cuLaunchKernel"), kLaunches + 1);
  EXPECT_EQ(mock.calls("cuCtxGetCurrent") - current_before, kLaunches);
  EXPECT_EQ(mock.calls(nullptr) - before, 2 * kLaunches)
      << "a warm launch makes another driver call than cuCtxGetCurrent and cuLaunchKernel";

  Module d = backplane::Build(kDivide, Target::FromDevice(Device(kGpu)));
  backplane::Function divide = d.GetFunction("divide");
  backplane::Tensor b = backplane::Tensor::Empty({1000}, DLDataType{kDLInt, 32, 1}, Device(kGpu));
  divide(1000, 3, b.dl());
  const long long checked_before = mock.calls(nullptr);
  for (int i = 0; i < kLaunches; ++i) divide(1000, 3, b.dl());
  // cuCtxGetCurrent, cuLaunchKernel, cuMemcpyDtoHAsync of the record, cuStreamSynchronize.
  EXPECT_EQ(mock.calls(nullptr) - checked_before, 4 * kLaunches);
  EXPECT_EQ(mock.launches(), 2 * (kLaunches + 1));
}

// A warm launch keeps the allocations its buffers were found in (no lock for them) only until
// an allocation is freed: a buffer freed between two launches is refused as before, and
// another buffer in the same thread's launches is still found.
TEST(CudaMockDriverTest, AWarmLaunchRefusesABufferFreedSinceTheLastOne) {
  UseMock();
  const Mock mock = Counters();
  Module m = backplane::Build(kFill, Target::FromDevice(Device(kGpu)));
  backplane::Function fill = m.GetFunction("fill_cols");
  void* p = Alloc(kGpu, 4000);
  int64_t shape[1] = {1000};
  DLTensor t{p, kGpu, 1, DLDataType{kDLFloat, 32, 1}, shape, nullptr, 0};
  fill(1000, &t);
  fill(1000, &t);
  backplane::Tensor other = Floats({1000});
  fill(1000, other.dl());
  backplane::Check(bp_device_free_data_space(kGpu, p));
  const bptest::Status st = CaptureError([&] { fill(1000, &t); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(st.message.find("is not device memory of cuda:0"), std::string::npos) << st;
  fill(1000, other.dl());
  // Past the end of a kept allocation is still past its end.
  int64_t longer[1] = {1001};
  DLTensor past{other.dl()->data, kGpu, 1, DLDataType{kDLFloat, 32, 1}, longer, nullptr, 0};
  const bptest::Status end = CaptureError([&] { fill(1001, &past); });
  EXPECT_EQ(end.kind, BP_ERR_INVALID_ARGUMENT) << end;
  backplane::Check(bp_device_stream_sync(kGpu, nullptr));
  EXPECT_EQ(mock.launches(), 4);
}

nlohmann::json LaunchPhases(const char* what = "json") {
  return nlohmann::json::parse(backplane::Function::Get("cuda.launch_phases")(what).AsString());
}

// With BACKPLANE_CUDA_LAUNCH_PHASES set, every phase of every launch is
// counted and timed, and the report names each phase; "reset" starts again from zero.
TEST(CudaMockDriverTest, TheLaunchPhaseTimerCountsEveryPhaseOfEveryLaunch) {
  UseMock({{"BACKPLANE_CUDA_LAUNCH_PHASES", "1"}});
  Module m = backplane::Build(kFill, Target::FromDevice(Device(kGpu)));
  backplane::Function fill = m.GetFunction("fill_cols");
  backplane::Tensor a = Floats({1000});
  fill(1000, a.dl());
  const nlohmann::json first = LaunchPhases("reset");
  EXPECT_EQ(first.at("launches"), 1) << first.dump();
  EXPECT_EQ(LaunchPhases().at("launches"), 0) << "reset left launches counted";
  constexpr int kLaunches = 25;
  for (int i = 0; i < kLaunches; ++i) fill(1000, a.dl());
  const nlohmann::json j = LaunchPhases();
  EXPECT_EQ(j.at("enabled"), true);
  EXPECT_EQ(j.at("launches"), kLaunches) << j.dump();
  const std::vector<std::string> names = {"bind",   "pack",       "context", "module",
                                          "stream", "fault_lock", "launch",  "fault_read"};
  ASSERT_EQ(j.at("phases").size(), names.size()) << j.dump();
  uint64_t sum = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const nlohmann::json& p = j.at("phases")[i];
    EXPECT_EQ(p.at("name"), names[i]) << j.dump();
    EXPECT_EQ(p.at("count"), kLaunches) << p.dump();
    sum += p.at("ns").get<uint64_t>();
  }
  EXPECT_GT(j.at("phases")[0].at("ns").get<uint64_t>(), 0u) << "binding took no time";
  EXPECT_LE(sum, j.at("total_ns").get<uint64_t>()) << j.dump();
  EXPECT_GT(sum, 0u);
  const std::string text = backplane::Function::Get("cuda.launch_phases")("text").AsString();
  for (const std::string& name : names) {
    EXPECT_NE(text.find("  " + name + " "), std::string::npos) << name << " in\n" << text;
  }
  EXPECT_NE(text.find("25 launches"), std::string::npos) << text;
  const bptest::Status bad =
      CaptureError([&] { backplane::Function::Get("cuda.launch_phases")("bogus"); });
  EXPECT_EQ(bad.kind, BP_ERR_INVALID_ARGUMENT) << bad;
}

// Without the variable the timer records nothing (and costs one branch a phase).
TEST(CudaMockDriverTest, WithoutTheSwitchTheLaunchPhaseTimerRecordsNothing) {
  unsetenv("BACKPLANE_CUDA_LAUNCH_PHASES");
  UseMock();
  Module m = backplane::Build(kFill, Target::FromDevice(Device(kGpu)));
  backplane::Tensor a = Floats({1000});
  for (int i = 0; i < 5; ++i) m.GetFunction("fill_cols")(1000, a.dl());
  const nlohmann::json j = LaunchPhases();
  EXPECT_EQ(j.at("enabled"), false);
  EXPECT_EQ(j.at("launches"), 0) << j.dump();
  EXPECT_EQ(j.at("total_ns"), 0) << j.dump();
  for (const nlohmann::json& p : j.at("phases")) {
    EXPECT_EQ(p.at("count"), 0) << p.dump();
    EXPECT_EQ(p.at("ns"), 0) << p.dump();
  }
}

}  // namespace
