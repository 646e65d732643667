// SPDX-License-Identifier: Apache-2.0
// Events and native handles (ABI 1.6; BP-PLUGIN-14). Events are checked on
// every device, with the plugin's own event entries or the core's fallback: an event recorded
// after work on one stream orders a second stream that waits for it, is passed after its sync,
// times the work between two events, and an event never recorded is passed. Native handles,
// where the DeviceAPI has them: every kind answers a handle or BP_ERR_UNSUPPORTED, the same
// one twice, and a made-up data handle is an error; a data space's own buffer wrapped as a
// tensor (bp_tensor_from_native) shows the same bytes both ways, is never freed through
// free_data_space, and its release runs once.
#include <backplane/backplane.hpp>

#include "conformance.h"
#include "device_util.h"

namespace backplane {
namespace conformance {

namespace {

struct EventRef {
  bp_object_t* obj = nullptr;
  explicit EventRef(DLDevice dev) {
    CheckCall(bp_event_create(dev, &obj), "bp_event_create(" + DeviceString(dev) + ")");
  }
  ~EventRef() {
    if (obj != nullptr) bp_object_release(obj);
  }
  EventRef(const EventRef&) = delete;
  EventRef& operator=(const EventRef&) = delete;
};

bool Done(const EventRef& e, const std::string& what) {
  int32_t done = -1;
  CheckCall(bp_event_query(e.obj, &done), "bp_event_query(" + what + ")");
  if (done != 0 && done != 1) Fail("bp_event_query(" + what + ") wrote " + std::to_string(done));
  return done == 1;
}

double ElapsedMs(const EventRef& start, const EventRef& end, const std::string& what) {
  double ms = -1;
  CheckCall(bp_event_elapsed_ms(start.obj, end.obj, &ms), "bp_event_elapsed_ms(" + what + ")");
  if (!(ms >= 0.0) || ms > 3.6e6) {
    Fail("bp_event_elapsed_ms(" + what + ") gave " + std::to_string(ms) +
         " ms; expected the milliseconds between two recorded points (>= 0)");
  }
  return ms;
}

void EventsOrderAndTime(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  ctx.Detail(ctx.api->event_create != nullptr ? "the plugin's own events"
                                              : "no event entries: the core's events");
  StreamHandle s1(ctx.dev);
  StreamHandle s2(ctx.dev);
  StreamWaitCheck check(ctx.dev, s1.get(), s2.get(), size_t{64} << 10, 1900);
  EventRef never(ctx.dev);
  if (!Done(never, "an event never recorded")) {
    Fail("an event never recorded is not passed; bp_event_query must answer 1 for it");
  }
  for (int round = 0; round < 3; ++round) {
    EventRef start(ctx.dev), end(ctx.dev);
    check.Round(
        round,
        [&] {
          CheckCall(bp_event_record(start.obj, s1.get()), "bp_event_record(start, stream 1)");
        },
        [&] {
          CheckCall(bp_event_record(end.obj, s1.get()), "bp_event_record(end, stream 1)");
          CheckCall(bp_event_wait(end.obj, s2.get()), "bp_event_wait(end, stream 2)");
        },
        "the copy queued on stream 2 after bp_event_wait(end) did not wait for the work "
        "recorded on stream 1 before the event (BP-PLUGIN-8)");
    CheckCall(bp_event_sync(end.obj), "bp_event_sync(end)");
    if (!Done(end, "end, after bp_event_sync")) {
      Fail("bp_event_query(end) answers 0 after bp_event_sync(end) returned");
    }
    if (!Done(start, "start, after the end was passed")) {
      Fail(
          "the start event is not passed although the end event, recorded after it on the "
          "same stream, is");
    }
    ElapsedMs(start, end, "start, end around 8 MiB of copies");
    // Recording again moves the mark: the later point is not before the earlier one.
    CheckCall(bp_event_record(start.obj, s1.get()), "bp_event_record(start) again");
    CheckCall(bp_event_sync(start.obj), "bp_event_sync(start)");
    ElapsedMs(end, start, "end, then start recorded again after it");
    Sync(ctx.dev, s1.get(), "stream 1");
  }
  double ms = 0;
  if (bp_event_elapsed_ms(never.obj, never.obj, &ms) == BP_OK) {
    Fail("bp_event_elapsed_ms of an event never recorded succeeded; it must be refused");
  }
  bp_error_clear();
}

// ---- native handles -------------------------------------------------------------------------

const bp_native_kind_t kKinds[] = {
    BP_NATIVE_BUFFER,        BP_NATIVE_BUFFER_OFFSET, BP_NATIVE_MEMORY,
    BP_NATIVE_MEMORY_OFFSET, BP_NATIVE_QUEUE,         BP_NATIVE_QUEUE_FAMILY,
    BP_NATIVE_CONTEXT,       BP_NATIVE_DEVICE,        BP_NATIVE_PLATFORM};

const char* KindName(bp_native_kind_t k) {
  static const char* const kNames[] = {
      "BP_NATIVE_BUFFER",        "BP_NATIVE_BUFFER_OFFSET", "BP_NATIVE_MEMORY",
      "BP_NATIVE_MEMORY_OFFSET", "BP_NATIVE_QUEUE",         "BP_NATIVE_QUEUE_FAMILY",
      "BP_NATIVE_CONTEXT",       "BP_NATIVE_DEVICE",        "BP_NATIVE_PLATFORM"};
  return k >= BP_NATIVE_BUFFER && k <= BP_NATIVE_PLATFORM ? kNames[k - 1] : "?";
}

bool OfData(bp_native_kind_t k) { return k >= BP_NATIVE_BUFFER && k <= BP_NATIVE_MEMORY_OFFSET; }
bool OfStream(bp_native_kind_t k) { return k == BP_NATIVE_QUEUE || k == BP_NATIVE_QUEUE_FAMILY; }

// The handle of `kind`, or false where the backend answers BP_ERR_UNSUPPORTED; any other
// failure fails the test.
bool Handle(DLDevice dev, bp_native_kind_t kind, const void* object, uint64_t* out,
            const std::string& what) {
  const bp_status_t st = bp_native_handle(dev, kind, object, out);
  if (st == BP_ERR_UNSUPPORTED) {
    bp_error_clear();
    return false;
  }
  if (st != BP_OK) {
    Fail("bp_native_handle(" + std::string(KindName(kind)) + ", " + what + ") failed (" +
         TakeError(st) + "); answer the handle or BP_ERR_UNSUPPORTED");
  }
  return true;
}

void NativeHandles(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  if (ctx.api->native_handle == nullptr) Skip("the DeviceAPI has no native_handle entry");
  DataSpace d(ctx.dev, 4096);
  StreamHandle s(ctx.dev);
  std::string has;
  for (bp_native_kind_t kind : kKinds) {
    const void* object = OfData(kind) ? d.handle() : OfStream(kind) ? s.get() : nullptr;
    const std::string what = OfData(kind) ? "a data space" : OfStream(kind) ? "a stream" : "none";
    uint64_t first = 0, again = 0;
    if (!Handle(ctx.dev, kind, object, &first, what)) continue;
    has += std::string(has.empty() ? "" : ", ") + KindName(kind);
    if (!Handle(ctx.dev, kind, object, &again, what) || again != first) {
      Fail("bp_native_handle(" + std::string(KindName(kind)) + ") answered " + Hex(first, 1) +
           " and then " + Hex(again, 1) + " for the same " + what);
    }
    if (kind == BP_NATIVE_BUFFER && first == 0) {
      Fail("bp_native_handle(BP_NATIVE_BUFFER) of a live data space is 0");
    }
    if (OfData(kind)) {
      // A made-up data handle is an error, never a dereference.
      uint64_t junk = 0;
      const void* bogus = reinterpret_cast<const void*>(uintptr_t{0x7ead0000});
      const bp_status_t st = bp_native_handle(ctx.dev, kind, bogus, &junk);
      if (st == BP_OK) {
        Fail("bp_native_handle(" + std::string(KindName(kind)) +
             ") of a made-up data handle 0x7ead0000 succeeded; it must be refused");
      }
      bp_error_clear();
    }
  }
  ctx.Detail("native handles: " + (has.empty() ? std::string("none") : has));
}

struct Released {
  int count = 0;
  static void Run(void* self) { ++static_cast<Released*>(self)->count; }
};

void WrapRoundTrip(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  if (ctx.api->wrap_native == nullptr) Skip("the DeviceAPI has no wrap_native entry");
  if (ctx.api->native_handle == nullptr) {
    Fail("the DeviceAPI wraps native buffers but has no native_handle entry to give one out");
  }
  constexpr size_t kN = 100000;
  DataSpace a(ctx.dev, kN);
  const std::vector<uint8_t> data = RandomBytes(kN, 1950);
  Copy(HostAt(const_cast<uint8_t*>(data.data())), At(a), kN, nullptr, "writing data space A");
  Sync(ctx.dev, nullptr, "writing A");
  bp_native_buffer_t nb{};
  nb.struct_size = sizeof(nb);
  uint64_t offset = 0;
  Handle(ctx.dev, BP_NATIVE_BUFFER, a.handle(), &nb.buffer, "data space A");
  Handle(ctx.dev, BP_NATIVE_BUFFER_OFFSET, a.handle(), &offset, "data space A");
  Handle(ctx.dev, BP_NATIVE_MEMORY, a.handle(), &nb.memory, "data space A");
  Handle(ctx.dev, BP_NATIVE_MEMORY_OFFSET, a.handle(), &nb.memory_offset, "data space A");
  if (nb.buffer == 0) Fail("bp_native_handle(BP_NATIVE_BUFFER) of data space A is 0");
  nb.size = offset + kN;
  Released released;
  const int64_t shape[1] = {static_cast<int64_t>(nb.size)};
  bp_object_t* wrapped = nullptr;
  CheckCall(bp_tensor_from_native(ctx.dev, &nb, 1, shape, DLDataType{kDLUInt, 8, 1}, &Released::Run,
                                  &released, &wrapped),
            "bp_tensor_from_native(the buffer of data space A)");
  DLTensor* w = nullptr;
  CheckCall(bp_tensor_get(wrapped, &w), "bp_tensor_get(the wrapped tensor)");
  const Place wp{ctx.dev, w->data, static_cast<size_t>(w->byte_offset + offset)};
  std::vector<uint8_t> got = DifferentBytes(data, 1951);
  Copy(wp, HostAt(got.data()), kN, nullptr, "reading the wrapped tensor");
  Sync(ctx.dev, nullptr, "reading the wrapped tensor");
  ExpectBytes(got.data(), data.data(), kN, "the wrapped buffer of data space A, read");
  const std::vector<uint8_t> other = DifferentBytes(data, 1952);
  Copy(HostAt(const_cast<uint8_t*>(other.data())), wp, kN, nullptr, "writing the wrapped tensor");
  Sync(ctx.dev, nullptr, "writing the wrapped tensor");
  std::vector<uint8_t> back = DifferentBytes(other, 1953);
  Copy(At(a), HostAt(back.data()), kN, nullptr, "reading data space A");
  Sync(ctx.dev, nullptr, "reading data space A");
  ExpectBytes(back.data(), other.data(), kN, "data space A after a write through its wrapper",
              data.data(), "what A held before");
  if (w->data == a.handle()) {
    // Handles that are device addresses (cuda's): the wrapper's handle is A's own, which
    // free_data_space rightly frees; nothing to check.
    ctx.Detail("the wrapped buffer's data handle is data space A's own (an address)");
  } else if (bp_device_free_data_space(ctx.dev, w->data) == BP_OK) {
    Fail(
        "free_data_space accepted the data handle of a wrapped native buffer; a wrapped buffer "
        "is the application's and must be refused (sdk::HandleTable::AddWrapped)");
  } else {
    bp_error_clear();
  }
  if (released.count != 0) Fail("the release of a wrapped buffer ran while its tensor lived");
  bp_object_release(wrapped);
  if (released.count != 1) {
    Fail("the release of a wrapped buffer ran " + std::to_string(released.count) +
         " times after its tensor went; once is right");
  }
  // A is untouched by the wrapper's end.
  std::vector<uint8_t> last = DifferentBytes(other, 1954);
  Copy(At(a), HostAt(last.data()), kN, nullptr, "reading data space A after the unwrap");
  Sync(ctx.dev, nullptr, "reading data space A after the unwrap");
  ExpectBytes(last.data(), other.data(), kN, "data space A after its wrapper went");
  a.Free();
}

}  // namespace

void AddEventNativeTests(std::vector<TestCase>* out) {
  out->push_back({"device.event.order_and_time",
                  "an event recorded after work on one stream orders a stream that waits for it, "
                  "is passed after its sync, times the work between two events; recording again "
                  "moves it; one never recorded is passed and cannot be timed",
                  "BP-PLUGIN-14", kNeedsDevice, EventsOrderAndTime});
  out->push_back({"device.native.handles",
                  "every native kind answers a handle or BP_ERR_UNSUPPORTED, the same twice; a "
                  "made-up data handle is refused",
                  "BP-PLUGIN-14", kNeedsDevice, NativeHandles});
  out->push_back({"device.native.wrap",
                  "a data space's native buffer wrapped as a tensor shows its bytes both ways, "
                  "free_data_space refuses the wrapper, and the release runs once when it goes",
                  "BP-PLUGIN-14", kNeedsDevice, WrapRoundTrip});
}

}  // namespace conformance
}  // namespace backplane
