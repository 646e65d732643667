// SPDX-License-Identifier: Apache-2.0
// The SDK's one-line registrations, in-process: RegisterDeviceAPI (device type id, table),
// RegisterCodegen (target.build.<kind>: argument checks, the Target's kind, ir::Error and an
// empty module turned into statuses) and RegisterModuleLoader (a module saved through the
// core and loaded back through the loader; bad bytes are an error, not a crash).
//
// Built with BACKPLANE_PLUGIN=1, as a plugin is, with the SDK's host table pointed at the
// core this test links. module.hpp comes first on purpose: the SDK headers must not depend
// on the order they are included in.
// clang-format off
#include <backplane/sdk/module.hpp>
// clang-format on
#include <gtest/gtest.h>

#include <backplane/ir/error.hpp>
#include <backplane/sdk/codegen.hpp>
#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/target.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plugins/test_util.h"

namespace {

namespace sdk = backplane::sdk;
using backplane::Any;
using backplane::Error;
using backplane::Function;
using backplane::Module;
using backplane::PackedArgs;
using backplane::Target;

class CodegenSdkTest : public ::testing::Test {
 protected:
  void SetUp() override { backplane::detail::g_host_api = bp_host_api(); }
  void TearDown() override { backplane::detail::g_host_api = bp_host_api(); }
};

// A device with nothing behind it: only the registration is under test.
class NullDeviceAPI final : public sdk::DeviceAPI {
 public:
  Any GetAttr(DLDevice, bp_device_attr_kind_t kind) override {
    return kind == BP_ATTR_EXIST ? sdk::IntValue(0) : sdk::NoneValue();
  }
  void SetDevice(DLDevice) override {}
  void* AllocDataSpace(DLDevice, size_t, size_t, DLDataType) override {
    throw Error(BP_ERR_UNSUPPORTED, "no memory");
  }
  void FreeDataSpace(DLDevice, void*) override {}
  void CopyDataFromTo(const DLTensor*, const DLTensor*, bp_stream_t) override {}
  void StreamSync(DLDevice, bp_stream_t) override {}
};

// A module whose functions return their own name; it saves as its names, one a line.
class NamesModule : public sdk::ModuleBase {
 public:
  static constexpr const char* kKind = "sdkgen";
  explicit NamesModule(std::vector<std::string> names) : names_(std::move(names)) {}
  Function GetFunction(const std::string& name) override {
    for (const std::string& n : names_) {
      if (n == name) return Function::FromCallable([n](PackedArgs) { return sdk::StringValue(n); });
    }
    return Function();
  }
  std::vector<std::string> ListFunctions() override { return names_; }
  std::optional<std::string> SaveToBytes() override {
    std::string out;
    for (const std::string& n : names_) out += n + "\n";
    return out;
  }

 private:
  std::vector<std::string> names_;
};

// The names of the functions in `text`, "name1\nname2\n"; anything else is refused.
Module ModuleFromNames(const std::string& text) {
  std::vector<std::string> names;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    names.push_back(text.substr(start, end - start));
  }
  BACKPLANE_REQUIRE(start == text.size() && !names.empty(), BP_ERR_INVALID_ARGUMENT,
                    "not an sdkgen module: expected names, one a line");
  return sdk::MakeModule(std::make_shared<NamesModule>(std::move(names)));
}

// Device type sdkgen, its kind, and a second kind on the same device type (each test runs in
// a fresh process; this sets up that process once).
void RegisterKinds() {
  static NullDeviceAPI api;
  sdk::RegisterDeviceAPI("sdkgen", &api);
  sdk::TargetKindBuilder("sdkgen", "sdkgen").Attr<int64_t>("lanes", 4, "vector lanes").Register();
  sdk::TargetKindBuilder("sdkgen_other", "sdkgen").Register();
}

// The code generator under test: "IR" is a list of names, one a line; "throw-ir" makes the
// IR library's error, "empty" returns no module.
Module BuildNames(const std::string& ir_text, const Target& target) {
  if (ir_text == "throw-ir") {
    throw backplane::ir::Error(backplane::ir::ErrorKind::kParse, "1:1: expected IR, got junk");
  }
  if (ir_text == "empty") return Module();
  EXPECT_EQ(target.GetAttr<int64_t>("lanes", 0), 8);
  return ModuleFromNames(ir_text);
}

Any Call(const std::string& name, const std::string& text, const Target& target) {
  return backplane::Registry::Get(name)(text, target.object());
}

TEST_F(CodegenSdkTest, RegisterDeviceAPIGivesTheDeviceTypeItsId) {
  static NullDeviceAPI api;
  EXPECT_EQ(api.device_type(), -1);
  const int32_t type = sdk::RegisterDeviceAPI("sdkdevice", &api);
  EXPECT_GE(type, BP_DEVICE_TYPE_FIRST_DYNAMIC);
  EXPECT_EQ(api.device_type(), type);
  EXPECT_EQ(backplane::DeviceTypeFromName("sdkdevice"), type);
  EXPECT_EQ(backplane::Registry::Get("device_api.sdkdevice")().AsPtr(), api.table());
  // A DLPack name keeps its DLPack id.
  static NullDeviceAPI vulkan;
  EXPECT_EQ(sdk::RegisterDeviceAPI("vulkan", &vulkan), int32_t{kDLVulkan});
}

TEST_F(CodegenSdkTest, RegisterCodegenMakesTargetBuildOfTheKind) {
  RegisterKinds();
  sdk::RegisterCodegen("sdkgen", BuildNames);
  const Target target = Target::Parse("sdkgen -lanes=8");
  const Module m(Call("target.build.sdkgen", "scale\nshift\n", target).AsObject());
  EXPECT_EQ(m.Kind(), "sdkgen");
  EXPECT_EQ(m.ListFunctions(), (std::vector<std::string>{"scale", "shift"}));
  EXPECT_EQ(m.GetFunction("shift")().AsString(), "shift");
}

TEST_F(CodegenSdkTest, RegisterCodegenChecksItsArguments) {
  RegisterKinds();
  sdk::RegisterCodegen("sdkgen", BuildNames);
  const Function build = backplane::Registry::Get("target.build.sdkgen");
  try {
    build("f\n");
    FAIL() << "one argument was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("takes 2 arguments"), std::string::npos) << e.what();
  }
  try {
    build("f\n", 42);
    FAIL() << "an int was accepted as the Target";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_TYPE);
    EXPECT_NE(std::string(e.what()).find("a Target object"), std::string::npos) << e.what();
  }
  try {
    Call("target.build.sdkgen", "f\n", Target::Parse("sdkgen_other"));
    FAIL() << "a Target of another kind was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("kind 'sdkgen_other'"), std::string::npos) << e.what();
  }
}

TEST_F(CodegenSdkTest, RegisterCodegenTurnsFailuresIntoStatuses) {
  RegisterKinds();
  sdk::RegisterCodegen("sdkgen", BuildNames);
  const Target target = Target::Parse("sdkgen -lanes=8");
  try {
    Call("target.build.sdkgen", "throw-ir", target);
    FAIL() << "an ir::Error was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("1:1: expected IR, got junk"), std::string::npos)
        << e.what();
  }
  try {
    Call("target.build.sdkgen", "empty", target);
    FAIL() << "an empty module was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INTERNAL);
    EXPECT_NE(std::string(e.what()).find("returned no module"), std::string::npos) << e.what();
  }
  try {
    Call("target.build.sdkgen", "no newline", target);
    FAIL() << "a backplane::Error was lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("not an sdkgen module"), std::string::npos) << e.what();
  }
}

TEST_F(CodegenSdkTest, RegisterModuleLoaderReadsWhatTheModuleSaved) {
  RegisterKinds();
  sdk::RegisterCodegen("sdkgen", BuildNames);
  sdk::RegisterModuleLoader("sdkgen", ModuleFromNames);
  const Module built(
      Call("target.build.sdkgen", "a\nb\n", Target::Parse("sdkgen -lanes=8")).AsObject());
  const Module loaded = Module::LoadFromBytes(built.SaveToBytes());
  EXPECT_EQ(loaded.Kind(), "sdkgen");
  EXPECT_EQ(loaded.ListFunctions(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(loaded.GetFunction("b")().AsString(), "b");

  const Function load = backplane::Registry::Get("runtime.module.load_from_bytes.sdkgen");
  try {
    load("a\n");  // a string, not a bytes object
    FAIL() << "a string was accepted as bytes";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_TYPE);
    EXPECT_NE(std::string(e.what()).find("a bytes object"), std::string::npos) << e.what();
  }
  bp_object_t* raw = nullptr;
  ASSERT_EQ(backplane::detail::Api()->bytes_create("junk", 4, &raw), BP_OK);
  const backplane::ObjectRef junk = backplane::ObjectRef::Adopt(raw);
  try {
    load(junk);
    FAIL() << "junk bytes were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("not an sdkgen module"), std::string::npos) << e.what();
  }
}

}  // namespace
