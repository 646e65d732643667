// SPDX-License-Identifier: Apache-2.0
#include "device_api.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace backplane {
namespace remote {

namespace {

thread_local std::unordered_map<int32_t, bp_stream_t> t_active_streams;

// A command's deadline for moving `nbytes`: the default plus the time at 10 MB/s.
int64_t TransferTimeoutMs(const RemoteServer& server, uint64_t nbytes) {
  return server.options().timeout_ms + static_cast<int64_t>(nbytes / 10000);
}

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

}  // namespace

Any FromValue(const v1::Value& v) {
  switch (v.kind_case()) {
    case v1::Value::kI:
      return sdk::IntValue(v.i());
    case v1::Value::kF:
      return sdk::FloatValue(v.f());
    case v1::Value::kS:
      return sdk::StringValue(v.s());
    case v1::Value::kB: {
      bp_object_t* obj = nullptr;
      Check(::backplane::detail::Api()->bytes_create(v.b().data(), v.b().size(), &obj));
      bp_value_t out = ::backplane::detail::ArgValue(BP_VALUE_OBJECT);
      out.u.v_obj = obj;
      return Any(out);
    }
    case v1::Value::kStrings:
      return sdk::StringArrayValue({v.strings().items().begin(), v.strings().items().end()});
    case v1::Value::kInts:
      return sdk::IntArrayValue({v.ints().items().begin(), v.ints().items().end()});
    case v1::Value::kDtype: {
      bp_value_t out = ::backplane::detail::ArgValue(BP_VALUE_DTYPE);
      out.u.v_dtype =
          DLDataType{static_cast<uint8_t>(v.dtype().code()), static_cast<uint8_t>(v.dtype().bits()),
                     static_cast<uint16_t>(v.dtype().lanes())};
      return Any(out);
    }
    default:
      return sdk::NoneValue();
  }
}

void SetDataType(v1::DataType* out, DLDataType t) {
  out->set_code(t.code);
  out->set_bits(t.bits);
  out->set_lanes(t.lanes);
}

RemoteDeviceAPI* RemoteDeviceAPI::Global() {
  static RemoteDeviceAPI* api = new RemoteDeviceAPI();
  return api;
}

RemoteDeviceAPI::RemoteDeviceAPI() : sdk::DeviceAPI(Entries{}) {}

DeviceRef RemoteDeviceAPI::Device(DLDevice dev) const { return Fleet::Get().Device(dev.device_id); }

Any RemoteDeviceAPI::GetAttr(DLDevice dev, bp_device_attr_kind_t kind) {
  if (kind == BP_ATTR_EXIST) {
    Fleet::Get().Count();  // lists servers that came up since
    return sdk::IntValue(Fleet::Get().Exists(dev.device_id) ? 1 : 0);
  }
  if (!Fleet::Get().Exists(dev.device_id)) return sdk::NoneValue();
  DeviceRef ref;
  try {
    ref = Device(dev);
  } catch (const Error& e) {
    if (e.kind() != BP_ERR_NOT_FOUND) throw;
    // Its server was detached: the id stays listed, and says so by its name.
    return kind == BP_ATTR_DEVICE_NAME ? sdk::StringValue("(detached) " + std::string(e.what()))
                                       : sdk::NoneValue();
  }
  // The name is the one the server gave in its Hello (it describes its devices once, when it
  // starts): listing devices costs no round trip, and names a silent server's devices too.
  if (kind == BP_ATTR_DEVICE_NAME && !ref.info.name().empty()) {
    return sdk::StringValue(ref.info.name());
  }
  std::shared_ptr<Session> s = ref.server->GetSession();
  v1::Command cmd;
  cmd.mutable_get_attr()->set_device(ref.index);
  cmd.mutable_get_attr()->set_kind(kind);
  const v1::Reply r = s->Request(
      cmd, std::string("attribute ") + ::backplane::detail::Api()->device_attr_name(kind) + " of " +
               Name(dev.device_id) + " (" + ref.RemoteName() + ")");
  return FromValue(r.value());
}

Any RemoteDeviceAPI::GetProperty(DLDevice dev, const std::string& key) {
  if (!Fleet::Get().Exists(dev.device_id)) return sdk::NoneValue();
  // Property keys are printable ASCII everywhere; the protocol carries UTF-8 only.
  for (const char c : key) {
    if (c < 0x20 || c > 0x7e) return sdk::NoneValue();
  }
  if (!Fleet::Get().Attached(dev.device_id)) return sdk::NoneValue();
  const DeviceRef ref = Device(dev);
  if (key == "server") return sdk::StringValue(ref.server->address());
  if (key == "remote_device") return sdk::StringValue(ref.RemoteName());
  if (key == "server_host") return sdk::StringValue(ref.server->Info().host());
  if (key == "server_native_modules")  // 1 when the server loads native code (its option)
    return sdk::IntValue(ref.server->Info().allows_native_modules() ? 1 : 0);
  std::shared_ptr<Session> s = ref.server->GetSession();
  v1::Command cmd;
  cmd.mutable_get_property()->set_device(ref.index);
  cmd.mutable_get_property()->set_key(key);
  const v1::Reply r = s->Request(cmd, "property '" + key + "' of " + Name(dev.device_id));
  return FromValue(r.value());
}

std::vector<std::string> RemoteDeviceAPI::ListProperties(DLDevice dev) {
  if (!Fleet::Get().Attached(dev.device_id)) return {};
  const DeviceRef ref = Device(dev);
  std::vector<std::string> keys{"server", "remote_device", "server_host", "server_native_modules"};
  std::shared_ptr<Session> s = ref.server->GetSession();
  v1::Command cmd;
  cmd.mutable_list_properties()->set_device(ref.index);
  const v1::Reply r = s->Request(cmd, "the properties of " + Name(dev.device_id));
  for (const std::string& k : r.names()) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  return keys;
}

void RemoteDeviceAPI::SetDevice(DLDevice dev) {
  Device(dev);  // exists, or NOT_FOUND naming those that do; nothing else is per thread
}

void* RemoteDeviceAPI::Alloc(DLDevice dev, size_t nbytes, size_t alignment, DLDataType type_hint,
                             bool workspace) {
  const DeviceRef ref = Device(dev);
  std::shared_ptr<Session> s = ref.server->GetSession();
  v1::Command cmd;
  v1::Alloc* a = cmd.mutable_alloc();
  a->set_device(ref.index);
  a->set_nbytes(nbytes);
  a->set_alignment(alignment);
  SetDataType(a->mutable_type_hint(), type_hint);
  a->set_workspace(workspace);
  const v1::Reply r =
      s->Request(cmd, std::string(workspace ? "workspace" : "alloc") + " of " + Bytes(nbytes) +
                          " on " + Name(dev.device_id) + " (" + ref.RemoteName() + ")");
  std::lock_guard<std::mutex> lock(mu_);
  const uintptr_t key = next_handle_;
  next_handle_ += 0x100;
  buffers_[key] =
      RemoteBuffer{ref.server, s->epoch(), r.handle(), nbytes, dev.device_id, ref.index, workspace};
  return reinterpret_cast<void*>(key);
}

void RemoteDeviceAPI::Free(DLDevice dev, void* ptr, bool workspace) {
  const char* what = workspace ? "workspace" : "data space";
  RemoteBuffer b;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = buffers_.find(reinterpret_cast<uintptr_t>(ptr));
    BACKPLANE_REQUIRE(it != buffers_.end(), BP_ERR_INVALID_ARGUMENT,
                      std::string("freeing ") + what + " " + sdk::PointerString(ptr) + " of " +
                          Name(dev.device_id) +
                          ": it is not a live allocation of the remote plugin (freed already, "
                          "or never allocated here)");
    BACKPLANE_REQUIRE(it->second.device == dev.device_id, BP_ERR_INVALID_ARGUMENT,
                      std::string("freeing ") + what + " " + sdk::PointerString(ptr) + " on " +
                          Name(dev.device_id) + ": it was allocated on " + Name(it->second.device) +
                          "; free it there");
    BACKPLANE_REQUIRE(it->second.workspace == workspace, BP_ERR_INVALID_ARGUMENT,
                      std::string("freeing ") + sdk::PointerString(ptr) + " as " + what +
                          ": it was allocated as " +
                          (workspace ? "data space (free_data_space)"
                                     : "workspace "
                                       "(free_workspace)"));
    b = it->second;
    buffers_.erase(it);
  }
  std::shared_ptr<Session> s = b.server->CurrentSession();
  if (!s || s->epoch() != b.epoch) return;  // its session ended and took it along
  v1::Command cmd;
  cmd.mutable_free()->set_buffer(b.handle);
  s->Post(cmd);
}

void* RemoteDeviceAPI::AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                                      DLDataType type_hint) {
  return Alloc(dev, nbytes, alignment, type_hint, false);
}

void RemoteDeviceAPI::FreeDataSpace(DLDevice dev, void* ptr) { Free(dev, ptr, false); }

void* RemoteDeviceAPI::AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType type_hint) {
  return Alloc(dev, nbytes, sdk::kDefaultWorkspaceAlignment, type_hint, true);
}

void RemoteDeviceAPI::FreeWorkspace(DLDevice dev, void* ptr) { Free(dev, ptr, true); }

RemoteBuffer RemoteDeviceAPI::Buffer(const void* data, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(reinterpret_cast<uintptr_t>(data));
  BACKPLANE_REQUIRE(it != buffers_.end(), BP_ERR_INVALID_ARGUMENT,
                    what + ": " + sdk::PointerString(data) +
                        " is not a live allocation of the remote plugin (freed, or never "
                        "allocated here)");
  return it->second;
}

std::shared_ptr<Session> RemoteDeviceAPI::SessionOf(const RemoteBuffer& b,
                                                    const std::string& what) {
  BACKPLANE_REQUIRE(Fleet::Get().IsAttached(b.server.get()), BP_ERR_NOT_FOUND,
                    what + ": the buffer was on " + b.server->label() +
                        ", which was detached; what it held there is gone");
  std::shared_ptr<Session> s = b.server->GetSession();
  if (s->epoch() != b.epoch) {
    throw Error(BP_ERR_DEVICE, what + ": the buffer on " + Name(b.device) +
                                   " was held by a "
                                   "session with " +
                                   b.server->label() +
                                   " that ended, and its contents went with it; free it and "
                                   "allocate it again");
  }
  return s;
}

uint64_t RemoteDeviceAPI::StreamHandle(bp_stream_t stream, int32_t device, const Session& session) {
  if (stream == nullptr) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(reinterpret_cast<uintptr_t>(stream));
  BACKPLANE_REQUIRE(it != streams_.end(), BP_ERR_INVALID_ARGUMENT,
                    "stream " + sdk::PointerString(stream) + " of " + Name(device) +
                        " is not a live stream (freed, or never created here); use one from "
                        "create_stream or the null stream");
  BACKPLANE_REQUIRE(it->second.device == device, BP_ERR_INVALID_ARGUMENT,
                    "stream " + sdk::PointerString(stream) + " belongs to " +
                        Name(it->second.device) + ", not " + Name(device));
  BACKPLANE_REQUIRE(it->second.epoch == session.epoch(), BP_ERR_DEVICE,
                    "stream " + sdk::PointerString(stream) + " of " + Name(device) +
                        " was held by a session with " + session.label() +
                        " that ended; free it and create another");
  return it->second.handle;
}

bp_stream_t RemoteDeviceAPI::ActiveStream(int32_t device) const {
  auto it = t_active_streams.find(device);
  return it == t_active_streams.end() ? nullptr : it->second;
}

void RemoteDeviceAPI::Write(const RemoteBuffer& to, uint64_t offset, const char* src, size_t nbytes,
                            bp_stream_t stream) {
  const std::string what = "copying " + Bytes(nbytes) + " to " + Name(to.device);
  std::shared_ptr<Session> s = SessionOf(to, what);
  const uint64_t remote_stream = StreamHandle(stream, to.device, *s);
  if (nbytes == 0) return;
  const uint64_t transfer = s->ReserveId();
  // One command for every chunk: its data keeps its capacity, so a transfer allocates one chunk
  // of host memory, not one a chunk (malloc gives a freed megabyte back to the system and faults
  // it in again on the next).
  v1::Command cmd;
  v1::Write* w = cmd.mutable_write();
  w->set_transfer(transfer);
  w->set_buffer(to.handle);
  w->set_stream(remote_stream);
  for (size_t done = 0; done < nbytes;) {
    const size_t n = std::min(kChunkBytes, nbytes - done);
    const bool last = done + n == nbytes;
    cmd.set_id(done == 0 ? transfer : 0);  // Send gives the others the next ids
    w->set_offset(offset + done);
    w->set_data(src + done, n);
    w->set_last(last);
    done += n;
    if (last) {
      s->Request(cmd, what, TransferTimeoutMs(*to.server, nbytes));
      s->ThrowDeferred();
    } else {
      s->Post(cmd);
    }
  }
}

void RemoteDeviceAPI::Read(const RemoteBuffer& from, uint64_t offset, char* dst, size_t nbytes,
                           bp_stream_t stream) {
  const std::string what = "copying " + Bytes(nbytes) + " from " + Name(from.device);
  std::shared_ptr<Session> s = SessionOf(from, what);
  v1::Command cmd;
  v1::Read* r = cmd.mutable_read();
  r->set_buffer(from.handle);
  r->set_offset(offset);
  r->set_nbytes(nbytes);
  r->set_stream(StreamHandle(stream, from.device, *s));
  r->set_chunk_bytes(kChunkBytes);
  size_t received = 0;
  bool overflow = false;
  s->Collect(
      cmd, what,
      [&](const v1::Reply& reply) {
        const std::string& d = reply.data();
        if (d.size() > nbytes - received) {
          overflow = true;
          return;
        }
        std::memcpy(dst + received, d.data(), d.size());
        received += d.size();
      },
      TransferTimeoutMs(*from.server, nbytes));
  s->ThrowDeferred();
  BACKPLANE_REQUIRE(!overflow && received == nbytes, BP_ERR_DEVICE,
                    from.server->label() + ": " + what + ": the server sent " +
                        (overflow ? "more than" : Bytes(received) + " of") + " the " +
                        Bytes(nbytes) + " asked for");
}

void RemoteDeviceAPI::CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) {
  const sdk::CopySides sides = sdk::CheckCopy(from, to, device_type());
  const size_t n = sides.nbytes;
  auto checked = [&](const DLTensor* t, const char* side) {
    const std::string what = std::string("copying ") + Bytes(n) +
                             (side[0] == 'f' ? " from " : " to ") + sdk::DeviceString(t->device);
    RemoteBuffer b = Buffer(t->data, what);
    BACKPLANE_REQUIRE(b.device == t->device.device_id, BP_ERR_INVALID_ARGUMENT,
                      what + ": the tensor's data is a buffer of " + Name(b.device));
    BACKPLANE_REQUIRE(t->byte_offset <= b.nbytes && n <= b.nbytes - t->byte_offset,
                      BP_ERR_INVALID_ARGUMENT,
                      what + ": bytes " + std::to_string(t->byte_offset) + " to " +
                          std::to_string(t->byte_offset + n) + " are past the end of its " +
                          Bytes(b.nbytes) + " buffer");
    return b;
  };
  auto host = [&](const DLTensor* t) {
    BACKPLANE_REQUIRE(t->device.device_type == kDLCPU, BP_ERR_INVALID_ARGUMENT,
                      "copying between " + sdk::DeviceString(from->device) + " and " +
                          sdk::DeviceString(to->device) +
                          ": the remote plugin copies to and from host (cpu) memory and remote "
                          "devices; copy through a cpu tensor");
    BACKPLANE_REQUIRE(n == 0 || t->data != nullptr, BP_ERR_INVALID_ARGUMENT,
                      "copying " + Bytes(n) + ": the host tensor's data is null");
    return static_cast<char*>(t->data) + t->byte_offset;
  };
  if (sides.from_device && sides.to_device) {
    const RemoteBuffer a = checked(from, "from"), b = checked(to, "to");
    if (n == 0) return;
    if (a.server == b.server) {
      const std::string what =
          "copying " + Bytes(n) + " from " + Name(a.device) + " to " + Name(b.device);
      std::shared_ptr<Session> s = SessionOf(a, what);
      SessionOf(b, what);
      v1::Command cmd;
      v1::Copy* c = cmd.mutable_copy();
      c->set_from_buffer(a.handle);
      c->set_from_offset(from->byte_offset);
      c->set_to_buffer(b.handle);
      c->set_to_offset(to->byte_offset);
      c->set_nbytes(n);
      c->set_stream(StreamHandle(stream, stream == nullptr ? a.device : StreamDevice(stream), *s));
      s->Request(cmd, what, TransferTimeoutMs(*a.server, n));
      s->ThrowDeferred();
      return;
    }
    // Two servers: through this host, in chunks.
    std::vector<char> staging(std::min(n, kChunkBytes * 16));
    for (size_t done = 0; done < n;) {
      const size_t k = std::min(staging.size(), n - done);
      Read(a, from->byte_offset + done, staging.data(), k, nullptr);
      Write(b, to->byte_offset + done, staging.data(), k, nullptr);
      done += k;
    }
    return;
  }
  if (sides.to_device) {
    const RemoteBuffer b = checked(to, "to");
    Write(b, to->byte_offset, host(from), n, stream);
  } else {
    const RemoteBuffer a = checked(from, "from");
    if (n == 0) return;
    Read(a, from->byte_offset, host(to), n, stream);
  }
}

int32_t RemoteDeviceAPI::StreamDevice(bp_stream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(reinterpret_cast<uintptr_t>(stream));
  return it == streams_.end() ? -1 : it->second.device;
}

bp_stream_t RemoteDeviceAPI::CreateStream(DLDevice dev) {
  const DeviceRef ref = Device(dev);
  std::shared_ptr<Session> s = ref.server->GetSession();
  v1::Command cmd;
  cmd.mutable_create_stream()->set_device(ref.index);
  const v1::Reply r = s->Request(cmd, "creating a stream on " + Name(dev.device_id));
  std::lock_guard<std::mutex> lock(mu_);
  const uintptr_t key = next_handle_;
  next_handle_ += 0x100;
  streams_[key] = RemoteStream{ref.server, s->epoch(), r.handle(), dev.device_id};
  return reinterpret_cast<bp_stream_t>(key);
}

void RemoteDeviceAPI::FreeStream(DLDevice dev, bp_stream_t stream) {
  BACKPLANE_REQUIRE(stream != nullptr, BP_ERR_INVALID_ARGUMENT,
                    "freeing the null stream of " + Name(dev.device_id) +
                        ": it is not created, so it needs no freeing");
  RemoteStream st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(reinterpret_cast<uintptr_t>(stream));
    BACKPLANE_REQUIRE(it != streams_.end(), BP_ERR_INVALID_ARGUMENT,
                      "freeing stream " + sdk::PointerString(stream) + " of " +
                          Name(dev.device_id) +
                          ": it is not a live stream (freed already, or never created here)");
    BACKPLANE_REQUIRE(it->second.device == dev.device_id, BP_ERR_INVALID_ARGUMENT,
                      "freeing stream " + sdk::PointerString(stream) + " on " +
                          Name(dev.device_id) + ": it belongs to " + Name(it->second.device));
    st = it->second;
    streams_.erase(it);
  }
  std::shared_ptr<Session> s = st.server->CurrentSession();
  if (!s || s->epoch() != st.epoch) return;
  v1::Command cmd;
  cmd.mutable_free_stream()->set_device(Fleet::Get().Device(st.device).index);
  cmd.mutable_free_stream()->set_stream(st.handle);
  s->Request(cmd, "freeing a stream of " + Name(dev.device_id));
}

void RemoteDeviceAPI::SetStream(DLDevice dev, bp_stream_t stream) {
  if (stream != nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(reinterpret_cast<uintptr_t>(stream));
    BACKPLANE_REQUIRE(it != streams_.end() && it->second.device == dev.device_id,
                      BP_ERR_INVALID_ARGUMENT,
                      "set_stream: " + sdk::PointerString(stream) + " is not a live stream of " +
                          Name(dev.device_id));
  }
  t_active_streams[dev.device_id] = stream;
}

void RemoteDeviceAPI::StreamSync(DLDevice dev, bp_stream_t stream) {
  const DeviceRef ref = Device(dev);
  std::shared_ptr<Session> s = ref.server->GetSession();
  v1::Command cmd;
  cmd.mutable_sync_stream()->set_device(ref.index);
  cmd.mutable_sync_stream()->set_stream(StreamHandle(stream, dev.device_id, *s));
  s->Request(cmd, "synchronizing a stream of " + Name(dev.device_id));
  s->ThrowDeferred();
}

void RemoteDeviceAPI::SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) {
  const DeviceRef ref = Device(dev);
  std::shared_ptr<Session> s = ref.server->GetSession();
  v1::Command cmd;
  v1::SyncStreamFromTo* c = cmd.mutable_sync_stream_from_to();
  c->set_device(ref.index);
  c->set_src(StreamHandle(src, dev.device_id, *s));
  c->set_dst(StreamHandle(dst, dev.device_id, *s));
  s->Request(cmd, "ordering two streams of " + Name(dev.device_id));
  s->ThrowDeferred();
}

}  // namespace remote
}  // namespace backplane
