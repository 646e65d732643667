// SPDX-License-Identifier: Apache-2.0
// backplane/sdk/stream_registry.hpp, the live-stream bookkeeping of the cuda and opencl
// DeviceAPIs: handles are checked against the live set and their device, each thread has its
// own active stream per device, and a thread whose active stream another thread freed gets an
// error instead of work on a reused handle. The handles here are plain addresses, as a vendor
// API's would be.
#include <gtest/gtest.h>

#include <backplane/sdk/stream_registry.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace sdk = backplane::sdk;

const DLDevice kDev0{kDLOpenCL, 0};
const DLDevice kDev1{kDLOpenCL, 1};

bp_stream_t Handle(int* storage) { return storage; }

// The message of the Error `body` throws, or "" when it throws none.
template <typename Body>
std::string ErrorOf(Body body) {
  try {
    body();
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT) << e.what();
    return e.what();
  }
  return "";
}

// The SDK's calls (device names for messages) go to the core this test links.
class StreamRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { backplane::detail::g_host_api = bp_host_api(); }
};

TEST_F(StreamRegistryTest, ChecksLivenessAndDevice) {
  sdk::StreamRegistry reg("opencl");
  int a = 0, b = 0;
  reg.Add(Handle(&a), kDev0);
  EXPECT_EQ(reg.Check(kDev0, Handle(&a)), Handle(&a));
  EXPECT_EQ(reg.Check(kDev1, nullptr), nullptr);  // the null stream of any device
  const std::string other = ErrorOf([&] { reg.Check(kDev1, Handle(&a)); });
  EXPECT_NE(other.find("belongs to opencl:0"), std::string::npos) << other;
  const std::string unknown = ErrorOf([&] { reg.Check(kDev0, Handle(&b)); });
  EXPECT_NE(unknown.find("is not a live opencl stream"), std::string::npos) << unknown;
  reg.Remove(Handle(&a));
  EXPECT_NE(ErrorOf([&] { reg.Check(kDev0, Handle(&a)); }).find("is not a live"),
            std::string::npos);
}

TEST_F(StreamRegistryTest, ActiveStreamsArePerThreadAndPerDevice) {
  sdk::StreamRegistry reg("cuda");
  int a = 0, b = 0;
  reg.Add(Handle(&a), kDev0);
  reg.Add(Handle(&b), kDev1);
  EXPECT_EQ(reg.Active(kDev0), nullptr);
  reg.SetActive(kDev0, Handle(&a));
  reg.SetActive(kDev1, Handle(&b));
  EXPECT_EQ(reg.Active(kDev0), Handle(&a));
  EXPECT_EQ(reg.Active(kDev1), Handle(&b));
  EXPECT_NE(ErrorOf([&] { reg.SetActive(kDev0, Handle(&b)); }).find("belongs to cuda:1"),
            std::string::npos);
  EXPECT_EQ(reg.Active(kDev0), Handle(&a)) << "a refused SetActive changes nothing";
  bp_stream_t seen_elsewhere = Handle(&a);
  std::thread other([&] { seen_elsewhere = reg.Active(kDev0); });
  other.join();
  EXPECT_EQ(seen_elsewhere, nullptr) << "another thread starts on the null stream";
  reg.SetActive(kDev0, nullptr);
  EXPECT_EQ(reg.Active(kDev0), nullptr);
  EXPECT_EQ(reg.Active(kDev1), Handle(&b));
}

TEST_F(StreamRegistryTest, FreeingOnTheActiveThreadFallsBackToTheNullStream) {
  sdk::StreamRegistry reg("opencl");
  int a = 0;
  reg.Add(Handle(&a), kDev0);
  reg.SetActive(kDev0, Handle(&a));
  reg.Remove(Handle(&a));
  EXPECT_EQ(reg.Active(kDev0), nullptr);
}

TEST_F(StreamRegistryTest, AnActiveStreamFreedByAnotherThreadIsAnErrorEvenIfTheHandleIsReused) {
  sdk::StreamRegistry reg("opencl");
  int a = 0;
  reg.Add(Handle(&a), kDev0);
  reg.SetActive(kDev0, Handle(&a));
  std::thread freer([&] {
    reg.Remove(Handle(&a));
    reg.Add(Handle(&a), kDev0);  // the vendor hands the same handle out for a new stream
  });
  freer.join();
  const std::string message = ErrorOf([&] { reg.Active(kDev0); });
  EXPECT_NE(message.find("active opencl stream on opencl:0"), std::string::npos) << message;
  EXPECT_NE(message.find("has been freed"), std::string::npos) << message;
  // The error is reported once; the thread is back on the null stream, and may pick the new one.
  EXPECT_EQ(reg.Active(kDev0), nullptr);
  reg.SetActive(kDev0, Handle(&a));
  EXPECT_EQ(reg.Active(kDev0), Handle(&a));
}

TEST_F(StreamRegistryTest, RegistriesDoNotShareActiveStreams) {
  sdk::StreamRegistry one("opencl"), two("cuda");
  int a = 0;
  one.Add(Handle(&a), kDev0);
  two.Add(Handle(&a), kDev0);
  one.SetActive(kDev0, Handle(&a));
  EXPECT_EQ(one.Active(kDev0), Handle(&a));
  EXPECT_EQ(two.Active(kDev0), nullptr);
}

// ForEach: a plugin whose streams are its own objects (vulkan) keeps no second list of them.
TEST_F(StreamRegistryTest, ForEachVisitsTheLiveStreamsOfOneDevice) {
  sdk::StreamRegistry reg("vulkan");
  int a = 0, b = 0, c = 0;
  reg.Add(Handle(&a), kDev0);
  reg.Add(Handle(&b), kDev1);
  reg.Add(Handle(&c), kDev0);
  reg.Remove(Handle(&a));
  std::vector<bp_stream_t> seen;
  reg.ForEach(kDev0, [&](bp_stream_t s) { seen.push_back(s); });
  EXPECT_EQ(seen, std::vector<bp_stream_t>{Handle(&c)});
  seen.clear();
  reg.ForEach(kDev1, [&](bp_stream_t s) { seen.push_back(s); });
  EXPECT_EQ(seen, std::vector<bp_stream_t>{Handle(&b)});
}

}  // namespace
