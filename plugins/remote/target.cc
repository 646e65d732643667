// SPDX-License-Identifier: Apache-2.0
#include "target.h"

#include <algorithm>
#include <backplane/sdk/target.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "client.h"

namespace backplane {
namespace remote {

namespace {

std::string Canonicalize(const std::string& attrs_json, const DLDevice* device) {
  nlohmann::json j = nlohmann::json::parse(attrs_json);
  if (device != nullptr) {
    const DeviceRef ref = Fleet::Get().Device(device->device_id);
    std::shared_ptr<Session> s = ref.server->GetSession();
    v1::Command cmd;
    cmd.mutable_target_from_device()->set_device(ref.index);
    const v1::Reply r =
        s->Request(cmd, "the Target of remote:" + std::to_string(device->device_id) + " (" +
                            ref.RemoteName() + ")");
    const nlohmann::json inner = nlohmann::json::parse(r.value().s(), nullptr, false);
    if (inner.is_discarded() || !inner.is_object()) {
      throw Error(BP_ERR_DEVICE, ref.server->label() + " sent a Target for " + ref.RemoteName() +
                                     " that is not a JSON object");
    }
    j["server"] = ref.server->address();
    j["device"] = ref.RemoteName();
    j["target"] = inner;
  }
  // The kind alone ("remote", every default): a Target bound to no device, which parses (as
  // every kind's defaults must) and which the build refuses, saying what it lacks.
  if (!j.contains("server") && !j.contains("device") && !j.contains("target")) return j.dump();
  if (!j.contains("server") || !j["server"].is_string()) {
    sdk::ThrowTargetAttrError("server",
                              "is missing; give the server's host:port, or build the "
                              "Target from a remote device (Target::FromDevice)");
  }
  try {
    ParseAddress(j["server"]);
  } catch (const std::exception& e) {
    sdk::ThrowTargetAttrError("server", std::string("is not an address: ") + e.what());
  }
  if (!j.contains("device") || !j["device"].is_string() || j["device"].get<std::string>().empty())
    sdk::ThrowTargetAttrError("device",
                              "is missing; give the device's name on the server, such "
                              "as \"opencl:0\"");
  if (!j.contains("target") || !j["target"].is_object() || !j["target"].contains("kind") ||
      !j["target"]["kind"].is_string())
    sdk::ThrowTargetAttrError("target",
                              "is not a Target as JSON with a \"kind\"; give the remote "
                              "device's own Target, or build from the device");
  if (j["target"]["kind"] == "remote")
    sdk::ThrowTargetAttrError("target",
                              "is itself a remote Target; a server does not serve "
                              "remote devices");
  // The inner Target's keys say what the code is ("gpu", "cpu", ...): the remote Target has them.
  nlohmann::json keys =
      j.contains("keys") && j["keys"].is_array() ? j["keys"] : nlohmann::json::array();
  if (j["target"].contains("keys") && j["target"]["keys"].is_array()) {
    for (const auto& k : j["target"]["keys"]) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  j["keys"] = keys;
  return j.dump();
}

}  // namespace

void RegisterRemoteTarget() {
  sdk::TargetKindBuilder("remote", "remote")
      .Keys({"remote"})
      .Attr<std::string>("server", sdk::kNoDefault, "the server, host:port")
      .Attr<std::string>("device", sdk::kNoDefault,
                         "the device's name on the server, e.g. opencl:0")
      .Attr<sdk::TargetMap>("target", sdk::kNoDefault, "the remote device's own Target")
      .WholeIR()
      .Canonicalizer(Canonicalize)
      .Register();
}

}  // namespace remote
}  // namespace backplane
