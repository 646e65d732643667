// SPDX-License-Identifier: Apache-2.0
// A third party's TargetKind, built with the SDK alone: kind "testaccel" on the simulated
// accelerator's device type (simaccel), with an attribute of every type, a canonicalizer that
// checks and derives values (and reads the device when FromDevice builds the Target), and the tag
// "testvendor/board1". It proves that a new kind needs no core edit.
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/target.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

namespace sdk = backplane::sdk;
using Json = nlohmann::json;

// Checks tile_sizes and derives "tile_elems" (their product) and "isa" (arch plus the
// features: "ta2+dma+fp16"). From a device, "device_name" is read from it.
std::string Canonicalize(const std::string& attrs_json, const DLDevice* device) {
  Json attrs = Json::parse(attrs_json);
  int64_t elems = 1;
  for (const Json& t : attrs.at("tile_sizes")) {
    const int64_t size = t.get<int64_t>();
    if (size < 1 || size > 4096) {
      sdk::ThrowTargetAttrError(
          "tile_sizes",
          "has " + std::to_string(size) + "; expected sizes from 1 to 4096, e.g. -tile_sizes=8,8");
    }
    elems *= size;
  }
  attrs["tile_elems"] = elems;
  std::string isa = attrs.at("arch").get<std::string>();
  for (const Json& f : attrs.at("features")) isa += "+" + f.get<std::string>();
  attrs["isa"] = isa;
  if (device != nullptr) {
    bp_value_t name;
    backplane::Check(
        backplane::detail::Api()->device_get_attr(*device, BP_ATTR_DEVICE_NAME, &name));
    backplane::Any owned(name);
    if (!owned.is_none()) attrs["device_name"] = owned.AsString();
  }
  return attrs.dump();
}

}  // namespace

BACKPLANE_PLUGIN_ENTRY("targetkind", "1.0.0") {
  sdk::TargetKindBuilder("testaccel", "simaccel")
      .Keys({"testaccel", "accel"})
      .Attr<bool>("enabled", true, "a bool")
      .Attr<int64_t>("max_num_threads", 128, BP_ATTR_MAX_THREADS_PER_BLOCK,
                     "an int FromDevice reads from max_threads_per_block")
      .Attr<double>("clock_ghz", 1.5, "a float")
      .Attr<std::string>("arch", std::string("ta1"), "a string")
      .Attr<std::string>("compute_version", sdk::kNoDefault, BP_ATTR_COMPUTE_VERSION,
                         "a string FromDevice reads from compute_version")
      .Attr<std::vector<int64_t>>("tile_sizes", std::vector<int64_t>{8, 8}, "an int array")
      .Attr<std::vector<std::string>>("features", std::vector<std::string>{}, "a string array")
      .Attr<sdk::TargetMap>("options", sdk::TargetMap{R"({"vector_width": 4})"}, "a map")
      .Attr<int64_t>("tile_elems", sdk::kNoDefault, "derived: the product of tile_sizes")
      .Attr<std::string>("isa", sdk::kNoDefault, "derived: arch+feature+...")
      .Attr<std::string>("device_name", sdk::kNoDefault, "derived from the device, if any")
      .Canonicalizer(Canonicalize)
      .Register();
  sdk::RegisterTag("testvendor/board1",
                   "testaccel -arch=ta2 -features=dma,fp16 -tile_sizes=16,4 -clock_ghz=2");
}
