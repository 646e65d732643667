// SPDX-License-Identifier: Apache-2.0
// The fixture of the vulkan plugin's tests on the real loader (lavapipe in CI): skips without a
// Vulkan device, fails a test on any validation error, and allocates and copies on vulkan:0.
#ifndef BACKPLANE_TESTS_PLUGINS_VULKAN_VULKAN_FIXTURE_H_
#define BACKPLANE_TESTS_PLUGINS_VULKAN_VULKAN_FIXTURE_H_

#include <stdlib.h>

#include "plugins/test_util.h"

namespace bptest {

inline constexpr DLDevice kDev{kDLVulkan, 0};

// The plugin creates its instance with the Khronos validation layer and a debug-utils
// messenger; every validation error fails the test that caused it (TearDown).
inline const int kValidationOn = setenv("BACKPLANE_VULKAN_VALIDATION", "1", /*overwrite=*/0);

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backplane::DeviceAPI::Get(backplane::Device(kDev)).Exists()) {
      GTEST_SKIP() << "no Vulkan device with a compute queue (install mesa-vulkan-drivers for "
                      "lavapipe)";
    }
  }
  void TearDown() override {
    (void)kValidationOn;
    const int64_t errors = backplane::Function::Get("vulkan.validation_errors")().AsInt();
    if (errors < 0) {
      RecordProperty("validation", "off: VK_LAYER_KHRONOS_validation is not installed");
    } else {
      EXPECT_EQ(errors, 0) << "the Vulkan validation layer reported errors (see stderr)";
    }
  }
  void* Alloc(size_t n) {
    void* p = nullptr;
    backplane::Check(bp_device_alloc_data_space(kDev, n, 64, backplane::UInt8(), &p));
    return p;
  }
  void Free(void* p) { backplane::Check(bp_device_free_data_space(kDev, p)); }
  void Copy(void* from_data, DLDevice from_dev, uint64_t from_off, void* to_data, DLDevice to_dev,
            uint64_t to_off, int64_t* shape, bp_stream_t s = nullptr) {
    DLTensor from = bptest::ByteView(from_data, from_dev, shape, from_off);
    DLTensor to = bptest::ByteView(to_data, to_dev, shape, to_off);
    backplane::Check(bp_device_copy_data_from_to(&from, &to, s));
  }
};

}  // namespace bptest

#endif  // BACKPLANE_TESTS_PLUGINS_VULKAN_VULKAN_FIXTURE_H_
