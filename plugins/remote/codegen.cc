// SPDX-License-Identifier: Apache-2.0
#include "codegen.h"

#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <backplane/sdk/codegen.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "client.h"
#include "module.h"

namespace backplane {
namespace remote {

namespace {

// `ir_text` in a version the server reads: the module it uploads holds IR (the host code, and
// the kernels of some kinds) that the server's Backplane parses, so what uses a construct newer
// than the server reads is lowered to the server's newest version (ir::LowerToVersion), or
// refused naming the construct and the server.
std::string ForServer(const std::string& ir_text, RemoteServer& remote, const std::string& name) {
  const v1::ServerInfo info = remote.Info();
  const int newest = info.ir_version_newest() == 0 ? 1 : static_cast<int>(info.ir_version_newest());
  if (newest >= ir::kTextFormatVersion) return ir_text;
  ir::IRModule module = ir::Parse(ir_text, "bp_build input");
  if (ir::TextVersion(module) <= newest) return ir_text;
  try {
    module = ir::LowerToVersion(module, newest);
  } catch (const ir::Error& e) {
    if (e.kind() != ir::ErrorKind::kUnsupported) throw;
    throw Error(BP_ERR_UNSUPPORTED,
                std::string(e.what()) + "; remote server " + name + " (Backplane " +
                    info.version() + ") reads IR text versions 1 to " + std::to_string(newest) +
                    ": upgrade the server's Backplane, or write the kernel without it");
  }
  return ir::Print(module);
}

Module BuildRemote(const std::string& ir_text, const Target& target) {
  const nlohmann::json j = nlohmann::json::parse(target.ToJson());
  if (!j.contains("server") || !j.contains("device") || !j.contains("target")) {
    throw Error(BP_ERR_INVALID_ARGUMENT,
                "the remote Target names no device (server, device and target are missing); "
                "build it from a remote device (Target::FromDevice on remote:N) or give all three");
  }
  const std::string server = j.at("server");
  const std::string device = j.at("device");
  const std::string inner_text = j.at("target").dump();
  Target inner;
  try {
    inner = Target::Parse(inner_text);
  } catch (const Error& e) {
    throw Error(e.kind(), "building for " + device + " of remote server " + server +
                              " needs its Target here: " + e.what() +
                              " (the code is generated on this host: install the plugin of the "
                              "remote device's kind here)");
  }
  std::shared_ptr<RemoteServer> attached = Fleet::Get().Find(server);
  Module built = Build(attached ? ForServer(ir_text, *attached, server) : ir_text, inner);
  std::string bytes = built.SaveToBytes();
  auto m = std::make_shared<RemoteModule>(server, device, inner.ToJson(), std::move(bytes),
                                          built.ListFunctions());
  // Uploaded now when the server is attached, so what the server refuses (native code it does
  // not load) is an error of the build; a module built for a server not attached here uploads
  // on its first call.
  if (attached) {
    std::shared_ptr<Session> session = attached->GetSession();
    m->Upload(*attached, *session);
  }
  return sdk::MakeModule(m);
}

}  // namespace

void RegisterRemoteCodegen() {
  sdk::RegisterCodegen("remote", BuildRemote);
  sdk::RegisterModuleLoader("remote", [](const std::string& bytes) {
    return sdk::MakeModule(RemoteModule::FromBytes(bytes));
  });
}

}  // namespace remote
}  // namespace backplane
