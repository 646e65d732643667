// SPDX-License-Identifier: Apache-2.0
// The remote plugin's DeviceAPI: the devices of attached servers (client.h) as devices
// remote:0, remote:1, ... of this host (docs/remote.md).
//
// - Data space and workspace live on the server; this host holds opaque handles (never
//   addresses) that name a buffer of one session. A session that ended takes its buffers
//   with it: their handles then fail with the reason, and freeing them just forgets them.
// - Copies: host <-> remote stream in chunks of kChunkBytes (HTTP/2 flow control bounds what is
//   in flight); remote <-> remote on one server is a server-side copy; across servers it goes
//   through this host.
// - Streams are the server device's streams; SetStream is per calling thread, as in CUDA, and
//   a module's calls run on the calling thread's active stream of their devices.
#ifndef BACKPLANE_REMOTE_DEVICE_API_H_
#define BACKPLANE_REMOTE_DEVICE_API_H_

#include <backplane/sdk/device_api.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "client.h"

namespace backplane {
namespace remote {

// A buffer (data space or workspace) of a session.
struct RemoteBuffer {
  std::shared_ptr<RemoteServer> server;
  uint64_t epoch = 0;   // the session that holds it
  uint64_t handle = 0;  // the server's number for it in that session
  uint64_t nbytes = 0;
  int32_t device = 0;  // remote:<device>
  uint32_t index = 0;  // the device's index on its server
  bool workspace = false;
};

struct RemoteStream {
  std::shared_ptr<RemoteServer> server;
  uint64_t epoch = 0;
  uint64_t handle = 0;
  int32_t device = 0;
};

class RemoteDeviceAPI final : public sdk::DeviceAPI {
 public:
  static RemoteDeviceAPI* Global();  // never destroyed

  Any GetAttr(DLDevice dev, bp_device_attr_kind_t kind) override;
  // "server" (host:port), "remote_device" (its name there, "opencl:0") and "server_host" (the
  // server machine's host name), then whatever the server's device answers.
  Any GetProperty(DLDevice dev, const std::string& key) override;
  std::vector<std::string> ListProperties(DLDevice dev) override;
  void SetDevice(DLDevice dev) override;
  void* AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                       DLDataType type_hint) override;
  void FreeDataSpace(DLDevice dev, void* ptr) override;
  void* AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType type_hint) override;
  void FreeWorkspace(DLDevice dev, void* ptr) override;
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  bp_stream_t CreateStream(DLDevice dev) override;
  void FreeStream(DLDevice dev, bp_stream_t stream) override;
  void SetStream(DLDevice dev, bp_stream_t stream) override;
  void StreamSync(DLDevice dev, bp_stream_t stream) override;
  void SyncStreamFromTo(DLDevice dev, bp_stream_t src, bp_stream_t dst) override;

  // ---- for modules (module.cc) ---------------------------------------------------------
  // The buffer behind a data handle, or BP_ERR_INVALID_ARGUMENT naming `what`.
  RemoteBuffer Buffer(const void* data, const std::string& what);
  // The server's number for `stream` (null: 0) of remote:<device> in `session`, or
  // BP_ERR_INVALID_ARGUMENT when it is not a live stream of that device and session.
  uint64_t StreamHandle(bp_stream_t stream, int32_t device, const Session& session);
  // The calling thread's active stream of remote:<device> (SetStream; null by default).
  bp_stream_t ActiveStream(int32_t device) const;
  // The device `dev` names, or BP_ERR_NOT_FOUND (client.h Fleet::Device).
  DeviceRef Device(DLDevice dev) const;
  // The session of `buffer`'s server, or BP_ERR_DEVICE when the session that held it ended.
  std::shared_ptr<Session> SessionOf(const RemoteBuffer& buffer, const std::string& what);

 private:
  RemoteDeviceAPI();
  void* Alloc(DLDevice dev, size_t nbytes, size_t alignment, DLDataType type_hint, bool workspace);
  void Free(DLDevice dev, void* ptr, bool workspace);
  void Write(const RemoteBuffer& to, uint64_t offset, const char* src, size_t nbytes,
             bp_stream_t stream);
  void Read(const RemoteBuffer& from, uint64_t offset, char* dst, size_t nbytes,
            bp_stream_t stream);
  // The device of a live stream, or -1.
  int32_t StreamDevice(bp_stream_t stream);
  std::string Name(int32_t device) const { return "remote:" + std::to_string(device); }

  mutable std::mutex mu_;
  uintptr_t next_handle_ = 0x100000;
  std::unordered_map<uintptr_t, RemoteBuffer> buffers_;
  std::unordered_map<uintptr_t, RemoteStream> streams_;
};

// A DataType message from a DLDataType.
void SetDataType(v1::DataType* out, DLDataType t);
// A value from the server (an attribute, a property, a call's result) as a Backplane value.
Any FromValue(const v1::Value& v);

}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_REMOTE_DEVICE_API_H_
