// SPDX-License-Identifier: Apache-2.0
#include "device_target.h"

#include <backplane/c_api.h>

#include <cctype>
#include <string>

namespace backplane {
namespace cli {

bool LooksLikeDevice(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  if (text.size() - colon - 1 > 9) return false;
  for (size_t i = 0; i < colon; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (!std::isalnum(c) && c != '_' && c != '-' && c != '.') return false;
  }
  for (size_t i = colon + 1; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

std::string DeviceListText() {
  std::string names;
  try {
    for (const DeviceEntry& e : ListDevices()) {
      names += (names.empty() ? "" : ", ") + e.device.ToString();
    }
  } catch (const Error&) {
    bp_error_clear();
  }
  return names.empty() ? "none" : names;
}

std::string ParseTargetOrDevice(const std::string& text, Target* out, bool* from_device) {
  if (from_device != nullptr) *from_device = false;
  if (LooksLikeDevice(text)) {
    const size_t colon = text.find(':');
    const std::string type_name = text.substr(0, colon);
    int32_t type = 0;
    if (bp_device_type_from_name(type_name.c_str(), &type) == BP_OK) {
      const Device dev(
          DLDevice{static_cast<DLDeviceType>(type), std::stoi(text.substr(colon + 1))});
      bp_value_t exists;
      if (bp_device_get_attr(dev.dl, BP_ATTR_EXIST, &exists) != BP_OK ||
          exists.type != BP_VALUE_INT || exists.u.v_int64 == 0) {
        bp_error_clear();
        return "device " + dev.ToString() +
               " does not exist here; the devices here: " + DeviceListText() +
               " ('backplane info -l' lists them)";
      }
      try {
        *out = Target::FromDevice(dev);
      } catch (const Error& e) {
        return "device " + dev.ToString() + ": cannot read its Target: " + e.what() +
               " (give a Target instead: 'backplane target --list' shows the kinds)";
      }
      if (from_device != nullptr) *from_device = true;
      return "";
    }
    bp_error_clear();
    try {
      *out = Target::Parse(text);
      return "";
    } catch (const Error& e) {
      std::string what = e.what();
      while (!what.empty() && (what.back() == '.' || what.back() == ' ')) what.pop_back();
      return what + "; nor is '" + type_name +
             "' a device type here (the devices here: " + DeviceListText() +
             "; 'backplane info -l' lists them)";
    }
  }
  try {
    *out = Target::Parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace cli
}  // namespace backplane
