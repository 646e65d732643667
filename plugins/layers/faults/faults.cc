// SPDX-License-Identifier: Apache-2.0
// The faults layer (docs/layers/faults.md): fails chosen calls, or calls at a rate with a seed,
// with the error a real fault of that kind gives, so a host application or the remote server
// can be tested against faults the device never makes on demand:
//
//   BACKPLANE_LAYERS=faults:seed=7:rate=0.02 backplane demo
//   BACKPLANE_LAYERS=faults:at=alloc_data_space#3+launch#1 ./my_app
//
// Allocations (alloc_data_space, alloc_workspace, create_stream, event_create) fail with
// BP_ERR_OUT_OF_MEMORY; a copy (copy_data_from_to) or a launch (a module function call) with
// BP_ERR_DEVICE; a stream sync or an event sync "times out" with BP_ERR_DEVICE. A failed
// allocation, copy or launch is not passed on: nothing is allocated, copied or run. A failed sync
// still waits on the plugin first, so no queued work is left writing to memory the caller frees
// once it sees the error; then it reports the fault. Every message starts "faults: injected"
// and names the entry, the call number, the device and the option that chose it.
//
// Each entry counts its calls (1-based, over all devices the layer wraps). Call k of an entry
// fails when at= names it, or when a hash of (seed, entry, k) falls under the rate, so the same
// seed and the same sequence of calls give the same faults. faults.injected returns how many
// were injected in this process and faults.log lists them ("entry#k", one a line; the first
// 10,000).
#include <array>
#include <atomic>
#include <backplane/sdk/layer.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace backplane {
namespace faults {
namespace {

// The entries that can fail, in the order the options list them.
enum Entry : int {
  kAllocDataSpace,
  kAllocWorkspace,
  kCreateStream,
  kEventCreate,
  kCopy,
  kLaunch,
  kStreamSync,
  kEventSync,
  kEntryCount
};

struct EntryInfo {
  const char* name;
  bp_status_t kind;
  const char* what;  // the fault, as the message names it
};

constexpr std::array<EntryInfo, kEntryCount> kInfo = {{
    {"alloc_data_space", BP_ERR_OUT_OF_MEMORY, "out-of-memory"},
    {"alloc_workspace", BP_ERR_OUT_OF_MEMORY, "out-of-memory"},
    {"create_stream", BP_ERR_OUT_OF_MEMORY, "out-of-memory"},
    {"event_create", BP_ERR_OUT_OF_MEMORY, "out-of-memory"},
    {"copy_data_from_to", BP_ERR_DEVICE, "device error"},
    {"launch", BP_ERR_DEVICE, "device error"},
    {"stream_sync", BP_ERR_DEVICE, "timeout"},
    {"event_sync", BP_ERR_DEVICE, "timeout"},
}};

std::string EntryList() {
  std::string all;
  for (const EntryInfo& e : kInfo) all += (all.empty() ? "" : ", ") + std::string(e.name);
  return all;
}

const char kUsage[] =
    "the options, separated by ':', are seed=N, rate=R (0 to 1), at=ENTRY#K[+ENTRY#K...], "
    "only=ENTRY[+ENTRY...] and device=TYPE[+TYPE...], as in faults:seed=7:rate=0.02 or "
    "faults:at=alloc_data_space#3";

[[noreturn]] void Refuse(const std::string& what) {
  throw Error(BP_ERR_INVALID_ARGUMENT, "layer faults: " + what);
}

int EntryByName(const std::string& name, const std::string& option) {
  for (int i = 0; i < kEntryCount; ++i) {
    if (name == kInfo[i].name) return i;
  }
  Refuse("'" + name + "' in '" + option + "' is not an entry that can fail; the entries are " +
         EntryList());
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// A decimal count >= `least`, all of `text`; otherwise refuses `option`.
uint64_t ParseCount(const std::string& text, uint64_t least, const std::string& option,
                    const char* expected) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    Refuse("'" + option + "': expected " + expected);
  }
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v < least) Refuse("'" + option + "': expected " + expected);
  return v;
}

// splitmix64's finaliser: a well-mixed 64-bit hash of x.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

struct Options {
  uint64_t seed = 0;
  bool has_rate = false;
  double rate = 0;
  std::string rate_text;                              // as given, for the messages
  std::array<std::vector<uint64_t>, kEntryCount> at;  // the calls at= names, per entry
  std::array<bool, kEntryCount> only{};               // the entries the rate applies to
  std::vector<std::string> devices;                   // the device types wrapped (empty: all)
};

Options Parse(const std::string& text) {
  if (text.empty()) {
    Refuse("nothing to inject: give rate=R (with seed=N) or at=ENTRY#K; " + std::string(kUsage));
  }
  Options o;
  o.only.fill(true);
  bool seen_seed = false, seen_at = false, seen_only = false, seen_device = false;
  auto once = [](bool* seen, const std::string& option) {
    if (*seen) Refuse("'" + option + "': the option is given twice; give it once");
    *seen = true;
  };
  for (const std::string& option : Split(text, ':')) {
    const size_t eq = option.find('=');
    const std::string key = option.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : option.substr(eq + 1);
    if (eq == std::string::npos) {
      Refuse("'" + option + "' is not an option; " + kUsage);
    } else if (value.empty()) {
      Refuse("'" + option + "' has no value; " + kUsage);
    } else if (key == "seed") {
      once(&seen_seed, option);
      o.seed = ParseCount(value, 0, option, "a decimal seed, as in seed=7");
    } else if (key == "rate") {
      once(&o.has_rate, option);
      // from_chars: a decimal point whatever the host's locale.
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), o.rate);
      if (error != std::errc() || end != value.data() + value.size() || !std::isfinite(o.rate) ||
          o.rate < 0 || o.rate > 1) {
        Refuse("'" + option + "': expected a probability from 0 to 1, as in rate=0.02");
      }
      o.rate_text = value;
    } else if (key == "at") {
      once(&seen_at, option);
      for (const std::string& item : Split(value, '+')) {
        const size_t hash = item.find('#');
        if (hash == std::string::npos) {
          Refuse("'" + option + "': '" + item + "' is not ENTRY#K; write the entry and the call " +
                 "to fail, counted from 1, as in at=alloc_data_space#3");
        }
        const int entry = EntryByName(item.substr(0, hash), option);
        o.at[entry].push_back(ParseCount(item.substr(hash + 1), 1, option,
                                         "a call number from 1 after '#', as in "
                                         "at=alloc_data_space#3"));
      }
    } else if (key == "only") {
      once(&seen_only, option);
      o.only.fill(false);
      for (const std::string& name : Split(value, '+')) o.only[EntryByName(name, option)] = true;
    } else if (key == "device") {
      once(&seen_device, option);
      for (const std::string& type : Split(value, '+')) {
        if (type.empty()) Refuse("'" + option + "': a device type is empty; as in device=cpu");
        o.devices.push_back(type);
      }
    } else {
      Refuse("unknown option '" + option + "'; " + kUsage);
    }
  }
  if (seen_only && !o.has_rate) {
    Refuse("only= chooses the entries a rate applies to, but no rate=R is given");
  }
  if (!o.has_rate && !seen_at) {
    Refuse("'" + text + "' injects nothing: give rate=R (with seed=N) or at=ENTRY#K");
  }
  return o;
}

class FaultsLayer;

// The tables of the device types the layer wraps.
class FaultTable final : public sdk::DeviceLayer {
 public:
  FaultTable(FaultsLayer* layer, int32_t type, const std::string& type_name,
             const bp_device_api_t* next)
      : DeviceLayer(type, type_name, next), layer_(layer) {}

  bp_status_t AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType hint,
                             void** out) override;
  bp_status_t AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType hint, void** out) override;
  bp_status_t CreateStream(DLDevice dev, bp_stream_t* out) override;
  bp_status_t EventCreate(DLDevice dev, void** out) override;
  bp_status_t CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t stream) override;
  bp_status_t StreamSync(DLDevice dev, bp_stream_t stream) override;
  bp_status_t EventSync(DLDevice dev, void* event) override;

 private:
  // The message of the fault to inject at this call of `entry` on `dev`, or "" to pass it on.
  std::string Fault(Entry entry, DLDevice dev) const;

  FaultsLayer* const layer_;
};

class FaultsLayer final : public sdk::Layer {
 public:
  explicit FaultsLayer(Options options) : o_(std::move(options)) {
    for (int i = 0; i < kEntryCount; ++i) {
      // An entry no option can fail is not counted (nor, for launches, wrapped).
      eligible_[i] = !o_.at[i].empty() || (o_.has_rate && o_.rate > 0 && o_.only[i]);
    }
  }

  sdk::DeviceLayer* WrapDeviceAPI(int32_t type, const std::string& type_name,
                                  const bp_device_api_t* next) override {
    if (!Wraps(type_name)) return nullptr;
    return new FaultTable(this, type, type_name, next);  // kept until exit, as the layer
  }

  Function WrapFunction(const std::string& module_kind, const std::string& name,
                        const Function& next) override {
    if (!eligible_[kLaunch]) return Function();
    const std::string what = module_kind + "." + name;
    return Function::FromCallable([this, what, next](PackedArgs args) -> Any {
      // The device of the launch: that of its first tensor argument, if any.
      const DLTensor* first = nullptr;
      for (int32_t i = 0; i < args.size() && first == nullptr; ++i) {
        if (args[i].type == BP_VALUE_TENSOR) first = args[i].u.v_tensor;
      }
      if (o_.devices.empty() || (first != nullptr && Wraps(TypeName(first->device.device_type)))) {
        const std::string fault = Decide(kLaunch, [&] {
          return what + (first == nullptr ? std::string()
                                          : " on " + TypeName(first->device.device_type) + ":" +
                                                std::to_string(first->device.device_id));
        });
        if (!fault.empty()) throw Error(BP_ERR_DEVICE, fault);
      }
      return next.CallPacked(args.data(), args.size());
    });
  }

  // Counts this call of `entry` and returns the message of the fault to inject, or "".
  // `where()` names the device ("cpu:0") or, for a launch, the function and its device; it is
  // called only for a fault, so a call that passes builds no string.
  template <typename Where>
  std::string Decide(Entry entry, Where where) {
    if (!eligible_[entry]) return "";
    const uint64_t call = calls_[entry].fetch_add(1, std::memory_order_relaxed) + 1;
    bool at = false;
    for (uint64_t k : o_.at[entry]) at = at || k == call;
    if (!at && !(o_.has_rate && o_.only[entry] && Draw(entry, call) < o_.rate)) return "";
    injected_.fetch_add(1, std::memory_order_relaxed);
    const std::string id = std::string(kInfo[entry].name) + "#" + std::to_string(call);
    {
      std::lock_guard lock(mu_);
      if (logged_ < kMaxLog) {
        log_ += id + "\n";
        ++logged_;
      }
    }
    return "faults: injected " + std::string(kInfo[entry].what) + " at " + kInfo[entry].name +
           " call " + std::to_string(call) + " " + (entry == kLaunch ? "of " : "on ") + where() +
           " (" + (at ? "at=" + id : "seed " + std::to_string(o_.seed) + ", rate " + o_.rate_text) +
           ")";
  }

  uint64_t Injected() const { return injected_.load(); }
  std::string Log() {
    std::lock_guard lock(mu_);
    return log_;
  }

 private:
  // A uniform draw in [0, 1) from (seed, entry, call): the same for the same three.
  double Draw(Entry entry, uint64_t call) const {
    const uint64_t h = Mix(Mix(o_.seed) ^ Mix((static_cast<uint64_t>(entry) << 56) ^ call));
    return static_cast<double>(h >> 11) * 0x1.0p-53;
  }

  bool Wraps(const std::string& type_name) const {
    if (o_.devices.empty()) return true;
    for (const std::string& t : o_.devices) {
      if (t == type_name) return true;
    }
    return false;
  }

  static std::string TypeName(int32_t type) {
    const char* name = nullptr;
    if (::backplane::detail::Api()->device_type_name(type, &name) == BP_OK && name != nullptr) {
      return name;
    }
    return "device type " + std::to_string(type);
  }

  const Options o_;
  std::array<bool, kEntryCount> eligible_{};
  std::array<std::atomic<uint64_t>, kEntryCount> calls_{};
  std::atomic<uint64_t> injected_{0};
  std::mutex mu_;
  // faults.log keeps the first kMaxLog faults (faults.injected counts them all).
  static constexpr int kMaxLog = 10000;
  int logged_ = 0;
  std::string log_;
};

std::atomic<FaultsLayer*> g_layer{nullptr};  // the one layer of the process, once made

std::string FaultTable::Fault(Entry entry, DLDevice dev) const {
  return layer_->Decide(entry, [&] { return type_name() + ":" + std::to_string(dev.device_id); });
}

bp_status_t FaultTable::AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                                       DLDataType hint, void** out) {
  const std::string fault = Fault(kAllocDataSpace, dev);
  if (!fault.empty()) return Refuse(BP_ERR_OUT_OF_MEMORY, fault);
  return DeviceLayer::AllocDataSpace(dev, nbytes, alignment, hint, out);
}

bp_status_t FaultTable::AllocWorkspace(DLDevice dev, size_t nbytes, DLDataType hint, void** out) {
  const std::string fault = Fault(kAllocWorkspace, dev);
  if (!fault.empty()) return Refuse(BP_ERR_OUT_OF_MEMORY, fault);
  return DeviceLayer::AllocWorkspace(dev, nbytes, hint, out);
}

bp_status_t FaultTable::CreateStream(DLDevice dev, bp_stream_t* out) {
  const std::string fault = Fault(kCreateStream, dev);
  if (!fault.empty()) return Refuse(BP_ERR_OUT_OF_MEMORY, fault);
  return DeviceLayer::CreateStream(dev, out);
}

bp_status_t FaultTable::EventCreate(DLDevice dev, void** out) {
  const std::string fault = Fault(kEventCreate, dev);
  if (!fault.empty()) return Refuse(BP_ERR_OUT_OF_MEMORY, fault);
  return DeviceLayer::EventCreate(dev, out);
}

bp_status_t FaultTable::CopyDataFromTo(const DLTensor* from, const DLTensor* to,
                                       bp_stream_t stream) {
  // The device this table serves: the side of the copy of its type (the target when both are).
  const DLDevice dev = to->device.device_type == device_type() ? to->device : from->device;
  const std::string fault = Fault(kCopy, dev);
  if (!fault.empty()) return Refuse(BP_ERR_DEVICE, fault);
  return DeviceLayer::CopyDataFromTo(from, to, stream);
}

bp_status_t FaultTable::StreamSync(DLDevice dev, bp_stream_t stream) {
  const std::string fault = Fault(kStreamSync, dev);
  const bp_status_t status = DeviceLayer::StreamSync(dev, stream);
  // The work is drained either way (see the top); the plugin's own error wins over the fault.
  if (fault.empty() || status != BP_OK) return status;
  return Refuse(BP_ERR_DEVICE, fault);
}

bp_status_t FaultTable::EventSync(DLDevice dev, void* event) {
  const std::string fault = Fault(kEventSync, dev);
  const bp_status_t status = DeviceLayer::EventSync(dev, event);
  if (fault.empty() || status != BP_OK) return status;
  return Refuse(BP_ERR_DEVICE, fault);
}

}  // namespace
}  // namespace faults
}  // namespace backplane

BACKPLANE_PLUGIN_ENTRY_WITH((backplane::sdk::PluginDescription{"faults", BACKPLANE_FAULTS_VERSION,
                                                               "Backplane"})) {
  namespace sdk = backplane::sdk;
  namespace faults = backplane::faults;
  sdk::RegisterLayer(
      "faults",
      [](const std::string& options) -> sdk::Layer* {
        faults::Options o = faults::Parse(options);
        auto* layer = new faults::FaultsLayer(std::move(o));  // kept until exit
        faults::g_layer.store(layer);
        return layer;
      },
      sdk::LayerWraps{/*functions=*/true, /*builds=*/false});
  // How many faults this process injected (0 without the layer), and which ("entry#k" lines,
  // in the order they were injected).
  sdk::RegisterFunction("faults.injected", [](backplane::PackedArgs) {
    faults::FaultsLayer* layer = faults::g_layer.load();
    return sdk::IntValue(layer != nullptr ? static_cast<int64_t>(layer->Injected()) : 0);
  });
  sdk::RegisterFunction("faults.log", [](backplane::PackedArgs) {
    faults::FaultsLayer* layer = faults::g_layer.load();
    return sdk::StringValue(layer != nullptr ? layer->Log() : "");
  });
}
