// SPDX-License-Identifier: Apache-2.0
// device_api.opencl on the real ICD loader and driver (PoCL in CI): devices, attributes
// against clinfo, copies with offsets on random data, streams, the workspace pool (reuse,
// its bound, wrong frees, several threads), and errors for what a user can cause; events
// (ordering two streams, query, sync, timing, recording again) and native handles (the OpenCL
// objects out, an application's cl_mem wrapped in: copies both ways, a kernel, refused wraps).
// Skipped, with the reason, where no OpenCL device exists.
#include <CL/cl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../test_util.h"

namespace {

using bptest::Capture;

class OpenCLTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        Capture(bp_plugin_load(
                    (std::string(BACKPLANE_OPENCL_PLUGIN_DIR) + "/libbackplane_opencl.so").c_str()))
            .ok());
    type_ = backplane::DeviceTypeFromName("opencl");
    if (!backplane::DeviceAPI::Get(backplane::Device(Dev(0))).Exists()) {
      GTEST_SKIP() << "no OpenCL device (install pocl-opencl-icd for one on the CPU)";
    }
  }
  DLDevice Dev(int32_t id) const { return DLDevice{static_cast<DLDeviceType>(type_), id}; }
  int32_t Count() const {
    int32_t n = 0;
    while (backplane::DeviceAPI::Get(backplane::Device(Dev(n))).Exists()) ++n;
    return n;
  }
  void* Alloc(int32_t id, size_t n) const {
    void* p = nullptr;
    backplane::Check(bp_device_alloc_data_space(Dev(id), n, 64, backplane::UInt8(), &p));
    return p;
  }
  void* Workspace(size_t n) const {
    void* p = nullptr;
    backplane::Check(bp_device_alloc_workspace(Dev(0), n, backplane::UInt8(), &p));
    return p;
  }
  int64_t CachedBytes() const {
    return backplane::DeviceAPI::Get(backplane::Device(Dev(0)))
        .GetProperty("workspace_cached_bytes")
        .AsInt();
  }
  // Copies `data` into `handle` at `offset` and back; true when the bytes come back.
  bool RoundTrip(void* handle, const std::vector<uint8_t>& data, uint64_t offset) const {
    std::vector<uint8_t> back(data.size(), 0);
    int64_t shape = static_cast<int64_t>(data.size());
    DLTensor h = View(const_cast<uint8_t*>(data.data()), bptest::CpuDevice(), &shape, 0);
    DLTensor d = View(handle, Dev(0), &shape, offset);
    DLTensor r = View(back.data(), bptest::CpuDevice(), &shape, 0);
    backplane::Check(bp_device_copy_data_from_to(&h, &d, nullptr));
    backplane::Check(bp_device_copy_data_from_to(&d, &r, nullptr));
    return back == data;
  }
  static DLTensor View(void* data, DLDevice dev, int64_t* shape, uint64_t offset) {
    return bptest::ByteView(data, dev, shape, offset);
  }
  int32_t type_ = 0;
};

// The value clinfo --raw prints for `key` on the first device, or "" without clinfo.
std::string Clinfo(const std::string& key) {
  FILE* f = popen("clinfo --raw 2>/dev/null", "r");
  if (f == nullptr) return "";
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, f) != nullptr) {
    std::string line(buf);
    const size_t k = line.find(" " + key + " ");
    if (out.empty() && line.rfind("[", 0) == 0 && k != std::string::npos) {
      size_t v = line.find_first_not_of(' ', k + key.size() + 1);
      out = line.substr(v);
      while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    }
  }
  pclose(f);
  return out;
}

// What this process's OpenCL answers for opencl:0 (the first device of the first platform
// that has one, the plugin's documented order).
template <typename T>
T DeviceInfo(cl_device_info what) {
  cl_uint num_platforms = 0;
  EXPECT_EQ(clGetPlatformIDs(0, nullptr, &num_platforms), CL_SUCCESS);
  std::vector<cl_platform_id> platforms(num_platforms);
  clGetPlatformIDs(num_platforms, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    cl_device_id id = nullptr;
    cl_uint n = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &id, &n) != CL_SUCCESS || n == 0) continue;
    T value{};
    EXPECT_EQ(clGetDeviceInfo(id, what, sizeof(value), &value, nullptr), CL_SUCCESS);
    return value;
  }
  ADD_FAILURE() << "no OpenCL device in this process";
  return T{};
}

TEST_F(OpenCLTest, DevicesExistInOrderAndNotPastTheEnd) {
  EXPECT_EQ(backplane::DeviceTypeName(type_), "opencl");
  const int32_t n = Count();
  ASSERT_GE(n, 1);
  backplane::DeviceAPI past = backplane::DeviceAPI::Get(backplane::Device(Dev(n)));
  EXPECT_FALSE(past.Exists());
  for (int32_t kind = 1; kind < BP_ATTR_COUNT; ++kind) {
    bp_value_t v;
    ASSERT_EQ(bp_device_get_attr(Dev(n), kind, &v), BP_OK);
    EXPECT_EQ(v.type, BP_VALUE_NONE) << "opencl:" << n << " kind " << kind;
  }
}

TEST_F(OpenCLTest, AttributesMatchClinfo) {
  auto api = backplane::DeviceAPI::Get(backplane::Device(Dev(0)));
  const std::string name = api.GetAttr(BP_ATTR_DEVICE_NAME).AsString();
  EXPECT_FALSE(name.empty());
  // The driver's SIMD width (attribute_truth_test compares it with clinfo), never a made-up 1.
  EXPECT_GT(api.GetAttr(BP_ATTR_WARP_SIZE).AsInt(), 0);
  EXPECT_GT(api.GetAttr(BP_ATTR_MAX_THREADS_PER_BLOCK).AsInt(), 0);
  EXPECT_EQ(api.GetAttr(BP_ATTR_MAX_THREAD_DIMENSIONS).AsString().front(), '[');
  EXPECT_TRUE(api.GetAttr(BP_ATTR_GCN_ARCH).is_none());
  if (Clinfo("CL_DEVICE_NAME").empty()) GTEST_SKIP() << "clinfo is not installed";
  EXPECT_EQ(name, Clinfo("CL_DEVICE_NAME"));
  EXPECT_EQ(std::to_string(api.GetAttr(BP_ATTR_MAX_THREADS_PER_BLOCK).AsInt()),
            Clinfo("CL_DEVICE_MAX_WORK_GROUP_SIZE"));
  EXPECT_EQ(std::to_string(api.GetAttr(BP_ATTR_MULTI_PROCESSOR_COUNT).AsInt()),
            Clinfo("CL_DEVICE_MAX_COMPUTE_UNITS"));
  EXPECT_EQ(std::to_string(api.GetAttr(BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK).AsInt()),
            Clinfo("CL_DEVICE_LOCAL_MEM_SIZE"));
  EXPECT_EQ(api.GetAttr(BP_ATTR_DRIVER_VERSION).AsString(), Clinfo("CL_DRIVER_VERSION"));
  // CL_DEVICE_GLOBAL_MEM_SIZE is not constant between processes: PoCL derives it from the
  // memory free when it starts, so clinfo, another process started later, may see another
  // value (16737591296 against 17006026752 in a sanitizer run). Within one process it is
  // fixed, so the plugin's answer is compared with this process's own OpenCL, and clinfo's
  // only by what does not drift: both are positive and within the machine's memory on a
  // device that shares it (CL_DEVICE_HOST_UNIFIED_MEMORY).
  const int64_t total = api.GetAttr(BP_ATTR_TOTAL_GLOBAL_MEMORY).AsInt();
  EXPECT_EQ(total, static_cast<int64_t>(DeviceInfo<cl_ulong>(CL_DEVICE_GLOBAL_MEM_SIZE)));
  const int64_t clinfo_total = std::stoll(Clinfo("CL_DEVICE_GLOBAL_MEM_SIZE"));
  EXPECT_GT(total, 0);
  EXPECT_GT(clinfo_total, 0);
  if (DeviceInfo<cl_bool>(CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE) {
    const int64_t phys = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
    EXPECT_LE(total, phys);
    EXPECT_LE(clinfo_total, phys);
  }
}

TEST_F(OpenCLTest, CopiesWithOffsetsRoundTripRandomData) {
  std::mt19937 rng(6);
  const size_t n = 1 << 16;
  std::vector<uint8_t> host(n), back(n, 0);
  for (auto& b : host) b = static_cast<uint8_t>(rng());
  void* a = Alloc(0, n + 128);
  void* b = Alloc(0, n + 256);
  int64_t shape = static_cast<int64_t>(n);
  DLTensor h = View(host.data(), bptest::CpuDevice(), &shape, 0);
  DLTensor da = View(a, Dev(0), &shape, 128);
  DLTensor db = View(b, Dev(0), &shape, 256);
  DLTensor r = View(back.data(), bptest::CpuDevice(), &shape, 0);
  backplane::Check(bp_device_copy_data_from_to(&h, &da, nullptr));
  backplane::Check(bp_device_copy_data_from_to(&da, &db, nullptr));
  backplane::Check(bp_device_copy_data_from_to(&db, &r, nullptr));
  EXPECT_EQ(host, back);
  // A partial read from the middle.
  int64_t part = 100;
  std::vector<uint8_t> mid(100);
  DLTensor src = View(b, Dev(0), &part, 256 + 1000);
  DLTensor dst = View(mid.data(), bptest::CpuDevice(), &part, 0);
  backplane::Check(bp_device_copy_data_from_to(&src, &dst, nullptr));
  EXPECT_EQ(0, std::memcmp(mid.data(), host.data() + 1000, 100));
  backplane::Check(bp_device_free_data_space(Dev(0), a));
  backplane::Check(bp_device_free_data_space(Dev(0), b));
}

TEST_F(OpenCLTest, StreamsOrderWorkWithEvents) {
  std::mt19937 rng(7);
  const size_t n = 1 << 20;
  std::vector<uint8_t> host(n), back(n, 0);
  for (auto& b : host) b = static_cast<uint8_t>(rng());
  bp_stream_t s1 = nullptr, s2 = nullptr;
  backplane::Check(bp_device_stream_create(Dev(0), &s1));
  backplane::Check(bp_device_stream_create(Dev(0), &s2));
  backplane::Check(bp_device_stream_set(Dev(0), s1));
  void* a = Alloc(0, n);
  void* b = Alloc(0, n);
  int64_t shape = static_cast<int64_t>(n);
  DLTensor h = View(host.data(), bptest::CpuDevice(), &shape, 0);
  DLTensor da = View(a, Dev(0), &shape, 0);
  DLTensor db = View(b, Dev(0), &shape, 0);
  DLTensor r = View(back.data(), bptest::CpuDevice(), &shape, 0);
  backplane::Check(bp_device_copy_data_from_to(&h, &da, s1));
  backplane::Check(bp_device_sync_stream_from_to(Dev(0), s1, s2));
  backplane::Check(bp_device_copy_data_from_to(&da, &db, s2));
  backplane::Check(bp_device_stream_sync(Dev(0), s2));
  backplane::Check(bp_device_copy_data_from_to(&db, &r, s1));
  EXPECT_EQ(host, back);
  // A stream used on a device it does not belong to, and a freed stream, are errors.
  backplane::Check(bp_device_stream_free(Dev(0), s2));
  auto s = Capture(bp_device_stream_sync(Dev(0), s2));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  backplane::Check(bp_device_stream_set(Dev(0), nullptr));
  backplane::Check(bp_device_stream_free(Dev(0), s1));
  backplane::Check(bp_device_free_data_space(Dev(0), a));
  backplane::Check(bp_device_free_data_space(Dev(0), b));
}

TEST_F(OpenCLTest, UserErrorsComeBackAsErrors) {
  void* p = nullptr;
  // More than the device can hold in one buffer.
  auto s = Capture(bp_device_alloc_data_space(Dev(0), size_t{1} << 60, 64, backplane::UInt8(), &p));
  EXPECT_EQ(s.kind, BP_ERR_OUT_OF_MEMORY) << s;
  EXPECT_NE(s.message.find("CL_DEVICE_MAX_MEM_ALLOC_SIZE"), std::string::npos) << s;
  s = Capture(bp_device_alloc_data_space(Dev(Count()), 16, 64, backplane::UInt8(), &p));
  EXPECT_EQ(s.kind, BP_ERR_NOT_FOUND) << s;
  // A host pointer where a handle belongs, past the end, freed twice.
  void* a = Alloc(0, 64);
  std::vector<uint8_t> host(64, 1);
  int64_t shape = 64;
  DLTensor from = View(host.data(), bptest::CpuDevice(), &shape, 0);
  DLTensor to = View(host.data(), Dev(0), &shape, 0);
  s = Capture(bp_device_copy_data_from_to(&from, &to, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  to = View(a, Dev(0), &shape, 1);
  s = Capture(bp_device_copy_data_from_to(&from, &to, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("past the end"), std::string::npos) << s;
  backplane::Check(bp_device_free_data_space(Dev(0), a));
  s = Capture(bp_device_free_data_space(Dev(0), a));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  // Zero-size buffers are valid handles.
  void* z = Alloc(0, 0);
  backplane::Check(bp_device_free_data_space(Dev(0), z));
}

TEST_F(OpenCLTest, WorkspaceOfTheSameSizeClassIsReused) {
  void* a = Workspace(4000);
  const int64_t cached = CachedBytes();
  backplane::Check(bp_device_free_workspace(Dev(0), a));
  EXPECT_EQ(CachedBytes(), cached + 4096);  // kept in the 4 KiB class, not released
  void* b = Workspace(4096);                // the same class: the same buffer comes back
  EXPECT_EQ(b, a);
  EXPECT_EQ(CachedBytes(), cached);
  void* c = Workspace(4097);  // the 5 KiB class: a buffer of its own
  EXPECT_NE(c, a);
  backplane::Check(bp_device_free_workspace(Dev(0), c));
  void* d = Workspace(5000);  // 4097 and 5000 share the 5 KiB class
  EXPECT_EQ(d, c);
  backplane::Check(bp_device_free_workspace(Dev(0), b));
  backplane::Check(bp_device_free_workspace(Dev(0), d));
}

TEST_F(OpenCLTest, WorkspaceRoundTripsRandomDataWithinItsRequestedSize) {
  const std::vector<uint8_t> data = bptest::RandomBytes(10000, 61);
  void* w = Workspace(10100);  // its class is 10 KiB + 2 KiB, more than requested
  EXPECT_TRUE(RoundTrip(w, data, 100));
  backplane::Check(bp_device_free_workspace(Dev(0), w));
  // Handed out again for a smaller request: copies may use only the bytes requested now.
  void* again = Workspace(10000);
  ASSERT_EQ(again, w);
  EXPECT_TRUE(RoundTrip(again, bptest::RandomBytes(10000, 62), 0));
  int64_t shape = 10000;
  std::vector<uint8_t> host(10000, 7);
  DLTensor h = View(host.data(), bptest::CpuDevice(), &shape, 0);
  DLTensor past = View(again, Dev(0), &shape, 1);
  auto s = Capture(bp_device_copy_data_from_to(&h, &past, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("past the end"), std::string::npos) << s;
  backplane::Check(bp_device_free_workspace(Dev(0), again));
  // Zero bytes is a valid workspace too.
  void* z = Workspace(0);
  EXPECT_NE(z, nullptr);
  backplane::Check(bp_device_free_workspace(Dev(0), z));
}

TEST_F(OpenCLTest, WorkspacePoolKeepsAtMostItsBound) {
  // Eight 16 MiB workspaces (the largest pooled class) freed: the pool keeps at most 64 MiB.
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(Workspace(size_t{16} << 20));
  for (void* b : blocks) backplane::Check(bp_device_free_workspace(Dev(0), b));
  // Earlier tests may have left small buffers in the pool: it is full to within one class.
  const int64_t full = CachedBytes();
  EXPECT_LE(full, int64_t{64} << 20);
  EXPECT_GT(full, int64_t{48} << 20);
  // Past the largest class: created and released each time, never cached.
  void* big = Workspace((size_t{16} << 20) + 1);
  EXPECT_TRUE(RoundTrip(big, bptest::RandomBytes(4096, 63), (size_t{16} << 20) - 4095));
  backplane::Check(bp_device_free_workspace(Dev(0), big));
  EXPECT_EQ(CachedBytes(), full);
}

TEST_F(OpenCLTest, WorkspaceFreedWrongOrTwiceIsAnError) {
  void* w = Workspace(256);
  void* d = Alloc(0, 256);
  auto s = Capture(bp_device_free_data_space(Dev(0), w));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("free_workspace"), std::string::npos) << s;
  s = Capture(bp_device_free_workspace(Dev(0), d));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("free_data_space"), std::string::npos) << s;
  // Both are still live and intact after the refused frees.
  EXPECT_TRUE(RoundTrip(w, bptest::RandomBytes(256, 64), 0));
  EXPECT_TRUE(RoundTrip(d, bptest::RandomBytes(256, 65), 0));
  backplane::Check(bp_device_free_workspace(Dev(0), w));
  backplane::Check(bp_device_free_data_space(Dev(0), d));
  s = Capture(bp_device_free_workspace(Dev(0), w));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("not a live opencl data space or workspace"), std::string::npos) << s;
  // A freed workspace sits in the pool but is not a live buffer for copies.
  std::vector<uint8_t> host(256, 1);
  int64_t shape = 256;
  DLTensor h = View(host.data(), bptest::CpuDevice(), &shape, 0);
  DLTensor freed = View(w, Dev(0), &shape, 0);
  s = Capture(bp_device_copy_data_from_to(&h, &freed, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
}

TEST_F(OpenCLTest, WorkspaceConcurrentAllocFreeFromFourThreads) {
  std::mutex mu;
  std::set<void*> live;  // no handle may be live twice
  std::vector<std::string> problems;
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(70 + t);
      const size_t sizes[] = {1, 100, 4096, 5000, 65536};
      for (int i = 0; i < 60; ++i) {
        const size_t n = sizes[rng() % 5];
        void* p = nullptr;
        auto s = Capture(bp_device_alloc_workspace(Dev(0), n, backplane::UInt8(), &p));
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          problems.push_back(s.message);
          return;
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!live.insert(p).second) problems.push_back("a live workspace was handed out twice");
        }
        const bool ok = RoundTrip(p, bptest::RandomBytes(n, 80 + t * 100 + i), 0);
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!ok) problems.push_back("thread " + std::to_string(t) + ": data did not round-trip");
          live.erase(p);
        }
        s = Capture(bp_device_free_workspace(Dev(0), p));
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          problems.push_back(s.message);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_LE(CachedBytes(), int64_t{64} << 20);
}

TEST_F(OpenCLTest, TargetFromDeviceFillsTheLimits) {
  const backplane::Device dev(Dev(0));
  const backplane::Target t = backplane::Target::FromDevice(dev, "");
  EXPECT_EQ(t.Kind(), "opencl");
  auto api = backplane::DeviceAPI::Get(dev);
  EXPECT_EQ(t.GetAttr<int64_t>("max_num_threads"),
            api.GetAttr(BP_ATTR_MAX_THREADS_PER_BLOCK).AsInt());
  EXPECT_EQ(t.GetAttr<int64_t>("thread_warp_size"), 1);
  EXPECT_EQ(t.GetAttr<int64_t>("max_shared_memory_per_block"),
            api.GetAttr(BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK).AsInt());
  EXPECT_EQ(t.GetAttr<std::string>("device_name"), api.GetAttr(BP_ATTR_DEVICE_NAME).AsString());
}

// ---- events and native handles (issue 19, items 2 and 3) ----------------------------------

using backplane::Device;

// A user event that holds back a queue of the plugin's (through its native cl_command_queue)
// until Open: what the queue does after it is then certainly not done, with no timing luck.
// Opened when it goes, so a failed assertion never leaves a queue blocked.
class Gate {
 public:
  explicit Gate(cl_context context) {
    cl_int err = CL_SUCCESS;
    event_ = clCreateUserEvent(context, &err);
    EXPECT_EQ(err, CL_SUCCESS);
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() {
    Open();
    clReleaseEvent(event_);
  }
  void Block(cl_command_queue queue) const {
    EXPECT_EQ(clEnqueueBarrierWithWaitList(queue, 1, &event_, nullptr), CL_SUCCESS);
    EXPECT_EQ(clFlush(queue), CL_SUCCESS);
  }
  void Open() {
    if (open_) return;
    open_ = true;
    EXPECT_EQ(clSetUserEventStatus(event_, CL_COMPLETE), CL_SUCCESS);
  }

 private:
  cl_event event_ = nullptr;
  bool open_ = false;
};

template <typename T>
T Handle(const Device& dev, bp_native_kind_t kind, const void* object = nullptr) {
  return reinterpret_cast<T>(static_cast<uintptr_t>(backplane::NativeHandle(dev, kind, object)));
}

cl_uint RefCount(cl_mem mem) {
  cl_uint n = 0;
  EXPECT_EQ(clGetMemObjectInfo(mem, CL_MEM_REFERENCE_COUNT, sizeof(n), &n, nullptr), CL_SUCCESS);
  return n;
}

// A device -> device copy of `bytes` from `a` to `b`, queued on `stream` without a host wait.
void CopyOn(void* a, void* b, DLDevice dev, int64_t bytes, bp_stream_t stream) {
  int64_t shape = bytes;
  DLTensor from = bptest::ByteView(a, dev, &shape, 0);
  DLTensor to = bptest::ByteView(b, dev, &shape, 0);
  backplane::Check(bp_device_copy_data_from_to(&from, &to, stream));
}

// Work on one stream, an event recorded after it, a second stream that waits for the event and
// then copies the result on: the second stream's copy sees the first stream's data. The first
// stream is held at a gate while the rest is queued, so "not done yet" and "the wait held the
// copy back" are certain, not a race that usually goes one way.
TEST_F(OpenCLTest, EventsOrderTwoStreamsAndTimeTheWorkBetween) {
  const Device dev(Dev(0));
  const size_t n = size_t{16} << 20;
  const std::vector<uint8_t> host = bptest::RandomBytes(n, 1901);
  const std::vector<uint8_t> stale = bptest::RandomBytes(n, 1902);
  void* a = Alloc(0, n);
  void* b = Alloc(0, n);
  void* c = Alloc(0, n);
  int64_t shape = static_cast<int64_t>(n);
  DLTensor h = View(const_cast<uint8_t*>(host.data()), bptest::CpuDevice(), &shape, 0);
  DLTensor old = View(const_cast<uint8_t*>(stale.data()), bptest::CpuDevice(), &shape, 0);
  DLTensor da = View(a, Dev(0), &shape, 0);
  DLTensor dc = View(c, Dev(0), &shape, 0);
  backplane::Check(bp_device_copy_data_from_to(&h, &da, nullptr));
  backplane::Check(bp_device_copy_data_from_to(&old, &dc, nullptr));

  backplane::Stream s(dev), t(dev);
  backplane::Event start(dev), end(dev), after_t(dev);
  Gate gate(Handle<cl_context>(dev, BP_NATIVE_CONTEXT));
  gate.Block(Handle<cl_command_queue>(dev, BP_NATIVE_QUEUE, s.handle()));
  start.Record(s);
  for (int i = 0; i < 4; ++i) {  // a -> b -> a ... : 4 x 16 MiB of copies on s
    CopyOn(i % 2 == 0 ? a : b, i % 2 == 0 ? b : a, Dev(0), shape, s.handle());
  }
  end.Record(s);
  end.MakeWait(t);
  // PoCL orders commands that use one buffer even across queues, so t's wait shows only in
  // work that shares nothing with s's: a copy between two other buffers, given time to run.
  void* e = Alloc(0, 4096);
  void* f = Alloc(0, 4096);
  CopyOn(e, f, Dev(0), 4096, t.handle());
  after_t.Record(t);
  CopyOn(a, c, Dev(0), shape, t.handle());  // must see s's copies
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(start.Done());
  EXPECT_FALSE(end.Done());
  EXPECT_FALSE(after_t.Done()) << "t did not wait for the event";

  const auto opened = std::chrono::steady_clock::now();
  gate.Open();
  end.Sync();
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - opened).count();
  EXPECT_TRUE(start.Done());
  EXPECT_TRUE(end.Done());
  std::vector<uint8_t> back(n, 0);
  DLTensor r = View(back.data(), bptest::CpuDevice(), &shape, 0);
  backplane::Check(bp_device_copy_data_from_to(&dc, &r, t.handle()));  // waits for t only
  EXPECT_TRUE(back == host) << "the copy on the waiting stream ran before the event's work";
  EXPECT_TRUE(after_t.Done());

  // Both markers passed between the gate's opening and Sync's return, with 64 MiB copied in
  // between: a positive time no longer than that (PoCL's clock is the host's; 1 ms of slack).
  const double ms = end.ElapsedMsSince(start);
  RecordProperty("elapsed_ms", std::to_string(ms));
  RecordProperty("host_ms", std::to_string(wall_ms));
  EXPECT_GT(ms, 0.0);
  EXPECT_LE(ms, wall_ms + 1.0);
  EXPECT_LT(start.ElapsedMsSince(end), 0.0) << "the order of the two events is kept";
  for (void* p : {a, b, c, e, f}) backplane::Check(bp_device_free_data_space(Dev(0), p));
}

TEST_F(OpenCLTest, EventNeverRecordedIsDoneAndRecordingAgainMovesTheMark) {
  const Device dev(Dev(0));
  backplane::Stream s(dev);
  backplane::Event never(dev), first(dev), moving(dev);
  EXPECT_TRUE(never.Done());
  never.Sync();
  never.MakeWait(s);  // nothing to wait for
  bptest::Status st = bptest::CaptureError([&] { never.ElapsedMsSince(never); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;

  first.Record(s);
  moving.Record(s);
  moving.Sync();
  const double before = moving.ElapsedMsSince(first);
  EXPECT_GE(before, 0.0);
  EXPECT_LT(before, 20.0);
  // Recorded again behind a gate: the mark is the new point, not yet passed, while `first`
  // keeps its own.
  Gate gate(Handle<cl_context>(dev, BP_NATIVE_CONTEXT));
  gate.Block(Handle<cl_command_queue>(dev, BP_NATIVE_QUEUE, s.handle()));
  moving.Record(s);
  EXPECT_FALSE(moving.Done()) << "recording again did not move the mark";
  EXPECT_TRUE(first.Done());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  gate.Open();
  moving.Sync();
  EXPECT_TRUE(moving.Done());
  EXPECT_GE(moving.ElapsedMsSince(first), 25.0) << "the mark stayed at its first point";

  // Events recorded on one thread while another queries, waits for and syncs them.
  backplane::Stream t(dev);
  std::atomic<bool> stop{false};
  std::atomic<int> problems{0};
  std::thread reader([&] {
    while (!stop.load()) {
      auto s1 = bptest::CaptureError([&] {
        moving.Done();
        moving.MakeWait(t);
        moving.Sync();
      });
      if (!s1.ok()) ++problems;
    }
  });
  for (int i = 0; i < 300; ++i) moving.Record(i % 2 == 0 ? s : t);
  stop.store(true);
  reader.join();
  EXPECT_EQ(problems.load(), 0);
  moving.Sync();
  EXPECT_TRUE(moving.Done());
}

TEST_F(OpenCLTest, NativeHandlesAreThePluginsOpenCLObjects) {
  const Device dev(Dev(0));
  const auto context = Handle<cl_context>(dev, BP_NATIVE_CONTEXT);
  const auto device = Handle<cl_device_id>(dev, BP_NATIVE_DEVICE);
  const auto platform = Handle<cl_platform_id>(dev, BP_NATIVE_PLATFORM);
  ASSERT_NE(context, nullptr);
  // opencl:0 is the first device of the first platform that has one (the documented order).
  cl_uint num_platforms = 0;
  ASSERT_EQ(clGetPlatformIDs(0, nullptr, &num_platforms), CL_SUCCESS);
  std::vector<cl_platform_id> platforms(num_platforms);
  clGetPlatformIDs(num_platforms, platforms.data(), nullptr);
  cl_device_id first = nullptr;
  for (cl_platform_id p : platforms) {
    cl_uint found = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &first, &found) == CL_SUCCESS && found > 0) break;
  }
  EXPECT_EQ(device, first);
  cl_platform_id device_platform = nullptr;
  clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof(device_platform), &device_platform, nullptr);
  EXPECT_EQ(platform, device_platform);
  cl_device_id context_device = nullptr;
  clGetContextInfo(context, CL_CONTEXT_DEVICES, sizeof(context_device), &context_device, nullptr);
  EXPECT_EQ(context_device, device);

  // Queues: the default one (null stream) and a stream's, both of this context and device,
  // both timing their commands.
  backplane::Stream s(dev);
  const auto q0 = Handle<cl_command_queue>(dev, BP_NATIVE_QUEUE);
  const auto qs = Handle<cl_command_queue>(dev, BP_NATIVE_QUEUE, s.handle());
  EXPECT_NE(q0, qs);
  for (cl_command_queue q : {q0, qs}) {
    cl_context qc = nullptr;
    cl_device_id qd = nullptr;
    cl_command_queue_properties props = 0;
    clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof(qc), &qc, nullptr);
    clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof(qd), &qd, nullptr);
    clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(props), &props, nullptr);
    EXPECT_EQ(qc, context);
    EXPECT_EQ(qd, device);
    EXPECT_NE(props & CL_QUEUE_PROFILING_ENABLE, 0u);
  }

  // A tensor's cl_mem holds what Backplane wrote; read here straight from OpenCL.
  const std::vector<float> x = bptest::RandomFloats(4096, 1903);
  backplane::Tensor tx = backplane::Tensor::Empty({4096}, backplane::Float32(), dev);
  tx.CopyFrom(x);
  const auto cl_x = reinterpret_cast<cl_mem>(tx.NativeHandle(BP_NATIVE_BUFFER));
  EXPECT_EQ(tx.NativeHandle(BP_NATIVE_BUFFER_OFFSET), 0u);
  cl_context mem_context = nullptr;
  size_t mem_size = 0;
  clGetMemObjectInfo(cl_x, CL_MEM_CONTEXT, sizeof(mem_context), &mem_context, nullptr);
  clGetMemObjectInfo(cl_x, CL_MEM_SIZE, sizeof(mem_size), &mem_size, nullptr);
  EXPECT_EQ(mem_context, context);
  EXPECT_GE(mem_size, x.size() * sizeof(float));
  std::vector<float> direct(x.size(), 0.0f);
  ASSERT_EQ(clEnqueueReadBuffer(q0, cl_x, CL_TRUE, 0, direct.size() * sizeof(float), direct.data(),
                                0, nullptr, nullptr),
            CL_SUCCESS);
  EXPECT_EQ(direct, x);
  void* w = Workspace(100);  // a workspace has its cl_mem too
  EXPECT_NE(backplane::NativeHandle(dev, BP_NATIVE_BUFFER, w), 0u);
  backplane::Check(bp_device_free_workspace(Dev(0), w));

  // What is not a live data handle or stream of this device, and kinds OpenCL has none of.
  bptest::Status st;
  const int on_the_host = 0;
  for (const void* bad : {static_cast<const void*>(&on_the_host), static_cast<const void*>(w)}) {
    st = bptest::CaptureError([&] { backplane::NativeHandle(dev, BP_NATIVE_BUFFER, bad); });
    EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  }
  st = bptest::CaptureError(
      [&] { backplane::NativeHandle(dev, BP_NATIVE_QUEUE, reinterpret_cast<void*>(0x40)); });
  EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
  for (bp_native_kind_t kind :
       {BP_NATIVE_MEMORY, BP_NATIVE_MEMORY_OFFSET, BP_NATIVE_QUEUE_FAMILY}) {
    st = bptest::CaptureError([&] { tx.NativeHandle(kind); });
    EXPECT_EQ(st.kind, BP_ERR_UNSUPPORTED) << st;
    EXPECT_NE(st.message.find("BP_NATIVE_BUFFER (the cl_mem)"), std::string::npos) << st;
    EXPECT_NE(st.message.find("BP_NATIVE_PLATFORM"), std::string::npos) << st;
  }
}

constexpr const char* kScaleAddIr = R"(# backplane-ir 1
func scale_add(rows: int32, x: buffer<float32>[rows, 256], y: buffer<float32>[rows, 256], out: buffer<float32>[rows, 256]) {
  for bx in thread(blockIdx.x, 0, rows) {
    for tx in thread(threadIdx.x, 0, 256) {
      out[bx, tx] = 2.0 * x[bx, tx] + y[bx, tx]
    }
  }
}
)";

// A cl_mem of the application's own, on the plugin's context.
cl_mem NewMem(cl_context context, size_t bytes) {
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes, nullptr, &err);
  EXPECT_EQ(err, CL_SUCCESS);
  return mem;
}

bp_native_buffer_t Native(cl_mem mem, uint64_t size) {
  return bp_native_buffer_t{sizeof(bp_native_buffer_t), reinterpret_cast<uint64_t>(mem), 0, 0,
                            size};
}

// Three cl_mems of the test's own wrapped as tensors without a copy: Backplane writes one and
// OpenCL reads it back, OpenCL writes one and Backplane reads it, a kernel reads both and
// writes the third, which OpenCL reads. Each release runs once, when its tensor goes, and each
// cl_mem's reference count is back to the test's one.
TEST_F(OpenCLTest, WrappedClMemsRoundTripBothWaysAndFeedAKernel) {
  // The kernel's program cache in the build tree, not the user's home.
  const std::string cache = std::string(BACKPLANE_TEST_SCRATCH_DIR) + "/opencl_cache/device_test";
  std::filesystem::create_directories(cache);
  std::filesystem::permissions(cache, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace);
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);

  const Device dev(Dev(0));
  const auto context = Handle<cl_context>(dev, BP_NATIVE_CONTEXT);
  const auto device = Handle<cl_device_id>(dev, BP_NATIVE_DEVICE);
  cl_int err = CL_SUCCESS;
  cl_command_queue mine = clCreateCommandQueueWithProperties(context, device, nullptr, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  const int32_t rows = 64;
  const size_t count = static_cast<size_t>(rows) * 256, bytes = count * sizeof(float);
  cl_mem mx = NewMem(context, bytes), my = NewMem(context, bytes + 4096),
         mout = NewMem(context, bytes);
  const std::vector<float> x = bptest::RandomFloats(count, 1904);
  const std::vector<float> y = bptest::RandomFloats(count, 1905);
  ASSERT_EQ(clEnqueueWriteBuffer(mine, my, CL_TRUE, 0, bytes, y.data(), 0, nullptr, nullptr),
            CL_SUCCESS);
  const std::vector<int64_t> shape = {rows, 256};
  int released[3] = {0, 0, 0};
  {
    backplane::Tensor tx = backplane::Tensor::FromNative(
        dev, Native(mx, bytes), shape, backplane::Float32(), [&] { ++released[0]; });
    backplane::Tensor ty = backplane::Tensor::FromNative(
        dev, Native(my, bytes + 4096), shape, backplane::Float32(), [&] { ++released[1]; });
    backplane::Tensor tout = backplane::Tensor::FromNative(
        dev, Native(mout, bytes), shape, backplane::Float32(), [&] { ++released[2]; });
    EXPECT_EQ(RefCount(mx), 2u) << "the plugin holds one reference while wrapped";
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_BUFFER), reinterpret_cast<uint64_t>(mx));
    EXPECT_EQ(tx.NativeHandle(BP_NATIVE_BUFFER_OFFSET), 0u);

    // Backplane -> the application.
    tx.CopyFrom(x);
    std::vector<float> got(count, 0.0f);
    ASSERT_EQ(clEnqueueReadBuffer(mine, mx, CL_TRUE, 0, bytes, got.data(), 0, nullptr, nullptr),
              CL_SUCCESS);
    EXPECT_EQ(got, x);
    // The application -> Backplane.
    EXPECT_EQ(ty.ToVector<float>(), y);

    // A kernel reads two wrapped buffers and writes the third, in place.
    backplane::Module m = backplane::Build(kScaleAddIr, backplane::Target::FromDevice(dev));
    m.GetFunction("scale_add")(rows, tx.dl(), ty.dl(), tout.dl());
    backplane::Check(bp_device_stream_sync(Dev(0), nullptr));
    ASSERT_EQ(clEnqueueReadBuffer(mine, mout, CL_TRUE, 0, bytes, got.data(), 0, nullptr, nullptr),
              CL_SUCCESS);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += got[i] == 2.0f * x[i] + y[i] ? 0 : 1;
    EXPECT_EQ(wrong, 0u);

    // Backplane never frees the application's buffer.
    auto s = Capture(bp_device_free_data_space(Dev(0), tx.dl()->data));
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
    EXPECT_NE(s.message.find("native buffer"), std::string::npos) << s;
    s = Capture(bp_device_free_workspace(Dev(0), tx.dl()->data));
    EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
    EXPECT_EQ(tx.ToVector<float>(), x) << "a refused free changed nothing";
    EXPECT_EQ(released[0] + released[1] + released[2], 0);
  }
  EXPECT_EQ(released[0], 1);
  EXPECT_EQ(released[1], 1);
  EXPECT_EQ(released[2], 1);
  for (cl_mem mem : {mx, my, mout}) {
    EXPECT_EQ(RefCount(mem), 1u) << "the plugin's reference was given back";
    EXPECT_EQ(clReleaseMemObject(mem), CL_SUCCESS);
  }
  clReleaseCommandQueue(mine);
}

TEST_F(OpenCLTest, BadWrapsAreRefusedAndNeverReleased) {
  const Device dev(Dev(0));
  const auto context = Handle<cl_context>(dev, BP_NATIVE_CONTEXT);
  const auto device = Handle<cl_device_id>(dev, BP_NATIVE_DEVICE);
  cl_mem mem = NewMem(context, 1024);
  cl_int err = CL_SUCCESS;
  cl_context other = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  cl_mem foreign = NewMem(other, 1024);
  int released = 0;
  auto wrap = [&](const bp_native_buffer_t& b, int64_t elements) {
    return bptest::CaptureError([&] {
      backplane::Tensor::FromNative(dev, b, {elements}, backplane::UInt8(), [&] { ++released; });
    });
  };
  struct Case {
    const char* what;
    bp_native_buffer_t buffer;
    int64_t elements;
    const char* says;
  };
  bp_native_buffer_t with_memory = Native(mem, 1024), with_offset = Native(mem, 1024);
  with_memory.memory = reinterpret_cast<uint64_t>(mem);
  with_offset.memory_offset = 16;
  const Case cases[] = {
      {"null", Native(nullptr, 1024), 1024, "buffer->buffer is 0"},
      {"larger than the cl_mem", Native(mem, 1025), 1025, "CL_MEM_SIZE"},
      {"a tensor larger than the size given", Native(mem, 512), 1024, ""},
      {"another context's", Native(foreign, 1024), 1024, "another cl_context"},
      {"memory set", with_memory, 1024, "buffer->memory"},
      {"memory_offset set", with_offset, 1024, "buffer->memory"},
  };
  for (const Case& c : cases) {
    const bptest::Status st = wrap(c.buffer, c.elements);
    EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << c.what << ": " << st;
    EXPECT_NE(st.message.find(c.says), std::string::npos) << c.what << ": " << st;
  }
  // An image is a cl_mem but not a buffer (where the device has images).
  cl_bool images = CL_FALSE;
  clGetDeviceInfo(device, CL_DEVICE_IMAGE_SUPPORT, sizeof(images), &images, nullptr);
  if (images == CL_TRUE) {
    const cl_image_format format{CL_RGBA, CL_FLOAT};
    cl_image_desc desc{};
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = 4;
    desc.image_height = 4;
    cl_mem image = clCreateImage(context, CL_MEM_READ_WRITE, &format, &desc, nullptr, &err);
    ASSERT_EQ(err, CL_SUCCESS);
    const bptest::Status st = wrap(Native(image, 16), 16);
    EXPECT_EQ(st.kind, BP_ERR_INVALID_ARGUMENT) << st;
    EXPECT_NE(st.message.find("not a buffer"), std::string::npos) << st;
    EXPECT_EQ(RefCount(image), 1u);
    clReleaseMemObject(image);
  }
  EXPECT_EQ(released, 0) << "a refused wrap never calls release";
  EXPECT_EQ(RefCount(mem), 1u) << "a refused wrap keeps no reference";
  EXPECT_EQ(RefCount(foreign), 1u);
  // The same buffer wrapped right after all that works, and nothing was left wrapped: the
  // reference count is exactly the test's one again once the tensor goes.
  {
    backplane::Tensor t = backplane::Tensor::FromNative(dev, Native(mem, 1024), {1024},
                                                        backplane::UInt8(), [&] { ++released; });
    const std::vector<uint8_t> data = bptest::RandomBytes(1024, 1906);
    t.CopyFrom(data);
    EXPECT_EQ(t.ToVector<uint8_t>(), data);
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(RefCount(mem), 1u);
  clReleaseMemObject(foreign);
  clReleaseMemObject(mem);
  clReleaseContext(other);
}

}  // namespace
