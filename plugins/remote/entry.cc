// SPDX-License-Identifier: Apache-2.0
// remote: the devices of other machines, served by `backplane serve`, as devices of this host
// (docs/remote.md). Its entry point registers:
//   device_api.remote                        remote:0, remote:1, ... (device_api.h)
//   target kind remote, target.build.remote  building for them (module.h)
//   runtime.module.load_from_bytes.remote    saved remote modules
//   remote.attach(address[, options JSON])   attaches a server; its description as JSON
//   remote.detach(address)                   ends its session; its devices go away
//   remote.servers()                         the attached servers and their devices, JSON
//   remote.status(address)                   what the server holds for all its sessions, JSON
//   remote.function(address, name)           a server's exposed function, as a function
// and attaches the servers BACKPLANE_REMOTE lists (host:port,host:port).
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "client.h"
#include "codegen.h"
#include "device_api.h"
#include "module.h"
#include "target.h"

namespace {

using backplane::Any;
using backplane::Error;
using backplane::PackedArgs;
namespace remote = backplane::remote;
namespace sdk = backplane::sdk;

nlohmann::json ServerJson(const std::string& address) {
  const nlohmann::json all = remote::Fleet::Get().Describe();
  for (const auto& s : all["servers"]) {
    if (s["address"] == address) return s;
  }
  return nullptr;
}

Any Attach(PackedArgs args) {
  const std::string address = args.String(0);
  nlohmann::json options;
  if (args.size() > 1) {
    options = nlohmann::json::parse(args.String(1), nullptr, false);
    if (options.is_discarded()) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "remote.attach: the options are not JSON: " + args.String(1));
    }
  }
  remote::Fleet::Get().Attach(address, remote::ClientOptions::FromJson(options), true);
  return sdk::StringValue(ServerJson(address).dump());
}

}  // namespace

BACKPLANE_PLUGIN_ENTRY_WITH((sdk::PluginDescription{"remote", BACKPLANE_REMOTE_VERSION,
                                                    "Backplane"})) {
  remote::RemoteDeviceAPI* api = remote::RemoteDeviceAPI::Global();
  sdk::RegisterDeviceAPI("remote", api);
  remote::RegisterRemoteTarget();
  remote::RegisterRemoteCodegen();
  sdk::RegisterFunction("remote.attach", Attach);
  sdk::RegisterFunction("remote.detach", [](PackedArgs args) {
    remote::Fleet::Get().Detach(args.String(0));
    return Any();
  });
  sdk::RegisterFunction("remote.servers", [](PackedArgs) {
    return sdk::StringValue(remote::Fleet::Get().Describe().dump());
  });
  sdk::RegisterFunction("remote.status", [](PackedArgs args) {
    const std::string address = args.String(0);
    std::shared_ptr<remote::RemoteServer> s = remote::Fleet::Get().Find(address);
    if (!s) throw Error(BP_ERR_NOT_FOUND, "remote.status: " + address + " is not attached");
    const remote::v1::ServerStatus st = s->Status();
    return sdk::StringValue(nlohmann::json{
        {"sessions", st.sessions()},
        {"buffers", st.buffers()},
        {"bytes", st.bytes()},
        {"streams", st.streams()},
        {"modules",
         st.modules()}}.dump());
  });
  sdk::RegisterFunction("remote.function", [](PackedArgs args) {
    backplane::Function f = remote::ServerFunction(args.String(0), args.String(1));
    bp_value_t v = backplane::detail::ArgValue(BP_VALUE_OBJECT);
    backplane::ObjectRef obj = f.object();
    v.u.v_obj = obj.release();
    return Any(v);
  });
  // BACKPLANE_REMOTE=host:port,host:port: attached now; one that is down is tried again when
  // the devices are next counted, and `backplane info` shows why it is not there.
  if (const char* env = secure_getenv("BACKPLANE_REMOTE")) {
    std::stringstream list(env);
    std::string address;
    const remote::ClientOptions options = remote::ClientOptions::FromJson(nullptr);
    while (std::getline(list, address, ',')) {
      address.erase(0, address.find_first_not_of(" \t"));
      address.erase(address.find_last_not_of(" \t") + 1);
      if (address.empty()) continue;
      remote::Fleet::Get().Attach(address, options, false);
    }
  }
}
