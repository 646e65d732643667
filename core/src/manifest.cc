// SPDX-License-Identifier: Apache-2.0
#include "manifest.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common.h"

namespace backplane::core {
namespace {

constexpr size_t kMaxManifestBytes = 1 << 20;

[[noreturn]] void Bad(const std::string& path, const std::string& what) {
  Fail(BP_ERR_PLUGIN, "manifest " + path + " is invalid: " + what);
}

std::string StringField(const nlohmann::json& j, const char* key, bool required,
                        const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) Bad(path, std::string("the field \"") + key + "\" is missing");
    return "";
  }
  if (!it->is_string()) Bad(path, std::string("the field \"") + key + "\" must be a string");
  return it->get<std::string>();
}

std::vector<std::string> StringList(const nlohmann::json& j, const char* key,
                                    const std::string& path) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) Bad(path, std::string("the field \"") + key + "\" must be an array");
  for (const auto& e : *it) {
    if (!e.is_string() || e.get<std::string>().empty()) {
      Bad(path, std::string("the field \"") + key + "\" must hold non-empty strings only");
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace

Manifest ReadManifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(BP_ERR_PLUGIN, "manifest " + path + " cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxManifestBytes) Bad(path, "it is larger than 1 MiB");
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) Bad(path, "it is not valid JSON");
  if (!j.is_object()) Bad(path, "expected a JSON object at the top level");
  auto mv = j.find("manifest_version");
  if (mv == j.end() || !mv->is_number_integer() || mv->get<int64_t>() != 1) {
    Bad(path, "expected \"manifest_version\": 1");
  }
  Manifest m;
  m.path = path;
  m.name = StringField(j, "name", true, path);
  m.library = StringField(j, "library", true, path);
  m.abi_version = StringField(j, "abi_version", true, path);
  m.version = StringField(j, "version", false, path);
  m.vendor = StringField(j, "vendor", false, path);
  m.provides = StringList(j, "provides", path);
  m.device_types = StringList(j, "device_types", path);
  if (m.name.empty() ||
      m.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    Bad(path, "\"name\" must be 1 or more characters of a-z, 0-9 and _");
  }
  if (m.library.empty() || m.library.find('/') != std::string::npos || m.library == "." ||
      m.library == "..") {
    Bad(path, "\"library\" must be a file name in the manifest's own folder, without '/'");
  }
  return m;
}

}  // namespace backplane::core
