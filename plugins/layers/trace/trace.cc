// SPDX-License-Identifier: Apache-2.0
// The trace layer (docs/layers/trace.md): records every DeviceAPI call, copy, module function
// call (a launch) and build with host timestamps, and device timestamps of launches and copies
// on devices that have events, and writes them when the process exits as a Chrome trace-event
// JSON file that Perfetto and chrome://tracing open.
//
//   BACKPLANE_LAYERS=trace:file=run.json backplane demo
//   backplane demo --trace run.json
//
// Tracks: process 1 "host" with a thread per host thread (every call, build and launch as the
// host saw it); a process per device ("cpu:0") with a thread per stream ("null stream",
// "stream 1") for its copies and launches, and a "... device clock" thread beside each stream
// where device times were measured. Flows join a copy to the first launch that takes the
// memory it wrote.
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/layer.hpp>
#include <backplane/sdk/plugin.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace backplane {
namespace trace_layer {
namespace {

namespace sdk = ::backplane::sdk;

constexpr uint32_t kHostPid = 1;
constexpr uint32_t kNullStreamTid = 1;
// The device-clock thread of a stream's thread `tid` is tid + this.
constexpr uint32_t kDeviceClockTid = 100000;
// Copies whose destination is remembered for flows to the launch that reads it.
constexpr size_t kMaxPendingCopies = 4096;
// Launches and copies whose device events wait for a stream_sync to be read.
constexpr size_t kMaxPendingDeviceSpans = 4096;

enum Category : uint8_t { kApi, kCopy, kLaunch, kCall, kBuild, kDevice };
const char* const kCategoryNames[] = {"api", "copy", "launch", "call", "build", "device"};

const char* StatusName(int32_t st) {
  static const char* const names[] = {
      "ok",          "invalid_argument", "not_found", "already_exists", "out_of_memory",
      "unsupported", "version_mismatch", "plugin",    "device",         "type",
      "internal"};
  return st >= 0 && st < 11 ? names[st] : "unknown";
}

struct Event {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  const std::string* name = nullptr;  // interned: lives as long as the Tracer
  uint32_t pid = 0;
  uint32_t tid = 0;
  Category cat = kApi;
  int32_t status = 0;
  uint64_t bytes = 0;
  const std::string* device = nullptr;  // the device an api call names, or null
  int64_t host_ts_ns = -1;              // kDevice: the host start of the launch or copy
};

// A span from t0 to t1 (ns from the origin) on track pid/tid.
Event MakeSpan(Category cat, const std::string* name, uint32_t pid, uint32_t tid, int64_t t0,
               int64_t t1, int32_t status) {
  Event e;
  e.ts_ns = t0;
  e.dur_ns = t1 - t0;
  e.name = name;
  e.pid = pid;
  e.tid = tid;
  e.cat = cat;
  e.status = status;
  return e;
}

struct Flow {
  uint64_t id;
  int64_t from_ts_ns;
  uint32_t from_pid, from_tid;
  int64_t to_ts_ns;
  uint32_t to_pid, to_tid;
};

// Where a copy wrote: a flow starts there if a launch takes that memory.
struct CopyDest {
  size_t begin, end;  // byte range from the data handle
  uint64_t flow_id;
  int64_t ts_ns;
  uint32_t pid, tid;
};

// A launch or copy timed with two device events, read once its stream is synchronised.
struct DeviceSpan {
  const bp_device_api_t* api;
  DLDevice dev;
  bp_stream_t stream;
  void* start;
  void* end;
  const std::string* name;
  uint32_t pid, tid;
  Category cat;
  int64_t host_ts_ns;
  uint64_t bytes;
};

struct Options {
  std::string file;
  size_t max_events = 1000000;
  bool device_times = true;
};

Options ParseOptions(const std::string& text) {
  const std::string known =
      "file=PATH (default backplane-trace-<pid>.json), max_events=N (default 1000000), "
      "device_times=0|1 (default 1)";
  Options o;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    size_t end = text.find(':', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    auto refuse = [&](const std::string& why) {
      throw Error(BP_ERR_INVALID_ARGUMENT, "layer trace: option '" + item + "': " + why +
                                               "; the options are " + known + ", separated by ':'");
    };
    if (eq == std::string::npos) refuse("an option is KEY=VALUE");
    if (key == "file") {
      if (value.empty()) refuse("the file name is empty");
      o.file = value;
    } else if (key == "max_events") {
      char* rest = nullptr;
      const unsigned long long n = std::strtoull(value.c_str(), &rest, 10);
      if (value.empty() || *rest != '\0' || value[0] == '-' || n == 0 || n > (1ull << 32)) {
        refuse("expected a whole number from 1 to 4294967296");
      }
      o.max_events = static_cast<size_t>(n);
    } else if (key == "device_times") {
      if (value != "0" && value != "1") refuse("expected 0 or 1");
      o.device_times = value == "1";
    } else {
      refuse("unknown option '" + key + "'");
    }
  }
  if (o.file.empty()) o.file = "backplane-trace-" + std::to_string(::getpid()) + ".json";
  // Written at exit, when the working folder may be another: fixed now.
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(o.file, ec);
  if (!ec) o.file = absolute.lexically_normal().string();
  return o;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void AppendEscaped(std::string* out, const std::string& s) {
  out->push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      *out += buf;
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

// Microseconds with nanosecond digits: exact, so nested spans stay nested in the file.
std::string Micros(int64_t ns) {
  char buf[32];
  const char* sign = ns < 0 ? "-" : "";
  const uint64_t a = ns < 0 ? static_cast<uint64_t>(-ns) : static_cast<uint64_t>(ns);
  std::snprintf(buf, sizeof(buf), "%s%" PRIu64 ".%03" PRIu64, sign, a / 1000, a % 1000);
  return buf;
}

std::string TypeName(int32_t type) {
  const char* name = nullptr;
  if (::backplane::detail::Api()->device_type_name(type, &name) != BP_OK || name == nullptr) {
    ::backplane::detail::Api()->error_clear();
    return "type" + std::to_string(type);
  }
  return name;
}

uint64_t DeviceKey(DLDevice dev) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(dev.device_type)) << 32) |
         static_cast<uint32_t>(dev.device_id);
}

// A new file beside `path`, `path`.tmp.XXXXXX, created by mkstemp (O_EXCL: never an existing
// file or a link someone planted in a shared folder such as /tmp, which a predictable name
// would let them aim at any file of this user); *tmp receives its name. Null, with errno, when
// it cannot.
FILE* CreateTemporaryBeside(const std::string& path, std::string* tmp) {
  std::string name = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd < 0) return nullptr;
  // The mode fopen would give (0666 less the umask), read without umask(), which would change
  // it for the process's other threads meanwhile; where it cannot be read, mkstemp's 0600.
  if (FILE* status = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned mask = 0;
    while (std::fgets(line, sizeof(line), status) != nullptr) {
      if (std::sscanf(line, "Umask: %o", &mask) == 1) {
        ::fchmod(fd, 0666 & ~static_cast<mode_t>(mask));
        break;
      }
    }
    std::fclose(status);
  }
  FILE* f = ::fdopen(fd, "wb");
  if (f == nullptr) {
    const int saved = errno;
    ::close(fd);
    ::unlink(name.c_str());
    errno = saved;
    return nullptr;
  }
  *tmp = std::move(name);
  return f;
}

class TraceTable;

// Everything recorded, under one lock; written once at exit.
class Tracer {
 public:
  explicit Tracer(Options options) : options_(std::move(options)), origin_ns_(NowNs()) {
    events_.reserve(std::min<size_t>(options_.max_events, 4096));
  }

  const Options& options() const { return options_; }
  int64_t Now() const { return NowNs() - origin_ns_; }

  // The host thread's track: tids 1, 2, ... in the order threads first call.
  uint32_t HostTid() {
    thread_local uint32_t tid = next_host_tid_.fetch_add(1) + 1;
    return tid;
  }

  const std::string* Intern(const std::string& s) {
    std::lock_guard lock(mu_);
    return InternLocked(s);
  }

  void Api(const char* entry, const DLDevice* dev, int64_t t0, int64_t t1, bp_status_t st) {
    const uint32_t tid = HostTid();
    std::lock_guard lock(mu_);
    Event e = MakeSpan(kApi, EntryNameLocked(entry), kHostPid, tid, t0, t1, st);
    e.device = dev != nullptr ? &DeviceNameLocked(*dev) : nullptr;
    PushLocked(e);
  }

  // A span on the host track (a module function call or a build).
  void Host(Category cat, const std::string* name, int64_t t0, int64_t t1, int32_t st) {
    const uint32_t tid = HostTid();
    std::lock_guard lock(mu_);
    PushLocked(MakeSpan(cat, name, kHostPid, tid, t0, t1, st));
  }

  // The stream `dev` works on now (set_stream; null until set).
  bp_stream_t CurrentStream(DLDevice dev) {
    std::lock_guard lock(mu_);
    auto it = current_stream_.find(DeviceKey(dev));
    return it == current_stream_.end() ? nullptr : it->second;
  }
  void SetCurrentStream(DLDevice dev, bp_stream_t stream) {
    std::lock_guard lock(mu_);
    current_stream_[DeviceKey(dev)] = stream;
  }

  // A copy on `dev`'s `stream` track; remembers where it wrote, for a flow.
  void Copy(DLDevice dev, bp_stream_t stream, const DLTensor* to, uint64_t bytes, int64_t t0,
            int64_t t1, bp_status_t st, DeviceSpan* span) {
    std::lock_guard lock(mu_);
    Event e = MakeSpan(kCopy, EntryNameLocked("copy"), PidLocked(dev), TidLocked(dev, stream), t0,
                       t1, st);
    e.bytes = bytes;
    e.device = &DeviceNameLocked(to->device);
    PushLocked(e);
    if (st == BP_OK && to->data != nullptr) {
      if (copy_dests_.size() >= kMaxPendingCopies) copy_dests_.clear();  // bounded
      copy_dests_[to->data] = CopyDest{static_cast<size_t>(to->byte_offset),
                                       static_cast<size_t>(to->byte_offset + bytes),
                                       next_flow_id_++,
                                       t0,
                                       e.pid,
                                       e.tid};
    }
    if (span != nullptr) AddSpanLocked(span, e);
  }

  // A launch: on the host track and, when `on_device`, on `dev`'s `stream` track, with flows
  // from the copies that wrote its tensors.
  void Launch(bool on_device, DLDevice dev, bp_stream_t stream, const std::string* name,
              const DLTensor* const* tensors, size_t n_tensors, int64_t t0, int64_t t1, int32_t st,
              DeviceSpan* span) {
    const uint32_t host_tid = HostTid();
    std::lock_guard lock(mu_);
    PushLocked(MakeSpan(kCall, name, kHostPid, host_tid, t0, t1, st));
    if (!on_device) return;
    const Event e = MakeSpan(kLaunch, name, PidLocked(dev), TidLocked(dev, stream), t0, t1, st);
    PushLocked(e);
    for (size_t i = 0; i < n_tensors && !copy_dests_.empty(); ++i) {
      const DLTensor* t = tensors[i];
      auto it = copy_dests_.find(t->data);
      if (it == copy_dests_.end()) continue;
      const size_t begin = static_cast<size_t>(t->byte_offset);
      const size_t end = begin + sdk::TensorBytes(t);
      if (begin < it->second.end && it->second.begin < std::max(end, begin + 1)) {
        if (flows_.size() < options_.max_events) {
          flows_.push_back(Flow{it->second.flow_id, it->second.ts_ns, it->second.pid,
                                it->second.tid, t0, e.pid, e.tid});
        } else {
          ++dropped_;
        }
        copy_dests_.erase(it);
      }
    }
    if (span != nullptr) AddSpanLocked(span, e);
  }

  // The data handle is gone: no flow may start from it.
  void Forget(void* data) {
    std::lock_guard lock(mu_);
    copy_dests_.erase(data);
  }

  // Reads the device times of the spans on `stream` of `dev`, which a sync just finished: each
  // becomes a span on the stream's device-clock thread. The device's clock is placed on the
  // host's by a marker event recorded after the sync.
  void ResolveSpans(const bp_device_api_t* api, DLDevice dev, bp_stream_t stream) {
    std::vector<DeviceSpan> ready;
    {
      std::lock_guard lock(mu_);
      for (auto it = spans_.begin(); it != spans_.end();) {
        if (DeviceKey(it->dev) == DeviceKey(dev) && it->stream == stream) {
          ready.push_back(*it);
          it = spans_.erase(it);
        } else {
          ++it;
        }
      }
      pending_spans_.store(spans_.size(), std::memory_order_relaxed);
    }
    if (ready.empty()) return;
    // The marker: recorded now on the (idle) stream; its device time is taken as the host
    // time half-way between recording it and seeing it passed.
    void* marker = nullptr;
    int64_t marker_host = -1;
    if (api->event_create(api->self, dev, &marker) == BP_OK) {
      const int64_t before = Now();
      if (api->event_record(api->self, dev, marker, stream) == BP_OK &&
          api->event_sync(api->self, dev, marker) == BP_OK) {
        marker_host = before + (Now() - before) / 2;
      }
    }
    std::vector<Event> resolved;
    for (const DeviceSpan& s : ready) {
      double start_ms = 0, end_ms = 0;
      if (marker_host >= 0 &&
          api->event_elapsed_ms(api->self, dev, s.start, marker, &start_ms) == BP_OK &&
          api->event_elapsed_ms(api->self, dev, s.end, marker, &end_ms) == BP_OK &&
          start_ms >= end_ms) {
        const int64_t t0 = marker_host - static_cast<int64_t>(start_ms * 1e6);
        Event e = MakeSpan(kDevice, s.name, s.pid, s.tid + kDeviceClockTid, t0,
                           t0 + static_cast<int64_t>((start_ms - end_ms) * 1e6), BP_OK);
        e.bytes = s.bytes;
        e.host_ts_ns = s.host_ts_ns;
        resolved.push_back(e);
      }
      api->event_free(api->self, dev, s.start);
      api->event_free(api->self, dev, s.end);
    }
    if (marker != nullptr) api->event_free(api->self, dev, marker);
    ::backplane::detail::Api()->error_clear();  // a device that cannot time leaves no message
    std::lock_guard lock(mu_);
    unresolved_ += ready.size() - resolved.size();
    // Each batch is placed by its own marker, whose host time is known to a few microseconds
    // only; a stream runs its work in order, so a batch that would start before the end of the
    // batch before it on its track is moved after it, whole.
    std::map<uint32_t, int64_t> shift;  // by track
    for (const Event& e : resolved) {
      auto last = device_clock_end_.find({e.pid, e.tid});
      if (last == device_clock_end_.end()) continue;
      int64_t& s = shift[e.tid];
      s = std::max(s, last->second - e.ts_ns);
    }
    for (Event e : resolved) {
      e.ts_ns += shift[e.tid];
      int64_t& end = device_clock_end_[{e.pid, e.tid}];
      end = std::max(end, e.ts_ns + e.dur_ns);
      PushLocked(e);
    }
  }

  // Whether any device span waits to be read (read without the lock: a sync on a device
  // without events costs one load).
  bool AnySpans() const { return pending_spans_.load(std::memory_order_relaxed) > 0; }

  // After a sync of `stream` (or, with sync_first, after syncing it here): its spans.
  void ResolveAfterSync(TraceTable* table, DLDevice dev, bp_stream_t stream, bool sync_first);

  // Room for one more timed span? Counts those refused.
  bool SpanRoom() {
    std::lock_guard lock(mu_);
    if (spans_.size() < kMaxPendingDeviceSpans) return true;
    ++unresolved_;
    return false;
  }

  void Write();

 private:
  const std::string* InternLocked(const std::string& s) {
    auto it = names_.find(s);
    if (it != names_.end()) return it->second;
    name_store_.push_back(s);
    const std::string* p = &name_store_.back();
    names_.emplace(s, p);
    return p;
  }

  // The DeviceAPI entries' names are literals: looked up by address, without hashing text.
  const std::string* EntryNameLocked(const char* entry) {
    auto it = entry_names_.find(entry);
    if (it != entry_names_.end()) return it->second;
    const std::string* name = InternLocked(entry);
    entry_names_.emplace(entry, name);
    return name;
  }

  const std::string& DeviceNameLocked(DLDevice dev) {
    auto it = device_names_.find(DeviceKey(dev));
    if (it != device_names_.end()) return *it->second;
    const std::string* name =
        InternLocked(TypeName(dev.device_type) + ":" + std::to_string(dev.device_id));
    device_names_.emplace(DeviceKey(dev), name);
    return *name;
  }

  // A process per device: pids 2, 3, ... in the order devices first work.
  uint32_t PidLocked(DLDevice dev) {
    auto it = device_pids_.find(DeviceKey(dev));
    if (it != device_pids_.end()) return it->second;
    const uint32_t pid = static_cast<uint32_t>(device_pids_.size()) + 2;
    device_pids_.emplace(DeviceKey(dev), pid);
    pid_names_.emplace_back(pid, &DeviceNameLocked(dev));
    return pid;
  }

  // A thread per stream of a device: 1 the null stream, 2, 3, ... the others by first use.
  uint32_t TidLocked(DLDevice dev, bp_stream_t stream) {
    if (stream == nullptr) return kNullStreamTid;
    auto& streams = stream_tids_[DeviceKey(dev)];
    auto it = streams.find(stream);
    if (it != streams.end()) return it->second;
    const uint32_t tid = static_cast<uint32_t>(streams.size()) + 2;
    streams.emplace(stream, tid);
    return tid;
  }

  void AddSpanLocked(DeviceSpan* span, const Event& e) {
    span->pid = e.pid;
    span->tid = e.tid;
    span->host_ts_ns = e.ts_ns;
    span->name = e.name;
    span->cat = e.cat;
    span->bytes = e.bytes;
    spans_.push_back(*span);
    pending_spans_.store(spans_.size(), std::memory_order_relaxed);
  }

  void PushLocked(const Event& e) {
    if (written_) return;  // after the file: nothing more is kept
    if (events_.size() >= options_.max_events) {
      ++dropped_;
      return;
    }
    events_.push_back(e);
    if (e.pid != kHostPid) return;
    if (e.tid > max_host_tid_) max_host_tid_ = e.tid;
  }

  const Options options_;
  const int64_t origin_ns_;
  std::atomic<uint32_t> next_host_tid_{0};
  std::mutex mu_;
  bool written_ = false;
  std::vector<Event> events_;
  std::vector<Flow> flows_;
  std::vector<DeviceSpan> spans_;
  std::atomic<size_t> pending_spans_{0};
  std::map<void*, CopyDest> copy_dests_;
  uint64_t next_flow_id_ = 1;
  uint64_t dropped_ = 0;
  uint64_t unresolved_ = 0;
  uint32_t max_host_tid_ = 0;
  std::deque<std::string> name_store_;
  std::unordered_map<std::string, const std::string*> names_;
  std::unordered_map<const char*, const std::string*> entry_names_;
  std::unordered_map<uint64_t, const std::string*> device_names_;
  std::unordered_map<uint64_t, uint32_t> device_pids_;
  std::vector<std::pair<uint32_t, const std::string*>> pid_names_;
  std::unordered_map<uint64_t, std::map<bp_stream_t, uint32_t>> stream_tids_;
  std::map<std::pair<uint32_t, uint32_t>, int64_t> device_clock_end_;  // by (pid, tid)
  std::unordered_map<uint64_t, bp_stream_t> current_stream_;
};

void Tracer::Write() {
  std::vector<Event> events;
  std::vector<Flow> flows;
  uint64_t dropped = 0, unresolved = 0;
  uint32_t max_host_tid = 0;
  std::vector<std::pair<uint32_t, const std::string*>> pid_names;
  {
    std::lock_guard lock(mu_);
    if (written_) return;
    written_ = true;
    events.swap(events_);
    flows.swap(flows_);
    dropped = dropped_;
    unresolved = unresolved_ + spans_.size();
    max_host_tid = max_host_tid_;
    pid_names = pid_names_;
  }
  // The threads each device process has: its streams, and their device clocks.
  std::map<uint32_t, std::set<uint32_t>> tids;
  for (const Event& e : events) {
    if (e.pid != kHostPid) tids[e.pid].insert(e.tid);
  }
  // Never a half-written file: a temporary beside it, renamed over it once complete. The
  // text goes out in pieces of about 1 MiB, so writing needs little memory beyond the spans.
  const std::string& path = options_.file;
  std::string tmp;
  FILE* file = CreateTemporaryBeside(path, &tmp);
  bool ok = file != nullptr;
  std::string out;
  out.reserve((1 << 20) + 4096);
  auto flush = [&] {
    if (ok) ok = std::fwrite(out.data(), 1, out.size(), file) == out.size();
    out.clear();
  };
  out += "{\"traceEvents\":[\n";
  bool first = true;
  auto begin = [&] {
    if (out.size() >= (1 << 20)) flush();
    if (!first) out += ",\n";
    first = false;
  };
  // An "M" event; `value` is a string, or with `number` a number.
  auto meta = [&](const char* what, uint32_t pid, const uint32_t* tid, const std::string& key,
                  const std::string& value, bool number = false) {
    begin();
    out += "{\"ph\":\"M\",\"name\":\"";
    out += what;
    out += "\",\"pid\":" + std::to_string(pid);
    if (tid != nullptr) out += ",\"tid\":" + std::to_string(*tid);
    out += ",\"args\":{\"" + key + "\":";
    if (number) {
      out += value;
    } else {
      AppendEscaped(&out, value);
    }
    out += "}}";
  };
  meta("process_name", kHostPid, nullptr, "name", "host");
  meta("process_sort_index", kHostPid, nullptr, "sort_index", "0", /*number=*/true);
  for (uint32_t tid = 1; tid <= max_host_tid; ++tid) {
    meta("thread_name", kHostPid, &tid, "name", "thread " + std::to_string(tid));
  }
  for (const auto& [pid, name] : pid_names) {
    meta("process_name", pid, nullptr, "name", *name);
    for (uint32_t tid : tids[pid]) {
      const uint32_t stream_tid = tid >= kDeviceClockTid ? tid - kDeviceClockTid : tid;
      std::string stream = stream_tid == kNullStreamTid
                               ? std::string("null stream")
                               : "stream " + std::to_string(stream_tid - 1);
      if (tid >= kDeviceClockTid) stream += " (device clock)";
      meta("thread_name", pid, &tid, "name", stream);
    }
  }
  if (dropped > 0) {
    meta("process_labels", kHostPid, nullptr, "labels",
         "dropped " + std::to_string(dropped) +
             " events (max_events=" + std::to_string(options_.max_events) + ")");
  }
  for (const Event& e : events) {
    begin();
    out += "{\"ph\":\"X\",\"cat\":\"";
    out += kCategoryNames[e.cat];
    out += "\",\"name\":";
    AppendEscaped(&out, *e.name);
    out += ",\"ts\":" + Micros(e.ts_ns) + ",\"dur\":" + Micros(e.dur_ns) +
           ",\"pid\":" + std::to_string(e.pid) + ",\"tid\":" + std::to_string(e.tid) +
           ",\"args\":{";
    std::string args;
    auto arg = [&](const char* key, const std::string& json_value) {
      if (!args.empty()) args += ",";
      args += "\"";
      args += key;
      args += "\":" + json_value;
    };
    if (e.device != nullptr) {
      std::string v;
      AppendEscaped(&v, *e.device);
      arg(e.cat == kCopy ? "to" : "device", v);
    }
    if (e.cat == kCopy || (e.cat == kDevice && e.bytes > 0)) arg("bytes", std::to_string(e.bytes));
    if (e.status != BP_OK) arg("status", std::string("\"") + StatusName(e.status) + "\"");
    if (e.cat == kDevice) {
      arg("clock", "\"device\"");
      arg("host_ts", Micros(e.host_ts_ns));
    }
    out += args + "}}";
  }
  for (const Flow& f : flows) {
    const std::string id = std::to_string(f.id);
    begin();
    out += "{\"ph\":\"s\",\"cat\":\"flow\",\"name\":\"copy to launch\",\"id\":" + id +
           ",\"ts\":" + Micros(f.from_ts_ns) + ",\"pid\":" + std::to_string(f.from_pid) +
           ",\"tid\":" + std::to_string(f.from_tid) + "}";
    begin();
    out += "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"flow\",\"name\":\"copy to launch\",\"id\":" + id +
           ",\"ts\":" + Micros(f.to_ts_ns) + ",\"pid\":" + std::to_string(f.to_pid) +
           ",\"tid\":" + std::to_string(f.to_tid) + "}";
  }
  out += "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"backplane_trace\":1,";
  out += "\"events\":" + std::to_string(events.size()) +
         ",\"dropped_events\":" + std::to_string(dropped) +
         ",\"unresolved_device_spans\":" + std::to_string(unresolved) + "}}\n";

  flush();
  if (file != nullptr) {
    ok = std::fflush(file) == 0 && ok;
    ok = ::fsync(::fileno(file)) == 0 && ok;
    ok = std::fclose(file) == 0 && ok;
  }
  if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    // errno is that of the last call that failed (fopen, fwrite, fsync, fclose or rename).
    std::fprintf(stderr, "backplane trace layer: cannot write the trace file '%s': %s\n",
                 path.c_str(), std::strerror(errno));
    if (!tmp.empty()) std::remove(tmp.c_str());  // only the file this process created
  }
}

// The table of one device type: each entry timed on the host track; copies also on their
// device's stream track, with device times where the device has events.
class TraceTable final : public sdk::DeviceLayer {
 public:
  TraceTable(int32_t type, const std::string& name, const bp_device_api_t* next, Tracer* tracer)
      : DeviceLayer(type, name, next), tracer_(tracer) {}

  // Creates the two events of a device span and records the first on `stream`; false where
  // the device has no events, device times are off, or too many spans wait.
  bool StartSpan(DLDevice dev, bp_stream_t stream, DeviceSpan* span) {
    const bp_device_api_t& n = next();
    if (!tracer_->options().device_times || n.event_create == nullptr || !tracer_->SpanRoom()) {
      return false;
    }
    span->api = &n;
    span->dev = dev;
    span->stream = stream;
    span->start = span->end = nullptr;
    if (n.event_create(n.self, dev, &span->start) == BP_OK &&
        n.event_create(n.self, dev, &span->end) == BP_OK &&
        n.event_record(n.self, dev, span->start, stream) == BP_OK) {
      return true;
    }
    FreeSpan(*span);
    return false;
  }
  // Records the second event; false (and the events freed) if that fails.
  bool EndSpan(DeviceSpan* span) {
    const bp_device_api_t& n = next();
    if (n.event_record(n.self, span->dev, span->end, span->stream) == BP_OK) return true;
    FreeSpan(*span);
    return false;
  }
  void FreeSpan(const DeviceSpan& span) {
    const bp_device_api_t& n = next();
    if (span.start != nullptr) n.event_free(n.self, span.dev, span.start);
    if (span.end != nullptr) n.event_free(n.self, span.dev, span.end);
    ::backplane::detail::Api()->error_clear();
  }

  bp_status_t GetAttr(DLDevice dev, int32_t kind, bp_value_t* out) override {
    return Timed("get_attr", dev, [&] { return DeviceLayer::GetAttr(dev, kind, out); });
  }
  bp_status_t GetProperty(DLDevice dev, const char* key, bp_value_t* out) override {
    return Timed("get_property", dev, [&] { return DeviceLayer::GetProperty(dev, key, out); });
  }
  bp_status_t SetDevice(DLDevice dev) override {
    return Timed("set_device", dev, [&] { return DeviceLayer::SetDevice(dev); });
  }
  bp_status_t AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType hint,
                             void** out) override {
    return Timed("alloc_data_space", dev,
                 [&] { return DeviceLayer::AllocDataSpace(dev, nbytes, alignment, hint, out); });
  }
  bp_status_t FreeDataSpace(DLDevice dev, void* data) override {
    tracer_->Forget(data);
    return Timed("free_data_space", dev, [&] { return DeviceLayer::FreeDataSpace(dev, data); });
  }
  bp_status_t AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType hint, void** out) override {
    return Timed("alloc_workspace", dev,
                 [&] { return DeviceLayer::AllocWorkspace(dev, nbytes, hint, out); });
  }
  bp_status_t FreeWorkspace(DLDevice dev, void* data) override {
    tracer_->Forget(data);
    return Timed("free_workspace", dev, [&] { return DeviceLayer::FreeWorkspace(dev, data); });
  }
  bp_status_t CopyDataFromTo(const DLTensor* from, const DLTensor* to,
                             bp_stream_t stream) override {
    if (from == nullptr || to == nullptr) return DeviceLayer::CopyDataFromTo(from, to, stream);
    // The device whose stream it is: the side of this table's type (`to` when both are).
    const DLDevice dev = to->device.device_type == device_type() ? to->device : from->device;
    DeviceSpan span{};
    const bool timed = StartSpan(dev, stream, &span);
    const int64_t t0 = tracer_->Now();
    const bp_status_t st = DeviceLayer::CopyDataFromTo(from, to, stream);
    const int64_t t1 = tracer_->Now();
    const bool keep = timed && st == BP_OK && EndSpan(&span);
    if (timed && !keep && st != BP_OK) FreeSpan(span);
    tracer_->Api("copy_data_from_to", &dev, t0, t1, st);
    tracer_->Copy(dev, stream, to, sdk::TensorBytes(from), t0, t1, st, keep ? &span : nullptr);
    return st;
  }
  bp_status_t CreateStream(DLDevice dev, bp_stream_t* out) override {
    return Timed("create_stream", dev, [&] { return DeviceLayer::CreateStream(dev, out); });
  }
  bp_status_t FreeStream(DLDevice dev, bp_stream_t stream) override {
    // Its timed spans are read while the stream still exists.
    tracer_->ResolveAfterSync(this, dev, stream, /*sync_first=*/true);
    return Timed("free_stream", dev, [&] { return DeviceLayer::FreeStream(dev, stream); });
  }
  bp_status_t SetStream(DLDevice dev, bp_stream_t stream) override {
    const bp_status_t st =
        Timed("set_stream", dev, [&] { return DeviceLayer::SetStream(dev, stream); });
    if (st == BP_OK) tracer_->SetCurrentStream(dev, stream);
    return st;
  }
  bp_status_t StreamSync(DLDevice dev, bp_stream_t stream) override {
    const bp_status_t st =
        Timed("stream_sync", dev, [&] { return DeviceLayer::StreamSync(dev, stream); });
    if (st == BP_OK) tracer_->ResolveAfterSync(this, dev, stream, /*sync_first=*/false);
    return st;
  }
  bp_status_t SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override {
    return Timed("sync_stream_from_to", dev,
                 [&] { return DeviceLayer::SyncStreamFromTo(dev, src, dst); });
  }
  bp_status_t ListProperties(DLDevice dev, bp_object_t** out) override {
    return Timed("list_properties", dev, [&] { return DeviceLayer::ListProperties(dev, out); });
  }
  bp_status_t EventCreate(DLDevice dev, void** out) override {
    return Timed("event_create", dev, [&] { return DeviceLayer::EventCreate(dev, out); });
  }
  bp_status_t EventFree(DLDevice dev, void* event) override {
    return Timed("event_free", dev, [&] { return DeviceLayer::EventFree(dev, event); });
  }
  bp_status_t EventRecord(DLDevice dev, void* event, bp_stream_t stream) override {
    return Timed("event_record", dev, [&] { return DeviceLayer::EventRecord(dev, event, stream); });
  }
  bp_status_t StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) override {
    return Timed("stream_wait_event", dev,
                 [&] { return DeviceLayer::StreamWaitEvent(dev, stream, event); });
  }
  bp_status_t EventQuery(DLDevice dev, void* event, int32_t* out_done) override {
    return Timed("event_query", dev, [&] { return DeviceLayer::EventQuery(dev, event, out_done); });
  }
  bp_status_t EventSync(DLDevice dev, void* event) override {
    return Timed("event_sync", dev, [&] { return DeviceLayer::EventSync(dev, event); });
  }
  bp_status_t EventElapsedMs(DLDevice dev, void* start, void* end, double* out_ms) override {
    return Timed("event_elapsed_ms", dev,
                 [&] { return DeviceLayer::EventElapsedMs(dev, start, end, out_ms); });
  }
  bp_status_t NativeHandle(DLDevice dev, int32_t kind, void* object, uint64_t* out) override {
    return Timed("native_handle", dev,
                 [&] { return DeviceLayer::NativeHandle(dev, kind, object, out); });
  }
  bp_status_t WrapNative(DLDevice dev, const bp_native_buffer_t* buffer, void** out) override {
    return Timed("wrap_native", dev, [&] { return DeviceLayer::WrapNative(dev, buffer, out); });
  }
  bp_status_t UnwrapNative(DLDevice dev, void* data) override {
    tracer_->Forget(data);
    return Timed("unwrap_native", dev, [&] { return DeviceLayer::UnwrapNative(dev, data); });
  }

 private:
  template <typename F>
  bp_status_t Timed(const char* entry, DLDevice dev, F&& call) {
    const int64_t t0 = tracer_->Now();
    const bp_status_t st = call();
    tracer_->Api(entry, &dev, t0, tracer_->Now(), st);
    return st;
  }

  Tracer* const tracer_;
};

void Tracer::ResolveAfterSync(TraceTable* table, DLDevice dev, bp_stream_t stream,
                              bool sync_first) {
  if (!AnySpans()) return;
  {
    std::lock_guard lock(mu_);
    bool any = false;
    for (const DeviceSpan& s : spans_) {
      any = any || (DeviceKey(s.dev) == DeviceKey(dev) && s.stream == stream);
    }
    if (!any) return;
  }
  const bp_device_api_t& n = table->next();
  if (sync_first && n.stream_sync(n.self, dev, stream) != BP_OK) {
    ::backplane::detail::Api()->error_clear();
    return;  // left for the count of unresolved spans
  }
  ResolveSpans(&n, dev, stream);
}

class TraceLayer final : public sdk::Layer {
 public:
  explicit TraceLayer(Tracer* tracer) : tracer_(tracer) {}

  sdk::DeviceLayer* WrapDeviceAPI(int32_t type, const std::string& type_name,
                                  const bp_device_api_t* next) override {
    auto* table = new TraceTable(type, type_name, next, tracer_);  // kept until exit
    if (type >= 0 && type < BP_DEVICE_TYPE_MAX) tables_[type].store(table);
    return table;
  }

  Function WrapFunction(const std::string& module_kind, const std::string& name,
                        const Function& next) override {
    (void)module_kind;
    const std::string* fname = tracer_->Intern(name);
    return Function::FromCallable(
        [this, next, fname](PackedArgs args) -> Any { return Launch(next, fname, args); });
  }

  Function WrapBuild(const std::string& target_kind, const Function& next) override {
    const std::string* name = tracer_->Intern("build " + target_kind);
    return Function::FromCallable([this, next, name](PackedArgs args) -> Any {
      const int64_t t0 = tracer_->Now();
      try {
        Any result = next.CallPacked(args.data(), args.size());
        tracer_->Host(kBuild, name, t0, tracer_->Now(), BP_OK);
        return result;
      } catch (const Error& e) {
        tracer_->Host(kBuild, name, t0, tracer_->Now(), e.kind());
        throw;
      }
    });
  }

 private:
  TraceTable* TableFor(int32_t type) {
    return type >= 0 && type < BP_DEVICE_TYPE_MAX ? tables_[type].load() : nullptr;
  }

  // A module function call: on the host track, and on the track of the device and current
  // stream of its tensors (the first non-CPU one, else the first), timed there by events.
  Any Launch(const Function& next, const std::string* name, PackedArgs args) {
    // The tensors among the arguments (the first kMaxTensors: the ones flows are looked for).
    constexpr size_t kMaxTensors = 32;
    const DLTensor* tensors[kMaxTensors];
    size_t n_tensors = 0;
    for (int32_t i = 0; i < args.size() && n_tensors < kMaxTensors; ++i) {
      const bp_value_t& v = args.data()[i];
      if (v.type == BP_VALUE_TENSOR && v.u.v_tensor != nullptr) {
        tensors[n_tensors++] = v.u.v_tensor;
      } else if (v.type == BP_VALUE_OBJECT && v.u.v_obj != nullptr) {
        int32_t type = 0;
        DLTensor* t = nullptr;
        const bp_host_api_t* api = ::backplane::detail::Api();
        if (api->object_type(v.u.v_obj, &type) == BP_OK && type == BP_OBJECT_TENSOR &&
            api->tensor_get(v.u.v_obj, &t) == BP_OK && t != nullptr) {
          tensors[n_tensors++] = t;
        }
      }
    }
    const DLTensor* on = nullptr;
    for (size_t i = 0; i < n_tensors; ++i) {
      const DLTensor* t = tensors[i];
      if (on == nullptr || (on->device.device_type == kDLCPU && t->device.device_type != kDLCPU)) {
        on = t;
      }
    }
    DLDevice dev{kDLCPU, 0};
    bp_stream_t stream = nullptr;
    TraceTable* table = nullptr;
    DeviceSpan span{};
    bool timed = false;
    if (on != nullptr) {
      dev = on->device;
      stream = tracer_->CurrentStream(dev);
      table = TableFor(dev.device_type);
      timed = table != nullptr && table->StartSpan(dev, stream, &span);
    }
    const int64_t t0 = tracer_->Now();
    int32_t st = BP_OK;
    Any result;
    try {
      result = next.CallPacked(args.data(), args.size());
    } catch (const Error& e) {
      st = e.kind();
      Finish(name, on, dev, stream, table, timed, &span, tensors, n_tensors, t0, st);
      throw;
    } catch (...) {
      Finish(name, on, dev, stream, table, timed, &span, tensors, n_tensors, t0, BP_ERR_INTERNAL);
      throw;
    }
    Finish(name, on, dev, stream, table, timed, &span, tensors, n_tensors, t0, st);
    return result;
  }

  void Finish(const std::string* name, const DLTensor* on, DLDevice dev, bp_stream_t stream,
              TraceTable* table, bool timed, DeviceSpan* span, const DLTensor* const* tensors,
              size_t n_tensors, int64_t t0, int32_t st) {
    const int64_t t1 = tracer_->Now();
    const bool keep = timed && st == BP_OK && table->EndSpan(span);
    if (timed && !keep && st != BP_OK) table->FreeSpan(*span);
    tracer_->Launch(on != nullptr, dev, stream, name, tensors, n_tensors, t0, t1, st,
                    keep ? span : nullptr);
  }

  Tracer* const tracer_;
  std::atomic<TraceTable*> tables_[BP_DEVICE_TYPE_MAX] = {};
};

Tracer* g_tracer = nullptr;

// The folder of the trace file must take a file now, not only at exit.
void CheckWritable(const std::string& path) {
  std::string probe;
  FILE* f = CreateTemporaryBeside(path, &probe);
  if (f == nullptr) {
    throw Error(BP_ERR_INVALID_ARGUMENT, "layer trace: option file=" + path +
                                             ": cannot create a file there (" +
                                             std::strerror(errno) +
                                             "); name a file in a folder that exists and "
                                             "that this process may write");
  }
  std::fclose(f);
  std::remove(probe.c_str());
}

}  // namespace
}  // namespace trace_layer
}  // namespace backplane

BACKPLANE_PLUGIN_ENTRY_WITH((::backplane::sdk::PluginDescription{"trace", BACKPLANE_TRACE_VERSION,
                                                                 "Backplane"})) {
  namespace sdk = ::backplane::sdk;
  namespace tl = ::backplane::trace_layer;
  sdk::RegisterLayer(
      "trace",
      [](const std::string& options) -> sdk::Layer* {
        tl::Options o = tl::ParseOptions(options);
        tl::CheckWritable(o.file);
        tl::g_tracer = new tl::Tracer(std::move(o));  // kept until exit, as the layer
        std::atexit([] {
          try {
            tl::g_tracer->Write();
          } catch (const std::exception& e) {  // std::bad_alloc: no half file, a message
            std::fprintf(stderr, "backplane trace layer: the trace file was not written: %s\n",
                         e.what());
          }
        });
        return new tl::TraceLayer(tl::g_tracer);
      },
      sdk::LayerWraps{/*functions=*/true, /*builds=*/true});
}
