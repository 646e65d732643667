// SPDX-License-Identifier: Apache-2.0
// Fixture for tests that use the simulated accelerator: loads simaccel_testing (simaccel with
// test hooks, plugin/hooks.h) from the test-plugin folder.
#ifndef BACKPLANE_TESTS_SDK_APPS_EXAMPLES_SIMACCEL_SIMACCEL_UTIL_H_
#define BACKPLANE_TESTS_SDK_APPS_EXAMPLES_SIMACCEL_SIMACCEL_UTIL_H_

#include <string>

#include "plugins/test_util.h"

namespace bptest {

class SimAccelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(LoadTestPlugin("simaccel_testing"));
    type_ = backplane::DeviceTypeFromName("simaccel");
  }
  void TearDown() override {
    // Leave the helpers in their neutral state for the next test in this process.
    backplane::Function::Get("simaccel_testing.set_delay_us")(0);
  }

  DLDevice Dev(int32_t id) const { return DLDevice{static_cast<DLDeviceType>(type_), id}; }
  backplane::Device Device(int32_t id) const { return backplane::Device(Dev(id)); }

  int64_t Live(int32_t id) const {
    return backplane::Function::Get("simaccel_testing.live_allocations")(id).AsInt();
  }
  void Hold(int32_t id, bp_stream_t s) const {
    backplane::Function::Get("simaccel_testing.stream_hold")(id, static_cast<void*>(s));
  }
  void Release(int32_t id, bp_stream_t s) const {
    backplane::Function::Get("simaccel_testing.stream_release")(id, static_cast<void*>(s));
  }

  void* Alloc(int32_t id, size_t n) const {
    void* p = nullptr;
    backplane::Check(bp_device_alloc_data_space(Dev(id), n, 64, backplane::UInt8(), &p));
    return p;
  }
  void Free(int32_t id, void* p) const { backplane::Check(bp_device_free_data_space(Dev(id), p)); }

  // Copies between host memory and a device handle, as byte views, on `stream`.
  void ToDevice(const void* host, int32_t id, void* handle, size_t n, uint64_t offset = 0,
                bp_stream_t stream = nullptr) const {
    int64_t shape = static_cast<int64_t>(n);
    DLTensor from = ByteView(const_cast<void*>(host), CpuDevice(), &shape, 0);
    DLTensor to = ByteView(handle, Dev(id), &shape, offset);
    backplane::Check(bp_device_copy_data_from_to(&from, &to, stream));
  }
  void ToHost(int32_t id, void* handle, void* host, size_t n, uint64_t offset = 0,
              bp_stream_t stream = nullptr) const {
    int64_t shape = static_cast<int64_t>(n);
    DLTensor from = ByteView(handle, Dev(id), &shape, offset);
    DLTensor to = ByteView(host, CpuDevice(), &shape, 0);
    backplane::Check(bp_device_copy_data_from_to(&from, &to, stream));
  }
  void Sync(int32_t id, bp_stream_t stream = nullptr) const {
    backplane::Check(bp_device_stream_sync(Dev(id), stream));
  }

  int32_t type_ = 0;
};

}  // namespace bptest

#endif  // BACKPLANE_TESTS_SDK_APPS_EXAMPLES_SIMACCEL_SIMACCEL_UTIL_H_
