// SPDX-License-Identifier: Apache-2.0
// The GetAttr tests (BP-PLUGIN-5): every attribute kind answers a value of its type or none,
// never garbage; kExist agrees with the devices that exist; repeated queries agree. The
// plugin's get_attr entry is called directly, so the kit sees exactly what it answers.
#include <backplane/backplane.hpp>
#include <cstring>
#include <thread>

#include "conformance.h"

namespace backplane {
namespace conformance {

namespace {

enum class Want { kInt, kFlag, kString, kIntOrString, kIntList, kStringList };

// The type each kind answers when it answers (c_api.h).
Want KindType(int32_t kind) {
  switch (kind) {
    case BP_ATTR_COMPUTE_VERSION:
    case BP_ATTR_DEVICE_NAME:
    case BP_ATTR_MAX_THREAD_DIMENSIONS:
    case BP_ATTR_GCN_ARCH:
    case BP_ATTR_DRIVER_VERSION:
    case BP_ATTR_DEVICE_KIND:
    case BP_ATTR_VENDOR:
    case BP_ATTR_UUID:
    case BP_ATTR_PCI_BUS_ID:
    case BP_ATTR_DRIVER_INFO:
      return Want::kString;
    case BP_ATTR_API_VERSION:
      return Want::kIntOrString;
    case BP_ATTR_SUPPORTS_FP64:
    case BP_ATTR_SUPPORTS_FP16:
      return Want::kFlag;
    case BP_ATTR_SUBGROUP_SIZES:
      return Want::kIntList;
    case BP_ATTR_EXTENSIONS:
    case BP_ATTR_ISA_FLAGS:
      return Want::kStringList;
    default:
      return Want::kInt;
  }
}

// Reads an array answer into `text` (its elements as JSON) and says what is wrong, or "".
std::string ReadList(const bp_object_t* array, bool* ints, std::string* text) {
  size_t n = 0;
  if (bp_array_size(array, &n) != BP_OK) return "an array whose size cannot be read";
  nlohmann::json items = nlohmann::json::array();
  bool all_ints = true;
  bool all_strings = true;
  for (size_t i = 0; i < n; ++i) {
    bp_value_t e;
    if (bp_array_get(array, i, &e) != BP_OK) return "an array whose elements cannot be read";
    int32_t t = 0;
    if (e.type == BP_VALUE_INT) {
      items.push_back(e.u.v_int64);
      all_strings = false;
    } else if (e.type == BP_VALUE_OBJECT && bp_object_type(e.u.v_obj, &t) == BP_OK &&
               t == BP_OBJECT_STRING) {
      const char* data = nullptr;
      size_t size = 0;
      bp_string_get(e.u.v_obj, &data, &size);
      items.push_back(std::string(data != nullptr ? data : "", size));
      all_ints = false;
    } else {
      return "an array whose element " + std::to_string(i) + " is a " + ValueTypeText(e);
    }
  }
  *ints = all_ints;
  *text = items.dump();
  return (all_ints || all_strings) ? "" : "an array that mixes ints and strings";
}

std::string KindName(int32_t kind) {
  const char* n = bp_device_attr_name(kind);
  return std::to_string(kind) + " (" + (n != nullptr ? n : "unknown") + ")";
}

// Every problem, up to a handful, then how many more.
std::string JoinProblems(const std::vector<std::string>& problems) {
  std::string out;
  for (size_t i = 0; i < problems.size() && i < 6; ++i) out += (i == 0 ? "" : "; ") + problems[i];
  if (problems.size() > 6) out += "; and " + std::to_string(problems.size() - 6) + " more";
  return out;
}

// One answer of get_attr, owned: the string copied out and the object released.
struct Answer {
  bp_status_t status = BP_OK;
  std::string error;
  bp_value_t value{};
  bool is_string = false;
  bool is_list = false;       // an array object (1.5's list kinds); `text` holds it as JSON
  bool list_of_ints = false;  // every element an int (an empty list counts as both)
  std::string text;
  std::string problem;  // a type violation, "" when the answer is well-formed

  std::string Show() const {
    if (status != BP_OK) return "error (" + error + ")";
    switch (value.type) {
      case BP_VALUE_NONE:
        return "none";
      case BP_VALUE_INT:
        return std::to_string(value.u.v_int64);
      case BP_VALUE_FLOAT:
        return std::to_string(value.u.v_float64);
      default:
        return is_string ? "\"" + text + "\"" : is_list ? text : ValueTypeText(value);
    }
  }
  bool operator==(const Answer& o) const {
    if (status != o.status || value.type != o.value.type) return false;
    if (value.type == BP_VALUE_INT) return value.u.v_int64 == o.value.u.v_int64;
    if (value.type == BP_VALUE_FLOAT) return value.u.v_float64 == o.value.u.v_float64;
    if (is_string || o.is_string) return is_string == o.is_string && text == o.text;
    if (is_list || o.is_list) return is_list == o.is_list && text == o.text;
    return true;
  }
};

Answer Query(const Context& ctx, DLDevice dev, int32_t kind) {
  Answer a;
  a.value.type = BP_VALUE_NONE;
  a.value.u.v_int64 = 0;
  a.status = ctx.api->get_attr(ctx.api->self, dev, kind, &a.value);
  if (a.status != BP_OK) {
    a.error = TakeError(a.status);
    return a;
  }
  const bp_value_t& v = a.value;
  if (v.type == BP_VALUE_OBJECT) {
    int32_t t = 0;
    if (v.u.v_obj != nullptr && bp_object_type(v.u.v_obj, &t) == BP_OK && t == BP_OBJECT_STRING) {
      const char* data = nullptr;
      size_t size = 0;
      bp_string_get(v.u.v_obj, &data, &size);
      a.is_string = true;
      a.text.assign(data != nullptr ? data : "", size);
      if (std::strlen(a.text.c_str()) != size) a.problem = "a string with an embedded NUL byte";
    } else if (v.u.v_obj != nullptr && t == BP_OBJECT_ARRAY) {
      a.is_list = true;
      a.problem = ReadList(v.u.v_obj, &a.list_of_ints, &a.text);
    } else {
      a.problem = "a " + ValueTypeText(v) +
                  "; attributes are strings or (the list kinds) arrays, not other objects";
    }
    bp_error_clear();
    bp_object_release(v.u.v_obj);
    return a;
  }
  if (v.type < BP_VALUE_NONE || v.type > BP_VALUE_OBJECT) {
    a.problem = "garbage: value " + ValueTypeText(v);
  } else if (v.type != BP_VALUE_NONE && v.type != BP_VALUE_INT && v.type != BP_VALUE_FLOAT) {
    a.problem = "a " + ValueTypeText(v) +
                (v.type == BP_VALUE_STR ? "; a result holds a string object, never a borrowed "
                                          "string"
                                        : "; attributes are none, int, float or a string object");
  }
  return a;
}

// What is wrong with answer `a` to `kind` on an existing device, or "".
std::string CheckAnswer(int32_t kind, const Answer& a) {
  if (a.status != BP_OK) {
    return "failed (" + a.error + "); a kind that cannot be queried answers none";
  }
  if (!a.problem.empty()) return "answered " + a.problem;
  const bp_value_t& v = a.value;
  if (v.type == BP_VALUE_NONE)
    return kind == BP_ATTR_EXIST ? "answered none; kExist is 0 or 1" : "";
  const Want want = KindType(kind);
  if (kind == BP_ATTR_EXIST) {
    if (v.type != BP_VALUE_INT || v.u.v_int64 != 1) {
      return "answered " + a.Show() + " for a device that exists; expected the int 1";
    }
    return "";
  }
  if (a.is_list) {
    if (want != Want::kIntList && want != Want::kStringList) {
      return "answered a list (" + a.Show() +
             "); only subgroup_sizes, extensions and isa_flags "
             "are lists";
    }
    const nlohmann::json items = nlohmann::json::parse(a.text);
    if (want == Want::kIntList) {
      if (!a.list_of_ints || items.empty()) {
        return "answered " + a.Show() +
               "; expected a non-empty list of positive ints (none "
               "when the device cannot say)";
      }
      for (const auto& e : items) {
        if (e.get<int64_t>() <= 0)
          return "answered " + a.Show() + " with a size that is not positive";
      }
    } else {
      for (const auto& e : items) {
        if (!e.is_string() || e.get<std::string>().empty()) {
          return "answered " + a.Show() + "; expected a list of non-empty strings";
        }
      }
    }
    return "";
  }
  if (want == Want::kFlag) {
    if (v.type != BP_VALUE_INT || (v.u.v_int64 != 0 && v.u.v_int64 != 1)) {
      return "answered " + a.Show() + "; this kind is the int 0 or 1";
    }
    return "";
  }
  if (want == Want::kIntList || want == Want::kStringList) {
    return "answered " + a.Show() + "; this kind is an array object (a list), or none";
  }
  if (v.type == BP_VALUE_INT && want != Want::kString) {
    if (v.u.v_int64 < 0 || (v.u.v_int64 == 0 && kind != BP_ATTR_AVAILABLE_GLOBAL_MEMORY)) {
      return "answered " + a.Show() +
             ", which is no count or size; a kind that does not apply "
             "answers none, never 0";
    }
    return "";
  }
  if (a.is_string && want != Want::kInt) {
    if (a.text.empty()) return "answered an empty string; a kind that does not apply answers none";
    if (kind == BP_ATTR_DEVICE_KIND && a.text != "cpu" && a.text != "gpu" &&
        a.text != "accelerator" && a.text != "other") {
      return "answered \"" + a.text + "\"; expected cpu, gpu, accelerator or other";
    }
    if (kind == BP_ATTR_MAX_THREAD_DIMENSIONS) {
      nlohmann::json j = nlohmann::json::parse(a.text, nullptr, false);
      bool ok = j.is_array() && !j.empty();
      for (const auto& e : j) ok = ok && e.is_number_integer() && e.get<int64_t>() > 0;
      if (!ok)
        return "answered \"" + a.text +
               "\"; expected a JSON array of extents like \"[1024, 1024, 64]\"";
    }
    return "";
  }
  return "answered a " + std::string(a.is_string ? "string" : ValueTypeText(v)) + " (" + a.Show() +
         "); this kind is " +
         (want == Want::kInt      ? "an int"
          : want == Want::kString ? "a string"
                                  : "an int or a string");
}

void Types(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  std::vector<std::string> problems;
  for (int32_t kind = 0; kind < BP_ATTR_COUNT; ++kind) {
    const Answer a = Query(ctx, ctx.dev, kind);
    const std::string p = CheckAnswer(kind, a);
    if (!p.empty()) problems.push_back("kind " + KindName(kind) + " " + p);
    ctx.Detail(KindName(kind) + ": " + a.Show());
  }
  // Kinds this host does not know (a newer minor's): none, or at most a clean error.
  for (int32_t kind : {int32_t{BP_ATTR_COUNT}, int32_t{64}, int32_t{100000}}) {
    const Answer a = Query(ctx, ctx.dev, kind);
    if (a.status == BP_OK && a.value.type != BP_VALUE_NONE) {
      problems.push_back("kind " + std::to_string(kind) +
                         ", which no ABI version defines, answered " + a.Show() +
                         " instead of none");
    }
  }
  const Answer total = Query(ctx, ctx.dev, BP_ATTR_TOTAL_GLOBAL_MEMORY);
  const Answer avail = Query(ctx, ctx.dev, BP_ATTR_AVAILABLE_GLOBAL_MEMORY);
  if (total.status == BP_OK && avail.status == BP_OK && total.value.type == BP_VALUE_INT &&
      avail.value.type == BP_VALUE_INT && avail.value.u.v_int64 > total.value.u.v_int64) {
    problems.push_back("available_global_memory " + avail.Show() + " exceeds total_global_memory " +
                       total.Show());
  }
  if (!problems.empty()) Fail(JoinProblems(problems) + " (BP-PLUGIN-5)");
}

void ExistCount(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  const int n = ctx.device_count;
  std::vector<std::string> problems;
  for (int32_t id = 0; id < n; ++id) {
    const Answer a = Query(ctx, DLDevice{ctx.dev.device_type, id}, BP_ATTR_EXIST);
    if (a.status != BP_OK || a.value.type != BP_VALUE_INT || a.value.u.v_int64 != 1) {
      problems.push_back("kExist of " + DeviceString(DLDevice{ctx.dev.device_type, id}) +
                         " answered " + a.Show() + " although it answered 1 before");
    }
  }
  // Past the last device: kExist = 0 (an int, not none), none for every other kind, and the
  // answer does not change further out.
  for (int32_t id : {n, n + 1, n + 7, 1000, 0x7fffffff}) {
    const DLDevice past{ctx.dev.device_type, id};
    const Answer e = Query(ctx, past, BP_ATTR_EXIST);
    if (e.status != BP_OK || e.value.type != BP_VALUE_INT || e.value.u.v_int64 != 0) {
      problems.push_back("kExist of " + DeviceString(past) + ", past the last of its " +
                         std::to_string(n) + " device(s), answered " + e.Show() +
                         "; expected the int 0");
      continue;
    }
    for (int32_t kind = 1; kind < BP_ATTR_COUNT; ++kind) {
      const Answer a = Query(ctx, past, kind);
      if (a.status == BP_OK && a.value.type != BP_VALUE_NONE) {
        problems.push_back("kind " + KindName(kind) + " of " + DeviceString(past) +
                           ", which does not exist, answered " + a.Show() + " instead of none");
        break;
      }
    }
  }
  ctx.Detail(std::to_string(n) + " device(s) of type " + DeviceTypeName(ctx.dev.device_type));
  if (!problems.empty()) Fail(JoinProblems(problems) + " (BP-PLUGIN-5)");
}

void Repeatable(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  std::vector<Answer> first;
  for (int32_t kind = 0; kind < BP_ATTR_COUNT; ++kind) first.push_back(Query(ctx, ctx.dev, kind));
  std::vector<std::string> problems;
  auto compare = [&](const std::vector<Answer>& again, const std::string& how) {
    for (int32_t kind = 0; kind < BP_ATTR_COUNT; ++kind) {
      const Answer& a = first[static_cast<size_t>(kind)];
      const Answer& b = again[static_cast<size_t>(kind)];
      // Free memory changes as anything allocates; only its type must stay.
      const bool same = kind == BP_ATTR_AVAILABLE_GLOBAL_MEMORY
                            ? a.status == b.status && a.value.type == b.value.type
                            : a == b;
      if (!same) {
        problems.push_back("kind " + KindName(kind) + " answered " + a.Show() + ", then " +
                           b.Show() + " " + how);
      }
    }
  };
  for (int round = 0; round < 3; ++round) {
    std::vector<Answer> again;
    for (int32_t kind = 0; kind < BP_ATTR_COUNT; ++kind) again.push_back(Query(ctx, ctx.dev, kind));
    compare(again, "when asked again");
  }
  std::vector<std::vector<Answer>> per_thread(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < per_thread.size(); ++t) {
    threads.emplace_back([&ctx, &per_thread, t] {
      for (int32_t kind = 0; kind < BP_ATTR_COUNT; ++kind)
        per_thread[t].push_back(Query(ctx, ctx.dev, kind));
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& answers : per_thread) compare(answers, "on another thread");
  if (!problems.empty()) Fail(JoinProblems(problems) + " (BP-PLUGIN-5)");
}

void UnknownProperty(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  if (ctx.api->get_property == nullptr)
    Skip("the DeviceAPI has no get_property (every key answers none)");
  for (const char* key : {"backplane.conformance.no_such_property", "", "\xff\xfe"}) {
    bp_value_t v;
    v.type = BP_VALUE_NONE;
    v.u.v_int64 = 0;
    const bp_status_t st = ctx.api->get_property(ctx.api->self, ctx.dev, key, &v);
    if (st != BP_OK)
      Fail(std::string("get_property(\"") + key + "\") failed (" + TakeError(st) +
           "); an unknown key answers none");
    if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
    if (v.type != BP_VALUE_NONE)
      Fail(std::string("get_property(\"") + key + "\"), a key no backend defines, answered a " +
           ValueTypeText(v) + " instead of none");
  }
}

// Every key list_properties lists answers get_property with something other than none, and
// the list is the same when asked again.
void ListedProperties(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  if (ctx.api->list_properties == nullptr) {
    Skip("the DeviceAPI has no list_properties (built before ABI 1.5, or lists no keys)");
  }
  auto list = [&ctx]() {
    bp_object_t* keys = nullptr;
    const bp_status_t st = ctx.api->list_properties(ctx.api->self, ctx.dev, &keys);
    if (st != BP_OK) Fail("list_properties failed (" + TakeError(st) + ")");
    if (keys == nullptr) Fail("list_properties answered no array; an empty one lists no keys");
    std::vector<std::string> out;
    size_t n = 0;
    bp_array_size(keys, &n);
    for (size_t i = 0; i < n; ++i) {
      bp_value_t e;
      int32_t t = 0;
      if (bp_array_get(keys, i, &e) != BP_OK || e.type != BP_VALUE_OBJECT ||
          bp_object_type(e.u.v_obj, &t) != BP_OK || t != BP_OBJECT_STRING) {
        bp_object_release(keys);
        Fail("list_properties answered an array whose element " + std::to_string(i) +
             " is not a string object");
      }
      const char* data = nullptr;
      bp_string_get(e.u.v_obj, &data, nullptr);
      out.push_back(data != nullptr ? data : "");
    }
    bp_object_release(keys);
    return out;
  };
  const std::vector<std::string> keys = list();
  std::vector<std::string> problems;
  for (const std::string& key : keys) {
    if (ctx.api->get_property == nullptr) {
      problems.push_back("lists \"" + key + "\" but has no get_property");
      break;
    }
    bp_value_t v;
    v.type = BP_VALUE_NONE;
    v.u.v_int64 = 0;
    const bp_status_t st = ctx.api->get_property(ctx.api->self, ctx.dev, key.c_str(), &v);
    if (st != BP_OK) {
      problems.push_back("get_property(\"" + key + "\"), a listed key, failed (" + TakeError(st) +
                         ")");
      continue;
    }
    // Described before the release: the answer's object is the caller's to release, and is
    // gone after it.
    ctx.Detail("property " + key + ": " + ValueTypeText(v));
    if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
    if (v.type == BP_VALUE_NONE) {
      problems.push_back("get_property(\"" + key + "\"), a listed key, answered none");
    }
  }
  if (list() != keys) problems.push_back("list_properties answered another list when asked again");
  if (!problems.empty()) Fail(JoinProblems(problems) + " (BP-PLUGIN-13)");
}

// bp_device_list lists exactly the devices of this type that answer kExist = 1: ids 0 to
// device_count - 1.
void ListedDevices(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  size_t count = 0;
  if (const bp_status_t st = bp_device_list(nullptr, 0, &count); st != BP_OK) {
    Fail("bp_device_list failed (" + TakeError(st) + ")");
  }
  std::vector<DLDevice> devices(count);
  if (const bp_status_t st = bp_device_list(devices.data(), devices.size(), &count); st != BP_OK) {
    Fail("bp_device_list failed (" + TakeError(st) + ")");
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < devices.size() && i < count; ++i) {
    if (devices[i].device_type == ctx.dev.device_type) ids.push_back(devices[i].device_id);
  }
  std::vector<int32_t> expected;
  for (int32_t id = 0; id < ctx.device_count; ++id) expected.push_back(id);
  if (ids != expected) {
    std::string got;
    for (int32_t id : ids) got += (got.empty() ? "" : ", ") + std::to_string(id);
    Fail("bp_device_list lists ids [" + got + "] of " + DeviceTypeName(ctx.dev.device_type) +
         ", but kExist says ids 0 to " + std::to_string(ctx.device_count - 1) +
         " exist (BP-PLUGIN-5)");
  }
  ctx.Detail(std::to_string(ids.size()) + " device(s) listed");
}

}  // namespace

void AddAttrTests(std::vector<TestCase>* out) {
  out->push_back({"device.attr.types",
                  "GetAttr: every attribute kind answers a value of its type (int, string "
                  "object or, for the list kinds, an array object) or none when it cannot be "
                  "queried or does not apply, never garbage",
                  "BP-PLUGIN-5", kNeedsDevice, Types});
  out->push_back({"device.attr.exist_count",
                  "kExist is 1 for every device that exists and the int 0 past the last one, where "
                  "every other kind answers none",
                  "BP-PLUGIN-5", kNeedsDevice, ExistCount});
  out->push_back({"device.attr.repeatable",
                  "repeated GetAttr queries, from one thread or several, give the same answers",
                  "BP-PLUGIN-5, BP-PLUGIN-9", kNeedsDevice, Repeatable});
  out->push_back({"device.attr.unknown_property",
                  "get_property answers none for a key it does not know", "BP-PLUGIN-5",
                  kNeedsDevice, UnknownProperty});
  out->push_back({"device.attr.listed_properties",
                  "every key list_properties lists answers get_property, and the list is stable",
                  "BP-PLUGIN-13", kNeedsDevice, ListedProperties});
  out->push_back({"device.list", "bp_device_list lists exactly the devices of the type that exist",
                  "BP-PLUGIN-5", kNeedsDevice, ListedDevices});
}

}  // namespace conformance
}  // namespace backplane
