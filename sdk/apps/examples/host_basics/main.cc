// SPDX-License-Identifier: Apache-2.0
// The host-app guide's example (docs/host-guide.md), built and run by the tests: find the
// plugins, list devices, move random data through a device and back, and handle errors.
#include <backplane/backplane.hpp>
#include <cstdio>
#include <random>
#include <vector>

namespace bp = backplane;

int main(int argc, char** argv) {
  try {
    // 1. Plugins: extra folders first (absolute), then BACKPLANE_PLUGIN_PATH and the install.
    for (int i = 1; i < argc; ++i) bp::Check(bp_plugin_path_add(argv[i]));

    // 2. A DeviceAPI is found by device type; its plugin loads on first use.
    bp::Device cpu = bp::Device::Parse("cpu:0");
    bp::DeviceAPI api = bp::DeviceAPI::Get(cpu);
    std::printf("%s: %s, %s cores\n", cpu.ToString().c_str(),
                api.GetAttr(BP_ATTR_DEVICE_NAME).ToString().c_str(),
                api.GetAttr(BP_ATTR_MULTI_PROCESSOR_COUNT).ToString().c_str());
    // Attributes that do not apply are none, never 0.
    std::printf("warp size: %s\n", api.GetAttr(BP_ATTR_WARP_SIZE).ToString().c_str());

    // 3. Tensors: allocate on the device, copy in, copy out (Empty, CopyDataFromTo, StreamSync).
    std::vector<float> input(1000);
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : input) x = dist(rng);
    bp::Tensor t = bp::Tensor::Empty({10, 100}, bp::Float32(), cpu);
    t.CopyFrom(input);
    bp::Tensor copy = t.CopyTo(cpu);  // device to device
    if (copy.ToVector<float>() != input) {
      std::fprintf(stderr, "round trip changed the data\n");
      return 1;
    }

    // 4. Streams: RAII; a device with one queue gives the null stream.
    bp::Stream stream(cpu);
    stream.Sync();

    // 5. Errors carry a kind and a message that names the culprit.
    try {
      bp::DeviceAPI::Get(bp::Device::Parse("no_such_device:0"));
    } catch (const bp::Error& e) {
      std::printf("expected error (%s): %s\n", bp_error_kind_name(e.kind()), e.what());
    }
    std::printf("host_basics: ok\n");
    return 0;
  } catch (const bp::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", bp_error_kind_name(e.kind()), e.what());
    return 1;
  }
}
