// SPDX-License-Identifier: Apache-2.0
#include "codegen.h"

#include <backplane/sdk/codegen.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "client.h"
#include "module.h"

namespace backplane::remote {

namespace {

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
  Module built = Build(ir_text, inner);
  std::string bytes = built.SaveToBytes();
  auto m = std::make_shared<RemoteModule>(server, device, inner.ToJson(), std::move(bytes),
                                          built.ListFunctions());
  // Uploaded now when the server is attached, so what the server refuses (native code it does
  // not load) is an error of the build; a module built for a server not attached here uploads
  // on its first call.
  if (std::shared_ptr<RemoteServer> s = Fleet::Get().Find(server)) {
    std::shared_ptr<Session> session = s->GetSession();
    m->Upload(*s, *session);
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

}  // namespace backplane::remote
