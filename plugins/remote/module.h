// SPDX-License-Identifier: Apache-2.0
// A module built for a remote device (codegen.h) and run there (docs/remote.md): the inner
// module's bytes, uploaded to the server's current session on first use (again after a
// reconnect or a detach and attach), whose functions run there by name. Saved, it is the inner
// module's bytes behind a JSON header; loaded back, it uploads them on its first call.
#ifndef BACKPLANE_REMOTE_MODULE_H_
#define BACKPLANE_REMOTE_MODULE_H_

#include <backplane/sdk/module.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client.h"

namespace backplane {
namespace remote {

class RemoteModule final : public sdk::ModuleBase {
 public:
  static constexpr const char* kKind = "remote";

  RemoteModule(std::string server, std::string device, std::string target_json, std::string bytes,
               std::vector<std::string> functions);
  Function GetFunction(const std::string& name) override;
  std::vector<std::string> ListFunctions() override { return functions_; }
  std::optional<std::string> SaveToBytes() override;
  std::optional<std::string> InspectSource(const std::string& format) override;

  // Uploads the module to its server's current session unless it is there already; returns
  // the server's handle. Throws Error naming the server (refused native code, say).
  uint64_t Upload(RemoteServer& server, Session& session);
  // Runs `name` on the server with `args` (remote tensors of that server, scalars, strings).
  Any Call(const std::string& name, PackedArgs args);

  // Reads what SaveToBytes wrote; BP_ERR_INVALID_ARGUMENT saying what is wrong.
  static std::shared_ptr<RemoteModule> FromBytes(const std::string& bytes);

 private:
  const std::string server_;  // host:port
  const std::string device_;  // its name on the server, "opencl:0"
  const std::string target_json_;
  const std::string bytes_;  // bp_module_save of the module built for the inner Target
  const std::vector<std::string> functions_;
  std::mutex mu_;
  // The server and session that have it: a server detached and attached again is another
  // RemoteServer, whose epochs start again (held, so its address is not reused meanwhile).
  std::shared_ptr<RemoteServer> uploaded_server_;
  uint64_t uploaded_epoch_ = 0;
  uint64_t uploaded_handle_ = 0;
};

// A function that calls the server's registered function `name` (it must --expose it).
Function ServerFunction(const std::string& server, const std::string& name);

}  // namespace remote
}  // namespace backplane

#endif  // BACKPLANE_REMOTE_MODULE_H_
