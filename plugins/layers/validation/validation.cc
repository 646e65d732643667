// SPDX-License-Identifier: Apache-2.0
// The validation layer (docs/layers/validation.md): between the host and every device's
// DeviceAPI table and module function calls, it keeps the live data spaces, workspaces,
// wrapped buffers, streams and events with the device each belongs to (and the module objects,
// for the leak report), and refuses a call that misuses one. Each finding is one message
//   BP-VALID-<n> (<rule>): <entry> on <device>: <what is wrong>; <what to do>
// written to stderr and returned from the entry as BP_ERR_INVALID_ARGUMENT, without passing the
// call on. Options (BACKPLANE_LAYERS=validation:abort):
//   abort           print the finding and a backtrace, then abort
//   leaks=off       no leak report at exit
//   backtraces=off  no backtrace of where each handle was made (cheaper creation)
// validation.findings() answers the findings of the process so far, one a line.
#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/layer.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace backplane {
namespace validation {
namespace {

namespace sdk = backplane::sdk;

// The rules, numbered stably (docs/layers/validation.md lists them).
enum Rule {
  kUseAfterFree = 1,
  kDoubleFree = 2,
  kUnknownHandle = 3,
  kWrongDevice = 4,
  kMismatchedFree = 5,
  kOutOfBounds = 6,
  kOverlap = 7,
  kFreedInFlight = 8,
  kEventOtherDevice = 9,
  kLeak = 10,
};

const char* RuleName(Rule r) {
  switch (r) {
    case kUseAfterFree:
      return "use after free";
    case kDoubleFree:
      return "double free";
    case kUnknownHandle:
      return "unknown handle";
    case kWrongDevice:
      return "wrong device";
    case kMismatchedFree:
      return "mismatched free";
    case kOutOfBounds:
      return "copy out of bounds";
    case kOverlap:
      return "overlapping copy";
    case kFreedInFlight:
      return "freed while in flight";
    case kEventOtherDevice:
      return "event of another device";
    case kLeak:
      return "leak";
  }
  return "?";
}

// Where a handle was made: the return addresses, symbolised only when printed.
struct Trace {
  static constexpr int kFrames = 16;
  void* frames[kFrames];
  int n = 0;
  void Capture() { n = backtrace(frames, kFrames); }
  static void Own() {}  // an address in this library
  // The frames past the layer's own (those in this library).
  std::string Symbols() const {
    if (n == 0) {
      return "    (no backtrace: made inside a module function call, or option "
             "backtraces=off)\n";
    }
    std::string out;
    char** names = backtrace_symbols(frames, n);
    if (names == nullptr) return "    (no symbols)\n";
    Dl_info self{}, frame{};
    dladdr(reinterpret_cast<void*>(&Trace::Own), &self);
    int first = 0;
    while (first < n && dladdr(frames[first], &frame) != 0 && frame.dli_fbase == self.dli_fbase) {
      ++first;
    }
    for (int i = first; i < n; ++i) out += std::string("    ") + names[i] + "\n";
    std::free(names);
    return out;
  }
};

std::string DeviceName(DLDevice dev) {
  const char* name = nullptr;
  std::string type;
  if (detail::Api()->device_type_name(dev.device_type, &name) == BP_OK && name != nullptr) {
    type = name;
  } else {
    detail::Api()->error_clear();
    type = "type" + std::to_string(static_cast<int>(dev.device_type));
  }
  return type + ":" + std::to_string(dev.device_id);
}

bool SameDevice(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

uint64_t DeviceCode(DLDevice dev) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(dev.device_type)) << 32) |
         static_cast<uint32_t>(dev.device_id);
}

std::string StreamName(bp_stream_t s) {
  return s == nullptr ? std::string("the null stream") : "stream " + sdk::PointerString(s);
}

// How many module function calls this thread is inside: a data handle allocated there is the
// module's own scratch memory (an ir_host function's workspace, which falls back to a data space
// on a device without workspace entries), freed in its stream's order after the kernels that use
// it are queued, so BP-VALID-8 does not apply to it.
thread_local int t_call_depth = 0;

// A data handle's kind: the entry that made it and the one that frees it.
enum class Kind { kDataSpace, kWorkspace, kWrapped };
const char* KindName(Kind k) {
  return k == Kind::kDataSpace   ? "data space"
         : k == Kind::kWorkspace ? "workspace"
                                 : "wrapped buffer";
}
const char* AllocEntry(Kind k) {
  return k == Kind::kDataSpace   ? "alloc_data_space"
         : k == Kind::kWorkspace ? "alloc_workspace"
                                 : "wrap_native";
}
const char* FreeEntry(Kind k) {
  return k == Kind::kDataSpace   ? "free_data_space"
         : k == Kind::kWorkspace ? "free_workspace"
                                 : "unwrap_native";
}

// A stream of one device: a created stream is its own key; the null stream is one per device.
struct StreamKey {
  bp_stream_t stream;
  uint64_t device;  // 0 for a created stream
  bool operator<(const StreamKey& o) const {
    return stream != o.stream ? stream < o.stream : device < o.device;
  }
  bool operator==(const StreamKey& o) const { return stream == o.stream && device == o.device; }
};
StreamKey KeyOf(DLDevice dev, bp_stream_t s) {
  return s != nullptr ? StreamKey{s, 0} : StreamKey{nullptr, DeviceCode(dev) + 1};
}

// Launches queued and known complete on one stream, counted.
struct StreamWork {
  uint64_t launched = 0;
  uint64_t completed = 0;
};

// One launch that uses a data handle: the stream of each device its tensors are on, with the
// launch's number there. It is complete once any of them is (a launch runs on one stream; which
// of its devices' streams that is, the layer does not know).
struct Launch {
  std::string function;
  DLDevice device;
  bp_stream_t stream;
  std::vector<std::pair<StreamKey, uint64_t>> marks;
};

struct Allocation {
  DLDevice dev;
  size_t nbytes;
  Kind kind;
  int count = 1;         // a plugin may hand out one address for several empty allocations
  bool scratch = false;  // made inside a module function call (t_call_depth)
  Trace trace;
  std::vector<std::shared_ptr<const Launch>> uses;
};

struct StreamInfo {
  DLDevice dev;
  Trace trace;
};

struct ModuleInfo {
  std::string kind;
  Trace trace;
};

struct EventInfo {
  DLDevice dev;
  Trace trace;
  bool recorded = false;
  StreamKey key{nullptr, 0};
  uint64_t seq = 0;
};

// What was freed, kept for the last kMax handles so a later use is named as use after free.
template <typename Key>
class FreedSet {
 public:
  struct Entry {
    DLDevice dev;
    std::string entry;  // the entry that freed it
    uint64_t serial;
  };
  void Add(const Key& k, DLDevice dev, const std::string& entry) {
    const uint64_t serial = ++serial_;
    map_[k] = Entry{dev, entry, serial};
    order_.emplace_back(k, serial);
    while (order_.size() > kMax) {
      auto it = map_.find(order_.front().first);
      if (it != map_.end() && it->second.serial == order_.front().second) map_.erase(it);
      order_.pop_front();
    }
  }
  void Erase(const Key& k) { map_.erase(k); }
  // Every key in [from, to).
  void EraseRange(const Key& from, const Key& to) {
    map_.erase(map_.lower_bound(from), map_.lower_bound(to));
  }
  const Entry* Find(const Key& k) const {
    auto it = map_.find(k);
    return it == map_.end() ? nullptr : &it->second;
  }

 private:
  static constexpr size_t kMax = 1 << 16;
  std::map<Key, Entry> map_;
  std::deque<std::pair<Key, uint64_t>> order_;
  uint64_t serial_ = 0;
};

// A finding not yet reported (made under the lock, reported outside it).
struct Finding {
  Rule rule;
  std::string entry;
  DLDevice dev;
  std::string what;
  std::string todo;
  explicit operator bool() const { return !entry.empty(); }
};

Finding Make(Rule rule, const char* entry, DLDevice dev, std::string what, std::string todo) {
  return Finding{rule, entry, dev, std::move(what), std::move(todo)};
}

// The state of the process: one for every device type's table and the function wrappers.
class State {
 public:
  State(bool abort_on_finding, bool leaks, bool backtraces)
      : abort_(abort_on_finding), leaks_(leaks), backtraces_(backtraces) {}

  // Where a handle is made, for the leak report: a backtrace (about 3 us) unless the option
  // backtraces=off says not to, or a module function is making its scratch memory.
  void Capture(Trace* t) const {
    if (backtraces_ && t_call_depth == 0) t->Capture();
  }

  std::mutex mu;

  // Writes the finding, keeps it for validation.findings, aborts with the `abort` option, and
  // sets the error slot; returns BP_ERR_INVALID_ARGUMENT.
  bp_status_t Report(const Finding& f) {
    const std::string message = Message(f);
    Emit(message);
    return detail::Api()->error_set(BP_ERR_INVALID_ARGUMENT, message.c_str());
  }
  static std::string Message(const Finding& f) {
    return "BP-VALID-" + std::to_string(static_cast<int>(f.rule)) + " (" + RuleName(f.rule) +
           "): " + f.entry + " on " + DeviceName(f.dev) + ": " + f.what + "; " + f.todo;
  }
  void Emit(const std::string& message) {
    {
      std::lock_guard lock(findings_mu_);
      if (findings_.size() < kMaxKept) findings_.push_back(message);
    }
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    if (abort_) {
      void* frames[64];
      const int n = backtrace(frames, 64);
      std::fprintf(stderr, "validation layer: aborting (option abort); backtrace:\n");
      std::fflush(stderr);
      backtrace_symbols_fd(frames, n, STDERR_FILENO);
      std::abort();
    }
  }
  std::string Findings() {
    std::lock_guard lock(findings_mu_);
    std::string out;
    for (const std::string& f : findings_) out += f + "\n";
    return out;
  }

  // ---- data handles (under mu) ----
  std::map<uintptr_t, Allocation>& Allocs(int32_t type) { return allocs_[type]; }
  // The live allocation of `type` that starts at `p`, or null.
  Allocation* Exact(int32_t type, const void* p) {
    auto t = allocs_.find(type);
    if (t == allocs_.end()) return nullptr;
    auto it = t->second.find(reinterpret_cast<uintptr_t>(p));
    return it == t->second.end() ? nullptr : &it->second;
  }
  // The live allocation of `type` that contains `p` (its start or inside), with its start.
  Allocation* Containing(int32_t type, const void* p, uintptr_t* base) {
    auto t = allocs_.find(type);
    if (t == allocs_.end()) return nullptr;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = t->second.upper_bound(a);
    for (int steps = 0; steps < 16 && it != t->second.begin(); ++steps) {
      --it;
      if (a - it->first < std::max<size_t>(it->second.nbytes, 1)) {
        *base = it->first;
        return &it->second;
      }
    }
    return nullptr;
  }
  // A live allocation of another type than `type` that starts at `p`.
  const Allocation* OtherType(int32_t type, const void* p) {
    for (auto& [t, m] : allocs_) {
      if (t == type) continue;
      auto it = m.find(reinterpret_cast<uintptr_t>(p));
      if (it != m.end()) return &it->second;
    }
    return nullptr;
  }
  void AddAlloc(DLDevice dev, void* p, size_t nbytes, Kind kind) {
    Allocation* a = Exact(dev.device_type, p);
    if (a != nullptr) {
      a->count++;
      return;
    }
    Allocation fresh{dev, nbytes, kind, 1, t_call_depth > 0, {}, {}};
    Capture(&fresh.trace);
    allocs_[dev.device_type].emplace(reinterpret_cast<uintptr_t>(p), std::move(fresh));
    // Addresses inside the new allocation are live again (for devices whose handles are
    // addresses; an opaque handle's stale neighbours are then unknown, not use after free).
    const uintptr_t at = reinterpret_cast<uintptr_t>(p);
    freed_data.EraseRange(std::make_pair(dev.device_type, at),
                          std::make_pair(dev.device_type, at + std::max<size_t>(nbytes, 1)));
  }
  FreedSet<std::pair<int32_t, uintptr_t>> freed_data;

  // ---- streams and events (under mu) ----
  std::unordered_map<bp_stream_t, StreamInfo> streams;
  FreedSet<bp_stream_t> freed_streams;
  std::unordered_map<void*, EventInfo> events;
  FreedSet<void*> freed_events;
  std::map<StreamKey, StreamWork> work;
  // The live module objects the core told of (on_module), in the order they were made.
  std::map<uint64_t, const void*> module_order;
  std::unordered_map<const void*, std::pair<uint64_t, ModuleInfo>> modules;
  uint64_t modules_made = 0;

  // A launch that is not known complete.
  bool Pending(const Launch& l) const {
    for (const auto& [key, seq] : l.marks) {
      auto it = work.find(key);
      if (it != work.end() && it->second.completed >= seq) return false;
    }
    return true;
  }
  void Complete(const StreamKey& key, uint64_t upto) {
    StreamWork& w = work[key];
    w.completed = std::max(w.completed, std::min(upto, w.launched));
  }

  void PrintLeaks() {
    if (!leaks_) return;
    std::lock_guard lock(mu);
    std::vector<std::string> out;
    for (auto& [type, m] : allocs_) {
      for (auto& [p, a] : m) {
        out.push_back(
            Message(Make(kLeak, AllocEntry(a.kind), a.dev,
                         std::string(KindName(a.kind)) + " " +
                             sdk::PointerString(reinterpret_cast<void*>(p)) + " of " +
                             std::to_string(a.nbytes) + " bytes is still alive at exit",
                         std::string("free it with ") + FreeEntry(a.kind) + "; made at:")) +
            "\n" + a.trace.Symbols());
      }
    }
    for (auto& [s, info] : streams) {
      out.push_back(Message(Make(kLeak, "create_stream", info.dev,
                                 "stream " + sdk::PointerString(s) + " is still alive at exit",
                                 "free it with free_stream; made at:")) +
                    "\n" + info.trace.Symbols());
    }
    for (auto& [e, info] : events) {
      out.push_back(Message(Make(kLeak, "event_create", info.dev,
                                 "event " + sdk::PointerString(e) + " is still alive at exit",
                                 "free it with event_free; made at:")) +
                    "\n" + info.trace.Symbols());
    }
    for (auto& [serial, m] : module_order) {
      const ModuleInfo& info = modules.at(m).second;
      out.push_back("BP-VALID-10 (leak): bp_module_create: module " + sdk::PointerString(m) +
                    " of kind '" + info.kind +
                    "' is still alive at exit; release it, or the module that imports it "
                    "(bp_object_release; a C++ Module or a Python Module releases it when it "
                    "goes); made at:\n" +
                    info.trace.Symbols());
    }
    for (const std::string& m : out) {
      std::fprintf(stderr, "%s", m.c_str());
    }
    if (!out.empty()) {
      std::fprintf(stderr, "validation layer: %zu handle(s) leaked\n", out.size());
    }
    std::fflush(stderr);
  }

 private:
  static constexpr size_t kMaxKept = 1000;
  const bool abort_;
  const bool leaks_;
  const bool backtraces_;
  std::map<int32_t, std::map<uintptr_t, Allocation>> allocs_;
  std::mutex findings_mu_;
  std::vector<std::string> findings_;
};

State* g_state = nullptr;

// The stream set_stream made current on this thread, per device (as CUDA's and Vulkan's
// SetStream are per thread).
thread_local std::unordered_map<uint64_t, bp_stream_t> t_current;

bp_stream_t CurrentStream(DLDevice dev) {
  auto it = t_current.find(DeviceCode(dev));
  return it == t_current.end() ? nullptr : it->second;
}

// The table of one device type.
class ValidationTable final : public sdk::DeviceLayer {
 public:
  ValidationTable(State* state, int32_t type, const std::string& name, const bp_device_api_t* next)
      : DeviceLayer(type, name, next), s_(*state) {}

  // ---- data spaces, workspaces, wrapped buffers ----
  bp_status_t AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType hint,
                             void** out) override {
    const bp_status_t st = DeviceLayer::AllocDataSpace(dev, nbytes, alignment, hint, out);
    if (st == BP_OK) Added(dev, *out, nbytes, Kind::kDataSpace);
    return st;
  }
  bp_status_t FreeDataSpace(DLDevice dev, void* data) override {
    return Free(dev, data, Kind::kDataSpace, [&] { return DeviceLayer::FreeDataSpace(dev, data); });
  }
  bp_status_t AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType hint, void** out) override {
    const bp_status_t st = DeviceLayer::AllocWorkspace(dev, nbytes, hint, out);
    if (st == BP_OK) Added(dev, *out, nbytes, Kind::kWorkspace);
    return st;
  }
  bp_status_t FreeWorkspace(DLDevice dev, void* data) override {
    return Free(dev, data, Kind::kWorkspace, [&] { return DeviceLayer::FreeWorkspace(dev, data); });
  }
  bp_status_t WrapNative(DLDevice dev, const bp_native_buffer_t* buffer, void** out) override {
    const bp_status_t st = DeviceLayer::WrapNative(dev, buffer, out);
    if (st == BP_OK) Added(dev, *out, buffer != nullptr ? buffer->size : 0, Kind::kWrapped);
    return st;
  }
  bp_status_t UnwrapNative(DLDevice dev, void* data) override {
    return Free(dev, data, Kind::kWrapped, [&] { return DeviceLayer::UnwrapNative(dev, data); });
  }

  bp_status_t CopyDataFromTo(const DLTensor* from, const DLTensor* to,
                             bp_stream_t stream) override {
    if (from != nullptr && to != nullptr) {
      Finding f;
      {
        std::lock_guard lock(s_.mu);
        f = CheckCopy(from, to, stream);
      }
      if (f) return s_.Report(f);
    }
    return DeviceLayer::CopyDataFromTo(from, to, stream);
  }

  // ---- streams ----
  bp_status_t CreateStream(DLDevice dev, bp_stream_t* out) override {
    const bp_status_t st = DeviceLayer::CreateStream(dev, out);
    if (st == BP_OK && *out != nullptr) {
      std::lock_guard lock(s_.mu);
      StreamInfo info{dev, {}};
      s_.Capture(&info.trace);
      s_.streams[*out] = info;
      s_.freed_streams.Erase(*out);
      // Its work counters stay: a handle made again continues them, so launches noted on the
      // stream of that handle before keep their numbers.
    }
    return st;
  }
  bp_status_t FreeStream(DLDevice dev, bp_stream_t stream) override {
    if (stream == nullptr) return DeviceLayer::FreeStream(dev, stream);
    return FreeHandle(
        s_.streams, s_.freed_streams, stream, dev, "free_stream",
        [&] { return CheckStream("free_stream", dev, stream, /*freeing=*/true); },
        [&] { return DeviceLayer::FreeStream(dev, stream); });
  }
  bp_status_t SetStream(DLDevice dev, bp_stream_t stream) override {
    if (Finding f = Check([&] { return CheckStream("set_stream", dev, stream, false); })) {
      return s_.Report(f);
    }
    const bp_status_t st = DeviceLayer::SetStream(dev, stream);
    if (st == BP_OK) t_current[DeviceCode(dev)] = stream;
    return st;
  }
  bp_status_t StreamSync(DLDevice dev, bp_stream_t stream) override {
    if (Finding f = Check([&] { return CheckStream("stream_sync", dev, stream, false); })) {
      return s_.Report(f);
    }
    uint64_t upto = 0;
    {
      std::lock_guard lock(s_.mu);
      upto = s_.work[KeyOf(dev, stream)].launched;
    }
    // A sync that returns has waited for the stream's work, which either ended or faulted (the
    // error reports the fault): neither way is it still running, so its memory may be freed.
    const bp_status_t st = DeviceLayer::StreamSync(dev, stream);
    {
      std::lock_guard lock(s_.mu);
      s_.Complete(KeyOf(dev, stream), upto);
    }
    return st;
  }
  bp_status_t SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override {
    if (Finding f = Check([&] {
          Finding g = CheckStream("sync_stream_from_to", dev, src, false);
          return g ? g : CheckStream("sync_stream_from_to", dev, dst, false);
        })) {
      return s_.Report(f);
    }
    return DeviceLayer::SyncStreamFromTo(dev, src, dst);
  }

  // ---- events ----
  bp_status_t EventCreate(DLDevice dev, void** out) override {
    const bp_status_t st = DeviceLayer::EventCreate(dev, out);
    if (st == BP_OK && *out != nullptr) {
      std::lock_guard lock(s_.mu);
      EventInfo info;
      info.dev = dev;
      s_.Capture(&info.trace);
      s_.events[*out] = info;
      s_.freed_events.Erase(*out);
    }
    return st;
  }
  bp_status_t EventFree(DLDevice dev, void* event) override {
    if (event == nullptr) return DeviceLayer::EventFree(dev, event);
    return FreeHandle(
        s_.events, s_.freed_events, event, dev, "event_free",
        [&] { return CheckEvent("event_free", dev, event, /*freeing=*/true); },
        [&] { return DeviceLayer::EventFree(dev, event); });
  }
  bp_status_t EventRecord(DLDevice dev, void* event, bp_stream_t stream) override {
    uint64_t seq = 0;
    {
      std::lock_guard lock(s_.mu);
      Finding f = CheckEvent("event_record", dev, event, false);
      if (!f) f = CheckStream("event_record", dev, stream, false);
      if (f) return ReportHeld(f);
      seq = s_.work[KeyOf(dev, stream)].launched;
    }
    const bp_status_t st = DeviceLayer::EventRecord(dev, event, stream);
    if (st == BP_OK) {
      std::lock_guard lock(s_.mu);
      auto it = s_.events.find(event);
      if (it != s_.events.end()) {
        it->second.recorded = true;
        it->second.key = KeyOf(dev, stream);
        it->second.seq = seq;
      }
    }
    return st;
  }
  bp_status_t StreamWaitEvent(DLDevice dev, bp_stream_t stream, void* event) override {
    if (Finding f = Check([&] {
          Finding g = CheckEvent("stream_wait_event", dev, event, false, /*wait=*/stream);
          return g ? g : CheckStream("stream_wait_event", dev, stream, false);
        })) {
      return s_.Report(f);
    }
    return DeviceLayer::StreamWaitEvent(dev, stream, event);
  }
  bp_status_t EventQuery(DLDevice dev, void* event, int32_t* out_done) override {
    if (Finding f = Check([&] { return CheckEvent("event_query", dev, event, false); })) {
      return s_.Report(f);
    }
    const bp_status_t st = DeviceLayer::EventQuery(dev, event, out_done);
    if (st == BP_OK && out_done != nullptr && *out_done == 1) Passed(event);
    return st;
  }
  bp_status_t EventSync(DLDevice dev, void* event) override {
    if (Finding f = Check([&] { return CheckEvent("event_sync", dev, event, false); })) {
      return s_.Report(f);
    }
    const bp_status_t st = DeviceLayer::EventSync(dev, event);
    if (st == BP_OK) Passed(event);
    return st;
  }
  bp_status_t EventElapsedMs(DLDevice dev, void* start, void* end, double* out_ms) override {
    if (Finding f = Check([&] {
          Finding g = CheckEvent("event_elapsed_ms", dev, start, false);
          return g ? g : CheckEvent("event_elapsed_ms", dev, end, false);
        })) {
      return s_.Report(f);
    }
    const bp_status_t st = DeviceLayer::EventElapsedMs(dev, start, end, out_ms);
    if (st == BP_OK) {  // both points passed
      Passed(start);
      Passed(end);
    }
    return st;
  }

 private:
  template <typename F>
  Finding Check(F f) {
    std::lock_guard lock(s_.mu);
    return f();
  }
  // Reports a finding made under the lock, which the caller's scope still holds: the report
  // itself takes no lock of the state's `mu`.
  bp_status_t ReportHeld(const Finding& f) { return s_.Report(f); }

  // Frees a stream or event: checked, forgotten and passed on; alive again if the table below
  // fails.
  template <typename Live, typename Freed, typename Handle, typename CheckFn, typename Next>
  bp_status_t FreeHandle(Live& live, Freed& freed, Handle h, DLDevice dev, const char* entry,
                         CheckFn check, Next next) {
    typename Live::mapped_type kept;
    {
      std::lock_guard lock(s_.mu);
      Finding f = check();
      if (f) return ReportHeld(f);
      kept = live[h];
      live.erase(h);
      freed.Add(h, dev, entry);
    }
    const bp_status_t st = next();
    if (st != BP_OK) {
      std::lock_guard lock(s_.mu);
      live[h] = kept;
      freed.Erase(h);
    }
    return st;
  }

  void Added(DLDevice dev, void* p, size_t nbytes, Kind kind) {
    if (p == nullptr) return;
    std::lock_guard lock(s_.mu);
    s_.AddAlloc(dev, p, nbytes, kind);
  }

  template <typename Next>
  bp_status_t Free(DLDevice dev, void* data, Kind kind, Next next) {
    if (data == nullptr) return next();
    const char* entry = FreeEntry(kind);
    std::unique_ptr<Allocation> kept;
    {
      std::lock_guard lock(s_.mu);
      Finding f = CheckFree(entry, dev, data, kind);
      if (f) return ReportHeld(f);
      auto& m = s_.Allocs(dev.device_type);
      auto it = m.find(reinterpret_cast<uintptr_t>(data));
      if (it->second.count > 1) {  // one of several empty allocations at this address
        it->second.count--;
        kept = nullptr;
      } else {
        kept = std::make_unique<Allocation>(std::move(it->second));
        m.erase(it);
        s_.freed_data.Add({dev.device_type, reinterpret_cast<uintptr_t>(data)}, dev, entry);
      }
    }
    const bp_status_t st = next();
    if (st != BP_OK && kept != nullptr) {  // still alive
      std::lock_guard lock(s_.mu);
      s_.Allocs(dev.device_type).emplace(reinterpret_cast<uintptr_t>(data), std::move(*kept));
      s_.freed_data.Erase({dev.device_type, reinterpret_cast<uintptr_t>(data)});
    }
    return st;
  }

  Finding CheckFree(const char* entry, DLDevice dev, void* data, Kind kind) {
    const std::string p = sdk::PointerString(data);
    Allocation* a = s_.Exact(dev.device_type, data);
    if (a == nullptr) {
      if (const auto* fr =
              s_.freed_data.Find({dev.device_type, reinterpret_cast<uintptr_t>(data)})) {
        return Make(kDoubleFree, entry, dev, p + " was already freed by " + fr->entry,
                    "free each allocation once, and drop every copy of its pointer when you do");
      }
      if (const Allocation* o = s_.OtherType(dev.device_type, data)) {
        return Make(
            kWrongDevice, entry, dev,
            std::string(KindName(o->kind)) + " " + p + " belongs to " + DeviceName(o->dev) +
                ", not to " + DeviceName(dev),
            std::string("free it with ") + FreeEntry(o->kind) + " on " + DeviceName(o->dev));
      }
      uintptr_t base = 0;
      if (const Allocation* c = s_.Containing(dev.device_type, data, &base)) {
        return Make(kUnknownHandle, entry, dev,
                    p + " lies inside " + KindName(c->kind) + " " +
                        sdk::PointerString(reinterpret_cast<void*>(base)) + " but is not its start",
                    std::string("free the pointer ") + AllocEntry(c->kind) + " returned");
      }
      return Make(kUnknownHandle, entry, dev,
                  p + " was not made by " + AllocEntry(kind) + " of this process",
                  std::string("pass only what ") + AllocEntry(kind) + " returned");
    }
    if (!SameDevice(a->dev, dev)) {
      return Make(kWrongDevice, entry, dev,
                  std::string(KindName(a->kind)) + " " + p + " belongs to " + DeviceName(a->dev),
                  std::string("free it with ") + FreeEntry(a->kind) + " on " + DeviceName(a->dev));
    }
    if (a->kind != kind) {
      return Make(kMismatchedFree, entry, dev,
                  p + " is a " + KindName(a->kind) + " made by " + AllocEntry(a->kind),
                  std::string("free it with ") + FreeEntry(a->kind));
    }
    // Workspaces and a module's scratch data spaces are stream-ordered (the host code of a
    // module frees one after queueing the kernels that use it); the host's data spaces and
    // wrapped buffers are not.
    for (const auto& use : a->uses) {
      if (a->kind == Kind::kWorkspace || a->scratch || !s_.Pending(*use)) continue;
      return Make(kFreedInFlight, entry, dev,
                  std::string(KindName(a->kind)) + " " + p + " is used by " + use->function +
                      ", launched on " + StreamName(use->stream) + " of " +
                      DeviceName(use->device) + ", which has not been synchronised since",
                  "call stream_sync on that stream (or event_sync on an event recorded on it "
                  "after the launch) before freeing");
    }
    return {};
  }

  // One side of a copy: null when it is fine, else the finding; `*alloc` and `*offset` the
  // allocation it lies in and its offset there, when it is one.
  Finding CheckSide(const char* side, const DLTensor* t, const DLDevice& dev, size_t nbytes,
                    const Allocation** alloc, uintptr_t* start) {
    *alloc = nullptr;
    const std::string p = sdk::PointerString(t->data);
    const int32_t type = t->device.device_type;
    uintptr_t base = reinterpret_cast<uintptr_t>(t->data);
    const Allocation* a = s_.Exact(type, t->data);
    // A handle freed (and not made again since) is named so before the allocation that may
    // seem to contain it: an opaque handle's "range" is no address range.
    const auto* freed = a == nullptr && type != kDLCPU
                            ? s_.freed_data.Find({type, reinterpret_cast<uintptr_t>(t->data)})
                            : nullptr;
    if (freed != nullptr) {
      return Make(kUseAfterFree, "copy_data_from_to", dev,
                  std::string("the ") + side + " " + p + " on " + DeviceName(t->device) +
                      " was freed by " + freed->entry,
                  "copy only from and to live allocations");
    }
    if (a == nullptr) a = s_.Containing(type, t->data, &base);
    if (a == nullptr) {
      // Host memory of the application's own (not a cpu data space) is not checked.
      if (type == kDLCPU) return {};
      if (const Allocation* o = s_.OtherType(type, t->data)) {
        return Make(kWrongDevice, "copy_data_from_to", dev,
                    std::string("the ") + side + " " + p + " is a " + KindName(o->kind) + " of " +
                        DeviceName(o->dev) + ", but the tensor names " + DeviceName(t->device),
                    "set the tensor's device to the one its data belongs to");
      }
      return Make(kUnknownHandle, "copy_data_from_to", dev,
                  std::string("the ") + side + " " + p + " is not in a live allocation of " +
                      DeviceName(t->device),
                  "copy only from and to data spaces allocated on that device");
    }
    if (!SameDevice(a->dev, t->device)) {
      return Make(kWrongDevice, "copy_data_from_to", dev,
                  std::string("the ") + side + " " + p + " belongs to " + DeviceName(a->dev) +
                      ", but the tensor names " + DeviceName(t->device),
                  "set the tensor's device to the one its data belongs to");
    }
    const uintptr_t inside = reinterpret_cast<uintptr_t>(t->data) - base;
    const uint64_t end = static_cast<uint64_t>(inside) + t->byte_offset;
    if (end < inside || end + nbytes < end || end + nbytes > a->nbytes) {
      return Make(kOutOfBounds, "copy_data_from_to", dev,
                  std::string("the ") + side + " covers bytes " + std::to_string(end) + " to " +
                      std::to_string(end + nbytes) + " of " + KindName(a->kind) + " " +
                      sdk::PointerString(reinterpret_cast<void*>(base)) + ", which has " +
                      std::to_string(a->nbytes) + " bytes",
                  "check the byte_offset and shape against the allocation's size");
    }
    *alloc = a;
    *start = end;
    return {};
  }

  Finding CheckCopy(const DLTensor* from, const DLTensor* to, bp_stream_t stream) {
    // The device the copy runs on: the side that is not the CPU, as the core routes it.
    const DLDevice dev = to->device.device_type != kDLCPU ? to->device : from->device;
    const size_t nbytes = sdk::TensorBytes(from);
    const Allocation *a = nullptr, *b = nullptr;
    uintptr_t sa = 0, sb = 0;
    Finding f = CheckSide("source", from, dev, nbytes, &a, &sa);
    if (!f) f = CheckSide("destination", to, dev, sdk::TensorBytes(to), &b, &sb);
    if (f) return f;
    if (a != nullptr && a == b && nbytes > 0 && sa < sb + nbytes && sb < sa + nbytes) {
      return Make(kOverlap, "copy_data_from_to", dev,
                  "the source (bytes " + std::to_string(sa) + " to " + std::to_string(sa + nbytes) +
                      ") and destination (bytes " + std::to_string(sb) + " to " +
                      std::to_string(sb + nbytes) + ") overlap in " + KindName(a->kind) + " " +
                      sdk::PointerString(from->data),
                  "copy through a separate buffer");
    }
    if (stream != nullptr) {
      auto it = s_.streams.find(stream);
      if (it == s_.streams.end()) return MissingStream("copy_data_from_to", dev, stream);
      if (!SameDevice(it->second.dev, from->device) && !SameDevice(it->second.dev, to->device)) {
        return Make(kWrongDevice, "copy_data_from_to", dev,
                    StreamName(stream) + " belongs to " + DeviceName(it->second.dev) +
                        ", which is neither side of the copy",
                    "pass a stream of " + DeviceName(dev) + " or the null stream");
      }
    }
    return {};
  }

  Finding MissingStream(const char* entry, DLDevice dev, bp_stream_t stream) {
    if (const auto* fr = s_.freed_streams.Find(stream)) {
      return Make(kUseAfterFree, entry, dev,
                  StreamName(stream) + " of " + DeviceName(fr->dev) + " was freed by free_stream",
                  "use a stream only between create_stream and free_stream");
    }
    return Make(kUnknownHandle, entry, dev,
                StreamName(stream) + " was not made by create_stream of this process",
                "pass a stream create_stream returned, or the null stream");
  }

  Finding CheckStream(const char* entry, DLDevice dev, bp_stream_t stream, bool freeing) {
    if (stream == nullptr) return {};
    auto it = s_.streams.find(stream);
    if (it == s_.streams.end()) {
      if (freeing && s_.freed_streams.Find(stream) != nullptr) {
        return Make(kDoubleFree, entry, dev,
                    StreamName(stream) + " was already freed by free_stream",
                    "free each stream once");
      }
      return MissingStream(entry, dev, stream);
    }
    if (!SameDevice(it->second.dev, dev)) {
      return Make(kWrongDevice, entry, dev,
                  StreamName(stream) + " belongs to " + DeviceName(it->second.dev),
                  std::string("call ") + entry + " with " + DeviceName(it->second.dev) +
                      ", or use a stream of " + DeviceName(dev));
    }
    return {};
  }

  // `wait`: the stream that is to wait for the event (stream_wait_event only).
  Finding CheckEvent(const char* entry, DLDevice dev, void* event, bool freeing,
                     bp_stream_t wait = nullptr) {
    const std::string e = "event " + sdk::PointerString(event);
    auto it = s_.events.find(event);
    if (it == s_.events.end()) {
      if (const auto* fr = s_.freed_events.Find(event)) {
        if (freeing) {
          return Make(kDoubleFree, entry, dev, e + " was already freed by event_free",
                      "free each event once");
        }
        return Make(kUseAfterFree, entry, dev,
                    e + " of " + DeviceName(fr->dev) + " was freed by event_free",
                    "use an event only between event_create and event_free");
      }
      return Make(kUnknownHandle, entry, dev, e + " was not made by event_create of this process",
                  "pass an event event_create returned");
    }
    if (wait != nullptr) {
      auto st = s_.streams.find(wait);
      if (st != s_.streams.end() && !SameDevice(st->second.dev, it->second.dev)) {
        return Make(kEventOtherDevice, entry, dev,
                    e + " of " + DeviceName(it->second.dev) + " is waited on by " +
                        StreamName(wait) + " of " + DeviceName(st->second.dev),
                    "a stream waits only for events of its own device: record an event on " +
                        DeviceName(st->second.dev) + ", or wait on the host with event_sync");
      }
    }
    if (!SameDevice(it->second.dev, dev)) {
      return Make(kWrongDevice, entry, dev, e + " belongs to " + DeviceName(it->second.dev),
                  std::string("call ") + entry + " with " + DeviceName(it->second.dev));
    }
    return {};
  }

  // The work recorded before the event is complete.
  void Passed(void* event) {
    std::lock_guard lock(s_.mu);
    auto it = s_.events.find(event);
    if (it != s_.events.end() && it->second.recorded) s_.Complete(it->second.key, it->second.seq);
  }

  State& s_;
};

// The tensors a call passes: DLTensor arguments and tensor objects.
void Tensors(const bp_value_t* args, int32_t n, std::vector<const DLTensor*>* out) {
  for (int32_t i = 0; i < n; ++i) {
    const bp_value_t& v = args[i];
    if (v.type == BP_VALUE_TENSOR && v.u.v_tensor != nullptr) {
      out->push_back(v.u.v_tensor);
    } else if (v.type == BP_VALUE_OBJECT && v.u.v_obj != nullptr) {
      int32_t type = 0;
      if (detail::Api()->object_type(v.u.v_obj, &type) != BP_OK) {
        detail::Api()->error_clear();
        continue;
      }
      DLTensor* t = nullptr;
      if (type == BP_OBJECT_TENSOR && detail::Api()->tensor_get(v.u.v_obj, &t) == BP_OK) {
        if (t != nullptr) out->push_back(t);
      }
    }
  }
}

class ValidationLayer final : public sdk::Layer {
 public:
  explicit ValidationLayer(State* state) : s_(*state) {}

  sdk::DeviceLayer* WrapDeviceAPI(int32_t type, const std::string& name,
                                  const bp_device_api_t* next) override {
    return new ValidationTable(&s_, type, name, next);  // kept until exit
  }

  // Modules are noted for the leak report only: the core checks each use of a module itself.
  void OnModule(const bp_object_t* module, const std::string& kind, bool alive) override {
    ModuleInfo info;
    if (alive) {
      info.kind = kind;
      s_.Capture(&info.trace);
    }
    std::lock_guard lock(s_.mu);
    auto it = s_.modules.find(module);
    // Its end; or, for a module made, a stale entry at the same address (its end was missed):
    // the newer one counts.
    if (it != s_.modules.end()) {
      s_.module_order.erase(it->second.first);
      s_.modules.erase(it);
    }
    if (alive) {
      const uint64_t serial = ++s_.modules_made;
      s_.module_order.emplace(serial, module);
      s_.modules[module] = {serial, std::move(info)};
    }
  }

  // A launch notes the data handles of its tensors on the device's current stream, so that
  // freeing one before that stream is synchronised is found. The CPU runs a function on the
  // calling thread, done when the call returns, so its tensors are not noted.
  Function WrapFunction(const std::string& module_kind, const std::string& name,
                        const Function& next) override {
    (void)module_kind;
    const std::string entry = "function " + name;
    return Function::FromCallable([this, name, entry, next](PackedArgs args) -> Any {
      struct Depth {
        Depth() { ++t_call_depth; }
        ~Depth() { --t_call_depth; }
      } depth;
      // A call made by a module function (an ir_host function's kernels) passes the outer
      // call's tensors, noted there, or its own scratch memory: only the outermost is checked.
      if (t_call_depth > 1) return next.CallPacked(args.data(), args.size());
      std::vector<const DLTensor*> tensors;
      Tensors(args.data(), args.size(), &tensors);
      tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                   [](const DLTensor* t) {
                                     return t->device.device_type == kDLCPU || t->data == nullptr;
                                   }),
                    tensors.end());
      if (tensors.empty()) return next.CallPacked(args.data(), args.size());
      std::string freed;  // the finding, if a tensor's data was freed
      {
        std::lock_guard lock(s_.mu);
        for (const DLTensor* t : tensors) {
          const int32_t type = t->device.device_type;
          if (s_.Exact(type, t->data) != nullptr) continue;
          if (const auto* fr = s_.freed_data.Find({type, reinterpret_cast<uintptr_t>(t->data)})) {
            freed = State::Message(Make(kUseAfterFree, entry.c_str(), t->device,
                                        "a tensor argument's data " + sdk::PointerString(t->data) +
                                            " was freed by " + fr->entry,
                                        "pass only tensors whose data is alive"));
            break;
          }
        }
      }
      if (!freed.empty()) {
        s_.Emit(freed);
        throw Error(BP_ERR_INVALID_ARGUMENT, freed);
      }
      Any result = next.CallPacked(args.data(), args.size());
      Noted(name, tensors);
      return result;
    });
  }

 private:
  void Noted(const std::string& name, const std::vector<const DLTensor*>& tensors) {
    auto launch = std::make_shared<Launch>();
    launch->function = name;
    launch->device = tensors[0]->device;
    launch->stream = nullptr;
    std::lock_guard lock(s_.mu);
    for (const DLTensor* t : tensors) {
      const StreamKey key = KeyOf(t->device, CurrentStream(t->device));
      if (launch->stream == nullptr && key.stream != nullptr) {
        launch->device = t->device;
        launch->stream = key.stream;
      }
      bool seen = false;
      for (const auto& m : launch->marks) seen = seen || m.first == key;
      if (!seen) launch->marks.emplace_back(key, ++s_.work[key].launched);
    }
    for (const DLTensor* t : tensors) {
      uintptr_t base = 0;
      Allocation* a = s_.Exact(t->device.device_type, t->data);
      if (a == nullptr) a = s_.Containing(t->device.device_type, t->data, &base);
      if (a == nullptr) continue;
      // A complete launch, or an earlier one on the same streams, says nothing more.
      auto& uses = a->uses;
      uses.erase(std::remove_if(uses.begin(), uses.end(),
                                [&](const std::shared_ptr<const Launch>& u) {
                                  if (u.get() == launch.get()) return false;
                                  if (!s_.Pending(*u)) return true;
                                  if (u->marks.size() != launch->marks.size()) return false;
                                  for (size_t i = 0; i < u->marks.size(); ++i) {
                                    if (!(u->marks[i].first == launch->marks[i].first)) {
                                      return false;
                                    }
                                  }
                                  return true;
                                }),
                 uses.end());
      if (uses.empty() || uses.back() != launch) uses.push_back(launch);
    }
  }

  State& s_;
};

}  // namespace
}  // namespace validation
}  // namespace backplane

BACKPLANE_PLUGIN_ENTRY_WITH((backplane::sdk::PluginDescription{
    "validation", BACKPLANE_VALIDATION_VERSION, "Backplane"})) {
  namespace sdk = backplane::sdk;
  namespace v = backplane::validation;
  sdk::RegisterLayer(
      "validation",
      [](const std::string& options) -> sdk::Layer* {
        bool abort_on_finding = false, leaks = true, backtraces = true;
        size_t start = 0;
        while (start <= options.size()) {
          size_t end = options.find_first_of(":,", start);
          if (end == std::string::npos) end = options.size();
          const std::string opt = options.substr(start, end - start);
          if (opt == "abort") {
            abort_on_finding = true;
          } else if (opt == "leaks=off") {
            leaks = false;
          } else if (opt == "leaks=on") {
            leaks = true;
          } else if (opt == "backtraces=off") {
            backtraces = false;
          } else if (opt == "backtraces=on") {
            backtraces = true;
          } else if (!opt.empty()) {
            throw backplane::Error(BP_ERR_INVALID_ARGUMENT,
                                   "layer validation: unknown option '" + opt +
                                       "'; the options are abort (abort with a backtrace at the "
                                       "first finding), leaks=off (no leak report at exit) and "
                                       "backtraces=off (no backtrace of where each handle was "
                                       "made)");
          }
          start = end + 1;
        }
        // The first backtrace() loads the unwinder; done here, not in a call being checked.
        void* warm[2];
        backtrace(warm, 2);
        v::g_state = new v::State(abort_on_finding, leaks, backtraces);  // kept until exit
        std::atexit([] { v::g_state->PrintLeaks(); });
        return new v::ValidationLayer(v::g_state);
      },
      sdk::LayerWraps{/*functions=*/true, /*builds=*/false, /*modules=*/true});
  sdk::RegisterFunction("validation.findings", [](backplane::PackedArgs) -> backplane::Any {
    return sdk::StringValue(v::g_state != nullptr ? v::g_state->Findings() : std::string());
  });
}
