// SPDX-License-Identifier: Apache-2.0
// Plugin-author helpers: the entry point, value and error helpers, registration.
//
// A plugin is C++ inside and C at its edge. It defines its one entry point with
// BACKPLANE_PLUGIN_ENTRY, whose body is ordinary C++ that may throw:
//
//   BACKPLANE_PLUGIN_ENTRY("foo", "1.2.0") {
//     backplane::sdk::RegisterDeviceAPI("foo", &FooDeviceAPI::Global());
//   }
//
// The macro negotiates the ABI version with the host, stores the host table (every call a
// plugin makes into the core goes through it; plugins never link libbackplane) and turns an
// exception thrown by the body into a status and a message in the host's error slot.
#ifndef BACKPLANE_SDK_PLUGIN_HPP_
#define BACKPLANE_SDK_PLUGIN_HPP_

#ifndef BACKPLANE_PLUGIN
#error \
    "backplane/sdk/plugin.hpp is for plugins: build the target with backplane_add_plugin() \
(or define BACKPLANE_PLUGIN=1 before including any Backplane header)"
#endif

#include <backplane/backplane.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// Throws backplane::Error(kind, message) unless `cond` holds. `message` is an expression
// that is evaluated only on failure, so building it costs nothing on the fast path. A good
// message names the thing, what was expected and what to do.
#define BACKPLANE_REQUIRE(cond, kind, message)            \
  do {                                                    \
    if (!(cond)) throw ::backplane::Error(kind, message); \
  } while (false)

namespace backplane {
namespace sdk {

// What a plugin says about itself in bp_plugin_info_t.
struct PluginDescription {
  const char* name;     // as in the plugin's manifest
  const char* version;  // the plugin's own version, free form
  const char* vendor = nullptr;
  // The lowest host ABI minor the plugin needs. The default is the minor of the headers it
  // was built with; a plugin that uses nothing newer may lower it.
  uint32_t min_host_minor = BP_ABI_VERSION_MINOR;
};

// Values for results and attributes. An Any built here owns its object, if any.
inline Any NoneValue() { return Any(); }
inline Any IntValue(int64_t x) {
  bp_value_t v = ::backplane::detail::ArgValue(BP_VALUE_INT);
  v.u.v_int64 = x;
  return Any(v);
}
inline Any FloatValue(double x) {
  bp_value_t v = ::backplane::detail::ArgValue(BP_VALUE_FLOAT);
  v.u.v_float64 = x;
  return Any(v);
}
// A pointer the receiver never frees (BP_VALUE_PTR).
inline Any PtrValue(void* p) {
  bp_value_t v = ::backplane::detail::ArgValue(BP_VALUE_PTR);
  v.u.v_ptr = p;
  return Any(v);
}
// A string object holding a copy of `text`.
inline Any StringValue(std::string_view text) {
  bp_value_t v = ::backplane::detail::ArgValue(BP_VALUE_OBJECT);
  v.u.v_obj = MakeString(text).release();
  return Any(v);
}

// An array object of ints, for list attributes such as BP_ATTR_SUBGROUP_SIZES (ABI 1.5).
inline Any IntArrayValue(const std::vector<int64_t>& items) {
  std::vector<bp_value_t> values;
  values.reserve(items.size());
  for (int64_t x : items) values.push_back(::backplane::detail::ToArg(x));
  bp_value_t v = ::backplane::detail::ArgValue(BP_VALUE_OBJECT);
  Check(::backplane::detail::Api()->array_create(values.data(), values.size(), &v.u.v_obj));
  return Any(v);
}
// An array object of strings (each copied), for list attributes such as BP_ATTR_EXTENSIONS and
// for DeviceAPI::ListProperties (ABI 1.5).
inline Any StringArrayValue(const std::vector<std::string>& items) {
  std::vector<bp_value_t> values;
  values.reserve(items.size());
  for (const std::string& x : items) values.push_back(::backplane::detail::ToArg(x));
  bp_value_t v = ::backplane::detail::ArgValue(BP_VALUE_OBJECT);
  Check(::backplane::detail::Api()->array_create(values.data(), values.size(), &v.u.v_obj));
  return Any(v);
}

// Registers `callable` (Any(PackedArgs)) as the global function `name`. A taken name is
// BP_ERR_ALREADY_EXISTS; during bp_plugin_init the core records the name as this plugin's.
// `flags`: more bp_function_create_with_flags bits (Function::FromCallable).
template <typename Callable>
void RegisterFunction(const std::string& name, Callable callable, uint32_t flags = 0) {
  Registry::Set(name, Function::FromCallable(std::move(callable), flags));
}

// The id of the device type `name`, registering a fresh one (>= BP_DEVICE_TYPE_FIRST_DYNAMIC)
// when DLPack does not define the name and nobody registered it before.
inline int32_t RegisterDeviceType(const std::string& name) {
  int32_t id = 0;
  Check(::backplane::detail::Api()->device_type_register(name.c_str(), &id));
  return id;
}

// "cpu:0", "simaccel:1", or "device type 77:0" when the id has no name.
inline std::string DeviceString(DLDevice dev) {
  const char* name = nullptr;
  std::string type;
  if (::backplane::detail::Api()->device_type_name(dev.device_type, &name) == BP_OK &&
      name != nullptr) {
    type = name;
  } else {
    ::backplane::detail::Api()->error_clear();
    type = "device type " + std::to_string(static_cast<int>(dev.device_type));
  }
  return type + ":" + std::to_string(dev.device_id);
}

// A pointer or opaque handle as text ("0x7f3a..."), for messages.
inline std::string PointerString(const void* p) {
  char buf[2 + 2 * sizeof(void*) + 1];
  std::snprintf(buf, sizeof(buf), "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
  return buf;
}

// A 16-byte device UUID as BP_ATTR_UUID reports it: "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
// lowercase hex, the bytes in order.
inline std::string UuidString(const unsigned char* b) {
  char out[37];
  std::snprintf(out, sizeof(out),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

// A PCI address as BP_ATTR_PCI_BUS_ID reports it: "dddd:bb:dd.f", lowercase hex (as lspci).
inline std::string PciBusIdString(uint32_t domain, uint32_t bus, uint32_t device,
                                  uint32_t function) {
  char out[32];
  std::snprintf(out, sizeof(out), "%04x:%02x:%02x.%x", domain, bus, device, function);
  return out;
}

namespace detail {

// The part of bp_host_api_t that every major keeps in place, so a plugin can read the
// host's version and report a mismatch whatever the host's major is.
constexpr size_t kHostNegotiationPrefix =
    offsetof(bp_host_api_t, error_set) + sizeof(bp_host_api_t::error_set);
// The host table of ABI 1.0; hosts of any 1.x offer at least this much.
constexpr size_t kHostApiSizeV1_0 =
    offsetof(bp_host_api_t, tensor_get) + sizeof(bp_host_api_t::tensor_get);
// bp_plugin_info_t up to `version`; `vendor` is written only when the host's struct has it.
constexpr size_t kPluginInfoMinSize =
    offsetof(bp_plugin_info_t, version) + sizeof(bp_plugin_info_t::version);

inline bp_status_t ReportInitError(const bp_host_api_t* host, bp_status_t kind,
                                   const std::string& message) {
  if (host->struct_size >= kHostNegotiationPrefix && host->error_set != nullptr) {
    return host->error_set(kind, message.c_str());
  }
  return kind;
}

// The body of bp_plugin_init: negotiation, then `body` under CatchAtEdge.
template <typename Body>
bp_status_t RunPluginInit(const bp_host_api_t* host, bp_plugin_info_t* out_info,
                          const PluginDescription& desc, Body&& body) noexcept {
  // Nothing can be reported without a host table; the status alone says it.
  if (host == nullptr) return BP_ERR_INVALID_ARGUMENT;
  if (host->struct_size < offsetof(bp_host_api_t, error_set)) return BP_ERR_VERSION_MISMATCH;
  const std::string who = std::string("plugin '") + desc.name + "'";
  try {
    if (out_info == nullptr || out_info->struct_size < kPluginInfoMinSize) {
      return ReportInitError(
          host, BP_ERR_INVALID_ARGUMENT,
          who + ": bp_plugin_init got " +
              (out_info == nullptr
                   ? std::string("a null bp_plugin_info_t")
                   : "a bp_plugin_info_t of " + std::to_string(out_info->struct_size) + " bytes") +
              "; the host must pass one of at least " + std::to_string(kPluginInfoMinSize) +
              " bytes with struct_size set");
    }
    out_info->abi_major = BP_ABI_VERSION_MAJOR;
    out_info->abi_minor = desc.min_host_minor;
    out_info->name = desc.name;
    out_info->version = desc.version;
    if (out_info->struct_size >= offsetof(bp_plugin_info_t, vendor) + sizeof(const char*)) {
      out_info->vendor = desc.vendor;
    }

    const std::string mine =
        std::to_string(BP_ABI_VERSION_MAJOR) + "." + std::to_string(desc.min_host_minor);
    const std::string theirs =
        std::to_string(host->abi_major) + "." + std::to_string(host->abi_minor);
    if (host->abi_major != BP_ABI_VERSION_MAJOR) {
      return ReportInitError(host, BP_ERR_VERSION_MISMATCH,
                             who + " speaks Backplane ABI " + mine + " but the host speaks " +
                                 theirs + "; use a build of the plugin for ABI major " +
                                 std::to_string(host->abi_major));
    }
    if (host->abi_minor < desc.min_host_minor) {
      return ReportInitError(host, BP_ERR_VERSION_MISMATCH,
                             who + " needs host ABI " + mine + " or newer but the host speaks " +
                                 theirs + "; upgrade libbackplane or use an older build of " +
                                 "the plugin");
    }
    if (host->struct_size < kHostApiSizeV1_0) {
      return ReportInitError(host, BP_ERR_VERSION_MISMATCH,
                             who + ": the host table has " + std::to_string(host->struct_size) +
                                 " bytes, fewer than ABI " + theirs + " promises (" +
                                 std::to_string(kHostApiSizeV1_0) + "); the host is broken");
    }
  } catch (...) {
    return ReportInitError(host, BP_ERR_OUT_OF_MEMORY, "out of host memory in bp_plugin_init");
  }
  ::backplane::detail::g_host_api = host;
  return CatchAtEdge(std::forward<Body>(body));
}

}  // namespace detail
}  // namespace sdk
}  // namespace backplane

// Defines the plugin's entry point (bp_plugin_init) from a PluginDescription expression;
// the braces that follow the macro are the init body.
#define BACKPLANE_PLUGIN_ENTRY_WITH(description)                                                \
  static void BackplanePluginInitBody();                                                        \
  extern "C" BP_EXPORT bp_status_t bp_plugin_init(const bp_host_api_t* host,                    \
                                                  bp_plugin_info_t* out_info) {                 \
    static const ::backplane::sdk::PluginDescription kBackplanePluginDescription = description; \
    return ::backplane::sdk::detail::RunPluginInit(host, out_info, kBackplanePluginDescription, \
                                                   &BackplanePluginInitBody);                   \
  }                                                                                             \
  static void BackplanePluginInitBody()

// Defines the plugin's entry point for a plugin named `name` (as in its manifest) at its own
// `version`; the braces that follow are the init body.
#define BACKPLANE_PLUGIN_ENTRY(name, version) \
  BACKPLANE_PLUGIN_ENTRY_WITH((::backplane::sdk::PluginDescription{name, version}))

#endif  // BACKPLANE_SDK_PLUGIN_HPP_
