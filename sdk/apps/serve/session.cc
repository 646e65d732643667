// SPDX-License-Identifier: Apache-2.0
// A session of the remote device server (session.hpp): the command loop, handles, buffers,
// transfers, streams, and the cleanup when the session ends. Every index, handle, offset and
// size a client sends is checked here before a device sees it.
#include "session.hpp"

#include <backplane/c_api.h>
#include <malloc.h>

#include <algorithm>
#include <backplane/backplane.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "backplane/remote/common.hpp"

namespace backplane {
namespace remote {

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

std::string LogSafe(const std::string& text, size_t max) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t n = std::min(text.size(), max);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c <= 0x7e) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > max) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

namespace {

// offset + length <= size, without overflow.
bool InBounds(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// A 1-D uint8 view of shape[0] bytes at data + byte_offset on `dev`.
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

// Every chunk of a transfer is a block of about kChunkBytes that gRPC and protobuf allocate and
// free (a Write's data, the buffers a message is read into and serialized to). By default glibc
// hands such a block back to the system once it is freed (past its dynamic mmap and trim
// thresholds), and the next chunk faults a megabyte of zeroed pages in again: about 180 page
// faults a chunk, a fifth of a bulk copy's time on loopback. This server keeps blocks up to a
// whole message in its heap and gives free memory back past 4 messages' worth.
void KeepChunksInHeap() {
#ifdef __GLIBC__
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, kMaxMessageBytes);
    mallopt(M_TRIM_THRESHOLD, 4 * kMaxMessageBytes);
  });
#endif
}

}  // namespace

void ClientSession::Send(const pb::Reply& reply) {
  if (!closed_ && !stream_->Write(reply)) closed_ = true;
}

void ClientSession::Run(Stream* stream, const std::function<void()>& on_first) {
  KeepChunksInHeap();
  stream_ = stream;
  pb::Command cmd;
  const bool first = stream->Read(&cmd);
  on_first();
  if (!first) return;
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
    hello.set_message("this server (Backplane " + std::string(kServerVersion) +
                      ") speaks protocol " + std::to_string(pb::PROTOCOL_VERSION) +
                      " and the client protocol " + std::to_string(cmd.hello().protocol()) +
                      ": use a client and a server of the same protocol (upgrade the older one)");
    Send(hello);
    shared_.log.Line("session " + std::to_string(number_) + " (" + peer_ +
                     ") refused: client protocol " + std::to_string(cmd.hello().protocol()));
    return;
  }
  client_ = cmd.hello().client();
  started_ = true;
  // Hello is always answered: the client learns the devices from it.
  *hello.mutable_info() = shared_.info;
  Send(hello);
  shared_.log.Line("session " + std::to_string(number_) + " (" + peer_ +
                   (client_.empty() ? "" : ", " + LogSafe(client_)) + ") started");
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
                               std::to_string(pb::PROTOCOL_VERSION) + ", Backplane " +
                               kServerVersion + "); is the client newer?");
}

const ExportedDevice& ClientSession::Dev(uint32_t index) const {
  if (index >= shared_.devices.size()) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "device " + std::to_string(index) + " does not exist on this server: it serves " +
             std::to_string(shared_.devices.size()) + " devices" +
             (shared_.devices.empty()
                  ? std::string()
                  : " (indices 0.." + std::to_string(shared_.devices.size() - 1) + ")"));
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

namespace {

// Host bytes that are always zero, the source of the copies that scrub device memory: calloc's
// fresh pages, which reading never dirties.
constexpr uint64_t kZeroBytes = uint64_t{8} << 20;
const char* Zeros() {
  static const char* zeros = static_cast<const char*>(std::calloc(kZeroBytes, 1));
  return zeros;
}

}  // namespace

void ClientSession::Scrub(const Buffer& b, uint64_t from, uint64_t to, const std::string& what) {
  if (from >= to) return;
  const ExportedDevice& d = Dev(b.device);
  if (d.dev.device_type == kDLCPU) {
    // Host memory (DLPack's kDLCPU): cleared in place.
    std::memset(static_cast<char*>(b.data) + from, 0, to - from);
    return;
  }
  const char* zeros = Zeros();
  if (zeros == nullptr) throw std::bad_alloc();
  const std::string doing = what + ": zeroing bytes " + std::to_string(from) + " to " +
                            std::to_string(to) +
                            " of the buffer first (memory another session "
                            "may have used is never shown)";
  for (uint64_t done = from; done < to;) {
    const uint64_t n = std::min(kZeroBytes, to - done);
    int64_t shape[1] = {static_cast<int64_t>(n)};
    DLTensor src = ByteView(const_cast<char*>(zeros), 0, DLDevice{kDLCPU, 0}, shape);
    DLTensor dst = ByteView(b.data, done, d.dev, shape);
    Must(bp_device_copy_data_from_to(&src, &dst, nullptr), doing);
    done += n;
  }
  // Whatever stream reads the bytes next sees zeros.
  Must(bp_device_stream_sync(d.dev, nullptr), doing);
}

void ClientSession::BeforeRead(Buffer& b, uint64_t offset, uint64_t length,
                               const std::string& what) {
  if (offset + length <= b.clean) return;  // InBounds was checked: no overflow
  Scrub(b, b.clean, b.nbytes, what);
  b.clean = b.nbytes;
}

void ClientSession::BeforeWrite(Buffer& b, uint64_t offset, const std::string& what) {
  if (offset <= b.clean) return;
  Scrub(b, b.clean, offset, what);
  b.clean = offset;
}

void ClientSession::AfterWrite(Buffer& b, uint64_t offset, uint64_t length) {
  if (offset <= b.clean) b.clean = std::max(b.clean, offset + length);
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
      Buffer& b = Buf(w.buffer());
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
        BeforeWrite(b, w.offset(), what);
        int64_t shape[1] = {static_cast<int64_t>(len)};
        DLTensor from = ByteView(const_cast<char*>(w.data().data()), 0, DLDevice{kDLCPU, 0}, shape);
        DLTensor to = ByteView(b.data, w.offset(), d.dev, shape);
        Must(bp_device_copy_data_from_to(&from, &to, s), what);
        AfterWrite(b, w.offset(), len);
      }
    } catch (const Error& e) {
      if (failed_writes_.size() >= kMaxFailedTransfers && !w.last()) {
        // Too many failed transfers whose last chunk has not come: this failure is answered
        // now, on this chunk, rather than kept (and never forgotten, so it is never lost).
        reply->set_code(e.kind());
        reply->set_message(e.what());
        return Answer::kUsual;
      }
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
  Buffer& b = Buf(r.buffer());
  const ExportedDevice& d = Dev(b.device);
  const std::string what = "reading " + std::to_string(r.nbytes()) + " bytes of buffer " +
                           std::to_string(r.buffer()) + " on " + d.label + " at offset " +
                           std::to_string(r.offset());
  if (!InBounds(r.offset(), r.nbytes(), b.nbytes)) {
    Fail(BP_ERR_INVALID_ARGUMENT, what + ": the buffer holds " + std::to_string(b.nbytes) +
                                      " bytes, so this would read past its end");
  }
  bp_stream_t s = StreamOf(r.stream(), b.device, what);
  BeforeRead(b, r.offset(), r.nbytes(), what);
  const uint64_t chunk =
      r.chunk_bytes() == 0 ? kChunkBytes : std::min<uint64_t>(r.chunk_bytes(), kChunkBytes);
  // One reply for every chunk: its data keeps its capacity and is not cleared again (the device
  // overwrites it), so a read allocates and zeroes one chunk, not one per chunk.
  pb::Reply reply;
  reply.set_id(cmd.id());
  std::string* data = reply.mutable_data();
  uint64_t done = 0;
  do {
    const uint64_t n = std::min(chunk, r.nbytes() - done);
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
  Buffer& from = Buf(c.from_buffer());
  Buffer& to = Buf(c.to_buffer());
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
  if (c.from_buffer() == c.to_buffer() && c.from_offset() < c.to_offset() + c.nbytes() &&
      c.to_offset() < c.from_offset() + c.nbytes()) {
    Fail(BP_ERR_INVALID_ARGUMENT, what + ": the two ranges overlap; copy through another buffer");
  }
  BeforeRead(from, c.from_offset(), c.nbytes(), what);
  BeforeWrite(to, c.to_offset(), what);
  if (fd.dev.device_type == td.dev.device_type) {
    // One DeviceAPI copies; its stream is the destination's (the source's when that is the CPU).
    const uint32_t owner = td.dev.device_type == kDLCPU ? from.device : to.device;
    bp_stream_t s = StreamOf(c.stream(), owner, what);
    int64_t shape[1] = {static_cast<int64_t>(c.nbytes())};
    DLTensor src = ByteView(from.data, c.from_offset(), fd.dev, shape);
    DLTensor dst = ByteView(to.data, c.to_offset(), td.dev, shape);
    Must(bp_device_copy_data_from_to(&src, &dst, s), what);
    AfterWrite(to, c.to_offset(), c.nbytes());
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
    AfterWrite(to, c.to_offset(), done);
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
    if (started_) {
      shared_.log.Line("session " + std::to_string(number_) + " (" + peer_ + ") ended: freed " +
                       std::to_string(nbuffers) + " buffers (" + std::to_string(bytes) +
                       " bytes), " + std::to_string(nstreams) + " streams, " +
                       std::to_string(nmodules) + " modules");
    }
  } catch (const std::exception& e) {
    shared_.log.Line("session " + std::to_string(number_) + ": cleaning up: " + e.what());
  }
}

}  // namespace remote
}  // namespace backplane
