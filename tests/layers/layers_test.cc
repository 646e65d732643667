// SPDX-License-Identifier: Apache-2.0
// The layer chain (c_api.h, "Layers"): with no layer the core calls the plugin's own table;
// layers from BACKPLANE_LAYERS and bp_layers_enable wrap it in the documented order and see
// every call; module functions and code generators are wrapped, and layers are told of every
// module made and ended; a broken layer, an unknown one or a refused option fails every use
// with a message that names it, never dropped silently. The chain is fixed once per process, so
// each test runs in a process of its own (ctest runs every case alone; by hand, pick one with
// --gtest_filter).
#include <stdlib.h>

#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

using backplane::Device;

void UseTestPlugins() {
  ASSERT_EQ(bp_plugin_path_add(bptest::TestPluginDir().c_str()), BP_OK);
  unsetenv("BACKPLANE_LAYERS");
}

std::string ProbeLog() { return backplane::Function::Get("layer_probe.log")().AsString(); }

// Allocates, fills with random bytes, copies back and frees through the C API on cpu:0;
// returns the failure, if any.
bptest::Status RoundTrip() {
  const DLDevice cpu{kDLCPU, 0};
  void* data = nullptr;
  bptest::Status s =
      bptest::Capture(bp_device_alloc_data_space(cpu, 256, 64, backplane::UInt8(), &data));
  if (!s.ok()) return s;
  std::vector<uint8_t> in = bptest::RandomBytes(256, 11), out(256);
  int64_t shape[1] = {256};
  DLTensor src = bptest::ByteView(in.data(), cpu, shape, 0);
  DLTensor dev = bptest::ByteView(data, cpu, shape, 0);
  DLTensor dst = bptest::ByteView(out.data(), cpu, shape, 0);
  s = bptest::Capture(bp_device_copy_data_from_to(&src, &dev, nullptr));
  if (s.ok()) s = bptest::Capture(bp_device_copy_data_from_to(&dev, &dst, nullptr));
  EXPECT_EQ(bp_device_free_data_space(cpu, data), BP_OK);
  if (s.ok()) {
    EXPECT_EQ(in, out);
  }
  return s;
}

size_t Find(const std::string& log, const std::string& line) { return log.find(line + "\n"); }

TEST(Layers, NoLayerMeansThePluginsOwnTable) {
  UseTestPlugins();
  EXPECT_TRUE(backplane::ActiveLayers().empty());
  const bp_device_api_t* api = nullptr;
  ASSERT_EQ(bp_device_api_get(kDLCPU, &api), BP_OK);
  // The plugin's table, as device_api.cpu hands it out: the same entries and self, so a call
  // costs what it did before layers existed.
  const auto* plugin =
      static_cast<const bp_device_api_t*>(backplane::Function::Get("device_api.cpu")().AsPtr());
  EXPECT_EQ(api->self, plugin->self);
  EXPECT_EQ(api->alloc_data_space, plugin->alloc_data_space);
  EXPECT_EQ(api->copy_data_from_to, plugin->copy_data_from_to);
  EXPECT_TRUE(RoundTrip().ok());
}

TEST(Layers, TheFirstLayerIsOutermostAndSeesEveryCall) {
  UseTestPlugins();
  backplane::EnableLayers("probe_a, probe_b");
  EXPECT_EQ(backplane::ActiveLayers(), (std::vector<std::string>{"probe_a", "probe_b"}));
  const bptest::Status s = RoundTrip();
  ASSERT_TRUE(s.ok()) << s;
  const std::string log = ProbeLog();
  // Built innermost first (probe_b wraps the plugin's table, probe_a wraps probe_b's); called
  // outermost first.
  EXPECT_LT(Find(log, "probe_b:wrap cpu"), Find(log, "probe_a:wrap cpu")) << log;
  const size_t a = Find(log, "probe_a:alloc_data_space"), b = Find(log, "probe_b:alloc_data_space");
  ASSERT_NE(a, std::string::npos) << log;
  ASSERT_NE(b, std::string::npos) << log;
  EXPECT_LT(a, b) << log;
  EXPECT_NE(Find(log, "probe_b:copy_data_from_to"), std::string::npos) << log;
  EXPECT_NE(Find(log, "probe_a:free_data_space"), std::string::npos) << log;
}

TEST(Layers, EnvironmentLayersComeBeforeTheHosts) {
  UseTestPlugins();
  setenv("BACKPLANE_LAYERS", "probe_b:mode=skip_cpu", 1);
  backplane::EnableLayers("probe_a");
  EXPECT_EQ(backplane::ActiveLayers(),
            (std::vector<std::string>{"probe_b:mode=skip_cpu", "probe_a"}));
  ASSERT_TRUE(RoundTrip().ok());
  const std::string log = ProbeLog();
  // probe_b leaves cpu unwrapped: probe_a's table sits directly over the plugin's.
  EXPECT_NE(Find(log, "probe_a:alloc_data_space"), std::string::npos) << log;
  EXPECT_EQ(Find(log, "probe_b:alloc_data_space"), std::string::npos) << log;
}

TEST(Layers, TheChainIsFixedByTheFirstDeviceUse) {
  UseTestPlugins();
  ASSERT_TRUE(RoundTrip().ok());
  const bptest::Status s = bptest::Capture(bp_layers_enable("probe_a"));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("fixed by the first use"), std::string::npos) << s;
  EXPECT_TRUE(backplane::ActiveLayers().empty());
}

TEST(Layers, MalformedAndRepeatedNamesAreRefused) {
  UseTestPlugins();
  bptest::Status s = bptest::Capture(bp_layers_enable("probe_a,bad/name"));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("'bad/name'"), std::string::npos) << s;
  s = bptest::Capture(bp_layers_enable("probe_a,probe_a"));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("enabled twice"), std::string::npos) << s;
  // Neither call enabled anything.
  EXPECT_TRUE(backplane::ActiveLayers().empty());
  s = bptest::Capture(bp_layers_enable(nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
}

TEST(Layers, AnUnknownLayerFailsEveryUseNamingIt) {
  UseTestPlugins();
  backplane::EnableLayers("no_such_layer");
  for (int i = 0; i < 2; ++i) {
    const bptest::Status s = RoundTrip();
    EXPECT_EQ(s.kind, BP_ERR_NOT_FOUND);
    EXPECT_NE(s.message.find("layer 'no_such_layer'"), std::string::npos) << s;
    EXPECT_NE(s.message.find("BACKPLANE_PLUGIN_PATH"), std::string::npos) << s;
  }
  bp_object_t* names = nullptr;
  EXPECT_EQ(bp_layers_active(&names), BP_ERR_NOT_FOUND);
}

TEST(Layers, ARefusedOptionNamesIt) {
  UseTestPlugins();
  backplane::EnableLayers("probe_a:colour=red");
  const bptest::Status s = RoundTrip();
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("'colour=red'"), std::string::npos) << s;
}

TEST(Layers, BrokenLayersAreReportedNotSkipped) {
  const struct {
    const char* mode;
    bp_status_t kind;
    const char* says;
  } cases[] = {{"throw", BP_ERR_INTERNAL, "cannot wrap cpu"},
               {"small", BP_ERR_VERSION_MISMATCH, "struct_size 16"},
               {"drop_entry", BP_ERR_PLUGIN, "'get_attr' is null"}};
  for (const auto& c : cases) {
    // A child process each: the chain is fixed once per process.
    const std::string mode = c.mode;
    EXPECT_EXIT(
        {
          UseTestPlugins();
          backplane::EnableLayers("probe_a:mode=" + mode);
          const bptest::Status s = RoundTrip();
          std::fprintf(stderr, "kind=%d %s\n", s.kind, s.message.c_str());
          std::exit(s.kind == c.kind && s.message.find(c.says) != std::string::npos &&
                            s.message.find("layer 'probe_a'") != std::string::npos
                        ? 0
                        : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << c.mode;
  }
}

TEST(Layers, ALayersErrorReachesTheCaller) {
  UseTestPlugins();
  backplane::EnableLayers("probe_a:mode=fail_alloc");
  const bptest::Status s = RoundTrip();
  EXPECT_EQ(s.kind, BP_ERR_OUT_OF_MEMORY);
  EXPECT_NE(s.message.find("probe_a refused an allocation of 256 bytes"), std::string::npos) << s;
  EXPECT_NE(s.message.find("cpu:0 alloc_data_space"), std::string::npos) << s;
}

TEST(Layers, ModuleFunctionsAndBuildsAreWrapped) {
  UseTestPlugins();
  bptest::LoadTestPlugin("simaccel_testing");
  backplane::EnableLayers("probe_a,probe_b");
  backplane::Module m =
      backplane::Build(bptest::kScaleAddGpuIr, backplane::Target::Parse("simaccel"));
  std::string log = ProbeLog();
  EXPECT_NE(Find(log, "probe_a:build simaccel"), std::string::npos) << log;
  EXPECT_LT(Find(log, "probe_a:build simaccel"), Find(log, "probe_b:build simaccel")) << log;
  backplane::Function::Get("layer_probe.clear")();

  const int rows = 3;
  const Device acc("simaccel", 0);
  std::vector<float> x = bptest::RandomFloats(rows * 256, 5),
                     y = bptest::RandomFloats(rows * 256, 6);
  backplane::Tensor tx = backplane::Tensor::Empty({rows, 256}, backplane::Float32(), acc);
  backplane::Tensor ty = backplane::Tensor::Empty({rows, 256}, backplane::Float32(), acc);
  backplane::Tensor to = backplane::Tensor::Empty({rows, 256}, backplane::Float32(), acc);
  tx.CopyFromBytes(x.data(), x.size() * sizeof(float));
  ty.CopyFromBytes(y.data(), y.size() * sizeof(float));
  m.GetFunction("scale_add")(rows, tx.dl(), ty.dl(), to.dl());
  std::vector<float> out(rows * 256);
  to.CopyToBytes(out.data(), out.size() * sizeof(float));
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 2.0f * x[i] + y[i]) << i;
  log = ProbeLog();
  const size_t a = Find(log, "probe_a:call ir_host.scale_add");
  const size_t b = Find(log, "probe_b:call ir_host.scale_add");
  ASSERT_NE(a, std::string::npos) << log;
  EXPECT_LT(a, b) << log;
}

TEST(Layers, LayersAreToldOfEveryModuleMadeAndEnded) {
  // on_module: each module bp_build and bp_module_load make (one of kind ir_host importing one
  // of kind simaccel) is told to every layer that asks, as made and, when the last reference
  // goes, as ending; nothing else is.
  UseTestPlugins();
  bptest::LoadTestPlugin("simaccel_testing");
  backplane::EnableLayers("probe_a,probe_b");
  auto modules = [] {
    std::string only;
    const std::string log = ProbeLog();
    size_t start = 0;
    while (start < log.size()) {
      const size_t end = log.find('\n', start);
      const std::string line = log.substr(start, end - start);
      if (line.find(":module ") != std::string::npos) only += line + "\n";
      start = end + 1;
    }
    backplane::Function::Get("layer_probe.clear")();
    return only;
  };
  backplane::Module built =
      backplane::Build(bptest::kScaleAddGpuIr, backplane::Target::Parse("simaccel"));
  EXPECT_EQ(modules(),
            "probe_a:module made simaccel\nprobe_b:module made simaccel\n"
            "probe_a:module made ir_host\nprobe_b:module made ir_host\n");
  const std::string bytes = built.SaveToBytes();
  EXPECT_EQ(modules(), "") << "saving makes no module";
  backplane::Module loaded = backplane::Module::LoadFromBytes(bytes);
  EXPECT_EQ(modules(),
            "probe_a:module made simaccel\nprobe_b:module made simaccel\n"
            "probe_a:module made ir_host\nprobe_b:module made ir_host\n");
  backplane::Module copy = loaded;  // a second reference: nothing ends
  loaded = backplane::Module();
  EXPECT_EQ(modules(), "");
  copy = backplane::Module();  // the root ends, then its import
  EXPECT_EQ(modules(),
            "probe_a:module ends ir_host\nprobe_b:module ends ir_host\n"
            "probe_a:module ends simaccel\nprobe_b:module ends simaccel\n");
  built = backplane::Module();
  EXPECT_EQ(modules(),
            "probe_a:module ends ir_host\nprobe_b:module ends ir_host\n"
            "probe_a:module ends simaccel\nprobe_b:module ends simaccel\n");
}

TEST(Layers, TheExampleLayerCountsAndReportsAtExit) {
  EXPECT_EXIT(
      {
        UseTestPlugins();
        backplane::EnableLayers("call_counter");
        const bptest::Status s = RoundTrip();
        std::exit(s.ok() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "call_counter: cpu alloc_data_space 1 calls, 256 bytes\n"
      "call_counter: cpu free_data_space 1 calls, 0 bytes\n"
      "call_counter: cpu copy_data_from_to 2 calls, 512 bytes\n");
}

TEST(Layers, TheExampleLayerRefusesAnUnknownOption) {
  UseTestPlugins();
  backplane::EnableLayers("call_counter:out=printer");
  const bptest::Status s = RoundTrip();
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("'out=printer'"), std::string::npos) << s;
}

}  // namespace
