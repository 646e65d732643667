// SPDX-License-Identifier: Apache-2.0
#include "module.h"

#include <algorithm>
#include <backplane/sdk/codegen.hpp>
#include <backplane/sdk/target.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "device_api.h"

namespace backplane {
namespace remote {

namespace {

constexpr const char* kFormat = "backplane.remote-module";
constexpr int kFormatVersion = 1;
constexpr size_t kMaxHeaderBytes = 64 * 1024;

// BACKPLANE_REMOTE_SYNC_CALLS=1: every call waits for the server's answer (each error comes
// back from the call that caused it, at one round trip a call).
bool SyncCalls() {
  const char* v = secure_getenv("BACKPLANE_REMOTE_SYNC_CALLS");
  return v != nullptr && std::string(v) == "1";
}

// Fills `ta` from the tensor argument `t`, which must be a live buffer of `server` in `session`
// whose view stays inside it; adds its device to `devices`.
void EncodeTensor(const DLTensor* t, RemoteServer& server, Session& session, v1::TensorArg* ta,
                  std::set<int32_t>* devices, const std::string& arg) {
  RemoteDeviceAPI* api = RemoteDeviceAPI::Global();
  BACKPLANE_REQUIRE(t != nullptr, BP_ERR_INVALID_ARGUMENT, arg + " is a null tensor");
  BACKPLANE_REQUIRE(t->device.device_type == api->device_type(), BP_ERR_INVALID_ARGUMENT,
                    arg + " is a tensor on " + sdk::DeviceString(t->device) +
                        "; a remote call takes tensors of remote devices of " + server.label() +
                        ": copy it there first");
  BACKPLANE_REQUIRE(t->ndim >= 0 && t->ndim <= 32 && (t->ndim == 0 || t->shape != nullptr),
                    BP_ERR_INVALID_ARGUMENT,
                    arg + " has ndim " + std::to_string(t->ndim) + " (0 to 32 with a shape)");
  const RemoteBuffer b = api->Buffer(t->data, arg);
  BACKPLANE_REQUIRE(b.server.get() == &server, BP_ERR_INVALID_ARGUMENT,
                    arg + " is a buffer of " + b.server->label() +
                        ", and this module runs "
                        "on " +
                        server.label() + "; copy it there first");
  BACKPLANE_REQUIRE(b.epoch == session.epoch(), BP_ERR_DEVICE,
                    arg + " is a buffer of a session with " + server.label() +
                        " that ended, and its contents went with it; allocate it again");
  BACKPLANE_REQUIRE(b.device == t->device.device_id, BP_ERR_INVALID_ARGUMENT,
                    arg + " claims " + sdk::DeviceString(t->device) +
                        " but its data is a buffer of remote:" + std::to_string(b.device));
  const std::optional<uint64_t> extent =
      ViewBytes(t->ndim, t->shape, t->strides, t->dtype.bits, t->dtype.lanes);
  BACKPLANE_REQUIRE(extent && t->byte_offset <= b.nbytes && *extent <= b.nbytes - t->byte_offset,
                    BP_ERR_INVALID_ARGUMENT,
                    arg + ": its shape, strides and byte_offset reach past the end of its " +
                        std::to_string(b.nbytes) + "-byte buffer");
  ta->set_device(b.index);
  ta->set_buffer(b.handle);
  ta->set_byte_offset(t->byte_offset);
  SetDataType(ta->mutable_dtype(), t->dtype);
  for (int32_t d = 0; d < t->ndim; ++d) ta->add_shape(t->shape[d]);
  if (t->strides != nullptr) {
    for (int32_t d = 0; d < t->ndim; ++d) ta->add_strides(t->strides[d]);
  }
  devices->insert(b.device);
}

// Fills `call`'s arguments and active streams from `args`; every tensor must be a buffer of
// `server` in `session`.
void EncodeArgs(PackedArgs args, RemoteServer& server, Session& session, v1::Call* call,
                const std::string& what) {
  RemoteDeviceAPI* api = RemoteDeviceAPI::Global();
  std::set<int32_t> devices;
  for (int32_t i = 0; i < args.size(); ++i) {
    const bp_value_t& v = args[i];
    const std::string arg = what + ": argument " + std::to_string(i);
    v1::Arg* a = call->add_args();
    switch (v.type) {
      case BP_VALUE_NONE:
        a->set_none(true);
        break;
      case BP_VALUE_INT:
        a->set_i(v.u.v_int64);
        break;
      case BP_VALUE_FLOAT:
        a->set_f(v.u.v_float64);
        break;
      case BP_VALUE_STR:
        BACKPLANE_REQUIRE(v.u.v_str != nullptr, BP_ERR_INVALID_ARGUMENT, arg + " is a null string");
        a->set_s(v.u.v_str);
        break;
      case BP_VALUE_DTYPE:
        SetDataType(a->mutable_dtype(), v.u.v_dtype);
        break;
      case BP_VALUE_DEVICE: {
        BACKPLANE_REQUIRE(v.u.v_device.device_type == api->device_type(), BP_ERR_INVALID_ARGUMENT,
                          arg + " is the device " + sdk::DeviceString(v.u.v_device) +
                              "; a remote call takes devices of the remote type only");
        const DeviceRef ref = Fleet::Get().Device(v.u.v_device.device_id);
        BACKPLANE_REQUIRE(ref.server.get() == &server, BP_ERR_INVALID_ARGUMENT,
                          arg + " is " + sdk::DeviceString(v.u.v_device) + ", a device of " +
                              ref.server->label() + ", not of " + server.label());
        a->set_device(ref.index);
        break;
      }
      case BP_VALUE_TENSOR:
        EncodeTensor(v.u.v_tensor, server, session, a->mutable_tensor(), &devices, arg);
        break;
      case BP_VALUE_OBJECT: {
        int32_t type = 0;
        Check(::backplane::detail::Api()->object_type(v.u.v_obj, &type));
        if (type == BP_OBJECT_TENSOR) {  // a tensor object (what Python passes)
          DLTensor* t = nullptr;
          Check(::backplane::detail::Api()->tensor_get(v.u.v_obj, &t));
          EncodeTensor(t, server, session, a->mutable_tensor(), &devices, arg);
          break;
        }
        if (type == BP_OBJECT_STRING) {
          a->set_s(GetString(v.u.v_obj));
        } else if (type == BP_OBJECT_BYTES) {
          const void* data = nullptr;
          size_t size = 0;
          Check(::backplane::detail::Api()->bytes_get(v.u.v_obj, &data, &size));
          a->set_b(data, size);
        } else {
          throw Error(BP_ERR_TYPE, arg + " is an object of type " + std::to_string(type) +
                                       "; a remote call carries numbers, strings, bytes, devices, "
                                       "dtypes and remote tensors");
        }
        break;
      }
      default:
        throw Error(BP_ERR_TYPE, arg + " is a " + ::backplane::detail::ValueTypeName(v) +
                                     "; a pointer or other local value cannot cross to a server");
    }
  }
  for (int32_t d : devices) {
    bp_stream_t active = api->ActiveStream(d);
    if (active == nullptr) continue;
    v1::ActiveStream* as = call->add_streams();
    as->set_device(Fleet::Get().Device(d).index);
    as->set_stream(api->StreamHandle(active, d, session));
  }
}

std::shared_ptr<RemoteServer> AttachedServer(const std::string& address, const std::string& what) {
  std::shared_ptr<RemoteServer> server = Fleet::Get().Find(address);
  if (!server) {
    throw Error(BP_ERR_NOT_FOUND, what + " runs on remote server " + address +
                                      ", which is not attached here; attach it first "
                                      "(BACKPLANE_REMOTE=" +
                                      address + " or remote.attach: docs/remote.md)");
  }
  return server;
}

}  // namespace

RemoteModule::RemoteModule(std::string server, std::string device, std::string target_json,
                           std::string bytes, std::vector<std::string> functions)
    : server_(std::move(server)),
      device_(std::move(device)),
      target_json_(std::move(target_json)),
      bytes_(std::move(bytes)),
      functions_(std::move(functions)) {}

Function RemoteModule::GetFunction(const std::string& name) {
  if (std::find(functions_.begin(), functions_.end(), name) == functions_.end()) return Function();
  auto self = std::static_pointer_cast<RemoteModule>(shared_from_this());
  return Function::FromCallable([self, name](PackedArgs args) { return self->Call(name, args); });
}

uint64_t RemoteModule::Upload(RemoteServer& server, Session& session) {
  std::lock_guard<std::mutex> lock(mu_);
  if (uploaded_server_.get() == &server && uploaded_epoch_ == session.epoch())
    return uploaded_handle_;
  const std::string what =
      "uploading a module for " + device_ + " (" + std::to_string(bytes_.size()) + " bytes)";
  const uint64_t transfer = session.ReserveId();
  v1::Reply reply;
  size_t done = 0;
  do {
    const size_t n = std::min(kChunkBytes, bytes_.size() - done);
    const bool last = done + n == bytes_.size();
    v1::Command cmd;
    if (done == 0) cmd.set_id(transfer);
    v1::LoadModule* m = cmd.mutable_load_module();
    m->set_transfer(transfer);
    m->set_data(bytes_.data() + done, n);
    m->set_last(last);
    done += n;
    if (last) {
      reply = session.Request(
          cmd, what, server.options().timeout_ms + static_cast<int64_t>(bytes_.size() / 10000));
    } else {
      session.Post(cmd);
    }
  } while (done < bytes_.size());
  uploaded_server_ = server.shared_from_this();
  uploaded_epoch_ = session.epoch();
  uploaded_handle_ = reply.handle();
  return uploaded_handle_;
}

Any RemoteModule::Call(const std::string& name, PackedArgs args) {
  const std::string what = "calling " + name + " on " + device_ + " of remote server " + server_;
  std::shared_ptr<RemoteServer> server = AttachedServer(server_, "the module's function " + name);
  std::shared_ptr<Session> session = server->GetSession();
  const uint64_t handle = Upload(*server, *session);
  v1::Command cmd;
  v1::Call* call = cmd.mutable_call();
  call->set_module(handle);
  call->set_function(name);
  EncodeArgs(args, *server, *session, call, what);
  if (SyncCalls()) return FromValue(session->Request(cmd, what).value());
  session->Post(cmd);
  return Any();
}

std::optional<std::string> RemoteModule::SaveToBytes() {
  const nlohmann::json header{{"format", kFormat},
                              {"version", kFormatVersion},
                              {"server", server_},
                              {"device", device_},
                              {"target", nlohmann::json::parse(target_json_)},
                              {"functions", functions_},
                              {"size", bytes_.size()}};
  return header.dump() + "\n" + bytes_;
}

std::optional<std::string> RemoteModule::InspectSource(const std::string& format) {
  if (!format.empty() && format != "json") return std::nullopt;
  return nlohmann::json{{"server", server_},
                        {"device", device_},
                        {"target", nlohmann::json::parse(target_json_)},
                        {"functions", functions_},
                        {"module_bytes", bytes_.size()}}
      .dump(2);
}

std::shared_ptr<RemoteModule> RemoteModule::FromBytes(const std::string& bytes) {
  auto bad = [](const std::string& why) {
    return Error(BP_ERR_INVALID_ARGUMENT, "remote module: " + why +
                                              "; it was not written by the remote plugin's "
                                              "save, or it was changed since");
  };
  const size_t nl = bytes.find('\n');
  if (nl == std::string::npos || nl > kMaxHeaderBytes) throw bad("no JSON header line");
  const nlohmann::json h = nlohmann::json::parse(bytes.substr(0, nl), nullptr, false);
  if (h.is_discarded() || !h.is_object()) throw bad("the header is not a JSON object");
  if (h.value("format", "") != kFormat)
    throw bad("the header's format is not " + std::string(kFormat));
  if (!h.contains("version") || h["version"] != kFormatVersion)
    throw bad("the header's version is not " + std::to_string(kFormatVersion));
  for (const char* key : {"server", "device"}) {
    if (!h.contains(key) || !h[key].is_string() || h[key].get<std::string>().empty())
      throw bad(std::string("the header has no ") + key);
  }
  if (!h.contains("target") || !h["target"].is_object()) throw bad("the header has no target");
  if (!h.contains("functions") || !h["functions"].is_array()) throw bad("no function list");
  std::vector<std::string> functions;
  for (const auto& f : h["functions"]) {
    if (!f.is_string()) throw bad("a function name is not a string");
    functions.push_back(f);
  }
  if (!h.contains("size") || !h["size"].is_number_unsigned() ||
      h["size"].get<uint64_t>() != bytes.size() - nl - 1)
    throw bad("the size in the header is not the size of what follows it");
  try {
    ParseAddress(h["server"]);
  } catch (const std::exception& e) {
    throw bad(e.what());
  }
  return std::make_shared<RemoteModule>(h["server"], h["device"], h["target"].dump(),
                                        bytes.substr(nl + 1), functions);
}

Function ServerFunction(const std::string& address, const std::string& name) {
  std::shared_ptr<RemoteServer> server = AttachedServer(address, "the function " + name);
  return Function::FromCallable([server, name](PackedArgs args) {
    const std::string what = "calling " + name + " on " + server->label();
    std::shared_ptr<Session> session = server->GetSession();
    v1::Command cmd;
    v1::Call* call = cmd.mutable_call();
    call->set_module(0);
    call->set_function(name);
    EncodeArgs(args, *server, *session, call, what);
    return FromValue(session->Request(cmd, what).value());
  });
}

}  // namespace remote
}  // namespace backplane
