// SPDX-License-Identifier: Apache-2.0
// Inside the remote device server (server.cc): what its files share. One ClientSession per
// Session RPC holds the client's handles and runs its commands (session.cc: the loop, buffers,
// transfers and streams; session_call.cc: modules, calls and the values they carry); Shared is
// what every session sees. Not installed: the server's interface is
// include/backplane/remote/server.hpp.
#ifndef BACKPLANE_REMOTE_SESSION_H_
#define BACKPLANE_REMOTE_SESSION_H_

#include <backplane/c_api.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <backplane/backplane.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backplane/remote/remote.grpc.pb.h"
#include "backplane/remote/server.hpp"

namespace backplane {
namespace remote {

namespace pb = backplane::remote::v1;

// A module upload (all its chunks) may hold at most this much of the server's memory.
constexpr size_t kMaxModuleBytes = size_t{256} << 20;
// Module uploads a session may have in flight at once.
constexpr size_t kMaxUploads = 16;
// Failed transfers remembered per session until their last chunk (a client that never sends
// it must not grow the table without bound).
constexpr size_t kMaxFailedTransfers = 1024;
// Alignment of data space when a client asks for 0.
constexpr uint64_t kDefaultAlignment = 64;
// Dimensions a tensor argument may have.
constexpr int kMaxTensorDims = 32;

// Backplane's version on the server (server.cc).
extern const char* const kServerVersion;

// ---- helpers (session.cc) ---------------------------------------------------------------

// Throws Error(code, message).
[[noreturn]] void Fail(bp_status_t code, const std::string& message);
// The calling thread's last error message.
std::string LastError();
// Throws Error(status, "<what>: <last error>") when `status` is not BP_OK.
void Must(bp_status_t status, const std::string& what);
// "a, b, c", or "none" for no items.
std::string Join(const std::vector<std::string>& items);

// `text` as one line of printable ASCII for the log: a backslash doubled and every byte outside
// 0x20..0x7e as \xNN (a newline cannot forge a line, an escape sequence cannot reach a
// terminal); at most `max` bytes of it, then "... (N bytes)".
std::string LogSafe(const std::string& text, size_t max = 120);

// Releases the object an owned value holds, if any.
struct OwnedValue {
  bp_value_t v{};
  OwnedValue() { v.type = BP_VALUE_NONE; }
  OwnedValue(const OwnedValue&) = delete;
  OwnedValue& operator=(const OwnedValue&) = delete;
  ~OwnedValue() {
    if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
  }
};

// ---- values (session_call.cc) -----------------------------------------------------------

// A protocol dtype as DLPack's; BP_ERR_INVALID_ARGUMENT naming `what` when it does not fit.
DLDataType ToDL(const pb::DataType& t, const std::string& what);
// A value (an attribute, a property, a result) as the protocol carries it; objects are
// borrowed. Values the protocol cannot carry (pointers, tensors, other objects) are
// BP_ERR_INVALID_ARGUMENT naming `what`.
void ToValue(const bp_value_t& v, pb::Value* out, const std::string& what);

// ---- what every session shares ----------------------------------------------------------

// The server's log: whole lines, from any thread.
class ServerLog {
 public:
  explicit ServerLog(std::ostream& out) : out_(out) {}
  void Line(const std::string& text) {
    // One write a line (std::cerr is unbuffered: a line written piece by piece could be read
    // half-written by whoever follows the log).
    const std::string line = "backplane serve: " + text + "\n";
    std::lock_guard<std::mutex> lock(mu_);
    out_.write(line.data(), static_cast<std::streamsize>(line.size()));
    out_.flush();
  }

 private:
  std::mutex mu_;
  std::ostream& out_;
};

struct ExportedDevice {
  DLDevice dev;
  std::string label;  // "opencl:0"
};

// What the Status RPC reports, over the live sessions.
struct Totals {
  std::atomic<uint32_t> sessions{0};
  std::atomic<uint64_t> buffers{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> streams{0};
  std::atomic<uint64_t> modules{0};
};

// Fixed once the server starts, but for the log, the totals and the session counters.
struct Shared {
  const ServerOptions& options;
  ServerLog log;
  std::vector<ExportedDevice> devices;  // a command's device index is a position here
  pb::ServerInfo info;                  // Hello's and Describe's answer
  std::string token;                    // empty: no token needed
  Totals totals;
  // The module kinds whose functions the server calls: the core's host code ("ir_host") and the
  // kinds of CPU Targets, whose modules hold whole functions that check their arguments. Any
  // other kind holds device kernels that take their launch grid from the caller.
  std::set<std::string> callable_kinds;
  std::atomic<uint64_t> next_session{1};
  std::atomic<int> live_sessions{0};

  Shared(const ServerOptions& o, std::ostream& out) : options(o), log(out) {}
};

// ---- one session ------------------------------------------------------------------------

using Stream = grpc::ServerReaderWriter<pb::Reply, pb::Command>;

// A client's session: its handle tables (numbers from 1, meaningful only here) and its
// commands, run in arrival order on the RPC's thread. The destructor frees everything.
class ClientSession {
 public:
  ClientSession(Shared& shared, uint64_t number, std::string peer)
      : shared_(shared), number_(number), peer_(std::move(peer)) {}
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;
  ~ClientSession() { Close(); }

  // Reads and runs commands until the client ends the stream or the connection goes.
  // `on_first` runs once the first command has come (or the stream ended before it).
  void Run(Stream* stream, const std::function<void()>& on_first);

 private:
  // Memory a device hands out may hold what another session freed. A buffer's bytes below
  // `clean` hold this session's writes or zeros; the rest is zeroed before anything can read it
  // (a Read, a Copy from it, a Call that takes it), so a buffer written whole before its first
  // use costs nothing more (docs/remote.md, "Isolation between sessions").
  struct Buffer {
    uint32_t device;
    void* data;
    uint64_t nbytes;
    bool workspace;
    uint64_t clean = 0;
  };
  struct StreamEntry {
    uint32_t device;
    bp_stream_t stream;
  };
  struct ModuleEntry {
    ObjectRef module;
    std::vector<std::string> functions;
  };
  struct Upload {
    std::string bytes;
    bool failed = false;
    bp_status_t code = BP_OK;
    std::string message;
  };
  // Whether to send the reply a command filled in.
  enum class Answer { kUsual, kNone };

  Answer Execute(const pb::Command& cmd, pb::Reply* reply);
  const ExportedDevice& Dev(uint32_t index) const;
  Buffer& Buf(uint64_t handle);
  bp_stream_t StreamOf(uint64_t handle, uint32_t device, const std::string& what);
  void Send(const pb::Reply& reply);

  // Zeros bytes [from, to) of `b` and waits until they are zero.
  void Scrub(const Buffer& b, uint64_t from, uint64_t to, const std::string& what);
  // Before bytes [offset, offset + length) of `b` are read: whatever of them this session has
  // not written is zeroed (the whole rest of the buffer, which makes it clean).
  void BeforeRead(Buffer& b, uint64_t offset, uint64_t length, const std::string& what);
  // Before a write at `offset`: the gap between the clean part and it is zeroed, so that a
  // write's end can become the clean part's end (AfterWrite).
  void BeforeWrite(Buffer& b, uint64_t offset, const std::string& what);
  // After bytes [offset, offset + length) of `b` were written (BeforeWrite came first).
  static void AfterWrite(Buffer& b, uint64_t offset, uint64_t length);

  void Alloc(const pb::Alloc& a, pb::Reply* reply);
  void Free(const pb::Free& f);
  Answer Write(const pb::Command& cmd, pb::Reply* reply);
  void Read(const pb::Command& cmd);
  void Copy(const pb::Copy& c);
  void CreateStream(const pb::CreateStream& c, pb::Reply* reply);
  void FreeStream(const pb::FreeStream& f);
  Answer LoadModule(const pb::Command& cmd, pb::Reply* reply);
  void RefuseNewerIR(const std::string& bytes) const;
  void Call(const pb::Call& c, pb::Reply* reply);
  void Close() noexcept;

  Shared& shared_;
  const uint64_t number_;
  const std::string peer_;
  std::string client_;
  bool started_ = false;  // Hello was accepted
  Stream* stream_ = nullptr;
  bool closed_ = false;  // a write to the client failed: the session ends
  uint64_t next_buffer_ = 1, next_stream_ = 1, next_module_ = 1;
  std::map<uint64_t, Buffer> buffers_;
  std::map<uint64_t, StreamEntry> streams_;
  std::map<uint64_t, ModuleEntry> modules_;
  std::map<uint64_t, std::pair<bp_status_t, std::string>> failed_writes_;  // by transfer
  std::map<uint64_t, Upload> uploads_;                                     // by transfer
  size_t upload_bytes_ = 0;
  std::set<uint32_t> used_devices_;
};

}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_REMOTE_SESSION_H_
