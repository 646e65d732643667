// SPDX-License-Identifier: Apache-2.0
// The SDK's plugin helpers, tested in-process: the ABI negotiation of the entry point, the
// DeviceAPI base class's defaults, its trampolines (pointer checks, exceptions turned into
// statuses), omitted entries, and a DeviceAPI registered here and used through the core.
//
// This executable is built with BACKPLANE_PLUGIN=1, as a plugin is, and points the SDK's
// host table at the core it links; nothing else in it includes Backplane headers without
// that definition.
#include <gtest/gtest.h>

#include <backplane/sdk/device_api.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/workspace_pool.hpp>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "plugins/test_util.h"

namespace {

namespace sdk = backplane::sdk;
using backplane::Any;

using bptest::Capture;
using bptest::Status;

class SdkTest : public ::testing::Test {
 protected:
  void SetUp() override { backplane::detail::g_host_api = bp_host_api(); }
  void TearDown() override { backplane::detail::g_host_api = bp_host_api(); }
};

// ---- entry point negotiation -------------------------------------------------------------

struct InitProbe {
  bp_plugin_info_t info;
  bool body_ran = false;
  InitProbe() {
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
  }
};

bp_status_t Init(const bp_host_api_t* host, InitProbe* probe, const sdk::PluginDescription& desc) {
  return sdk::detail::RunPluginInit(host, &probe->info, desc, [probe] { probe->body_ran = true; });
}

TEST_F(SdkTest, EntryAnswersItsVersionAndRunsTheBody) {
  InitProbe p;
  const sdk::PluginDescription desc{"probe", "3.1.4", "ACME"};
  ASSERT_EQ(Init(bp_host_api(), &p, desc), BP_OK);
  EXPECT_TRUE(p.body_ran);
  EXPECT_EQ(p.info.abi_major, uint32_t{BP_ABI_VERSION_MAJOR});
  EXPECT_EQ(p.info.abi_minor, uint32_t{BP_ABI_VERSION_MINOR});
  EXPECT_STREQ(p.info.name, "probe");
  EXPECT_STREQ(p.info.version, "3.1.4");
  EXPECT_STREQ(p.info.vendor, "ACME");
}

TEST_F(SdkTest, EntryRefusesAHostOfAnotherMajorNamingBothVersions) {
  bp_host_api_t host = *bp_host_api();
  host.abi_major = BP_ABI_VERSION_MAJOR + 1;
  host.abi_minor = 3;
  InitProbe p;
  const Status s = Capture(Init(&host, &p, sdk::PluginDescription{"probe", "1"}));
  EXPECT_EQ(s.kind, BP_ERR_VERSION_MISMATCH);
  EXPECT_FALSE(p.body_ran);
  const std::string mine =
      std::to_string(BP_ABI_VERSION_MAJOR) + "." + std::to_string(BP_ABI_VERSION_MINOR);
  const std::string theirs = std::to_string(BP_ABI_VERSION_MAJOR + 1) + ".3";
  EXPECT_NE(s.message.find(mine), std::string::npos) << s.message;
  EXPECT_NE(s.message.find(theirs), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("probe"), std::string::npos) << s.message;
  // The answer is filled in even so, so the host can report the plugin's version.
  EXPECT_EQ(p.info.abi_major, uint32_t{BP_ABI_VERSION_MAJOR});
  EXPECT_STREQ(p.info.name, "probe");
}

TEST_F(SdkTest, EntryRefusesAHostOlderThanThePluginNeeds) {
  InitProbe p;
  sdk::PluginDescription desc{"probe", "1"};
  desc.min_host_minor = BP_ABI_VERSION_MINOR + 7;
  const Status s = Capture(Init(bp_host_api(), &p, desc));
  EXPECT_EQ(s.kind, BP_ERR_VERSION_MISMATCH);
  EXPECT_FALSE(p.body_ran);
  EXPECT_NE(s.message.find(std::to_string(BP_ABI_VERSION_MAJOR) + "." +
                           std::to_string(BP_ABI_VERSION_MINOR + 7)),
            std::string::npos)
      << s.message;
  EXPECT_EQ(p.info.abi_minor, uint32_t{BP_ABI_VERSION_MINOR + 7});
}

TEST_F(SdkTest, EntryChecksTheStructsItIsGiven) {
  InitProbe p;
  const sdk::PluginDescription desc{"probe", "1"};
  EXPECT_EQ(Init(nullptr, &p, desc), BP_ERR_INVALID_ARGUMENT);
  bp_host_api_t tiny = *bp_host_api();
  tiny.struct_size = sizeof(size_t);
  EXPECT_EQ(Init(&tiny, &p, desc), BP_ERR_VERSION_MISMATCH);
  bp_host_api_t small = *bp_host_api();
  small.struct_size = offsetof(bp_host_api_t, device_api_get);
  Status s = Capture(Init(&small, &p, desc));
  EXPECT_EQ(s.kind, BP_ERR_VERSION_MISMATCH);
  EXPECT_NE(s.message.find("host table"), std::string::npos) << s.message;
  // An info struct too small for the fields of 1.0.
  p.info.struct_size = offsetof(bp_plugin_info_t, name);
  s = Capture(Init(bp_host_api(), &p, desc));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find(std::to_string(offsetof(bp_plugin_info_t, name))), std::string::npos)
      << s.message;
  s = Capture(sdk::detail::RunPluginInit(bp_host_api(), nullptr, desc, [] {}));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(p.body_ran);
}

TEST_F(SdkTest, EntryLeavesFieldsTheHostDoesNotHave) {
  InitProbe p;
  const char* sentinel = "untouched";
  p.info.vendor = sentinel;
  p.info.struct_size = offsetof(bp_plugin_info_t, vendor);  // a host from before `vendor`
  ASSERT_EQ(Init(bp_host_api(), &p, sdk::PluginDescription{"probe", "1", "ACME"}), BP_OK);
  EXPECT_EQ(p.info.vendor, sentinel);
  EXPECT_STREQ(p.info.version, "1");
}

TEST_F(SdkTest, EntryTurnsExceptionsFromTheBodyIntoStatuses) {
  InitProbe p;
  const sdk::PluginDescription desc{"probe", "1"};
  Status s = Capture(sdk::detail::RunPluginInit(bp_host_api(), &p.info, desc, [] {
    throw backplane::Error(BP_ERR_DEVICE, "no device plugged in");
  }));
  EXPECT_EQ(s.kind, BP_ERR_DEVICE);
  EXPECT_EQ(s.message, "no device plugged in");
  s = Capture(sdk::detail::RunPluginInit(bp_host_api(), &p.info, desc,
                                         [] { throw std::runtime_error("boom"); }));
  EXPECT_EQ(s.kind, BP_ERR_INTERNAL);
  EXPECT_NE(s.message.find("boom"), std::string::npos);
  s = Capture(sdk::detail::RunPluginInit(bp_host_api(), &p.info, desc, [] { throw 42; }));
  EXPECT_EQ(s.kind, BP_ERR_INTERNAL);
}

// ---- DeviceAPI base class ----------------------------------------------------------------

// A host-memory DeviceAPI that records what it was asked, with only the required methods.
class RecordingAPI : public sdk::DeviceAPI {
 public:
  explicit RecordingAPI(const Entries& entries = Entries{}) : sdk::DeviceAPI(entries) {}

  Any GetAttr(DLDevice, bp_device_attr_kind_t kind) override {
    ++attr_calls;
    return kind == BP_ATTR_EXIST ? sdk::IntValue(1) : sdk::NoneValue();
  }
  void SetDevice(DLDevice) override {}
  void* AllocDataSpace(DLDevice, size_t nbytes, size_t alignment, DLDataType) override {
    if (throw_kind == 1) throw backplane::Error(BP_ERR_DEVICE, "device fell off the bus");
    if (throw_kind == 2) throw std::bad_alloc();
    if (throw_kind == 3) throw std::runtime_error("driver said no");
    if (throw_kind == 4) throw 7;
    last_alignment = alignment;
    ++allocs;
    void* p = nullptr;
    if (posix_memalign(&p, alignment < sizeof(void*) ? sizeof(void*) : alignment,
                       nbytes == 0 ? 1 : nbytes) != 0) {
      throw std::bad_alloc();
    }
    return p;
  }
  void FreeDataSpace(DLDevice, void* ptr) override {
    ++frees;
    std::free(ptr);
  }
  void CopyDataFromTo(const DLTensor* from, const DLTensor* to, bp_stream_t) override {
    std::memcpy(static_cast<char*>(to->data) + to->byte_offset,
                static_cast<const char*>(from->data) + from->byte_offset, sdk::TensorBytes(from));
  }
  void StreamSync(DLDevice, bp_stream_t stream) override { synced.push_back(stream); }

  int attr_calls = 0;
  int allocs = 0;
  int frees = 0;
  int throw_kind = 0;
  size_t last_alignment = 0;
  std::vector<bp_stream_t> synced;
};

const DLDevice kDev{kDLCPU, 0};
const DLDataType kU8{kDLUInt, 8, 1};

TEST_F(SdkTest, UnoverriddenMethodsHaveTheDocumentedDefaults) {
  RecordingAPI api;
  void* w = api.AllocWorkspace(kDev, 100, kU8);
  EXPECT_EQ(api.allocs, 1) << "workspace defaults to data space";
  EXPECT_EQ(api.last_alignment, sdk::kDefaultWorkspaceAlignment);
  api.FreeWorkspace(kDev, w);
  EXPECT_EQ(api.frees, 1);
  EXPECT_EQ(api.CreateStream(kDev), nullptr) << "a single-queue device has the null stream";
  api.SetStream(kDev, nullptr);
  api.FreeStream(kDev, nullptr);
  bp_stream_t src = reinterpret_cast<bp_stream_t>(0x10);
  bp_stream_t dst = reinterpret_cast<bp_stream_t>(0x20);
  api.SyncStreamFromTo(kDev, src, dst);
  EXPECT_EQ(api.synced, std::vector<bp_stream_t>{src}) << "the default waits for the source";
  EXPECT_TRUE(api.GetProperty(kDev, "anything").is_none());
  try {
    api.FreeStream(kDev, src);
    ADD_FAILURE() << "freeing a stream a single-queue device never made must fail";
  } catch (const backplane::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("0x10"), std::string::npos) << e.what();
  }
}

TEST_F(SdkTest, TableHasEveryEntryOrOmitsTheOptionalOnes) {
  RecordingAPI full;
  const bp_device_api_t* t = full.table();
  EXPECT_EQ(t->struct_size, sizeof(bp_device_api_t));
  EXPECT_EQ(t->self, &full);
  for (const void* entry :
       {(const void*)t->get_attr, (const void*)t->get_property, (const void*)t->set_device,
        (const void*)t->alloc_data_space, (const void*)t->free_data_space,
        (const void*)t->alloc_workspace, (const void*)t->free_workspace,
        (const void*)t->copy_data_from_to, (const void*)t->create_stream,
        (const void*)t->free_stream, (const void*)t->set_stream, (const void*)t->stream_sync,
        (const void*)t->sync_stream_from_to}) {
    EXPECT_NE(entry, nullptr);
  }
  RecordingAPI lean(sdk::DeviceAPI::Entries{false, false, false, false});
  t = lean.table();
  EXPECT_EQ(t->get_property, nullptr);
  EXPECT_EQ(t->alloc_workspace, nullptr);
  EXPECT_EQ(t->free_workspace, nullptr);
  EXPECT_EQ(t->create_stream, nullptr);
  EXPECT_EQ(t->free_stream, nullptr);
  EXPECT_EQ(t->set_stream, nullptr);
  EXPECT_EQ(t->sync_stream_from_to, nullptr);
  EXPECT_NE(t->get_attr, nullptr);
  EXPECT_NE(t->alloc_data_space, nullptr);
  EXPECT_NE(t->copy_data_from_to, nullptr);
  EXPECT_NE(t->stream_sync, nullptr);
}

TEST_F(SdkTest, TrampolinesTurnExceptionsIntoStatuses) {
  RecordingAPI api;
  const bp_device_api_t* t = api.table();
  void* p = reinterpret_cast<void*>(0x1);
  const struct {
    int throw_kind;
    bp_status_t status;
    const char* text;
  } cases[] = {{1, BP_ERR_DEVICE, "device fell off the bus"},
               {2, BP_ERR_OUT_OF_MEMORY, "out of host memory"},
               {3, BP_ERR_INTERNAL, "driver said no"},
               {4, BP_ERR_INTERNAL, "unknown C++ exception"}};
  for (const auto& c : cases) {
    api.throw_kind = c.throw_kind;
    const Status s = Capture(t->alloc_data_space(t->self, kDev, 16, 64, kU8, &p));
    EXPECT_EQ(s.kind, c.status) << c.text;
    EXPECT_NE(s.message.find(c.text), std::string::npos) << s.message;
    EXPECT_EQ(p, reinterpret_cast<void*>(0x1)) << "outputs stay untouched on failure";
  }
}

TEST_F(SdkTest, TrampolinesCheckTheirArguments) {
  RecordingAPI api;
  const bp_device_api_t* t = api.table();
  Status s = Capture(t->alloc_data_space(t->self, kDev, 16, 64, kU8, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("out_data"), std::string::npos) << s.message;
  void* p = nullptr;
  s = Capture(t->alloc_data_space(t->self, kDev, 16, 24, kU8, &p));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("24"), std::string::npos) << s.message;
  EXPECT_EQ(api.allocs, 0) << "a bad alignment must not reach the backend";
  s = Capture(t->alloc_workspace(t->self, kDev, 16, kU8, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  DLTensor any{};
  s = Capture(t->copy_data_from_to(t->self, nullptr, &any, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("from"), std::string::npos) << s.message;
  s = Capture(t->copy_data_from_to(t->self, &any, nullptr, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  bp_value_t v;
  s = Capture(t->get_property(t->self, kDev, nullptr, &v));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  s = Capture(t->create_stream(t->self, kDev, nullptr));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
}

TEST_F(SdkTest, AttributeKindsOutsideTheEnumAreNone) {
  RecordingAPI api;
  const bp_device_api_t* t = api.table();
  for (int32_t kind : {-1, int32_t{BP_ATTR_COUNT}, 9999}) {
    bp_value_t v;
    v.type = BP_VALUE_INT;
    ASSERT_EQ(t->get_attr(t->self, kDev, kind, &v), BP_OK);
    EXPECT_EQ(v.type, BP_VALUE_NONE) << kind;
  }
  EXPECT_EQ(api.attr_calls, 0) << "unknown kinds must not reach the backend";
  bp_value_t v;
  ASSERT_EQ(t->get_attr(t->self, kDev, BP_ATTR_EXIST, &v), BP_OK);
  EXPECT_EQ(v.type, BP_VALUE_INT);
  EXPECT_EQ(v.u.v_int64, 1);
}

TEST_F(SdkTest, ValueHelpersMakeOwnedValues) {
  EXPECT_TRUE(sdk::NoneValue().is_none());
  EXPECT_EQ(sdk::IntValue(-5).AsInt(), -5);
  EXPECT_DOUBLE_EQ(sdk::FloatValue(2.5).AsFloat(), 2.5);
  int x = 0;
  EXPECT_EQ(sdk::PtrValue(&x).AsPtr(), &x);
  const Any s = sdk::StringValue("name with \0 inside");
  EXPECT_EQ(s.type(), BP_VALUE_OBJECT);
  EXPECT_EQ(s.AsString(), "name with ");
  EXPECT_EQ(sdk::PointerString(reinterpret_cast<void*>(0xabc)), "0xabc");
}

// A DeviceAPI without workspace or stream entries, registered under a new device type and
// used through the core: the core applies the defaults of null entries (docs/abi.md, "The
// DeviceAPI table") on top of the SDK's table.
TEST_F(SdkTest, ARegisteredDeviceAPIWorksThroughTheCore) {
  static RecordingAPI api(sdk::DeviceAPI::Entries{true, false, false, false});
  const int32_t type = sdk::RegisterDeviceType("sdktest");
  EXPECT_GE(type, BP_DEVICE_TYPE_FIRST_DYNAMIC);
  sdk::RegisterDeviceAPI("sdktest", &api);
  EXPECT_EQ(backplane::Registry::Get("device_api.sdktest")().AsPtr(), api.table());
  const DLDevice dev{static_cast<DLDeviceType>(type), 0};

  void* w = nullptr;
  ASSERT_EQ(bp_device_alloc_workspace(dev, 300, kU8, &w), BP_OK);
  EXPECT_EQ(api.allocs, 1) << "the core falls back to data space";
  EXPECT_EQ(api.last_alignment, 64u);
  ASSERT_EQ(bp_device_free_workspace(dev, w), BP_OK);
  EXPECT_EQ(api.frees, 1);

  bp_stream_t s = reinterpret_cast<bp_stream_t>(0x1);
  ASSERT_EQ(bp_device_stream_create(dev, &s), BP_OK);
  EXPECT_EQ(s, nullptr);
  bp_stream_t src = reinterpret_cast<bp_stream_t>(0x30);
  ASSERT_EQ(bp_device_sync_stream_from_to(dev, src, nullptr), BP_OK);
  EXPECT_EQ(api.synced, std::vector<bp_stream_t>{src});

  const std::vector<float> ref = {1.0f, -2.5f, 3.75f, 1e-3f, 12345.0f};
  auto t = backplane::Tensor::Empty({5}, backplane::Float32(), backplane::Device(dev));
  t.CopyFrom(ref);
  EXPECT_EQ(t.ToVector<float>(), ref);
}

// The workspace pool every GPU-style plugin keeps (sdk::WorkspacePool): size classes in
// quarter steps, the cap on kept bytes, and the plugin's token deciding what Take may hand out.
TEST(SdkWorkspacePool, ClassesWasteAtMostAQuarterAndLargeRequestsAreNotPooled) {
  backplane::sdk::WorkspacePool<int> pool;
  EXPECT_EQ(pool.ClassBytes(0), 4096u);
  EXPECT_EQ(pool.ClassBytes(4096), 4096u);
  EXPECT_EQ(pool.ClassBytes(4097), 5120u);
  EXPECT_EQ(pool.ClassBytes(5000), 5120u);
  EXPECT_EQ(pool.ClassBytes(8192), 8192u);
  EXPECT_EQ(pool.ClassBytes(8193), 10240u);
  EXPECT_EQ(pool.ClassBytes(size_t{16} << 20), size_t{16} << 20);
  EXPECT_EQ(pool.ClassBytes((size_t{16} << 20) + 1), 0u);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const size_t n = 4097 + rng() % ((size_t{16} << 20) - 4096);
    const size_t c = pool.ClassBytes(n);
    ASSERT_GE(c, n);
    ASSERT_LE(c - n, c / 4) << n;           // at most a quarter unused
    ASSERT_EQ(pool.ClassBytes(c), c) << n;  // a class is its own class
  }
  // A plugin with larger classes: no overflow near the top.
  backplane::sdk::WorkspacePool<int> big({.max_class = ~size_t{0}, .max_cached = ~size_t{0}});
  EXPECT_EQ(big.ClassBytes((size_t{1} << 63) + 1), (size_t{1} << 63) + (size_t{1} << 61));
  EXPECT_EQ(big.ClassBytes(~size_t{0}), 0u) << "its class would pass SIZE_MAX";
}

TEST(SdkWorkspacePool, TakeHandsOutOnlyWhatTheTokenAllowsAndKeepStopsAtTheCap) {
  backplane::sdk::WorkspacePool<int, int> pool({.max_cached = 4 * 4096});
  EXPECT_TRUE(pool.Keep(4096, 1, /*stream=*/10));
  EXPECT_TRUE(pool.Keep(4096, 2, /*stream=*/20));
  EXPECT_TRUE(pool.Keep(8192, 3, /*stream=*/10));
  EXPECT_FALSE(pool.Keep(4096, 4, 10)) << "past max_cached";
  EXPECT_FALSE(pool.Keep(0, 5, 10)) << "not a pooled class";
  EXPECT_EQ(pool.CachedBytes(), 4u * 4096);
  int b = 0, token = 0;
  EXPECT_FALSE(pool.Take(5120, &b)) << "no such class";
  EXPECT_FALSE(pool.Take(
      4096, [](int t) { return t == 30; }, &b));
  ASSERT_TRUE(pool.Take(
      4096, [](int t) { return t == 10; }, &b, &token));
  EXPECT_EQ(b, 1);
  EXPECT_EQ(token, 10);
  pool.ForEachReady([](int& t) { t = t == 20 ? 30 : t; });  // stream 20 went away
  ASSERT_TRUE(pool.Take(
      4096, [](int t) { return t == 30; }, &b));
  EXPECT_EQ(b, 2);
  EXPECT_EQ(pool.CachedBytes(), 8192u);
  const auto all = pool.TakeAll();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].buffer, 3);
  EXPECT_EQ(pool.CachedBytes(), 0u);
}

// A class with many kept buffers: Take asks a bounded number of tokens (the newest and the
// oldest), finds a usable one at either end, and leaves the rest for later.
TEST(SdkWorkspacePool, TakeAsksABoundedNumberOfTokens) {
  using Pool = backplane::sdk::WorkspacePool<int, int>;
  Pool pool({.max_cached = size_t{1} << 30});
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(pool.Keep(4096, i, /*token=*/i));
  int asked = 0, b = -1;
  auto only = [&](int want) {
    return [&asked, want](int t) {
      ++asked;
      return t == want;
    };
  };
  EXPECT_FALSE(pool.Take(4096, only(2500), &b)) << "the middle is not asked about";
  EXPECT_LE(asked, static_cast<int>(2 * Pool::kProbes));
  asked = 0;
  ASSERT_TRUE(pool.Take(4096, only(3), &b));  // among the oldest
  EXPECT_EQ(b, 3);
  EXPECT_LE(asked, static_cast<int>(2 * Pool::kProbes));
  asked = 0;
  ASSERT_TRUE(pool.Take(4096, only(4994), &b));  // among the newest
  EXPECT_EQ(b, 4994);
  EXPECT_LE(asked, static_cast<int>(Pool::kProbes));
  EXPECT_EQ(pool.CachedBytes(), 4998u * 4096);
  // A short list: every buffer is asked about, each once.
  Pool small;
  for (int i = 0; i < 11; ++i) ASSERT_TRUE(small.Keep(4096, i, i));
  asked = 0;
  EXPECT_FALSE(small.Take(4096, only(-1), &b));
  EXPECT_EQ(asked, 11);
  ASSERT_TRUE(small.Take(4096, only(7), &b));
  EXPECT_EQ(b, 7);
}

}  // namespace
