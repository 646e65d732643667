// SPDX-License-Identifier: Apache-2.0
// A host that offers an older ABI minor, for plugins built today (docs/abi.md, "Versions both
// ways"). It copies libbackplane's real host table, reports the older version in abi_major and
// abi_minor, sets struct_size to the size that version's table had, and fills every entry past
// that size with a trap that fails the test if the plugin calls it (a real old host's table
// simply ends there). Then it opens the plugin with dlopen and calls its bp_plugin_init directly,
// as the loader would. Offered a minor newer than today's, it plays a newer host instead: a host
// table and a bp_plugin_info_t longer than the plugin knows.
//
//   abi_old_host <host version> <plugin.so> works
//     the plugin must accept the host and work without the newer entries (for the abinew test
//     plugin, new_plugin.cc, its device, functions and target kind are exercised too);
//   abi_old_host <host version> <plugin.so> refused <plugin's version>
//     the plugin must refuse with BP_ERR_VERSION_MISMATCH and a message naming both versions.
// Exits 0 when the plugin did what was expected.
#include <backplane/c_api.h>
#include <dlfcn.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace {

int g_failures = 0;
std::string g_host_version;

void Expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++g_failures;
}

std::string LastError() {
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  return message != nullptr ? message : "(no message)";
}

// The size of the host table of each 1.x minor: up to and including its last entry.
size_t HostTableSize(unsigned minor) {
  switch (minor) {
    case 0:
      return offsetof(bp_host_api_t, tensor_get) + sizeof(void*);
    case 1:
      return offsetof(bp_host_api_t, device_attr_name) + sizeof(void*);
    case 2:
      return offsetof(bp_host_api_t, module_load) + sizeof(void*);
    case 3:
      return offsetof(bp_host_api_t, build) + sizeof(void*);
    case 4:
      return offsetof(bp_host_api_t, module_load_with_options) + sizeof(void*);
    case 5:
      return offsetof(bp_host_api_t, device_list) + sizeof(void*);
    case 6:
      return offsetof(bp_host_api_t, tensor_from_native) + sizeof(void*);
    case 7:
    case 8:  // 1.8 appended no entry (BP_FUNCTION_READS_IR flag bits)
      return offsetof(bp_host_api_t, function_create_with_flags) + sizeof(void*);
    case 9:
      return offsetof(bp_host_api_t, layers_active) + sizeof(void*);
    default:  // a minor made after this test was written: today's table
      return sizeof(bp_host_api_t);
  }
}

constexpr size_t kFirstEntry = offsetof(bp_host_api_t, error_set);
constexpr size_t kEntries = (sizeof(bp_host_api_t) - kFirstEntry) / sizeof(void*);

// Entry I of the table, called although it lies past the end of the table the plugin was given.
template <size_t I>
void Trap() {
  std::printf(
      "FAIL: the plugin called host table entry %zu (byte offset %zu), past the end of "
      "the ABI %s table it was given\n",
      I, kFirstEntry + I * sizeof(void*), g_host_version.c_str());
  std::fflush(stdout);
  std::_Exit(3);
}

template <size_t... I>
std::array<void (*)(), sizeof...(I)> MakeTraps(std::index_sequence<I...>) {
  return {&Trap<I>...};
}

// An entry a newer minor appended, which no plugin built today can know of.
void TrapNewer() {
  std::printf("FAIL: the plugin called a host table entry of ABI %s, newer than its own\n",
              g_host_version.c_str());
  std::fflush(stdout);
  std::_Exit(3);
}

// The host table this test offers, with room for a newer minor's entries; it outlives the
// plugin, as a host's does.
struct OfferedTable {
  bp_host_api_t base;
  void* newer[4];
};
OfferedTable g_offered;
bp_host_api_t& g_table = g_offered.base;

void OfferVersion(unsigned major, unsigned minor) {
  g_table = *bp_host_api();
  g_table.abi_major = major;
  g_table.abi_minor = minor;
  g_table.struct_size = major == BP_ABI_VERSION_MAJOR ? HostTableSize(minor) : sizeof(g_table);
  if (major == BP_ABI_VERSION_MAJOR && minor > BP_ABI_VERSION_MINOR) {
    // A newer host: its table is longer than the plugin's header says.
    g_table.struct_size = sizeof(g_offered);
    for (void*& entry : g_offered.newer) entry = reinterpret_cast<void*>(&TrapNewer);
  }
  static const auto traps = MakeTraps(std::make_index_sequence<kEntries>{});
  auto* slots = reinterpret_cast<void**>(reinterpret_cast<char*>(&g_table) + kFirstEntry);
  for (size_t i = 0; i < kEntries; ++i) {
    if (kFirstEntry + (i + 1) * sizeof(void*) > g_table.struct_size) {
      slots[i] = reinterpret_cast<void*>(traps[i]);
    }
  }
}

bp_value_t Call(const char* name) {
  bp_object_t* fn = nullptr;
  bp_value_t out;
  out.type = BP_VALUE_NONE;
  if (bp_registry_get(name, &fn) != BP_OK) {
    Expect(false, std::string(name) + " is registered: " + LastError());
    return out;
  }
  if (bp_function_call(fn, nullptr, 0, &out) != BP_OK) {
    Expect(false, std::string(name) + " runs: " + LastError());
  }
  bp_object_release(fn);
  return out;
}

std::string TakeString(bp_value_t v) {
  if (v.type != BP_VALUE_OBJECT) return "(not a string object)";
  const char* data = nullptr;
  bp_string_get(v.u.v_obj, &data, nullptr);
  std::string s = data != nullptr ? data : "";
  bp_object_release(v.u.v_obj);
  return s;
}

// The abinew plugin (new_plugin.cc) on this host: what it registered works, through the real
// core, while its own calls into the host go through the old table.
void ExerciseAbinew(unsigned minor) {
  const std::string host = "1." + std::to_string(minor);
  Expect(TakeString(Call("abinew.host_version")) == host,
         "the plugin saw the host's version, " + host);
  const bp_value_t count = Call("abinew.count_devices");
  if (minor < 5) {
    Expect(count.type == BP_VALUE_INT && count.u.v_int64 == -1,
           "listing devices (ABI 1.5) is reported unsupported on a " + host + " host");
  } else {
    Expect(count.type == BP_VALUE_INT && count.u.v_int64 >= 1,
           "listing devices works on a " + host + " host and finds abinew:0");
  }

  int32_t type = -1;
  Expect(bp_device_type_from_name("abinew", &type) == BP_OK, "its device type is registered");
  const DLDevice dev{static_cast<DLDeviceType>(type), 0};
  bp_value_t v;
  Expect(bp_device_get_attr(dev, BP_ATTR_DEVICE_NAME, &v) == BP_OK &&
             TakeString(v) == "abinew host memory",
         "its DeviceAPI answers the device name (a string object made through the old table)");
  bp_object_t* keys = nullptr;
  size_t n = 0;
  Expect(
      bp_device_list_properties(dev, &keys) == BP_OK && bp_array_size(keys, &n) == BP_OK && n == 1,
      "its property keys are listed (an array made through the old table)");
  bp_object_release(keys);

  const int64_t shape[1] = {64};
  const DLDataType i32{kDLInt, 32, 1};
  bp_object_t* a = nullptr;
  bp_object_t* b = nullptr;
  bp_object_t* c = nullptr;
  DLTensor *ta = nullptr, *tb = nullptr, *tc = nullptr;
  bool copied = bp_tensor_empty(1, shape, i32, DLDevice{kDLCPU, 0}, &a) == BP_OK &&
                bp_tensor_empty(1, shape, i32, dev, &b) == BP_OK &&
                bp_tensor_empty(1, shape, i32, DLDevice{kDLCPU, 0}, &c) == BP_OK &&
                bp_tensor_get(a, &ta) == BP_OK && bp_tensor_get(b, &tb) == BP_OK &&
                bp_tensor_get(c, &tc) == BP_OK;
  if (copied) {
    for (int i = 0; i < 64; ++i) static_cast<int32_t*>(ta->data)[i] = i * 7;
    copied = bp_device_copy_data_from_to(ta, tb, nullptr) == BP_OK &&
             bp_device_copy_data_from_to(tb, tc, nullptr) == BP_OK &&
             bp_device_stream_sync(dev, nullptr) == BP_OK &&
             std::memcmp(ta->data, tc->data, 64 * sizeof(int32_t)) == 0;
  }
  Expect(copied, "data goes to its device and back");
  bp_object_release(c);
  bp_object_release(b);
  bp_object_release(a);

  bp_object_t* target = nullptr;
  const bp_status_t parsed = bp_target_parse("abinew", &target);
  if (minor >= 1) {
    Expect(parsed == BP_OK, "its target kind is registered on a host with Targets (" + host + ")");
  } else {
    Expect(parsed != BP_OK, "it registers no target kind on a 1.0 host, which has no Targets");
    bp_error_clear();
  }
  bp_object_release(target);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (std::strcmp(argv[3], "works") != 0 && std::strcmp(argv[3], "refused") != 0) ||
      (std::strcmp(argv[3], "refused") == 0 && argc < 5)) {
    std::fprintf(stderr,
                 "usage: abi_old_host <major.minor> <plugin.so> works\n"
                 "       abi_old_host <major.minor> <plugin.so> refused <plugin's version>\n");
    return 2;
  }
  unsigned major = 0, minor = 0;
  if (std::sscanf(argv[1], "%u.%u", &major, &minor) != 2) return 2;
  g_host_version = argv[1];
  const std::string library = argv[2];
  const bool expect_works = std::strcmp(argv[3], "works") == 0;
  OfferVersion(major, minor);
  std::printf("host: ABI %s, a host table of %zu bytes (today's has %zu)\n", argv[1],
              g_table.struct_size, sizeof(bp_host_api_t));

  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::printf("FAIL: dlopen %s: %s\n", library.c_str(), dlerror());
    return 1;
  }
  auto init = reinterpret_cast<bp_plugin_init_fn_t>(dlsym(handle, BP_PLUGIN_ENTRY_SYMBOL));
  if (init == nullptr) {
    std::printf("FAIL: %s exports no %s\n", library.c_str(), BP_PLUGIN_ENTRY_SYMBOL);
    return 1;
  }
  // A newer host's bp_plugin_info_t is longer too; the plugin must leave what it does not know.
  struct {
    bp_plugin_info_t info;
    uint64_t newer[2];
  } answer;
  std::memset(&answer, 0, sizeof(answer));
  const bool newer = major == BP_ABI_VERSION_MAJOR && minor > BP_ABI_VERSION_MINOR;
  answer.newer[0] = answer.newer[1] = 0x5e5e5e5e5e5e5e5eull;
  bp_plugin_info_t& info = answer.info;
  info.struct_size = newer ? sizeof(answer) : sizeof(info);
  bp_error_clear();
  const bp_status_t st = init(&g_table, &info);
  if (newer) {
    Expect(answer.newer[0] == 0x5e5e5e5e5e5e5e5eull && answer.newer[1] == 0x5e5e5e5e5e5e5e5eull,
           "the plugin wrote nothing past the bp_plugin_info_t it knows");
  }
  const std::string plugin = std::to_string(info.abi_major) + "." + std::to_string(info.abi_minor);
  std::printf("plugin: '%s' answered ABI %s, status %d (%s)\n",
              info.name != nullptr ? info.name : "?", plugin.c_str(), st, bp_error_kind_name(st));

  if (expect_works) {
    Expect(st == BP_OK, "bp_plugin_init accepts an ABI " + g_host_version + " host" +
                            (st == BP_OK ? "" : ": " + LastError()));
    Expect(info.abi_major == major && info.abi_minor <= minor,
           "the plugin needs no more than ABI " + g_host_version + " (it says " + plugin + ")");
    if (st == BP_OK && info.name != nullptr && std::strcmp(info.name, "abinew") == 0) {
      ExerciseAbinew(minor);
    }
  } else {
    const std::string message = LastError();
    std::printf("message: %s\n", message.c_str());
    Expect(st == BP_ERR_VERSION_MISMATCH, "bp_plugin_init refuses with BP_ERR_VERSION_MISMATCH");
    Expect(message.find(g_host_version) != std::string::npos,
           "the message names the host's version, " + g_host_version);
    Expect(message.find(argv[4]) != std::string::npos,
           std::string("the message names the plugin's version, ") + argv[4]);
  }
  std::printf("%s\n", g_failures == 0 ? "PASS" : "FAILED");
  return g_failures == 0 ? 0 : 1;
}
