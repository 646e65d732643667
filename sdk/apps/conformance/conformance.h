// SPDX-License-Identifier: Apache-2.0
// The conformance kit's tests and what they share (docs/conformance.md).
//
// A test is a named check of one clause of the contract: the DeviceAPI table (docs/abi.md),
// Targets (docs/targets.md), code generators (docs/codegen-guide.md) and the plugin
// requirements BP-PLUGIN-1..13 (docs/plugin-guide.md).
// It runs in a process of its own (isolate.h) that loads the plugin afresh, so a plugin that
// crashes or hangs fails that test and nothing else. A test fails by throwing TestFailure
// (Fail) with a message that says what it saw, and declines by throwing TestSkip (Skip)
// when the plugin lacks what it checks.
#ifndef BACKPLANE_SDK_CONFORMANCE_CONFORMANCE_H_
#define BACKPLANE_SDK_CONFORMANCE_CONFORMANCE_H_

#include <backplane/c_api.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace backplane {
class Error;  // backplane/backplane.hpp
}  // namespace backplane

namespace backplane {
namespace conformance {

// What a test needs. Every test loads the plugin itself (Context::Load), when it is ready
// to: a test may look at the library, or at the registry, first. The parent skips a test whose
// needs the plugin does not meet, with the reason, instead of starting a process for it.
enum Needs : unsigned {
  kNeedsNothing = 0,
  kNeedsDevice = 1u << 0,        // a device of the plugin is present
  kNeedsCodegen = 1u << 1,       // a code generator for a kind of the device's type
  kNeedsOpaqueMemory = 1u << 2,  // the device is not the host (data space may be a handle)
  kNeedsStreams = 1u << 3,       // the device creates streams (create_stream gives non-null)
  // No other test runs beside it, whatever --jobs says: it reads device-wide state (free
  // memory) that a sibling test's allocations or a sibling process's GPU context would move.
  kNeedsDeviceAlone = 1u << 4,
};

// One device type the plugin provides a DeviceAPI for.
struct DeviceTypeInfo {
  std::string name;
  int32_t id = -1;
  int count = 0;                          // ids 0..count-1 answer BP_ATTR_EXIST = 1
  std::vector<std::string> device_names;  // BP_ATTR_DEVICE_NAME per id ("" when none)
  // Per id: its code is CPU code (a cpu device, or a Target from it with the key "cpu", such as
  // a remote plugin's view of a server's cpu:0), so it gets the catalog's CPU kernels.
  std::vector<bool> cpu_code;
  // Per id: the target kinds its Target (FromDevice) names inside itself, such as the server's
  // Target {"kind": "c", ...} in a remote plugin's Target, that have no kind or no code
  // generator in the test's process: their code is generated there, by another plugin, which
  // the parent adds to the tests (main.cc, AddCodegenPlugins).
  std::vector<std::vector<std::string>> foreign_kinds;
  // Per id: the device loads no native code (a remote device whose server runs without
  // --allow-native-modules: its property server_native_modules is 0), so a kind whose modules
  // are native code (its plugin provides runtime.module.native_code.<kind>) cannot run there.
  std::vector<bool> refuses_native;
  bool streams = false;  // create_stream gives streams other than null
  std::string refused;   // why the core refused its DeviceAPI table, if it did
};

// One target kind the plugin registers.
struct KindInfo {
  std::string name;
  std::string device_type;  // the device type its code runs on
  bool codegen = false;     // the plugin provides target.build.<name>
};

// What loading the plugin told the kit: from bp_plugins_list and the plugin's devices.
struct PluginInfo {
  std::string name, library, manifest, version, abi_version, vendor;
  std::string warnings;                            // what the loader noted (bp_plugins_list reason)
  std::vector<std::string> provides;               // names the manifest declares
  std::vector<std::string> declared_device_types;  // device types the manifest declares
  std::vector<DeviceTypeInfo> device_types;        // one per device_api.<type> it provides
  std::vector<KindInfo> kinds;

  nlohmann::json ToJson() const;
  static PluginInfo FromJson(const nlohmann::json& j);
  // The kinds with a code generator whose device type is `type_name`.
  std::vector<std::string> CodegenKinds(const std::string& type_name) const;
  bool Provides(const std::string& name) const;
};

// Whether `dev` runs CPU code: a cpu device, or one whose Target (FromDevice) has the key "cpu".
bool RunsCpuCode(DLDevice dev);
// The target kinds that `dev`'s Target (FromDevice) names in Targets nested inside it, which
// this process has no kind or no code generator (`target.build.<kind>`) for, in order, once.
std::vector<std::string> ForeignKinds(DLDevice dev);

// What a test runs with, in its own process.
class Context {
 public:
  std::string library;                    // the plugin library (resolved by the parent)
  std::vector<std::string> plugin_paths;  // --plugin-path folders, searched first
  std::string device_text;                // --device as the parent chose it ("type:id")
  PluginInfo info;                        // filled by Load
  DLDevice dev{kDLCPU, 0};                // the device under test, after SetUpDevice
  int device_count = 0;                   // devices of dev's type
  const bp_device_api_t* api = nullptr;   // dev's DeviceAPI (the core's copy of the table)
  std::vector<std::string> details;       // lines the result carries besides its message
  nlohmann::json extra;                   // data the result carries (plugin.load: the info)

  // Loads the plugin through the core (bp_plugin_load) and fills `info`. Throws
  // TestFailure naming the reason when it does not load.
  void Load();
  // Counts each device type's devices, reads their names and whether they create streams:
  // the plugin.load test's survey for the parent, which decides what applies from it.
  void Survey();
  // Picks the device under test and its DeviceAPI. Throws TestSkip when there is none.
  void SetUpDevice();
  // True when the device's data space is host memory (device type cpu).
  bool HostMemory() const { return dev.device_type == kDLCPU; }
  const DeviceTypeInfo* DeviceType() const;
  void Detail(const std::string& line) { details.push_back(line); }
};

// A named check. `clause` quotes the contract briefly; `requirement` lists the BP-PLUGIN
// numbers it checks ("" when no numbered requirement states the clause, only the DeviceAPI,
// Target or code-generator contract).
struct TestCase {
  std::string name;
  std::string clause;
  std::string requirement;
  unsigned needs = kNeedsNothing;
  std::function<void(Context&)> run;
  int kernel_family = -1;  // codegen.kernel.*: 0 for CPU kernels, 1 for GPU kernels
};

// Devices of `type` present: ids from 0 while BP_ATTR_EXIST answers 1.
int CountDevices(int32_t type);

// Every test, in the order they run.
const std::vector<TestCase>& AllTests();
const TestCase* FindTest(const std::string& name);

// Each family adds its tests (tests_*.cc).
void AddPluginTests(std::vector<TestCase>* out);
void AddAttrTests(std::vector<TestCase>* out);
void AddMemoryTests(std::vector<TestCase>* out);
void AddCopyTests(std::vector<TestCase>* out);
void AddStreamTests(std::vector<TestCase>* out);
void AddConcurrencyTests(std::vector<TestCase>* out);
void AddCodegenTests(std::vector<TestCase>* out);
void AddConstructTests(std::vector<TestCase>* out);
void AddStreamReuseTests(std::vector<TestCase>* out);
void AddEventNativeTests(std::vector<TestCase>* out);

class TestFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class TestSkip : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Fails the running test with `message`: what was seen, against what was expected.
[[noreturn]] void Fail(const std::string& message);
// Called with every failure's message as Fail throws it. A test's process reports the
// failure at once through it, so that a plugin that then crashes (its queued work writing
// into buffers the failing test released) cannot hide the clause that failed first.
void SetFailureObserver(void (*observer)(const std::string& message));
// Skips the running test: the plugin does not have what it checks.
[[noreturn]] void Skip(const std::string& reason);
// Skips the running test, with "<where>: <the error's message>" as the reason, when `e` (from
// building a clause's kernel, or running it) is a refusal the contract allows: one by bp_build
// of a kernel whose IR needs a newer IR text version than the code generator reads
// (BP_ERR_UNSUPPORTED and "which needs IR text version" in the message; docs/conformance.md,
// "Old code generators"), and, when `optional` (a dtype, atomic or vector type a device may
// lack), any BP_ERR_UNSUPPORTED. Returns otherwise, for the caller to fail the test.
void SkipIfRefused(const Error& e, const std::string& where, bool optional = false);
// The message in this thread's error slot for a failed status ("<kind>: <message>"), and
// clears the slot.
std::string TakeError(bp_status_t status);
// Fails with "<call> failed (<kind>: <message>)" unless `status` is BP_OK.
void CheckCall(bp_status_t status, const std::string& call);

// j[key] when j is an object that has it, else null (which iterates as empty).
const nlohmann::json& Member(const nlohmann::json& j, const char* key);
// "0x9c".
std::string Hex(uint64_t value, int digits = 2);
// "simaccel:0", or "type 77:0" when the type has no name.
std::string DeviceString(DLDevice dev);
// A BP_VALUE_* type as text ("int", "string object", "type 77").
std::string ValueTypeText(const bp_value_t& v);

}  // namespace conformance
}  // namespace backplane

#endif  // BACKPLANE_SDK_CONFORMANCE_CONFORMANCE_H_
