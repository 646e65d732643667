// SPDX-License-Identifier: Apache-2.0
// The fixture of the opencl plugin's tests on the real ICD loader (PoCL in CI): loads the
// plugin, skips without an OpenCL device, and allocates and copies on opencl:N.
#ifndef BACKPLANE_TESTS_PLUGINS_OPENCL_OPENCL_FIXTURE_H_
#define BACKPLANE_TESTS_PLUGINS_OPENCL_OPENCL_FIXTURE_H_

#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace bptest {

class OpenCLTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        bptest::Capture(
            bp_plugin_load(
                (std::string(BACKPLANE_OPENCL_PLUGIN_DIR) + "/libbackplane_opencl.so").c_str()))
            .ok());
    type_ = backplane::DeviceTypeFromName("opencl");
    if (!backplane::DeviceAPI::Get(backplane::Device(Dev(0))).Exists()) {
      GTEST_SKIP() << "no OpenCL device (install pocl-opencl-icd for one on the CPU)";
    }
  }
  DLDevice Dev(int32_t id) const { return DLDevice{static_cast<DLDeviceType>(type_), id}; }
  int32_t Count() const {
    int32_t n = 0;
    while (backplane::DeviceAPI::Get(backplane::Device(Dev(n))).Exists()) ++n;
    return n;
  }
  void* Alloc(int32_t id, size_t n) const {
    void* p = nullptr;
    backplane::Check(bp_device_alloc_data_space(Dev(id), n, 64, backplane::UInt8(), &p));
    return p;
  }
  void* Workspace(size_t n) const {
    void* p = nullptr;
    backplane::Check(bp_device_alloc_workspace(Dev(0), n, backplane::UInt8(), &p));
    return p;
  }
  int64_t CachedBytes() const {
    return backplane::DeviceAPI::Get(backplane::Device(Dev(0)))
        .GetProperty("workspace_cached_bytes")
        .AsInt();
  }
  // Copies `data` into `handle` at `offset` and back; true when the bytes come back.
  bool RoundTrip(void* handle, const std::vector<uint8_t>& data, uint64_t offset) const {
    std::vector<uint8_t> back(data.size(), 0);
    int64_t shape = static_cast<int64_t>(data.size());
    DLTensor h = View(const_cast<uint8_t*>(data.data()), bptest::CpuDevice(), &shape, 0);
    DLTensor d = View(handle, Dev(0), &shape, offset);
    DLTensor r = View(back.data(), bptest::CpuDevice(), &shape, 0);
    backplane::Check(bp_device_copy_data_from_to(&h, &d, nullptr));
    backplane::Check(bp_device_copy_data_from_to(&d, &r, nullptr));
    return back == data;
  }
  static DLTensor View(void* data, DLDevice dev, int64_t* shape, uint64_t offset) {
    return bptest::ByteView(data, dev, shape, offset);
  }
  int32_t type_ = 0;
};

}  // namespace bptest

#endif  // BACKPLANE_TESTS_PLUGINS_OPENCL_OPENCL_FIXTURE_H_
