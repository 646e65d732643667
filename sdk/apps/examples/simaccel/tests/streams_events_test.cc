// SPDX-License-Identifier: Apache-2.0
// simaccel's streams and events, checked the way a host application uses them: through the C++
// host API (backplane/backplane.hpp), with the plugin found on BACKPLANE_PLUGIN_PATH (or a
// folder given with --plugin-path). A vendor copies this next to their plugin and points it at
// their device; every check compares against a float64 reference computed here.
//
//   simaccel_streams_events_test [--plugin-path DIR]
//
// 1. Two streams, ordered by events: stream 1 runs C = A + B and records e1; stream 2 waits
//    for e1 (it does not wait on the host) and runs D = C + B. D must equal A + 2B: stream 2's
//    kernel read the C that stream 1 wrote. The events are passed after their sync, one never
//    recorded is passed, and the times between them add up (e0 -> e1 -> e2 on one device's
//    clock; the kernel between e0 and e1 takes time).
// 2. Recording again moves an event's mark to a later point.
// 3. The stream registry, as the host sees it: a thread's active stream that this thread frees
//    leaves the null stream active; one that another thread frees is an error at that thread's
//    next launch, naming the freed stream; a freed handle is refused by StreamSync.
//
// Exit status 0 when every check passes; otherwise 1 with one line per failed check.
#include <backplane/backplane.hpp>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace bp = backplane;

namespace {

// c = a + b on one GPU-style thread per element, blocks of 256.
constexpr const char* kAddKernel = R"(# backplane-ir 1
func add_gpu(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for bx in thread(blockIdx.x, 0, n / 256 + min(floormod(n, 256), 1)) {
    for tx in thread(threadIdx.x, 0, 256) {
      if (bx * 256 + tx < n) {
        c[bx * 256 + tx] = a[bx * 256 + tx] + b[bx * 256 + tx]
      }
    }
  }
}
)";

// Elements per tensor: enough that a kernel keeps the stream's worker busy while the host
// queues the rest, so stream 2 reading C before stream 1 wrote it would show.
constexpr int32_t kN = 1 << 18;

int failures = 0;

void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what.c_str());
    ++failures;
  }
}

// `got` equals sum_k coef[k] * inputs[k] in float64, within the rounding of float32 adds.
void ExpectSum(const std::vector<float>& got, const std::vector<const std::vector<float>*>& inputs,
               const std::vector<double>& coef, const std::string& what) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double want = 0, scale = 0;
    for (size_t k = 0; k < inputs.size(); ++k) {
      want += coef[k] * (*inputs[k])[i];
      scale += std::fabs(coef[k] * (*inputs[k])[i]);
    }
    if (!(std::fabs(got[i] - want) <= 4.0e-7 * scale)) {
      if (bad++ == 0) first = i;
    }
  }
  Expect(bad == 0, what + ": " + std::to_string(bad) + " of " + std::to_string(got.size()) +
                       " elements differ from the float64 reference (first at " +
                       std::to_string(first) + ")");
}

std::vector<float> Random(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(kN);
  for (float& x : v) x = dist(rng);
  return v;
}

// Runs `f`, which must throw bp::Error whose message contains `needle`.
template <typename F>
void ExpectError(F&& f, const std::string& needle, const std::string& what) {
  try {
    f();
  } catch (const bp::Error& e) {
    Expect(std::strstr(e.what(), needle.c_str()) != nullptr,
           what + ": the error '" + e.what() + "' does not say '" + needle + "'");
    return;
  }
  Expect(false, what + ": no error");
}

void OrderedByEvents(const bp::Device& dev, const bp::Function& add) {
  const std::vector<float> a = Random(1), b = Random(2);
  bp::Tensor ta = bp::Tensor::Empty({kN}, bp::Float32(), dev);
  bp::Tensor tb = bp::Tensor::Empty({kN}, bp::Float32(), dev);
  bp::Tensor tc = bp::Tensor::Empty({kN}, bp::Float32(), dev);
  bp::Tensor td = bp::Tensor::Empty({kN}, bp::Float32(), dev);
  ta.CopyFrom(a);
  tb.CopyFrom(b);

  bp::Stream s1(dev), s2(dev);
  bp::Event e0(dev), e1(dev), e2(dev), never(dev);
  Expect(never.Done(), "an event never recorded is passed");

  e0.Record(s1);
  s1.SetActive();  // kernels run on the calling thread's active stream
  add(kN, ta.dl(), tb.dl(), tc.dl());
  e1.Record(s1);
  e1.MakeWait(s2);  // stream 2's later work waits for C; the host goes on
  s2.SetActive();
  add(kN, tc.dl(), tb.dl(), td.dl());
  e2.Record(s2);

  e2.Sync();
  Expect(e2.Done(), "e2 is passed after e2.Sync()");
  Expect(e1.Done() && e0.Done(), "e0 and e1, which e2 waited for, are passed");
  ExpectSum(tc.ToVector<float>(), {&a, &b}, {1, 1}, "C = A + B on stream 1");
  ExpectSum(td.ToVector<float>(), {&a, &b}, {1, 2},
            "D = C + B on stream 2 after waiting for e1 (A + 2B)");

  const double t01 = e1.ElapsedMsSince(e0), t12 = e2.ElapsedMsSince(e1);
  const double t02 = e2.ElapsedMsSince(e0);
  std::printf("e0 -> e1 (C = A + B, %d elements): %.3f ms; e1 -> e2: %.3f ms\n", kN, t01, t12);
  Expect(t01 > 0, "the kernel between e0 and e1 takes time: " + std::to_string(t01) + " ms");
  Expect(t12 >= 0,
         "e2, recorded after e1 was waited for, is not before it: " + std::to_string(t12) + " ms");
  Expect(std::fabs(t02 - (t01 + t12)) <= 1e-6 * (1 + t02),
         "e0 -> e2 (" + std::to_string(t02) + " ms) is e0 -> e1 plus e1 -> e2 (" +
             std::to_string(t01 + t12) + " ms): one clock");

  // Recording again moves the mark past the point it had.
  e0.Record(s2);
  e0.Sync();
  Expect(e0.ElapsedMsSince(e2) >= 0, "e0 recorded again, after e2, is not before e2");
  ExpectError([&] { (void)e1.ElapsedMsSince(never); }, "was never recorded",
              "the time since an event never recorded is refused");
  // s1 and s2 are freed here; this thread's active stream (s2) goes back to the null stream.
}

void RegistryThroughTheHost(const bp::Device& dev, const bp::Function& add) {
  const std::vector<float> a = Random(3), b = Random(4);
  bp::Tensor ta = bp::Tensor::Empty({kN}, bp::Float32(), dev);
  bp::Tensor tb = bp::Tensor::Empty({kN}, bp::Float32(), dev);
  bp::Tensor tc = bp::Tensor::Empty({kN}, bp::Float32(), dev);
  ta.CopyFrom(a);
  tb.CopyFrom(b);

  // This thread frees its own active stream: the null stream is active again, and the next
  // kernel runs there, before the null-stream copy that reads C.
  bp_stream_t freed = nullptr;
  {
    bp::Stream s3(dev);
    s3.SetActive();
    freed = s3.handle();
  }
  add(kN, ta.dl(), tb.dl(), tc.dl());
  ExpectSum(tc.ToVector<float>(), {&a, &b}, {1, 1},
            "C = A + B on the null stream, after the active stream was freed");
  ExpectError([&] { bp::DeviceAPI::Get(dev).StreamSync(freed); }, "is not a live simaccel stream",
              "StreamSync on a freed stream");

  // Another thread's active stream, freed here: its next launch fails, naming the stream.
  bp::Stream s4(dev);
  const bp_stream_t s4_handle = s4.handle();
  std::promise<void> active, freed_it;
  std::future<void> freed_future = freed_it.get_future();
  std::string error;
  std::thread other([&] {
    bp::Check(bp_device_stream_set(dev.dl, s4_handle));
    active.set_value();
    freed_future.wait();
    try {
      add(kN, ta.dl(), tb.dl(), tc.dl());
    } catch (const bp::Error& e) {
      error = e.what();
    }
  });
  active.get_future().wait();
  s4 = bp::Stream();  // frees it
  freed_it.set_value();
  other.join();
  Expect(error.find("has been freed") != std::string::npos,
         "a launch on another thread's freed active stream is refused (got '" + error + "')");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--plugin-path") == 0 && i + 1 < argc) {
        bp::Check(bp_plugin_path_add(argv[++i]));
      } else {
        std::fprintf(stderr, "usage: simaccel_streams_events_test [--plugin-path DIR]\n");
        return 2;
      }
    }
    const bp::Device dev("simaccel", 0);
    const bp::DeviceAPI api = bp::DeviceAPI::Get(dev);
    Expect(api.Exists(), "simaccel:0 exists (SIMACCEL_DEVICES is not 0)");
    if (failures > 0) return 1;
    const bp_device_api_t* table = api.table();
    Expect(table->struct_size >= offsetof(bp_device_api_t, event_elapsed_ms) + sizeof(void*) &&
               table->event_create != nullptr,
           "simaccel's DeviceAPI has its own events (event_create ... event_elapsed_ms)");

    const bp::Module module = bp::Build(kAddKernel, bp::Target::Parse("simaccel"));
    const bp::Function add = module.GetFunction("add_gpu");
    OrderedByEvents(dev, add);
    RegistryThroughTheHost(dev, add);
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  std::printf("simaccel streams and events: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
