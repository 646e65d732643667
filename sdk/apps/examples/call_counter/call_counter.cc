// SPDX-License-Identifier: Apache-2.0
// call_counter: an example Backplane layer, built out of tree against the installed SDK
// (CMakeLists.txt). It counts the calls and bytes that go through every device's DeviceAPI
// and the module function calls, and writes one line per device type and entry when the
// process exits:
//
//   BACKPLANE_LAYERS=call_counter backplane demo
//   call_counter: cpu alloc_data_space 12 calls, 3072 bytes
//
// Its one option, `out=stdout`, writes the summary to standard output instead of standard
// error. docs/layer-guide.md walks through it.
#include <atomic>
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/layer.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace call_counter {
namespace {

namespace sdk = backplane::sdk;

struct Counter {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> bytes{0};
};

// The counts of one device type.
class CountingTable final : public sdk::DeviceLayer {
 public:
  using DeviceLayer::DeviceLayer;

  bp_status_t AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType hint,
                             void** out) override {
    alloc.calls++;
    alloc.bytes += nbytes;
    return DeviceLayer::AllocDataSpace(dev, nbytes, alignment, hint, out);
  }
  bp_status_t FreeDataSpace(DLDevice dev, void* data) override {
    free.calls++;
    return DeviceLayer::FreeDataSpace(dev, data);
  }
  bp_status_t CopyDataFromTo(const DLTensor* from, const DLTensor* to,
                             bp_stream_t stream) override {
    copy.calls++;
    copy.bytes += sdk::TensorBytes(from);
    return DeviceLayer::CopyDataFromTo(from, to, stream);
  }
  bp_status_t StreamSync(DLDevice dev, bp_stream_t stream) override {
    sync.calls++;
    return DeviceLayer::StreamSync(dev, stream);
  }

  void Print(FILE* out) const {
    const struct {
      const char* entry;
      const Counter& c;
    } rows[] = {{"alloc_data_space", alloc},
                {"free_data_space", free},
                {"copy_data_from_to", copy},
                {"stream_sync", sync}};
    for (const auto& r : rows) {
      if (r.c.calls == 0) continue;
      std::fprintf(out, "call_counter: %s %s %llu calls, %llu bytes\n", type_name().c_str(),
                   r.entry, static_cast<unsigned long long>(r.c.calls.load()),
                   static_cast<unsigned long long>(r.c.bytes.load()));
    }
  }

  Counter alloc, free, copy, sync;
};

class CallCounter final : public sdk::Layer {
 public:
  explicit CallCounter(FILE* out) : out_(out) {}

  sdk::DeviceLayer* WrapDeviceAPI(int32_t type, const std::string& type_name,
                                  const bp_device_api_t* next) override {
    auto* table = new CountingTable(type, type_name, next);  // kept until exit
    std::lock_guard lock(mu_);
    tables_.push_back(table);
    return table;
  }

  backplane::Function WrapFunction(const std::string& module_kind, const std::string& name,
                                   const backplane::Function& next) override {
    (void)module_kind;
    (void)name;
    return backplane::Function::FromCallable([this, next](backplane::PackedArgs args) {
      function_calls_++;
      return next.CallPacked(args.data(), args.size());
    });
  }

  void Print() {
    std::lock_guard lock(mu_);
    for (const CountingTable* t : tables_) t->Print(out_);
    std::fprintf(out_, "call_counter: %llu module function calls\n",
                 static_cast<unsigned long long>(function_calls_.load()));
    std::fflush(out_);
  }

 private:
  FILE* const out_;
  std::mutex mu_;
  std::vector<CountingTable*> tables_;
  std::atomic<uint64_t> function_calls_{0};
};

CallCounter* g_layer = nullptr;

}  // namespace
}  // namespace call_counter

BACKPLANE_PLUGIN_ENTRY_WITH((backplane::sdk::PluginDescription{"call_counter", CALL_COUNTER_VERSION,
                                                               "Backplane examples"})) {
  namespace sdk = backplane::sdk;
  sdk::RegisterLayer(
      "call_counter",
      [](const std::string& options) -> sdk::Layer* {
        FILE* out = stderr;
        if (options == "out=stdout") {
          out = stdout;
        } else if (!options.empty() && options != "out=stderr") {
          throw backplane::Error(BP_ERR_INVALID_ARGUMENT,
                                 "layer call_counter: unknown options '" + options +
                                     "'; the one option is out=stdout or out=stderr");
        }
        call_counter::g_layer = new call_counter::CallCounter(out);  // kept until exit
        std::atexit([] { call_counter::g_layer->Print(); });
        return call_counter::g_layer;
      },
      sdk::LayerWraps{/*functions=*/true, /*builds=*/false});
}
