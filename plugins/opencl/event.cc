// SPDX-License-Identifier: Apache-2.0
// Events of device_api.opencl (ABI 1.6): markers on the device's command queues.
//
// An event keeps the cl_event of the marker its last record enqueued. Recording again swaps in
// a new marker and releases the old one, so the event always names the latest point; a reader
// (query, sync, wait, timing) takes its own reference to the marker under the event's lock and
// works on that, so a record on another thread never releases a marker in use.
//
// Timing: a marker is a command that completes once every command queued before it on its
// in-order queue has completed, so its CL_PROFILING_COMMAND_END is the moment that point was
// passed (its START is when the queue began it, which on PoCL precedes END by under 1 us). The
// elapsed time between two events is END(end) - END(start): both measured the same way, in
// the device's clock. A driver that keeps no profiling times for markers answers
// CL_PROFILING_INFO_NOT_AVAILABLE, which is BP_ERR_UNSUPPORTED here.
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "device_api.h"

namespace backplane {
namespace opencl {

struct Event {
  explicit Event(int32_t id) : device_id(id) {}
  const int32_t device_id;
  std::mutex mu;
  cl_event marker = nullptr;  // the last record's marker; null while never recorded
};

namespace {

// Releases a cl_event when it goes (null is fine).
struct EventRef {
  explicit EventRef(cl_event e) : event(e) {}
  EventRef(const EventRef&) = delete;
  EventRef& operator=(const EventRef&) = delete;
  ~EventRef() {
    if (event != nullptr) clReleaseEvent(event);
  }
  cl_event event;
};

// The event of `handle`, checked to be of `dev` (the core passes only handles from
// CreateEvent; a handle of another device is the caller's mistake).
Event* EventOf(DLDevice dev, void* handle, const char* call) {
  BACKPLANE_REQUIRE(handle != nullptr, BP_ERR_INVALID_ARGUMENT,
                    std::string(call) + " on " + sdk::DeviceString(dev) +
                        ": the event is null; pass one from event_create");
  Event* e = static_cast<Event*>(handle);
  BACKPLANE_REQUIRE(e->device_id == dev.device_id, BP_ERR_INVALID_ARGUMENT,
                    std::string(call) +
                        ": the event belongs to opencl:" + std::to_string(e->device_id) + ", not " +
                        sdk::DeviceString(dev) + "; use an event of the stream's device");
  return e;
}

// A reference of the caller's own to the event's current marker (null: never recorded).
cl_event CurrentMarker(Event* e) {
  std::lock_guard<std::mutex> lock(e->mu);
  if (e->marker != nullptr) clRetainEvent(e->marker);
  return e->marker;
}

// The execution status of `marker`: CL_COMPLETE, a positive state before it, or the negative
// error of the work it waited for, which is thrown.
cl_int Status(DLDevice dev, cl_event marker, const char* call) {
  cl_int status = CL_COMPLETE;
  Check(clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr),
        std::string("clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS) for ") + call + " on " +
            sdk::DeviceString(dev));
  if (status < 0) {
    throw Error(BP_ERR_DEVICE, std::string(call) + " on " + sdk::DeviceString(dev) +
                                   ": the work queued before the event failed with " +
                                   ErrorName(status) + " (" + std::to_string(status) +
                                   "); the stream's later work may not have run either");
  }
  return status;
}

// CL_PROFILING_COMMAND_END of `marker`, in the device's nanoseconds.
cl_ulong EndNs(DLDevice dev, cl_event marker, const char* which) {
  cl_ulong ns = 0;
  const cl_int err =
      clGetEventProfilingInfo(marker, CL_PROFILING_COMMAND_END, sizeof(ns), &ns, nullptr);
  if (err == CL_PROFILING_INFO_NOT_AVAILABLE) {
    throw Error(BP_ERR_UNSUPPORTED,
                "timing events on " + sdk::DeviceString(dev) +
                    ": the OpenCL driver keeps no profiling times for the " + which +
                    " event's marker (CL_PROFILING_INFO_NOT_AVAILABLE); time the work with "
                    "the host's clock around Event::Sync instead");
  }
  Check(err, std::string("clGetEventProfilingInfo(CL_PROFILING_COMMAND_END) of the ") + which +
                 " event on " + sdk::DeviceString(dev));
  return ns;
}

}  // namespace

void* OpenCLDeviceAPI::CreateEvent(DLDevice dev) {
  CheckDevice(dev);
  return new Event(dev.device_id);
}

void OpenCLDeviceAPI::FreeEvent(DLDevice dev, void* event) {
  std::unique_ptr<Event> e(EventOf(dev, event, "event_free"));
  // A marker still queued may be released: the driver keeps it until it completes.
  if (e->marker != nullptr) clReleaseEvent(e->marker);
}

void OpenCLDeviceAPI::RecordEvent(DLDevice dev, void* event, bp_stream_t stream) {
  Event* e = EventOf(dev, event, "event_record");
  cl_command_queue q = Queue(dev, stream);
  cl_event marker = nullptr;
  Check(clEnqueueMarkerWithWaitList(q, 0, nullptr, &marker),
        "clEnqueueMarkerWithWaitList (recording an event) on " + sdk::DeviceString(dev));
  EventRef owned(marker);
  // Another queue may wait for the marker only once it is flushed (OpenCL 3.0, 5.13), and a
  // marker never flushed might never be seen complete by event_query.
  Check(clFlush(q), "clFlush (recording an event) on " + sdk::DeviceString(dev));
  {
    std::lock_guard<std::mutex> lock(e->mu);
    std::swap(e->marker, owned.event);
  }
  // `owned` now releases the previous marker, if any, outside the lock.
}

void OpenCLDeviceAPI::StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) {
  Event* e = EventOf(dev, event, "stream_wait_event");
  cl_command_queue q = Queue(dev, stream);
  EventRef marker(CurrentMarker(e));
  if (marker.event == nullptr) return;  // never recorded: passed, nothing to wait for
  Check(clEnqueueBarrierWithWaitList(q, 1, &marker.event, nullptr),
        "clEnqueueBarrierWithWaitList (waiting for an event) on " + sdk::DeviceString(dev));
  // Flushed like a record: the barrier's own queue may itself be waited for by a third.
  Check(clFlush(q), "clFlush (waiting for an event) on " + sdk::DeviceString(dev));
}

bool OpenCLDeviceAPI::EventDone(DLDevice dev, void* event) {
  Event* e = EventOf(dev, event, "event_query");
  EventRef marker(CurrentMarker(e));
  if (marker.event == nullptr) return true;
  return Status(dev, marker.event, "event_query") == CL_COMPLETE;
}

void OpenCLDeviceAPI::SyncEvent(DLDevice dev, void* event) {
  Event* e = EventOf(dev, event, "event_sync");
  EventRef marker(CurrentMarker(e));
  if (marker.event == nullptr) return;
  const cl_int err = clWaitForEvents(1, &marker.event);
  // A failure of the work before the marker names that work's error, not the wait's.
  if (err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) Status(dev, marker.event, "event_sync");
  Check(err, "clWaitForEvents (event_sync) on " + sdk::DeviceString(dev));
}

double OpenCLDeviceAPI::EventElapsedMs(DLDevice dev, void* start, void* end) {
  Event* a = EventOf(dev, start, "event_elapsed_ms");
  Event* b = EventOf(dev, end, "event_elapsed_ms");
  BACKPLANE_REQUIRE(CheckDevice(dev).profiling, BP_ERR_UNSUPPORTED,
                    "timing events on " + sdk::DeviceString(dev) +
                        ": the device does not offer CL_QUEUE_PROFILING_ENABLE "
                        "(CL_DEVICE_QUEUE_ON_HOST_PROPERTIES), so its queues keep no times; time "
                        "the work with the host's clock around Event::Sync instead");
  EventRef from(CurrentMarker(a));
  EventRef to(CurrentMarker(b));
  BACKPLANE_REQUIRE(from.event != nullptr && to.event != nullptr, BP_ERR_INVALID_ARGUMENT,
                    "event_elapsed_ms on " + sdk::DeviceString(dev) + ": the " +
                        (from.event == nullptr ? "start" : "end") +
                        " event was never recorded; record both first");
  // The core waited for both; a marker whose work failed has no meaningful time.
  BACKPLANE_REQUIRE(Status(dev, from.event, "event_elapsed_ms") == CL_COMPLETE &&
                        Status(dev, to.event, "event_elapsed_ms") == CL_COMPLETE,
                    BP_ERR_INVALID_ARGUMENT,
                    "event_elapsed_ms on " + sdk::DeviceString(dev) +
                        ": an event is not passed yet; sync both events first");
  const cl_ulong t0 = EndNs(dev, from.event, "start");
  const cl_ulong t1 = EndNs(dev, to.event, "end");
  // Signed: an end recorded on another stream may have passed before the start.
  return static_cast<double>(static_cast<int64_t>(t1 - t0)) / 1e6;
}

}  // namespace opencl
}  // namespace backplane
