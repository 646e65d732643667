// SPDX-License-Identifier: Apache-2.0
// Target objects: the C entry points to parse, build from a device, print and query them.
#include "target.h"

#include "device_type.h"
#include "plugin_loader.h"
#include "runtime.h"

namespace backplane {
namespace core {
namespace {

const TargetObject& AsTarget(const bp_object_t* obj, const char* fn) {
  return As<TargetObject>(obj, BP_OBJECT_TARGET, fn);
}

bp_value_t Value(int32_t type) {
  bp_value_t v;
  v.type = type;
  v.reserved0 = 0;
  v.u.v_int64 = 0;
  return v;
}

// A JSON array of ints or strings as an array object (owned).
bp_object_t* ArrayFrom(const Json& a) {
  std::vector<bp_value_t> values;
  std::vector<std::string> strings;
  strings.reserve(a.size());
  for (const auto& e : a) {
    if (e.is_string()) {
      strings.push_back(e.get<std::string>());
      bp_value_t v = Value(BP_VALUE_STR);
      v.u.v_str = strings.back().c_str();
      values.push_back(v);
    } else {
      bp_value_t v = Value(BP_VALUE_INT);
      v.u.v_int64 = e.get<int64_t>();
      values.push_back(v);
    }
  }
  bp_object_t* out = nullptr;
  if (bp_array_create(values.data(), values.size(), &out) != BP_OK) {
    Fail(BP_ERR_INTERNAL, "target: building an array failed: " + LastErrorMessage());
  }
  return out;
}

KindPtr KindForDevice(DLDevice dev, const char* kind) {
  const char* type_name = DeviceTypeName(dev.device_type);
  const std::string dev_name =
      (type_name != nullptr ? std::string(type_name) : std::to_string(dev.device_type)) + ":" +
      std::to_string(dev.device_id);
  if (kind != nullptr) {
    KindPtr k = FindKind(kind);
    if (k == nullptr) {
      Fail(BP_ERR_NOT_FOUND, std::string("target: unknown target kind '") + kind + "'." +
                                 NearestNames(kind, KindNames()));
    }
    if (k->device_type_id != dev.device_type) {
      Fail(BP_ERR_INVALID_ARGUMENT, std::string("target kind '") + kind +
                                        "' runs on device type '" + k->device_type + "', not on " +
                                        dev_name);
    }
    return k;
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& k : AllKinds()) {
      if (k->device_type_id == dev.device_type) return k;
    }
    // A kind for this device may live in a plugin not loaded yet.
    if (pass == 0) Runtime::Get().loader.LoadAllDeclaring("target.kind.");
  }
  Fail(BP_ERR_NOT_FOUND, "target: no target kind runs on " + dev_name +
                             "; a plugin registers kinds with bp_target_kind_register");
}

}  // namespace
}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT bp_status_t bp_target_parse(const char* text, bp_object_t** out_target) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(text != nullptr, "text is null");
  BP_REQUIRE_ARG(out_target != nullptr, "out_target is null");
  *out_target = ParseTarget(text).release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_target_from_device(DLDevice dev, const char* kind,
                                            bp_object_t** out_target) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_target != nullptr, "out_target is null");
  const bp_device_api_t* api = nullptr;
  if (bp_device_api_get(dev.device_type, &api) != BP_OK) {
    Fail(BP_ERR_NOT_FOUND, "target from device: " + LastErrorMessage());
  }
  bp_value_t exist;
  if (bp_device_get_attr(dev, BP_ATTR_EXIST, &exist) != BP_OK) {
    Fail(BP_ERR_DEVICE, "target from device: " + LastErrorMessage());
  }
  if (exist.type != BP_VALUE_INT || exist.u.v_int64 == 0) {
    Fail(BP_ERR_NOT_FOUND, std::string("target from device: device ") +
                               DeviceTypeName(dev.device_type) + ":" +
                               std::to_string(dev.device_id) + " does not exist");
  }
  KindPtr k = KindForDevice(dev, kind);
  Json obj;
  obj["kind"] = k->name;
  obj["from_device"] = dev.device_id;
  for (const auto& a : k->attrs) {
    if (a.device_attr < 0) continue;
    bp_value_t v;
    if (bp_device_get_attr(dev, a.device_attr, &v) != BP_OK) {
      Fail(BP_ERR_DEVICE, "target from device: reading " + a.name + ": " + LastErrorMessage());
    }
    Ref owned = v.type == BP_VALUE_OBJECT ? Ref::Adopt(v.u.v_obj) : Ref();
    if (v.type == BP_VALUE_NONE) continue;  // the device cannot say: the default stays
    if (v.type == BP_VALUE_INT && a.type == BP_TARGET_ATTR_BOOL)
      obj[a.name] = v.u.v_int64 != 0;
    else if (v.type == BP_VALUE_INT && a.type == BP_TARGET_ATTR_INT)
      obj[a.name] = v.u.v_int64;
    else if (v.type == BP_VALUE_INT && a.type == BP_TARGET_ATTR_FLOAT)
      obj[a.name] = static_cast<double>(v.u.v_int64);
    else if (v.type == BP_VALUE_FLOAT && a.type == BP_TARGET_ATTR_FLOAT)
      obj[a.name] = v.u.v_float64;
    else if (owned && owned.get()->type() == BP_OBJECT_STRING && a.type == BP_TARGET_ATTR_STRING) {
      obj[a.name] = static_cast<const StringObject*>(owned.get())->text;
    } else {
      Fail(BP_ERR_PLUGIN, "target kind '" + k->name + "' attribute '" + a.name + "' is " +
                              AttrTypeName(a.type) + " but the device answered a value of type " +
                              std::to_string(v.type) + " for its device_attr");
    }
  }
  *out_target = TargetFromJson(obj, &dev, 0).release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_target_to_json(const bp_object_t* target, bp_object_t** out_json) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_json != nullptr, "out_json is null");
  *out_json = NewString(AsTarget(target, "bp_target_to_json").text);
  BP_API_END
}

BP_EXPORT bp_status_t bp_target_kind(const bp_object_t* target, const char** out_kind) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_kind != nullptr, "out_kind is null");
  *out_kind = AsTarget(target, "bp_target_kind").kind->name.c_str();
  BP_API_END
}

BP_EXPORT bp_status_t bp_target_get_attr(const bp_object_t* target, const char* name,
                                         bp_value_t* out_value) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(name != nullptr, "name is null");
  BP_REQUIRE_ARG(out_value != nullptr, "out_value is null");
  const TargetObject& t = AsTarget(target, "bp_target_get_attr");
  const std::string key = name;
  int32_t type = 0;
  if (key == "keys")
    type = BP_TARGET_ATTR_STRING_ARRAY;
  else if (key == "tag")
    type = BP_TARGET_ATTR_STRING;
  else if (key == "from_device")
    type = BP_TARGET_ATTR_INT;
  else if (key == "host")
    type = -1;
  else if (const AttrDef* a = t.kind->Find(key))
    type = a->type;
  else {
    Fail(BP_ERR_INVALID_ARGUMENT, "target kind '" + t.kind->name + "' has no attribute '" + key +
                                      "'." + NearestNames(key, t.kind->AttrNames()));
  }
  auto it = t.json.find(key);
  if (it == t.json.end()) {
    *out_value = Value(BP_VALUE_NONE);
    return BP_OK;
  }
  bp_value_t v = Value(BP_VALUE_NONE);
  switch (type) {
    case -1: {
      v = Value(BP_VALUE_OBJECT);
      v.u.v_obj = TargetFromJson(*it, nullptr, 0).release();
      break;
    }
    case BP_TARGET_ATTR_BOOL:
      v = Value(BP_VALUE_INT);
      v.u.v_int64 = it->get<bool>() ? 1 : 0;
      break;
    case BP_TARGET_ATTR_INT:
      v = Value(BP_VALUE_INT);
      v.u.v_int64 = it->get<int64_t>();
      break;
    case BP_TARGET_ATTR_FLOAT:
      v = Value(BP_VALUE_FLOAT);
      v.u.v_float64 = it->get<double>();
      break;
    case BP_TARGET_ATTR_STRING:
      v = Value(BP_VALUE_OBJECT);
      v.u.v_obj = NewString(it->get<std::string>());
      break;
    case BP_TARGET_ATTR_INT_ARRAY:
    case BP_TARGET_ATTR_STRING_ARRAY:
      v = Value(BP_VALUE_OBJECT);
      v.u.v_obj = ArrayFrom(*it);
      break;
    default:
      v = Value(BP_VALUE_OBJECT);
      v.u.v_obj = NewString(it->dump());
      break;
  }
  *out_value = v;
  BP_API_END
}

}  // extern "C"
