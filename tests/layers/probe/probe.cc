// SPDX-License-Identifier: Apache-2.0
// layer_probe: two layers for the tests of the layer chain (tests/layers/layers_test.cc),
// probe_a and probe_b. Each writes "<name>:<entry>" to one shared log for every DeviceAPI call,
// function call, build and module (made, ends) it sees, so a test reads the order in which the
// chain passes a call down. An option makes a layer misbehave as a broken third-party layer would:
//   mode=throw        wrap_device_api throws
//   mode=small        hands the core a table shorter than 1.9's
//   mode=drop_entry   leaves an entry null (get_attr) that the table below has
//   mode=skip_cpu     leaves the cpu type unwrapped
//   mode=fail_alloc   every alloc_data_space fails with BP_ERR_OUT_OF_MEMORY and a message
// Any other option is refused, naming it.
#include <backplane/sdk/layer.hpp>
#include <backplane/sdk/plugin.hpp>
#include <mutex>
#include <string>
#include <vector>

namespace probe {
namespace {

namespace sdk = backplane::sdk;

std::mutex g_mu;
std::vector<std::string>& Log() {
  static auto* log = new std::vector<std::string>();
  return *log;
}
std::vector<sdk::DeviceLayer*>& Tables() {
  static auto* tables = new std::vector<sdk::DeviceLayer*>();
  return *tables;
}
void Note(const std::string& line) {
  std::lock_guard lock(g_mu);
  Log().push_back(line);
}

class ProbeTable final : public sdk::DeviceLayer {
 public:
  ProbeTable(std::string layer, std::string mode, int32_t type, const std::string& type_name,
             const bp_device_api_t* next)
      : DeviceLayer(type, type_name, next), layer_(std::move(layer)), mode_(std::move(mode)) {}

  bp_status_t AllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType hint,
                             void** out) override {
    Note(layer_ + ":alloc_data_space");
    if (mode_ == "fail_alloc") {
      return Refuse(BP_ERR_OUT_OF_MEMORY,
                    layer_ + " refused an allocation of " + std::to_string(nbytes) + " bytes");
    }
    return DeviceLayer::AllocDataSpace(dev, nbytes, alignment, hint, out);
  }
  bp_status_t FreeDataSpace(DLDevice dev, void* data) override {
    Note(layer_ + ":free_data_space");
    return DeviceLayer::FreeDataSpace(dev, data);
  }
  bp_status_t CopyDataFromTo(const DLTensor* from, const DLTensor* to,
                             bp_stream_t stream) override {
    Note(layer_ + ":copy_data_from_to");
    return DeviceLayer::CopyDataFromTo(from, to, stream);
  }
  bp_status_t GetAttr(DLDevice dev, int32_t kind, bp_value_t* out) override {
    Note(layer_ + ":get_attr");
    return DeviceLayer::GetAttr(dev, kind, out);
  }

 private:
  const std::string layer_;
  const std::string mode_;
};

class Probe final : public sdk::Layer {
 public:
  Probe(std::string name, std::string mode) : name_(std::move(name)), mode_(std::move(mode)) {}

  sdk::DeviceLayer* WrapDeviceAPI(int32_t type, const std::string& type_name,
                                  const bp_device_api_t* next) override {
    Note(name_ + ":wrap " + type_name);
    if (mode_ == "throw") {
      throw backplane::Error(BP_ERR_INTERNAL, name_ + " cannot wrap " + type_name);
    }
    if (mode_ == "skip_cpu" && type_name == "cpu") return nullptr;
    auto* table = new ProbeTable(name_, mode_, type, type_name, next);
    {
      // Kept until exit, reachable (a table the core refuses is still the layer's).
      std::lock_guard lock(g_mu);
      Tables().push_back(table);
    }
    if (mode_ == "small") {
      const_cast<bp_device_api_t*>(table->Table())->struct_size = 16;
    }
    if (mode_ == "drop_entry") const_cast<bp_device_api_t*>(table->Table())->get_attr = nullptr;
    return table;
  }

  backplane::Function WrapFunction(const std::string& module_kind, const std::string& name,
                                   const backplane::Function& next) override {
    const std::string tag = name_ + ":call " + module_kind + "." + name;
    return backplane::Function::FromCallable([tag, next](backplane::PackedArgs args) {
      Note(tag);
      return next.CallPacked(args.data(), args.size());
    });
  }

  void OnModule(const bp_object_t* module, const std::string& kind, bool alive) override {
    (void)module;
    Note(name_ + ":module " + (alive ? "made " : "ends ") + kind);
  }

  backplane::Function WrapBuild(const std::string& target_kind,
                                const backplane::Function& next) override {
    const std::string tag = name_ + ":build " + target_kind;
    return backplane::Function::FromCallable([tag, next](backplane::PackedArgs args) {
      Note(tag);
      return next.CallPacked(args.data(), args.size());
    });
  }

 private:
  const std::string name_;
  const std::string mode_;
};

sdk::Layer* Make(const std::string& name, const std::string& options) {
  std::string mode;
  if (options.rfind("mode=", 0) == 0) {
    mode = options.substr(5);
  } else if (!options.empty()) {
    throw backplane::Error(BP_ERR_INVALID_ARGUMENT, "layer " + name + ": unknown option '" +
                                                        options + "'; it takes mode=...");
  }
  Note(name + ":made" + (mode.empty() ? "" : " " + mode));
  return new Probe(name, mode);
}

}  // namespace
}  // namespace probe

BACKPLANE_PLUGIN_ENTRY("layer_probe", "1.0.0") {
  namespace sdk = backplane::sdk;
  const sdk::LayerWraps wraps{/*functions=*/true, /*builds=*/true, /*modules=*/true};
  sdk::RegisterLayer(
      "probe_a", [](const std::string& o) { return probe::Make("probe_a", o); }, wraps);
  sdk::RegisterLayer(
      "probe_b", [](const std::string& o) { return probe::Make("probe_b", o); }, wraps);
  // The log, one entry per line, and a way to empty it.
  sdk::RegisterFunction("layer_probe.log", [](backplane::PackedArgs) {
    std::lock_guard lock(probe::g_mu);
    std::string all;
    for (const std::string& l : probe::Log()) all += l + "\n";
    return sdk::StringValue(all);
  });
  sdk::RegisterFunction("layer_probe.clear", [](backplane::PackedArgs) {
    std::lock_guard lock(probe::g_mu);
    probe::Log().clear();
    return sdk::NoneValue();
  });
}
