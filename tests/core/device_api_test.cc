// SPDX-License-Identifier: Apache-2.0
// The core's DeviceAPI manager and bp_device_* defaults, driven by test-double DeviceAPI
// tables the test registers itself (the failures here -- a short table, a missing entry, a
// garbage attribute -- cannot be produced by a well-built plugin, so doubles stand in).
#include <gtest/gtest.h>

#include <atomic>
#include <backplane/backplane.hpp>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace bp = backplane;

namespace {

// Host-memory backed device with counters, minimal table: no workspace, no streams.
struct Counters {
  std::atomic<int> alloc{0}, free{0}, sync{0}, copy{0};
};

bp_status_t MinGetAttr(void*, DLDevice dev, int32_t kind, bp_value_t* out) {
  if (kind == BP_ATTR_EXIST) {
    out->type = BP_VALUE_INT;
    out->u.v_int64 = dev.device_id == 0;
  }
  return BP_OK;
}
bp_status_t MinAlloc(void* self, DLDevice, size_t nbytes, size_t alignment, DLDataType,
                     void** out) {
  ++static_cast<Counters*>(self)->alloc;
  *out =
      std::aligned_alloc(alignment, (nbytes + alignment - 1) / alignment * alignment + alignment);
  return BP_OK;
}
bp_status_t MinFree(void* self, DLDevice, void* p) {
  ++static_cast<Counters*>(self)->free;
  std::free(p);
  return BP_OK;
}
bp_status_t MinCopy(void* self, const DLTensor* from, const DLTensor* to, bp_stream_t) {
  ++static_cast<Counters*>(self)->copy;
  size_t n = (from->dtype.bits * from->dtype.lanes + 7) / 8;
  for (int i = 0; i < from->ndim; ++i) n *= from->shape[i];
  std::memcpy(static_cast<char*>(to->data) + to->byte_offset,
              static_cast<const char*>(from->data) + from->byte_offset, n);
  return BP_OK;
}
bp_status_t MinSync(void* self, DLDevice, bp_stream_t) {
  ++static_cast<Counters*>(self)->sync;
  return BP_OK;
}

bp_device_api_t MinimalTable(Counters* c) {
  bp_device_api_t t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.self = c;
  t.get_attr = MinGetAttr;
  t.alloc_data_space = MinAlloc;
  t.free_data_space = MinFree;
  t.copy_data_from_to = MinCopy;
  t.stream_sync = MinSync;
  return t;
}

// Registers device type `name` with `table` as its DeviceAPI; returns the type id.
int32_t Install(const std::string& name, const bp_device_api_t* table) {
  int32_t id = 0;
  EXPECT_EQ(bp_device_type_register(name.c_str(), &id), BP_OK);
  bp::Registry::Set("device_api." + name, bp::Function::FromCallable([table](bp::PackedArgs) {
                      bp_value_t v;
                      v.type = BP_VALUE_PTR;
                      v.u.v_ptr = const_cast<bp_device_api_t*>(table);
                      return bp::Any(v);
                    }));
  return id;
}

std::string Message() {
  const char* msg = nullptr;
  bp_error_last(nullptr, &msg);
  return msg;
}

TEST(DeviceAPI, WorkspaceFallsBackToDataSpaceAndStreamsToNull) {
  static Counters c;
  static bp_device_api_t table = MinimalTable(&c);
  const int32_t id = Install("td_minimal", &table);
  bp::DeviceAPI api = bp::DeviceAPI::Get(bp::Device(DLDevice{static_cast<DLDeviceType>(id), 0}));
  EXPECT_TRUE(api.Exists());
  EXPECT_TRUE(api.GetAttr(BP_ATTR_WARP_SIZE).is_none());
  EXPECT_TRUE(api.GetProperty("anything").is_none());  // no get_property entry: none
  void* w = api.AllocWorkspace(1000);
  EXPECT_EQ(c.alloc.load(), 1);
  api.FreeWorkspace(w);
  EXPECT_EQ(c.free.load(), 1);
  api.SetDevice();  // a null set_device is a no-op
  bp::Stream s(api.device());
  EXPECT_EQ(s.handle(), nullptr);
  s.SetActive();  // the null stream may always be made active
  bp::Stream s2(api.device());
  s2.WaitFor(s);  // no sync_stream_from_to: the core waits on the source
  EXPECT_EQ(c.sync.load(), 1);
  EXPECT_EQ(bp_device_stream_set(api.device().dl, reinterpret_cast<bp_stream_t>(0x10)),
            BP_ERR_UNSUPPORTED);
  EXPECT_NE(Message().find("no set_stream"), std::string::npos);
}

TEST(DeviceAPI, ShortTableIsRefusedWithSizes) {
  static Counters c;
  static bp_device_api_t table = MinimalTable(&c);
  table.struct_size = 3 * sizeof(void*);
  const int32_t id = Install("td_short", &table);
  const bp_device_api_t* out = nullptr;
  EXPECT_EQ(bp_device_api_get(id, &out), BP_ERR_VERSION_MISMATCH);
  EXPECT_NE(Message().find("struct_size 24 but ABI 1.0 needs at least 120"), std::string::npos)
      << Message();
}

TEST(DeviceAPI, LongerTableFromNewerMinorIsAccepted) {
  static Counters c;
  struct Longer {
    bp_device_api_t base;
    void* future_entry;
  };
  static Longer table{MinimalTable(&c), reinterpret_cast<void*>(0x1)};
  table.base.struct_size = sizeof(Longer);
  const int32_t id = Install("td_longer", &table.base);
  const bp_device_api_t* out = nullptr;
  ASSERT_EQ(bp_device_api_get(id, &out), BP_OK);
  EXPECT_EQ(out->struct_size, sizeof(bp_device_api_t));
  EXPECT_EQ(out->alloc_data_space, MinAlloc);
}

TEST(DeviceAPI, MissingRequiredEntryIsNamed) {
  static Counters c;
  static bp_device_api_t table = MinimalTable(&c);
  table.copy_data_from_to = nullptr;
  const int32_t id = Install("td_missing", &table);
  const bp_device_api_t* out = nullptr;
  EXPECT_EQ(bp_device_api_get(id, &out), BP_ERR_PLUGIN);
  EXPECT_NE(Message().find("required entry 'copy_data_from_to'"), std::string::npos) << Message();
}

bp_status_t GarbageAttr(void*, DLDevice, int32_t, bp_value_t* out) {
  out->type = 77;
  return BP_OK;
}

TEST(DeviceAPI, GarbageAttributeIsRejected) {
  static Counters c;
  static bp_device_api_t table = MinimalTable(&c);
  table.get_attr = GarbageAttr;
  const int32_t id = Install("td_garbage", &table);
  bp_value_t v;
  EXPECT_EQ(bp_device_get_attr(DLDevice{static_cast<DLDeviceType>(id), 0}, 0, &v), BP_ERR_PLUGIN);
  EXPECT_NE(Message().find("returned a value of type 77"), std::string::npos) << Message();
}

TEST(DeviceAPI, UnknownTypeAndMissingPluginNameTheType) {
  const bp_device_api_t* out = nullptr;
  EXPECT_EQ(bp_device_api_get(199, &out), BP_ERR_NOT_FOUND);
  EXPECT_NE(Message().find("device type id 199 is not known"), std::string::npos);
  int32_t id = 0;
  ASSERT_EQ(bp_device_type_register("td_no_plugin", &id), BP_OK);
  EXPECT_EQ(bp_device_api_get(id, &out), BP_ERR_NOT_FOUND);
  EXPECT_NE(Message().find("no DeviceAPI for device type 'td_no_plugin'"), std::string::npos);
  // Names the plugins it looked at, or says none was found.
  EXPECT_TRUE(Message().find("(plugins looked at: ") != std::string::npos ||
              Message().find("(no plugin was found on the search path)") != std::string::npos)
      << Message();
  EXPECT_NE(Message().find("BACKPLANE_PLUGIN_PATH"), std::string::npos);
  bp_object_t* t = nullptr;
  const int64_t shape[] = {4};
  EXPECT_EQ(
      bp_tensor_empty(1, shape, bp::Float32(), DLDevice{static_cast<DLDeviceType>(id), 0}, &t),
      BP_ERR_NOT_FOUND);
}

TEST(DeviceAPI, CopyChecksSizesAndLayout) {
  static Counters c;
  static bp_device_api_t table = MinimalTable(&c);
  const int32_t id = Install("td_copycheck", &table);
  const DLDevice dev{static_cast<DLDeviceType>(id), 0};
  auto a = bp::Tensor::Empty({4, 4}, bp::Float32(), bp::Device(dev));
  auto b = bp::Tensor::Empty({3, 4}, bp::Float32(), bp::Device(dev));
  EXPECT_EQ(bp_device_copy_data_from_to(a.dl(), b.dl(), nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(Message().find("the source holds 64 bytes but the destination 48"), std::string::npos)
      << Message();
  DLTensor strided = *a.dl();
  int64_t strides[] = {1, 4};
  strided.strides = strides;
  EXPECT_EQ(bp_device_copy_data_from_to(&strided, a.dl(), nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(Message().find("strided"), std::string::npos);
  EXPECT_EQ(bp_device_copy_data_from_to(nullptr, a.dl(), nullptr), BP_ERR_INVALID_ARGUMENT);
  // A tensor of no elements copies whatever its strides (NumPy's empty (4, 0) array has (0, 0)).
  auto e1 = bp::Tensor::Empty({4, 0}, bp::Float32(), bp::Device(dev));
  auto e2 = bp::Tensor::Empty({4, 0}, bp::Float32(), bp::Device(dev));
  DLTensor empty = *e1.dl();
  int64_t zero_strides[] = {0, 0};
  empty.strides = zero_strides;
  EXPECT_EQ(bp_device_copy_data_from_to(&empty, e2.dl(), nullptr), BP_OK) << Message();
  std::vector<float> host(7);
  EXPECT_THROW(a.CopyFrom(host), bp::Error);
}

TEST(DeviceAPI, CopyBetweenTwoDeviceTypesIsStagedThroughTheHost) {
  static Counters ca, cb;
  static bp_device_api_t ta = MinimalTable(&ca), tb = MinimalTable(&cb);
  const int32_t ida = Install("td_stage_a", &ta);
  const int32_t idb = Install("td_stage_b", &tb);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-100, 100);
  std::vector<float> data(1031);
  for (auto& x : data) x = dist(rng);
  auto a = bp::Tensor::Empty({1031}, bp::Float32(),
                             bp::Device(DLDevice{static_cast<DLDeviceType>(ida), 0}));
  a.CopyFrom(data);
  auto b = a.CopyTo(bp::Device(DLDevice{static_cast<DLDeviceType>(idb), 0}));
  EXPECT_EQ(b.ToVector<float>(), data);
  EXPECT_GE(ca.copy.load(), 2);  // host->a, a->staging
  EXPECT_GE(cb.copy.load(), 2);  // staging->b, b->host
}

TEST(DeviceAPI, TensorFreesItsDataSpace) {
  static Counters c;
  static bp_device_api_t table = MinimalTable(&c);
  const int32_t id = Install("td_tensor_free", &table);
  {
    auto t = bp::Tensor::Empty({2, 3, 5}, bp::MakeDType(kDLInt, 16),
                               bp::Device(DLDevice{static_cast<DLDeviceType>(id), 0}));
    EXPECT_EQ(t.NumBytes(), 60u);
    EXPECT_EQ(c.alloc.load(), 1);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.dl()->data) % 64, 0u);
  }
  EXPECT_EQ(c.free.load(), 1);
  bp_object_t* t = nullptr;
  const int64_t negative[] = {2, -1};
  EXPECT_EQ(
      bp_tensor_empty(2, negative, bp::Float32(), DLDevice{static_cast<DLDeviceType>(id), 0}, &t),
      BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(Message().find("dimension 1 is negative"), std::string::npos);
  const int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(bp_tensor_empty(2, huge, bp::Float32(), DLDevice{static_cast<DLDeviceType>(id), 0}, &t),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(Message().find("overflows"), std::string::npos);
}

// ---- ABI 1.5: list attributes, list_properties, bp_device_list ----------------------------

bp_status_t ListKeys(void*, DLDevice dev, bp_object_t** out) {
  bp_value_t keys[2];
  keys[0].type = keys[1].type = BP_VALUE_STR;
  keys[0].u.v_str = "alpha";
  keys[1].u.v_str = "beta";
  return bp_array_create(keys, dev.device_id == 0 ? 2 : 0, out);
}

bp_status_t ListNumbers(void*, DLDevice, bp_object_t** out) {
  bp_value_t v;
  v.type = BP_VALUE_INT;
  v.u.v_int64 = 7;
  return bp_array_create(&v, 1, out);
}

// The attributes of a 1.5 plugin: subgroup sizes as an array of ints, extensions as an array
// with a pointer in it (a contract violation), the name as a string.
bp_status_t ListAttr(void*, DLDevice dev, int32_t kind, bp_value_t* out) {
  if (kind == BP_ATTR_EXIST) {
    out->type = BP_VALUE_INT;
    out->u.v_int64 = dev.device_id < 2;
  } else if (kind == BP_ATTR_SUBGROUP_SIZES) {
    bp_value_t sizes[2];
    sizes[0].type = sizes[1].type = BP_VALUE_INT;
    sizes[0].u.v_int64 = 16;
    sizes[1].u.v_int64 = 32;
    out->type = BP_VALUE_OBJECT;
    return bp_array_create(sizes, 2, &out->u.v_obj);
  } else if (kind == BP_ATTR_EXTENSIONS) {
    bp_value_t bad;
    bad.type = BP_VALUE_PTR;
    bad.u.v_ptr = &bad;
    out->type = BP_VALUE_OBJECT;
    return bp_array_create(&bad, 1, &out->u.v_obj);
  } else if (kind == BP_ATTR_DEVICE_NAME) {
    out->type = BP_VALUE_OBJECT;
    return bp_string_create("listed", 6, &out->u.v_obj);
  }
  return BP_OK;
}

TEST(DeviceAPI, TableOfAbi14StillWorksAndListsNoProperties) {
  // A plugin built against 1.4: its table ends before list_properties, and whatever lies
  // behind it in memory (here a non-null pointer) is never read.
  static Counters c;
  struct Abi14 {
    unsigned char table[offsetof(bp_device_api_t, list_properties)];
    void* not_a_field;
  };
  static Abi14 old{};
  bp_device_api_t full = MinimalTable(&c);
  full.struct_size = offsetof(bp_device_api_t, list_properties);
  std::memcpy(old.table, &full, sizeof(old.table));
  old.not_a_field = reinterpret_cast<void*>(0x1);
  const int32_t id = Install("td_abi14", reinterpret_cast<bp_device_api_t*>(&old));
  const bp_device_api_t* out = nullptr;
  ASSERT_EQ(bp_device_api_get(id, &out), BP_OK) << Message();
  EXPECT_EQ(out->list_properties, nullptr);
  const bp::Device dev(DLDevice{static_cast<DLDeviceType>(id), 0});
  bp::DeviceAPI api = bp::DeviceAPI::Get(dev);
  EXPECT_TRUE(api.ListProperties().empty());
  // A 1.5 kind it does not know answers none; everything 1.4 had still works.
  EXPECT_TRUE(api.GetAttr(BP_ATTR_SUBGROUP_SIZES).is_none());
  std::vector<float> data = {1, 2, 3, 4, 5};
  auto t = bp::Tensor::Empty({5}, bp::Float32(), dev);
  t.CopyFrom(data);
  EXPECT_EQ(t.ToVector<float>(), data);
  bool listed = false;
  for (const bp::DeviceEntry& e : bp::ListDevices()) listed = listed || e.device == dev;
  EXPECT_TRUE(listed) << "a 1.4 plugin's devices are listed too";
}

TEST(DeviceAPI, ListPropertiesReturnsThePluginsKeys) {
  static Counters c;
  static bp_device_api_t table = MinimalTable(&c);
  table.list_properties = ListKeys;
  const int32_t id = Install("td_props", &table);
  bp::DeviceAPI api = bp::DeviceAPI::Get(bp::Device(DLDevice{static_cast<DLDeviceType>(id), 0}));
  EXPECT_EQ(api.ListProperties(), (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(bp_device_list_properties(DLDevice{static_cast<DLDeviceType>(id), 0}, nullptr),
            BP_ERR_INVALID_ARGUMENT);

  static bp_device_api_t bad = MinimalTable(&c);
  bad.list_properties = ListNumbers;
  const int32_t bad_id = Install("td_props_bad", &bad);
  bp_object_t* keys = nullptr;
  EXPECT_EQ(bp_device_list_properties(DLDevice{static_cast<DLDeviceType>(bad_id), 0}, &keys),
            BP_ERR_PLUGIN);
  EXPECT_NE(Message().find("list_properties: returned an array whose element 0 is not a string"),
            std::string::npos)
      << Message();
}

TEST(DeviceAPI, ListAttributesAreArraysAndTheirElementsAreChecked) {
  static Counters c;
  static bp_device_api_t table = MinimalTable(&c);
  table.get_attr = ListAttr;
  const int32_t id = Install("td_lists", &table);
  const DLDevice dev{static_cast<DLDeviceType>(id), 1};
  bp_value_t v;
  ASSERT_EQ(bp_device_get_attr(dev, BP_ATTR_SUBGROUP_SIZES, &v), BP_OK) << Message();
  ASSERT_EQ(v.type, BP_VALUE_OBJECT);
  size_t n = 0;
  ASSERT_EQ(bp_array_size(v.u.v_obj, &n), BP_OK);
  EXPECT_EQ(n, 2u);
  bp_object_release(v.u.v_obj);
  EXPECT_EQ(bp_device_get_attr(dev, BP_ATTR_EXTENSIONS, &v), BP_ERR_PLUGIN);
  EXPECT_NE(Message().find("element 0 is neither a number nor a string"), std::string::npos)
      << Message();
}

TEST(DeviceAPI, DeviceListHasEveryDeviceOfEveryType) {
  static Counters c;
  static bp_device_api_t table = MinimalTable(&c);
  table.get_attr = ListAttr;  // devices 0 and 1 exist, named "listed"
  const int32_t id = Install("td_listed", &table);
  size_t count = 0;
  ASSERT_EQ(bp_device_list(nullptr, 0, &count), BP_OK) << Message();
  std::vector<DLDevice> devices(count);
  ASSERT_EQ(bp_device_list(devices.data(), devices.size(), &count), BP_OK);
  std::vector<int32_t> ids;
  for (const DLDevice& d : devices) {
    if (d.device_type == id) ids.push_back(d.device_id);
  }
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(bp_device_list(nullptr, 3, &count), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_device_list(devices.data(), devices.size(), nullptr), BP_ERR_INVALID_ARGUMENT);

  std::vector<bp::DeviceEntry> entries;
  for (const bp::DeviceEntry& e : bp::ListDevices()) {
    if (e.type_name == "td_listed") entries.push_back(e);
  }
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].index, 1);
  EXPECT_EQ(entries[1].name, "listed");
  EXPECT_EQ(entries[1].device.ToString(), "td_listed:1");
}

}  // namespace
