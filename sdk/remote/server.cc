// SPDX-License-Identifier: Apache-2.0
// The remote device server, what `backplane serve` runs (docs/remote.md): this machine's
// devices over gRPC, one session per client (remote.proto).
//
// Threads. gRPC's synchronous server gives each RPC a thread of its pool (sized for
// max_sessions); a session's commands run on its thread in arrival order: read, execute,
// reply. Sessions share only what is fixed at start (the devices, the options), the log and the
// totals the Status RPC reports (atomics).
//
// Trust. Everything a client sends is checked before it reaches a device: device indices,
// handles (each session has its own table; another session's numbers resolve to nothing),
// offsets and sizes (overflow-safe), and the views a call's tensor arguments make of buffers.
// Modules with native code load only with --allow-native-modules, and only the registered
// functions named with --expose can be called by name.
#include "backplane/remote/server.h"

#include <backplane/c_api.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <backplane/backplane.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backplane/remote/common.h"
#include "backplane/remote/remote.grpc.pb.h"

namespace backplane::remote {

namespace {

namespace pb = backplane::remote::v1;

// A module upload (all its chunks) may hold at most this much of the server's memory.
constexpr size_t kMaxModuleBytes = size_t{256} << 20;
// Failed transfers remembered per session until their last chunk (a client that never sends
// it must not grow the table without bound).
constexpr size_t kMaxFailedTransfers = 1024;
// Alignment of data space when a client asks for 0.
constexpr uint64_t kDefaultAlignment = 64;
// Devices of one type are ids 0, 1, ... while BP_ATTR_EXIST says 1, up to this many.
constexpr int32_t kMaxDevicesPerType = 64;
// Dimensions a tensor argument may have.
constexpr int kMaxTensorDims = 32;

#ifdef BACKPLANE_VERSION
constexpr const char* kVersion = BACKPLANE_VERSION;
#else
constexpr const char* kVersion = "unknown";
#endif

// ---- small helpers ----------------------------------------------------------------------

[[noreturn]] void Fail(bp_status_t code, const std::string& message) { throw Error(code, message); }

// The calling thread's last error message.
std::string LastError() {
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  return message != nullptr && *message != '\0' ? message : "no message recorded";
}

// Throws Error(status, "<what>: <last error>") when `status` is not BP_OK.
void Must(bp_status_t status, const std::string& what) {
  if (status != BP_OK) throw Error(status, what + ": " + LastError());
}

// offset + length <= size, without overflow.
bool InBounds(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

uint64_t CheckedAdd(uint64_t a, uint64_t b, const std::string& what) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) Fail(BP_ERR_INVALID_ARGUMENT, what + " overflows");
  return r;
}

uint64_t CheckedMul(uint64_t a, uint64_t b, const std::string& what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) Fail(BP_ERR_INVALID_ARGUMENT, what + " overflows");
  return r;
}

// A 1-D uint8 view of `nbytes` bytes at data + byte_offset on `dev`.
DLTensor ByteView(void* data, uint64_t byte_offset, DLDevice dev, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = dev;
  t.ndim = 1;
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = byte_offset;
  return t;
}

DLDataType ToDL(const pb::DataType& t, const std::string& what) {
  if (t.code() > 255 || t.bits() == 0 || t.bits() > 255 || t.lanes() == 0 || t.lanes() > 65535) {
    Fail(BP_ERR_INVALID_ARGUMENT, what + ": dtype (code " + std::to_string(t.code()) + ", bits " +
                                      std::to_string(t.bits()) + ", lanes " +
                                      std::to_string(t.lanes()) +
                                      ") is not one DLPack can hold (code and bits 1..255, lanes "
                                      "1..65535)");
  }
  return DLDataType{static_cast<uint8_t>(t.code()), static_cast<uint8_t>(t.bits()),
                    static_cast<uint16_t>(t.lanes())};
}

void FromDL(DLDataType t, pb::DataType* out) {
  out->set_code(t.code);
  out->set_bits(t.bits);
  out->set_lanes(t.lanes);
}

// An array object as a list of strings or of ints; false when it holds anything else.
bool ArrayToValue(const bp_object_t* array, pb::Value* out) {
  size_t n = 0;
  Must(bp_array_size(array, &n), "reading an array");
  std::vector<bp_value_t> items(n);
  bool all_ints = true;
  bool all_strings = true;
  for (size_t i = 0; i < n; ++i) {
    Must(bp_array_get(array, i, &items[i]), "reading an array");  // borrowed
    int32_t type = 0;
    if (items[i].type == BP_VALUE_OBJECT) bp_object_type(items[i].u.v_obj, &type);
    all_ints = all_ints && items[i].type == BP_VALUE_INT;
    all_strings = all_strings && items[i].type == BP_VALUE_OBJECT && type == BP_OBJECT_STRING;
  }
  if (all_strings) {  // an empty array reads as an empty list of strings
    pb::StringList* list = out->mutable_strings();
    for (const bp_value_t& v : items) list->add_items(GetString(v.u.v_obj));
    return true;
  }
  if (all_ints) {
    pb::IntList* list = out->mutable_ints();
    for (const bp_value_t& v : items) list->add_items(v.u.v_int64);
    return true;
  }
  return false;
}

// A value (an attribute, a property, a result) as the protocol carries it; objects are
// borrowed. Values the protocol cannot carry (pointers, tensors, other objects) are
// BP_ERR_INVALID_ARGUMENT naming `what`.
void ToValue(const bp_value_t& v, pb::Value* out, const std::string& what) {
  switch (v.type) {
    case BP_VALUE_NONE:
      out->set_none(true);
      return;
    case BP_VALUE_INT:
      out->set_i(v.u.v_int64);
      return;
    case BP_VALUE_FLOAT:
      out->set_f(v.u.v_float64);
      return;
    case BP_VALUE_DTYPE:
      FromDL(v.u.v_dtype, out->mutable_dtype());
      return;
    case BP_VALUE_OBJECT: {
      int32_t type = 0;
      Must(bp_object_type(v.u.v_obj, &type), what);
      if (type == BP_OBJECT_STRING) {
        out->set_s(GetString(v.u.v_obj));
        return;
      }
      if (type == BP_OBJECT_BYTES) {
        const void* data = nullptr;
        size_t size = 0;
        Must(bp_bytes_get(v.u.v_obj, &data, &size), what);
        out->set_b(std::string(static_cast<const char*>(data), size));
        return;
      }
      if (type == BP_OBJECT_ARRAY && ArrayToValue(v.u.v_obj, out)) return;
      Fail(BP_ERR_INVALID_ARGUMENT,
           what + ": the result is an object of type " + std::to_string(type) +
               ", which the remote protocol cannot carry (it carries none, int, float, dtype, "
               "string, bytes and arrays of strings or ints)");
    }
    default:
      Fail(BP_ERR_INVALID_ARGUMENT,
           what + ": the result is a " + detail::ValueTypeName(v) +
               " value, which the remote protocol cannot carry (it carries none, int, float, "
               "dtype, string, bytes and arrays of strings or ints)");
  }
}

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

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// ---- what every session shares ----------------------------------------------------------

class Log {
 public:
  explicit Log(std::ostream& out) : out_(out) {}
  void Line(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    out_ << "backplane serve: " << text << std::endl;
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

struct Shared {
  const ServerOptions& options;
  Log log;
  std::vector<ExportedDevice> devices;
  pb::ServerInfo info;
  std::string token;  // empty: no token needed
  Totals totals;
  std::atomic<uint64_t> next_session{1};
  std::atomic<int> live_sessions{0};

  Shared(const ServerOptions& o, std::ostream& out) : options(o), log(out) {}
};

// ---- one session ------------------------------------------------------------------------

using Stream = grpc::ServerReaderWriter<pb::Reply, pb::Command>;

class ClientSession {
 public:
  ClientSession(Shared& shared, uint64_t number, std::string peer)
      : shared_(shared), number_(number), peer_(std::move(peer)) {}
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;
  ~ClientSession() { Close(); }

  // Reads and runs commands until the client ends the stream or the connection goes.
  void Run(Stream* stream);

 private:
  struct Buffer {
    uint32_t device;
    void* data;
    uint64_t nbytes;
    bool workspace;
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

  void Alloc(const pb::Alloc& a, pb::Reply* reply);
  void Free(const pb::Free& f);
  Answer Write(const pb::Command& cmd, pb::Reply* reply);
  void Read(const pb::Command& cmd);
  void Copy(const pb::Copy& c);
  void CreateStream(const pb::CreateStream& c, pb::Reply* reply);
  void FreeStream(const pb::FreeStream& f);
  Answer LoadModule(const pb::Command& cmd, pb::Reply* reply);
  void Call(const pb::Call& c, pb::Reply* reply);
  void Close() noexcept;

  Shared& shared_;
  const uint64_t number_;
  const std::string peer_;
  std::string client_;
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

void ClientSession::Send(const pb::Reply& reply) {
  if (!closed_ && !stream_->Write(reply)) closed_ = true;
}

void ClientSession::Run(Stream* stream) {
  stream_ = stream;
  pb::Command cmd;
  if (!stream->Read(&cmd)) return;
  pb::Reply hello;
  hello.set_id(cmd.id());
  if (cmd.op_case() != pb::Command::kHello) {
    hello.set_code(BP_ERR_INVALID_ARGUMENT);
    hello.set_message("the first command of a session must be Hello (protocol " +
                      std::to_string(pb::PROTOCOL_VERSION) + "); got command field " +
                      std::to_string(cmd.op_case()));
    Send(hello);
    return;
  }
  if (cmd.hello().protocol() != pb::PROTOCOL_VERSION) {
    hello.set_code(BP_ERR_VERSION_MISMATCH);
    hello.set_message("this server (Backplane " + std::string(kVersion) + ") speaks protocol " +
                      std::to_string(pb::PROTOCOL_VERSION) + " and the client protocol " +
                      std::to_string(cmd.hello().protocol()) +
                      ": use a client and a server of the same protocol (upgrade the older one)");
    Send(hello);
    shared_.log.Line("session " + std::to_string(number_) + " (" + peer_ +
                     ") refused: client protocol " + std::to_string(cmd.hello().protocol()));
    return;
  }
  client_ = cmd.hello().client();
  // Hello is always answered: the client learns the devices from it.
  *hello.mutable_info() = shared_.info;
  Send(hello);
  shared_.log.Line("session " + std::to_string(number_) + " (" + peer_ +
                   (client_.empty() ? "" : ", " + client_) + ") started");
  while (!closed_ && stream->Read(&cmd)) {
    pb::Reply reply;
    reply.set_id(cmd.id());
    Answer answer = Answer::kUsual;
    try {
      answer = Execute(cmd, &reply);
    } catch (const Error& e) {
      reply.set_code(e.kind());
      reply.set_message(e.what());
    } catch (const std::bad_alloc&) {
      reply.set_code(BP_ERR_OUT_OF_MEMORY);
      reply.set_message("out of host memory on the server");
    } catch (const std::exception& e) {
      reply.set_code(BP_ERR_INTERNAL);
      reply.set_message(e.what());
    }
    if (reply.code() != BP_OK) {
      // An error replaces whatever the command had filled in.
      const pb::Reply error = [&] {
        pb::Reply r;
        r.set_id(reply.id());
        r.set_code(reply.code());
        r.set_message(reply.message());
        return r;
      }();
      Send(error);
    } else if (answer == Answer::kUsual && cmd.want_reply()) {
      Send(reply);
    }
  }
}

ClientSession::Answer ClientSession::Execute(const pb::Command& cmd, pb::Reply* reply) {
  switch (cmd.op_case()) {
    case pb::Command::kHello:
      Fail(BP_ERR_INVALID_ARGUMENT, "Hello again: a session says Hello once, first");
    case pb::Command::kGetAttr: {
      const ExportedDevice& d = Dev(cmd.get_attr().device());
      OwnedValue v;
      const std::string what =
          "attribute " + std::to_string(cmd.get_attr().kind()) + " of " + d.label;
      Must(bp_device_get_attr(d.dev, cmd.get_attr().kind(), &v.v), "reading " + what);
      ToValue(v.v, reply->mutable_value(), what);
      return Answer::kUsual;
    }
    case pb::Command::kGetProperty: {
      const ExportedDevice& d = Dev(cmd.get_property().device());
      OwnedValue v;
      const std::string what = "property '" + cmd.get_property().key() + "' of " + d.label;
      Must(bp_device_get_property(d.dev, cmd.get_property().key().c_str(), &v.v),
           "reading " + what);
      ToValue(v.v, reply->mutable_value(), what);
      return Answer::kUsual;
    }
    case pb::Command::kListProperties: {
      const ExportedDevice& d = Dev(cmd.list_properties().device());
      bp_object_t* keys = nullptr;
      Must(bp_device_list_properties(d.dev, &keys), "listing the properties of " + d.label);
      for (const std::string& k : GetStringArray(ObjectRef::Adopt(keys).get())) {
        reply->add_names(k);
      }
      return Answer::kUsual;
    }
    case pb::Command::kTargetFromDevice: {
      const ExportedDevice& d = Dev(cmd.target_from_device().device());
      const std::string& kind = cmd.target_from_device().kind();
      bp_object_t* target = nullptr;
      const std::string what =
          "the Target of " + d.label + (kind.empty() ? "" : " (kind '" + kind + "')");
      Must(bp_target_from_device(d.dev, kind.empty() ? nullptr : kind.c_str(), &target),
           "making " + what);
      ObjectRef target_ref = ObjectRef::Adopt(target);
      bp_object_t* json = nullptr;
      Must(bp_target_to_json(target, &json), "writing " + what + " as JSON");
      reply->mutable_value()->set_s(GetString(ObjectRef::Adopt(json).get()));
      return Answer::kUsual;
    }
    case pb::Command::kAlloc:
      Alloc(cmd.alloc(), reply);
      return Answer::kUsual;
    case pb::Command::kFree:
      Free(cmd.free());
      return Answer::kUsual;
    case pb::Command::kWrite:
      return Write(cmd, reply);
    case pb::Command::kRead:
      Read(cmd);
      return Answer::kNone;
    case pb::Command::kCopy:
      Copy(cmd.copy());
      return Answer::kUsual;
    case pb::Command::kCreateStream:
      CreateStream(cmd.create_stream(), reply);
      return Answer::kUsual;
    case pb::Command::kFreeStream:
      FreeStream(cmd.free_stream());
      return Answer::kUsual;
    case pb::Command::kSyncStream: {
      const ExportedDevice& d = Dev(cmd.sync_stream().device());
      const std::string what =
          "synchronizing stream " + std::to_string(cmd.sync_stream().stream()) + " of " + d.label;
      bp_stream_t s = StreamOf(cmd.sync_stream().stream(), cmd.sync_stream().device(), what);
      Must(bp_device_stream_sync(d.dev, s), what);
      return Answer::kUsual;
    }
    case pb::Command::kSyncStreamFromTo: {
      const pb::SyncStreamFromTo& c = cmd.sync_stream_from_to();
      const ExportedDevice& d = Dev(c.device());
      const std::string what = "making stream " + std::to_string(c.dst()) + " of " + d.label +
                               " wait for stream " + std::to_string(c.src());
      bp_stream_t src = StreamOf(c.src(), c.device(), what);
      bp_stream_t dst = StreamOf(c.dst(), c.device(), what);
      Must(bp_device_sync_stream_from_to(d.dev, src, dst), what);
      return Answer::kUsual;
    }
    case pb::Command::kLoadModule:
      return LoadModule(cmd, reply);
    case pb::Command::kFreeModule: {
      auto it = modules_.find(cmd.free_module().module());
      if (it == modules_.end()) {
        Fail(BP_ERR_INVALID_ARGUMENT,
             "freeing module " + std::to_string(cmd.free_module().module()) + ": no module " +
                 std::to_string(cmd.free_module().module()) + " in this session");
      }
      modules_.erase(it);
      shared_.totals.modules--;
      return Answer::kUsual;
    }
    case pb::Command::kCall:
      Call(cmd.call(), reply);
      return Answer::kUsual;
    case pb::Command::kPing:
      return Answer::kUsual;
    case pb::Command::OP_NOT_SET:
      break;
  }
  Fail(BP_ERR_UNSUPPORTED, "command " + std::to_string(cmd.id()) +
                               " has no operation this server knows (it speaks protocol " +
                               std::to_string(pb::PROTOCOL_VERSION) + ", Backplane " + kVersion +
                               "); is the client newer?");
}

const ExportedDevice& ClientSession::Dev(uint32_t index) const {
  if (index >= shared_.devices.size()) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "device " + std::to_string(index) + " does not exist on this server: it serves " +
             std::to_string(shared_.devices.size()) + " devices (indices 0.." +
             std::to_string(shared_.devices.size() - 1) + ")");
  }
  return shared_.devices[index];
}

ClientSession::Buffer& ClientSession::Buf(uint64_t handle) {
  auto it = buffers_.find(handle);
  if (it == buffers_.end()) {
    Fail(BP_ERR_INVALID_ARGUMENT, "no buffer " + std::to_string(handle) + " in this session");
  }
  return it->second;
}

// The stream `handle` (0: the null stream), which must be one of `device`'s.
bp_stream_t ClientSession::StreamOf(uint64_t handle, uint32_t device, const std::string& what) {
  if (handle == 0) return nullptr;
  auto it = streams_.find(handle);
  if (it == streams_.end()) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         what + ": no stream " + std::to_string(handle) + " in this session");
  }
  if (it->second.device != device) {
    Fail(BP_ERR_INVALID_ARGUMENT, what + ": stream " + std::to_string(handle) + " is one of " +
                                      Dev(it->second.device).label + ", not of " +
                                      Dev(device).label);
  }
  return it->second.stream;
}

void ClientSession::Alloc(const pb::Alloc& a, pb::Reply* reply) {
  const ExportedDevice& d = Dev(a.device());
  const std::string what = std::string(a.workspace() ? "workspace" : "data space") + " of " +
                           std::to_string(a.nbytes()) + " bytes on " + d.label;
  if (a.nbytes() > SIZE_MAX / 2) {
    Fail(BP_ERR_OUT_OF_MEMORY, "allocating " + what + ": no device has that much memory");
  }
  const uint64_t alignment = a.alignment() == 0 ? kDefaultAlignment : a.alignment();
  if ((alignment & (alignment - 1)) != 0 || alignment > (uint64_t{1} << 30)) {
    Fail(BP_ERR_INVALID_ARGUMENT, "allocating " + what + ": alignment " +
                                      std::to_string(alignment) +
                                      " is not a power of two up to 2^30");
  }
  DLDataType hint{kDLUInt, 8, 1};
  if (a.has_type_hint() && a.type_hint().bits() != 0) {
    hint = ToDL(a.type_hint(), "allocating " + what);
  }
  void* data = nullptr;
  if (a.workspace()) {
    Must(bp_device_alloc_workspace(d.dev, a.nbytes(), hint, &data), "allocating " + what);
  } else {
    Must(bp_device_alloc_data_space(d.dev, a.nbytes(), alignment, hint, &data),
         "allocating " + what);
  }
  const uint64_t handle = next_buffer_++;
  buffers_[handle] = Buffer{a.device(), data, a.nbytes(), a.workspace()};
  used_devices_.insert(a.device());
  shared_.totals.buffers++;
  shared_.totals.bytes += a.nbytes();
  reply->set_handle(handle);
}

void ClientSession::Free(const pb::Free& f) {
  const Buffer& b = Buf(f.buffer());
  const ExportedDevice& d = Dev(b.device);
  const std::string what = "freeing buffer " + std::to_string(f.buffer()) + " on " + d.label;
  if (b.workspace) {
    Must(bp_device_free_workspace(d.dev, b.data), what);
  } else {
    Must(bp_device_free_data_space(d.dev, b.data), what);
  }
  shared_.totals.buffers--;
  shared_.totals.bytes -= b.nbytes;
  buffers_.erase(f.buffer());
}

ClientSession::Answer ClientSession::Write(const pb::Command& cmd, pb::Reply* reply) {
  const pb::Write& w = cmd.write();
  auto failed = failed_writes_.find(w.transfer());
  if (failed == failed_writes_.end()) {
    try {
      const Buffer& b = Buf(w.buffer());
      const ExportedDevice& d = Dev(b.device);
      const uint64_t len = w.data().size();
      const std::string what = "writing " + std::to_string(len) + " bytes to buffer " +
                               std::to_string(w.buffer()) + " on " + d.label + " at offset " +
                               std::to_string(w.offset());
      if (!InBounds(w.offset(), len, b.nbytes)) {
        Fail(BP_ERR_INVALID_ARGUMENT, what + ": the buffer holds " + std::to_string(b.nbytes) +
                                          " bytes, so this would write past its end");
      }
      bp_stream_t s = StreamOf(w.stream(), b.device, what);
      if (len != 0) {
        int64_t shape[1] = {static_cast<int64_t>(len)};
        DLTensor from = ByteView(const_cast<char*>(w.data().data()), 0, DLDevice{kDLCPU, 0}, shape);
        DLTensor to = ByteView(b.data, w.offset(), d.dev, shape);
        Must(bp_device_copy_data_from_to(&from, &to, s), what);
      }
    } catch (const Error& e) {
      if (failed_writes_.size() >= kMaxFailedTransfers)
        failed_writes_.erase(failed_writes_.begin());
      failed = failed_writes_.emplace(w.transfer(), std::make_pair(e.kind(), e.what())).first;
    }
  }
  if (!w.last()) return Answer::kNone;  // the last chunk's reply reports the transfer
  if (failed != failed_writes_.end()) {
    reply->set_code(failed->second.first);
    reply->set_message(failed->second.second);
    failed_writes_.erase(failed);
  }
  return Answer::kUsual;
}

void ClientSession::Read(const pb::Command& cmd) {
  const pb::Read& r = cmd.read();
  const Buffer& b = Buf(r.buffer());
  const ExportedDevice& d = Dev(b.device);
  const std::string what = "reading " + std::to_string(r.nbytes()) + " bytes of buffer " +
                           std::to_string(r.buffer()) + " on " + d.label + " at offset " +
                           std::to_string(r.offset());
  if (!InBounds(r.offset(), r.nbytes(), b.nbytes)) {
    Fail(BP_ERR_INVALID_ARGUMENT, what + ": the buffer holds " + std::to_string(b.nbytes) +
                                      " bytes, so this would read past its end");
  }
  bp_stream_t s = StreamOf(r.stream(), b.device, what);
  const uint64_t chunk =
      r.chunk_bytes() == 0 ? kChunkBytes : std::min<uint64_t>(r.chunk_bytes(), kChunkBytes);
  uint64_t done = 0;
  do {
    const uint64_t n = std::min(chunk, r.nbytes() - done);
    pb::Reply reply;
    reply.set_id(cmd.id());
    std::string* data = reply.mutable_data();
    data->resize(n);
    if (n != 0) {
      int64_t shape[1] = {static_cast<int64_t>(n)};
      DLTensor from = ByteView(b.data, r.offset() + done, d.dev, shape);
      DLTensor to = ByteView(data->data(), 0, DLDevice{kDLCPU, 0}, shape);
      Must(bp_device_copy_data_from_to(&from, &to, s), what);
      // A device-to-host copy has written the host bytes once the stream reaches it.
      Must(bp_device_stream_sync(d.dev, s), what);
    }
    done += n;
    reply.set_last(done == r.nbytes());
    Send(reply);
  } while (done < r.nbytes() && !closed_);
}

void ClientSession::Copy(const pb::Copy& c) {
  const Buffer& from = Buf(c.from_buffer());
  const Buffer& to = Buf(c.to_buffer());
  const ExportedDevice& fd = Dev(from.device);
  const ExportedDevice& td = Dev(to.device);
  const std::string what = "copying " + std::to_string(c.nbytes()) + " bytes from buffer " +
                           std::to_string(c.from_buffer()) + " (" + fd.label + ", offset " +
                           std::to_string(c.from_offset()) + ") to buffer " +
                           std::to_string(c.to_buffer()) + " (" + td.label + ", offset " +
                           std::to_string(c.to_offset()) + ")";
  if (!InBounds(c.from_offset(), c.nbytes(), from.nbytes)) {
    Fail(BP_ERR_INVALID_ARGUMENT, what + ": the source holds " + std::to_string(from.nbytes) +
                                      " bytes, so this would read past its end");
  }
  if (!InBounds(c.to_offset(), c.nbytes(), to.nbytes)) {
    Fail(BP_ERR_INVALID_ARGUMENT, what + ": the destination holds " + std::to_string(to.nbytes) +
                                      " bytes, so this would write past its end");
  }
  if (c.nbytes() == 0) return;
  if (fd.dev.device_type == td.dev.device_type) {
    // One DeviceAPI copies; its stream is the destination's (the source's when that is the CPU).
    const uint32_t owner = td.dev.device_type == kDLCPU ? from.device : to.device;
    bp_stream_t s = StreamOf(c.stream(), owner, what);
    int64_t shape[1] = {static_cast<int64_t>(c.nbytes())};
    DLTensor src = ByteView(from.data, c.from_offset(), fd.dev, shape);
    DLTensor dst = ByteView(to.data, c.to_offset(), td.dev, shape);
    Must(bp_device_copy_data_from_to(&src, &dst, s), what);
    return;
  }
  // Two device types: through host memory, a chunk at a time. The stream, if any, is used on
  // the side it belongs to.
  bp_stream_t from_stream = nullptr;
  bp_stream_t to_stream = nullptr;
  if (c.stream() != 0) {
    auto it = streams_.find(c.stream());
    if (it == streams_.end()) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           what + ": no stream " + std::to_string(c.stream()) + " in this session");
    }
    if (it->second.device == from.device) {
      from_stream = it->second.stream;
    } else if (it->second.device == to.device) {
      to_stream = it->second.stream;
    } else {
      Fail(BP_ERR_INVALID_ARGUMENT, what + ": stream " + std::to_string(c.stream()) +
                                        " is one of " + Dev(it->second.device).label +
                                        ", neither side's");
    }
  }
  std::string staging(std::min<uint64_t>(c.nbytes(), kChunkBytes), '\0');
  for (uint64_t done = 0; done < c.nbytes();) {
    const uint64_t n = std::min<uint64_t>(staging.size(), c.nbytes() - done);
    int64_t shape[1] = {static_cast<int64_t>(n)};
    DLTensor src = ByteView(from.data, c.from_offset() + done, fd.dev, shape);
    DLTensor host = ByteView(staging.data(), 0, DLDevice{kDLCPU, 0}, shape);
    DLTensor dst = ByteView(to.data, c.to_offset() + done, td.dev, shape);
    Must(bp_device_copy_data_from_to(&src, &host, from_stream), what);
    Must(bp_device_stream_sync(fd.dev, from_stream), what);
    // The host side of a host-to-device copy is read before the call returns.
    Must(bp_device_copy_data_from_to(&host, &dst, to_stream), what);
    done += n;
  }
}

void ClientSession::CreateStream(const pb::CreateStream& c, pb::Reply* reply) {
  const ExportedDevice& d = Dev(c.device());
  bp_stream_t s = nullptr;
  Must(bp_device_stream_create(d.dev, &s), "creating a stream on " + d.label);
  const uint64_t handle = next_stream_++;
  streams_[handle] = StreamEntry{c.device(), s};
  used_devices_.insert(c.device());
  shared_.totals.streams++;
  reply->set_handle(handle);
}

void ClientSession::FreeStream(const pb::FreeStream& f) {
  const ExportedDevice& d = Dev(f.device());
  const std::string what = "freeing stream " + std::to_string(f.stream()) + " of " + d.label;
  if (f.stream() == 0) Fail(BP_ERR_INVALID_ARGUMENT, what + ": stream 0 is the null stream");
  bp_stream_t s = StreamOf(f.stream(), f.device(), what);
  Must(bp_device_stream_free(d.dev, s), what);
  streams_.erase(f.stream());
  shared_.totals.streams--;
}

ClientSession::Answer ClientSession::LoadModule(const pb::Command& cmd, pb::Reply* reply) {
  const pb::LoadModule& m = cmd.load_module();
  Upload& up = uploads_[m.transfer()];
  if (!up.failed) {
    if (m.data().size() > kMaxModuleBytes - upload_bytes_) {
      up.failed = true;
      up.code = BP_ERR_INVALID_ARGUMENT;
      up.message = "loading a module: the upload is larger than " +
                   std::to_string(kMaxModuleBytes >> 20) +
                   " MiB, the most this server takes for modules in flight";
      upload_bytes_ -= up.bytes.size();
      std::string().swap(up.bytes);
    } else {
      up.bytes += m.data();
      upload_bytes_ += m.data().size();
    }
  }
  if (!m.last()) return Answer::kNone;
  const Upload done = std::move(up);
  upload_bytes_ -= done.bytes.size();
  uploads_.erase(m.transfer());
  if (done.failed) Fail(done.code, done.message);
  bp_module_load_options_t options{};
  options.struct_size = sizeof(options);
  options.flags = shared_.options.allow_native_modules ? BP_MODULE_LOAD_ALLOW_NATIVE : 0u;
  bp_object_t* module = nullptr;
  const bp_status_t status =
      bp_module_load_with_options(done.bytes.data(), done.bytes.size(), &options, &module);
  if (status != BP_OK) {
    const std::string message = LastError();
    if (!shared_.options.allow_native_modules && status == BP_ERR_INVALID_ARGUMENT &&
        message.find("carries native code") != std::string::npos) {
      Fail(status,
           "loading a module of " + std::to_string(done.bytes.size()) +
               " bytes: it carries native code (a library that would run inside the server "
               "process, with its rights), and this server does not load native code. Its "
               "operator can start it with `backplane serve --allow-native-modules` to load "
               "modules from clients it trusts (docs/security.md); or build the module for a "
               "Target without native code");
    }
    Fail(status, "loading a module of " + std::to_string(done.bytes.size()) + " bytes: " + message);
  }
  ModuleEntry entry{ObjectRef::Adopt(module), {}};
  bp_object_t* names = nullptr;
  Must(bp_module_list_functions(module, &names), "listing the functions of a loaded module");
  entry.functions = GetStringArray(ObjectRef::Adopt(names).get());
  for (const std::string& f : entry.functions) reply->add_names(f);
  const uint64_t handle = next_module_++;
  modules_.emplace(handle, std::move(entry));
  shared_.totals.modules++;
  reply->set_handle(handle);
  return Answer::kUsual;
}

void ClientSession::Call(const pb::Call& c, pb::Reply* reply) {
  std::string what = "calling " + c.function();
  ObjectRef func;
  if (c.module() != 0) {
    auto it = modules_.find(c.module());
    what += " of module " + std::to_string(c.module());
    if (it == modules_.end()) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           what + ": no module " + std::to_string(c.module()) + " in this session");
    }
    bp_object_t* f = nullptr;
    if (bp_module_get_function(it->second.module.get(), c.function().c_str(), 1, &f) != BP_OK) {
      Fail(BP_ERR_NOT_FOUND, what + ": the module has no function '" + c.function() +
                                 "'; its functions are: " + Join(it->second.functions));
    }
    func = ObjectRef::Adopt(f);
  } else {
    const std::vector<std::string>& expose = shared_.options.expose;
    if (std::find(expose.begin(), expose.end(), c.function()) == expose.end()) {
      Fail(BP_ERR_NOT_FOUND, what + ": this server does not expose the registered function '" +
                                 c.function() + "' (it exposes: " + Join(expose) +
                                 "); its operator can with `backplane serve --expose " +
                                 c.function() + "`");
    }
    bp_object_t* f = nullptr;
    Must(bp_registry_get(c.function().c_str(), &f), what);
    func = ObjectRef::Adopt(f);
  }
  // The arguments; tensors, strings and bytes live until the call returns.
  const int n = c.args_size();
  std::vector<bp_value_t> args(static_cast<size_t>(n));
  std::vector<ObjectRef> objects;
  std::deque<DLTensor> tensors;
  std::deque<std::vector<int64_t>> dims;
  for (int i = 0; i < n; ++i) {
    const pb::Arg& a = c.args(i);
    bp_value_t& v = args[static_cast<size_t>(i)];
    v.reserved0 = 0;
    const std::string at = what + ": argument " + std::to_string(i);
    switch (a.kind_case()) {
      case pb::Arg::kNone:
        v.type = BP_VALUE_NONE;
        v.u.v_int64 = 0;
        break;
      case pb::Arg::kI:
        v.type = BP_VALUE_INT;
        v.u.v_int64 = a.i();
        break;
      case pb::Arg::kF:
        v.type = BP_VALUE_FLOAT;
        v.u.v_float64 = a.f();
        break;
      case pb::Arg::kS: {
        bp_object_t* s = nullptr;
        Must(bp_string_create(a.s().data(), a.s().size(), &s), at);
        objects.push_back(ObjectRef::Adopt(s));
        v.type = BP_VALUE_OBJECT;
        v.u.v_obj = s;
        break;
      }
      case pb::Arg::kB: {
        bp_object_t* b = nullptr;
        Must(bp_bytes_create(a.b().data(), a.b().size(), &b), at);
        objects.push_back(ObjectRef::Adopt(b));
        v.type = BP_VALUE_OBJECT;
        v.u.v_obj = b;
        break;
      }
      case pb::Arg::kDevice:
        v.type = BP_VALUE_DEVICE;
        v.u.v_device = Dev(a.device()).dev;
        used_devices_.insert(a.device());
        break;
      case pb::Arg::kDtype:
        v.type = BP_VALUE_DTYPE;
        v.u.v_dtype = ToDL(a.dtype(), at);
        break;
      case pb::Arg::kTensor: {
        const pb::TensorArg& t = a.tensor();
        const Buffer& b = Buf(t.buffer());
        if (t.device() != b.device) {
          Fail(BP_ERR_INVALID_ARGUMENT, at + ": buffer " + std::to_string(t.buffer()) + " is on " +
                                            Dev(b.device).label + ", not on device " +
                                            std::to_string(t.device()));
        }
        const int ndim = t.shape_size();
        if (ndim > kMaxTensorDims) {
          Fail(BP_ERR_INVALID_ARGUMENT, at + ": " + std::to_string(ndim) + " dimensions; at most " +
                                            std::to_string(kMaxTensorDims));
        }
        if (t.strides_size() != 0 && t.strides_size() != ndim) {
          Fail(BP_ERR_INVALID_ARGUMENT, at + ": " + std::to_string(t.strides_size()) +
                                            " strides for " + std::to_string(ndim) + " dimensions");
        }
        const DLDataType dtype = ToDL(t.dtype(), at);
        // The highest byte the view touches must be in the buffer.
        const std::string size = at + ": the tensor's extent";
        const uint64_t element = (uint64_t{dtype.bits} * dtype.lanes + 7) / 8;
        bool empty = false;
        uint64_t last = 0;     // the offset, in elements, of the last element
        uint64_t compact = 1;  // the compact stride of the dimension being read
        for (int k = ndim - 1; k >= 0; --k) {
          const int64_t extent = t.shape(k);
          const int64_t stride = t.strides_size() != 0 ? t.strides(k) : 0;
          if (extent < 0 || stride < 0) {
            Fail(BP_ERR_INVALID_ARGUMENT, at + ": dimension " + std::to_string(k) + " has " +
                                              (extent < 0 ? "extent " + std::to_string(extent)
                                                          : "stride " + std::to_string(stride)) +
                                              "; remote tensors need extents and strides >= 0");
          }
          if (extent == 0) empty = true;
          const uint64_t s = t.strides_size() != 0 ? static_cast<uint64_t>(stride) : compact;
          if (!empty && extent > 0) {
            last = CheckedAdd(last, CheckedMul(static_cast<uint64_t>(extent - 1), s, size), size);
          }
          if (t.strides_size() == 0 && extent > 0) {
            compact = CheckedMul(compact, static_cast<uint64_t>(extent), size);
          }
        }
        const uint64_t end =
            empty ? t.byte_offset()
                  : CheckedAdd(t.byte_offset(),
                               CheckedMul(CheckedAdd(last, 1, size), element, size), size);
        if (end > b.nbytes) {
          Fail(BP_ERR_INVALID_ARGUMENT, at + ": the view of buffer " + std::to_string(t.buffer()) +
                                            " reaches byte " + std::to_string(end) +
                                            " but the buffer holds " + std::to_string(b.nbytes));
        }
        dims.emplace_back(t.shape().begin(), t.shape().end());
        int64_t* shape = dims.back().data();
        int64_t* strides = nullptr;
        if (t.strides_size() != 0) {
          dims.emplace_back(t.strides().begin(), t.strides().end());
          strides = dims.back().data();
        }
        DLTensor& dl = tensors.emplace_back();
        dl.data = b.data;
        dl.device = Dev(b.device).dev;
        dl.ndim = ndim;
        dl.dtype = dtype;
        dl.shape = shape;
        dl.strides = strides;
        dl.byte_offset = t.byte_offset();
        v.type = BP_VALUE_TENSOR;
        v.u.v_tensor = &dl;
        used_devices_.insert(b.device);
        break;
      }
      case pb::Arg::KIND_NOT_SET:
        Fail(BP_ERR_INVALID_ARGUMENT, at + " has no value (a newer client?)");
    }
  }
  // The streams the call runs on; each device's null stream is set back afterwards, whatever
  // happens.
  struct Restore {
    std::vector<DLDevice> devices;
    ~Restore() {
      for (const DLDevice& d : devices) bp_device_stream_set(d, nullptr);
    }
  } restore;
  for (const pb::ActiveStream& a : c.streams()) {
    const ExportedDevice& d = Dev(a.device());
    const std::string at =
        what + ": making stream " + std::to_string(a.stream()) + " active on " + d.label;
    bp_stream_t s = StreamOf(a.stream(), a.device(), at);
    restore.devices.push_back(d.dev);
    Must(bp_device_stream_set(d.dev, s), at);
  }
  OwnedValue result;
  Must(bp_function_call(func.get(), args.data(), n, &result.v), what);
  ToValue(result.v, reply->mutable_value(), what);
}

// Frees everything the session holds; the session's streams and each device's null stream are
// synchronized first, so no work still uses what is freed.
void ClientSession::Close() noexcept {
  try {
    size_t nbuffers = buffers_.size(), nstreams = streams_.size(), nmodules = modules_.size();
    uint64_t bytes = 0;
    auto note = [&](bp_status_t status, const std::string& what) {
      if (status != BP_OK) {
        shared_.log.Line("session " + std::to_string(number_) + ": " + what + ": " + LastError());
      }
    };
    for (const auto& [handle, s] : streams_) {
      note(bp_device_stream_sync(Dev(s.device).dev, s.stream),
           "synchronizing stream " + std::to_string(handle));
    }
    for (uint32_t d : used_devices_) {
      note(bp_device_stream_sync(Dev(d).dev, nullptr),
           "synchronizing the null stream of " + Dev(d).label);
    }
    for (const auto& [handle, s] : streams_) {
      note(bp_device_stream_free(Dev(s.device).dev, s.stream),
           "freeing stream " + std::to_string(handle));
      shared_.totals.streams--;
    }
    streams_.clear();
    for (const auto& [handle, b] : buffers_) {
      const DLDevice dev = Dev(b.device).dev;
      note(b.workspace ? bp_device_free_workspace(dev, b.data)
                       : bp_device_free_data_space(dev, b.data),
           "freeing buffer " + std::to_string(handle));
      bytes += b.nbytes;
      shared_.totals.buffers--;
      shared_.totals.bytes -= b.nbytes;
    }
    buffers_.clear();
    shared_.totals.modules -= modules_.size();
    modules_.clear();
    uploads_.clear();
    if (!client_.empty() || nbuffers + nstreams + nmodules != 0) {
      shared_.log.Line("session " + std::to_string(number_) + " (" + peer_ + ") ended: freed " +
                       std::to_string(nbuffers) + " buffers (" + std::to_string(bytes) +
                       " bytes), " + std::to_string(nstreams) + " streams, " +
                       std::to_string(nmodules) + " modules");
    }
  } catch (const std::exception& e) {
    shared_.log.Line("session " + std::to_string(number_) + ": cleaning up: " + e.what());
  }
}

// ---- the service ------------------------------------------------------------------------

class Service final : public pb::Remote::Service {
 public:
  explicit Service(Shared& shared) : shared_(shared) {}

  grpc::Status Session(grpc::ServerContext* context, Stream* stream) override {
    grpc::Status auth = Authenticate(context);
    if (!auth.ok()) return auth;
    const int max = shared_.options.max_sessions;
    if (shared_.live_sessions.fetch_add(1) >= max) {
      shared_.live_sessions--;
      shared_.log.Line("refused a session from " + context->peer() + ": " + std::to_string(max) +
                       " sessions are open (--max-sessions)");
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "the server has " + std::to_string(max) +
                              " sessions open, its limit (backplane serve --max-sessions " +
                              std::to_string(max) + "); try again later");
    }
    shared_.totals.sessions++;
    {
      ClientSession session(shared_, shared_.next_session++, context->peer());
      session.Run(stream);
    }  // everything it held is freed here
    shared_.totals.sessions--;
    shared_.live_sessions--;
    return grpc::Status::OK;
  }

  grpc::Status Describe(grpc::ServerContext* context, const pb::DescribeRequest*,
                        pb::ServerInfo* info) override {
    grpc::Status auth = Authenticate(context);
    if (!auth.ok()) return auth;
    *info = shared_.info;
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext* context, const pb::StatusRequest*,
                      pb::ServerStatus* status) override {
    grpc::Status auth = Authenticate(context);
    if (!auth.ok()) return auth;
    status->set_sessions(shared_.totals.sessions.load());
    status->set_buffers(shared_.totals.buffers.load());
    status->set_bytes(shared_.totals.bytes.load());
    status->set_streams(shared_.totals.streams.load());
    status->set_modules(shared_.totals.modules.load());
    return grpc::Status::OK;
  }

 private:
  // With --token-file, every RPC must carry "authorization: Bearer <token>".
  grpc::Status Authenticate(grpc::ServerContext* context) {
    if (shared_.token.empty()) return grpc::Status::OK;
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(kTokenMetadata);
    if (it == metadata.end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this server needs a token: send the metadata '" +
                              std::string(kTokenMetadata) +
                              ": Bearer <token>' (docs/remote.md, docs/security.md)");
    }
    const std::string value(it->second.data(), it->second.size());
    const std::string prefix = "Bearer ";
    if (value.compare(0, prefix.size(), prefix) != 0 ||
        !SameSecret(value.substr(prefix.size()), shared_.token)) {
      shared_.log.Line("refused " + context->peer() + ": wrong token");
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "the token is not this server's (docs/security.md)");
    }
    return grpc::Status::OK;
  }

  Shared& shared_;
};

// ---- starting -----------------------------------------------------------------------------

// The devices to serve, in the order of their type ids and then ids; "remote" devices never
// (a server re-exporting remote devices could loop back to itself). The types are walked here,
// not with bp_device_list, so the remote plugin's DeviceAPI is never asked anything.
std::vector<ExportedDevice> FindDevices(const std::vector<std::string>& wanted) {
  Must(bp_plugins_load_all(), "loading the plugins");
  size_t count = 0;
  Must(bp_device_type_list(nullptr, 0, &count), "listing device types");
  std::vector<int32_t> types(count);
  Must(bp_device_type_list(types.data(), types.size(), &count), "listing device types");
  types.resize(std::min(count, types.size()));
  std::sort(types.begin(), types.end());
  std::vector<ExportedDevice> out;
  std::set<std::string> with_devices;
  for (int32_t type : types) {
    const char* name = nullptr;
    if (bp_device_type_name(type, &name) != BP_OK || name == nullptr) continue;
    const std::string type_name = name;
    if (type_name == "remote") continue;
    const bp_device_api_t* api = nullptr;
    if (bp_device_api_get(type, &api) != BP_OK) continue;
    for (int32_t id = 0; id < kMaxDevicesPerType; ++id) {
      const DLDevice dev{static_cast<DLDeviceType>(type), id};
      OwnedValue exists;
      if (bp_device_get_attr(dev, BP_ATTR_EXIST, &exists.v) != BP_OK) break;
      if (exists.v.type != BP_VALUE_INT || exists.v.u.v_int64 == 0) break;
      with_devices.insert(type_name);
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), type_name) == wanted.end()) {
        continue;
      }
      out.push_back(ExportedDevice{dev, type_name + ":" + std::to_string(id)});
    }
  }
  bp_error_clear();
  for (const std::string& w : wanted) {
    if (w == "remote") {
      throw std::invalid_argument(
          "--devices remote: a server never serves remote devices (they could lead back to "
          "itself); name the types of this machine's devices");
    }
    if (with_devices.count(w) == 0) {
      throw std::invalid_argument(
          "--devices " + w + ": this machine has no devices of type '" + w +
          "'; the types with devices here are: " +
          Join(std::vector<std::string>(with_devices.begin(), with_devices.end())));
    }
  }
  return out;
}

pb::DeviceInfo Describe(const ExportedDevice& d) {
  pb::DeviceInfo info;
  const char* type = nullptr;
  bp_device_type_name(d.dev.device_type, &type);
  info.set_type(type != nullptr ? type : "");
  info.set_id(d.dev.device_id);
  OwnedValue name;
  if (bp_device_get_attr(d.dev, BP_ATTR_DEVICE_NAME, &name.v) == BP_OK &&
      name.v.type == BP_VALUE_OBJECT) {
    int32_t t = 0;
    if (bp_object_type(name.v.u.v_obj, &t) == BP_OK && t == BP_OBJECT_STRING) {
      info.set_name(GetString(name.v.u.v_obj));
    }
  }
  bp_object_t* target = nullptr;
  if (bp_target_from_device(d.dev, nullptr, &target) == BP_OK) {
    ObjectRef ref = ObjectRef::Adopt(target);
    const char* kind = nullptr;
    if (bp_target_kind(target, &kind) == BP_OK && kind != nullptr) info.set_target_kind(kind);
  }
  bp_error_clear();
  return info;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// The token without the line end a file usually has; it must be text a header can carry.
std::string ReadToken(const std::string& path) {
  std::string token = ReadSecretFile(path, "--token-file");
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                            token.back() == '\t')) {
    token.pop_back();
  }
  if (token.empty()) throw std::invalid_argument("--token-file '" + path + "' holds only spaces");
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      throw std::invalid_argument("--token-file '" + path +
                                  "': the token must be one line of printable ASCII without "
                                  "spaces (e.g. `openssl rand -hex 32`)");
    }
  }
  return token;
}

void WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << '\n';
    out.close();
    if (!out) throw std::runtime_error("--port-file: cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error("--port-file: cannot rename '" + tmp + "' to '" + path + "': " + why);
  }
}

// Blocks SIGINT and SIGTERM in this thread (and so in every thread it starts) for its life;
// a thread of the server takes them with sigwait.
class BlockStopSignals {
 public:
  BlockStopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~BlockStopSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  BlockStopSignals(const BlockStopSignals&) = delete;
  BlockStopSignals& operator=(const BlockStopSignals&) = delete;
  const sigset_t& set() const { return set_; }

 private:
  sigset_t set_{};
  sigset_t old_{};
};

}  // namespace

int Serve(const ServerOptions& options, std::ostream& log_out) {
  // From here on, SIGINT and SIGTERM wait for the thread that stops the server, in every
  // thread: gRPC (from its first call) and plugins start theirs after this.
  BlockStopSignals signals;

  // The options first: nothing starts when they cannot work.
  const Address address = ParseAddress(options.listen, /*allow_port_zero=*/true);
  const bool tls = !options.tls_cert.empty() || !options.tls_key.empty();
  if (tls && (options.tls_cert.empty() || options.tls_key.empty())) {
    throw std::invalid_argument(
        "TLS needs both --tls-cert (the server's certificate chain, PEM) and --tls-key (its "
        "private key, PEM); docs/security.md");
  }
  if (!options.client_ca.empty() && !tls) {
    throw std::invalid_argument(
        "--client-ca checks client certificates, which needs TLS: pass --tls-cert and --tls-key "
        "too; docs/security.md");
  }
  if (!IsLoopback(address.host) &&
      (!tls || (options.client_ca.empty() && options.token_file.empty()))) {
    throw std::invalid_argument(
        "--listen " + options.listen +
        " is reachable from other machines, and a server there must use TLS and authenticate "
        "its clients: pass --tls-cert and --tls-key, and --client-ca (clients present "
        "certificates it signed) or --token-file (clients send a bearer token), or both; or "
        "listen on 127.0.0.1 (docs/security.md, \"Remote devices\")");
  }
  if (options.max_sessions < 1 || options.max_sessions > 100000) {
    throw std::invalid_argument("--max-sessions " + std::to_string(options.max_sessions) +
                                " is out of range 1..100000");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::string mode;
  if (tls) {
    const bool mtls = !options.client_ca.empty();
    grpc::SslServerCredentialsOptions ssl(
        mtls ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    ssl.pem_key_cert_pairs.push_back({ReadSecretFile(options.tls_key, "--tls-key"),
                                      ReadSecretFile(options.tls_cert, "--tls-cert")});
    if (mtls) ssl.pem_root_certs = ReadSecretFile(options.client_ca, "--client-ca");
    credentials = grpc::SslServerCredentials(ssl);
    mode = mtls ? "TLS+mTLS" : "TLS";
  } else {
    credentials = grpc::InsecureServerCredentials();
    mode = "plaintext loopback";
  }
  Shared shared(options, log_out);
  if (!options.token_file.empty()) {
    shared.token = ReadToken(options.token_file);
    mode += "+token";
  }

  shared.devices = FindDevices(options.device_types);
  shared.info.set_protocol(pb::PROTOCOL_VERSION);
  shared.info.set_version(kVersion);
  shared.info.set_host(HostName());
  shared.info.set_allows_native_modules(options.allow_native_modules);
  for (const std::string& name : options.expose) {
    bp_object_t* f = nullptr;
    if (bp_registry_get(name.c_str(), &f) != BP_OK) {
      bp_error_clear();
      throw std::invalid_argument("--expose " + name + ": no registered function has that name " +
                                  "here (`backplane info` lists them)");
    }
    bp_object_release(f);
    shared.info.add_functions(name);
  }
  for (size_t i = 0; i < shared.devices.size(); ++i) {
    *shared.info.add_devices() = Describe(shared.devices[i]);
    const pb::DeviceInfo& d = shared.info.devices(static_cast<int>(i));
    shared.log.Line("device " + std::to_string(i) + ": " + shared.devices[i].label + " (" +
                    (d.name().empty() ? "no name" : d.name()) + ", target " +
                    (d.target_kind().empty() ? "none" : d.target_kind()) + ")");
  }

  Service service(shared);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address.Target(), credentials, &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // A port another server holds is an error, not a port to share (SO_REUSEPORT).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A client that vanishes without closing its connection is noticed within ~15 s, and its
  // session ends.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  // A thread per session, and some for Describe, Status, refusals and gRPC's pollers.
  grpc::ResourceQuota quota("backplane-serve");
  quota.SetMaxThreads(options.max_sessions + 16);
  builder.SetResourceQuota(quota);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    if (server != nullptr) server->Shutdown();
    throw std::runtime_error("cannot listen on " + address.Target() +
                             ": the port is taken, the address is not this machine's, or the TLS "
                             "certificate and key are not a valid pair (gRPC's message above says "
                             "which)");
  }
  const std::string where =
      address.port == 0 ? Address{address.host, port}.Target() : address.Target();
  if (!options.port_file.empty()) {
    try {
      WritePortFile(options.port_file, port);
    } catch (...) {
      server->Shutdown();
      throw;
    }
  }
  shared.log.Line("listening on " + where + " (" + mode + "); " +
                  std::to_string(shared.devices.size()) + " devices; native modules " +
                  (options.allow_native_modules ? "allowed" : "refused") + "; exposes " +
                  Join(options.expose) + "; at most " + std::to_string(options.max_sessions) +
                  " sessions");

  std::thread stopper([&] {
    int sig = 0;
    while (sigwait(&signals.set(), &sig) != 0) {
    }
    shared.log.Line(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                    ": stopping (sessions end and everything they hold is freed)");
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  });
  server->Wait();
  stopper.join();
  shared.log.Line("stopped");
  return 0;
}

}  // namespace backplane::remote
