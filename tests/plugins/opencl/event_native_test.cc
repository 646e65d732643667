// SPDX-License-Identifier: Apache-2.0
// The opencl plugin's events (ordering two streams, query, sync, timing, recording again) and
// native handles (the OpenCL objects out, an application's cl_mem wrapped in: copies both ways,
// a kernel, refused wraps), on the real ICD loader (PoCL in CI).
// Skipped, with the reason, where no OpenCL device exists.
#include <CL/cl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "opencl_fixture.h"
#include "plugins/test_util.h"

namespace {

using bptest::Capture;
using bptest::OpenCLTest;

// ---- events and native handles ----------------------------------

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
    backplane::Module m =
        backplane::Build(bptest::kScaleAddGpuIr, backplane::Target::FromDevice(dev));
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
