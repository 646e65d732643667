// SPDX-License-Identifier: Apache-2.0
// The global function registry and the device-type registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <backplane/backplane.hpp>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace bp = backplane;

namespace {

bp::Function Constant(int64_t value) {
  return bp::Function::FromCallable([value](bp::PackedArgs) {
    bp_value_t r;
    r.type = BP_VALUE_INT;
    r.u.v_int64 = value;
    return bp::Any(r);
  });
}

TEST(Registry, SetGetListRemove) {
  bp::Registry::Set("test.answer", Constant(42));
  EXPECT_EQ(bp::Registry::Get("test.answer")().AsInt(), 42);
  auto names = bp::Registry::List();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "test.answer"), names.end());
  bp::Registry::Remove("test.answer");
  EXPECT_FALSE(bp::Registry::TryGet("test.answer"));
  EXPECT_THROW(bp::Registry::Remove("test.answer"), bp::Error);
}

TEST(Registry, TakenNameIsAnErrorNamingTheOwnerUnlessOverride) {
  bp::Registry::Set("test.dup", Constant(1));
  try {
    bp::Registry::Set("test.dup", Constant(2));
    FAIL() << "expected ALREADY_EXISTS";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_ALREADY_EXISTS);
    EXPECT_NE(std::string(e.what()).find("'test.dup' is already registered by the host"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("allow_override"), std::string::npos);
  }
  EXPECT_EQ(bp::Registry::Get("test.dup")().AsInt(), 1);
  bp::Registry::Set("test.dup", Constant(2), /*allow_override=*/true);
  EXPECT_EQ(bp::Registry::Get("test.dup")().AsInt(), 2);
}

TEST(Registry, MissingNameSaysHowToFindNames) {
  bp_object_t* out = nullptr;
  EXPECT_EQ(bp_registry_get("test.no_such_function", &out), BP_ERR_NOT_FOUND);
  const char* msg = nullptr;
  bp_error_last(nullptr, &msg);
  EXPECT_NE(std::string(msg).find("'test.no_such_function' is not registered"), std::string::npos);
  EXPECT_NE(std::string(msg).find("backplane info"), std::string::npos);
  EXPECT_EQ(bp_registry_set("", nullptr, 0), BP_ERR_INVALID_ARGUMENT);
  bp::ObjectRef not_a_function = bp::MakeString("x");
  EXPECT_EQ(bp_registry_set("test.bad", not_a_function.get(), 0), BP_ERR_TYPE);
}

TEST(Registry, ConcurrentSetGetCall) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &failures] {
      std::mt19937 rng(t);
      for (int i = 0; i < 500; ++i) {
        const int64_t v = static_cast<int64_t>(rng() % 1000000);
        const std::string name = "test.concurrent." + std::to_string(t);
        bp::Registry::Set(name, Constant(v), /*allow_override=*/true);
        if (bp::Registry::Get(name)().AsInt() != v) ++failures;
        (void)bp::Registry::List();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(DeviceTypes, DLPackIdsBothWays) {
  const std::pair<const char*, int32_t> expected[] = {
      {"cpu", kDLCPU},       {"cuda", kDLCUDA},     {"cuda_host", kDLCUDAHost},
      {"opencl", kDLOpenCL}, {"vulkan", kDLVulkan}, {"metal", kDLMetal},
      {"rocm", kDLROCM},     {"ext_dev", kDLExtDev}};
  for (const auto& [name, id] : expected) {
    EXPECT_EQ(bp::DeviceTypeFromName(name), id) << name;
    EXPECT_EQ(bp::DeviceTypeName(id), name);
  }
}

TEST(DeviceTypes, NewNameGetsFreshIdAboveExtDevWithoutCoreEdit) {
  int32_t a = 0, b = 0, again = 0;
  ASSERT_EQ(bp_device_type_register("test_accel_a", &a), BP_OK);
  ASSERT_EQ(bp_device_type_register("test_accel_b", &b), BP_OK);
  ASSERT_EQ(bp_device_type_register("test_accel_a", &again), BP_OK);
  EXPECT_GE(a, BP_DEVICE_TYPE_FIRST_DYNAMIC);
  EXPECT_GT(a, kDLExtDev);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, again);
  EXPECT_EQ(bp::DeviceTypeName(b), "test_accel_b");
  EXPECT_EQ(bp::Device::Parse("test_accel_b:3").dl.device_type, b);
  EXPECT_EQ(bp::Device::Parse("test_accel_b:3").dl.device_id, 3);
  std::vector<int32_t> ids(BP_DEVICE_TYPE_MAX);
  size_t count = 0;
  ASSERT_EQ(bp_device_type_list(ids.data(), ids.size(), &count), BP_OK);
  ids.resize(count);
  EXPECT_NE(std::find(ids.begin(), ids.end(), a), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), kDLCPU), ids.end());
}

TEST(DeviceTypes, BadNamesAndUnknownIdsAreClearErrors) {
  int32_t id = 0;
  for (const char* bad : {"", "Upper", "has space", "dash-ed", "../x"}) {
    EXPECT_EQ(bp_device_type_register(bad, &id), BP_ERR_INVALID_ARGUMENT) << bad;
  }
  EXPECT_EQ(bp_device_type_from_name("no_such_device", &id), BP_ERR_NOT_FOUND);
  const char* msg = nullptr;
  bp_error_last(nullptr, &msg);
  EXPECT_NE(std::string(msg).find("'no_such_device' is not known; known: cpu(1)"),
            std::string::npos)
      << msg;
  const char* name = nullptr;
  EXPECT_EQ(bp_device_type_name(200, &name), BP_ERR_NOT_FOUND);
  EXPECT_EQ(bp_device_type_name(-1, &name), BP_ERR_NOT_FOUND);
  EXPECT_THROW(bp::Device::Parse("cpu:x"), bp::Error);
  // An ID past int32 is an error of its own, not std::stoi's out_of_range.
  for (const char* big : {"cpu:2147483648", "cpu:99999999999", "cpu:123456789012345678901234"}) {
    try {
      bp::Device::Parse(big);
      ADD_FAILURE() << big << " parsed";
    } catch (const bp::Error& e) {
      EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT) << big;
      EXPECT_NE(std::string(e.what()).find("larger than 2147483647"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(bp::Device::Parse("cpu:2147483647").dl.device_id, 2147483647);
}

}  // namespace
