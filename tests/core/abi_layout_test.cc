// SPDX-License-Identifier: Apache-2.0
// Pins the layout of every ABI struct: a change here is an ABI break that needs a new major
// (or, for a field appended at the end, a new minor and an abi-changelog entry).
// abi_static_layout.h pins every field and value at compile time, as C++ here and as C99 in
// c_header_test.c; the tests below check it at run time and that the pins cover all of c_api.h.
#include <backplane/c_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "abi_static_layout.h"
#include "host_api_entries.h"  // core/src: the one list of the exported functions

namespace {

constexpr size_t kPtr = sizeof(void*);

TEST(AbiLayout, ValueIsSixteenBytes) {
  EXPECT_EQ(sizeof(bp_value_t), 16u);
  EXPECT_EQ(offsetof(bp_value_t, type), 0u);
  EXPECT_EQ(offsetof(bp_value_t, u), 8u);
}

TEST(AbiLayout, DeviceApiTable) {
  EXPECT_EQ(offsetof(bp_device_api_t, struct_size), 0u);
  EXPECT_EQ(offsetof(bp_device_api_t, self), 1 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, get_attr), 2 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, get_property), 3 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, set_device), 4 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, alloc_data_space), 5 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, free_data_space), 6 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, alloc_workspace), 7 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, free_workspace), 8 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, copy_data_from_to), 9 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, create_stream), 10 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, free_stream), 11 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, set_stream), 12 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, stream_sync), 13 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, sync_stream_from_to), 14 * kPtr);
  // 1.5 appended one entry: a 1.4 table (15 pointer-sized fields) ends before it.
  EXPECT_EQ(offsetof(bp_device_api_t, list_properties), 15 * kPtr);
  // 1.6 appended the seven event entries.
  EXPECT_EQ(offsetof(bp_device_api_t, event_create), 16 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, event_elapsed_ms), 22 * kPtr);
  // ... and the three native-handle entries.
  EXPECT_EQ(offsetof(bp_device_api_t, native_handle), 23 * kPtr);
  EXPECT_EQ(offsetof(bp_device_api_t, unwrap_native), 25 * kPtr);
  EXPECT_EQ(sizeof(bp_device_api_t), 26 * kPtr);
}

TEST(AbiLayout, HostApiTable) {
  EXPECT_EQ(offsetof(bp_host_api_t, struct_size), 0u);
  EXPECT_EQ(offsetof(bp_host_api_t, abi_major), kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, abi_minor), kPtr + 4);
  EXPECT_EQ(offsetof(bp_host_api_t, error_set), 2 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, function_call), 16 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, device_api_get), 24 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, device_get_property), 26 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, tensor_get), 39 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, target_kind_register), 40 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, target_get_attr), 47 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, device_attr_name), 48 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, module_create), 49 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, module_load), 57 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, build), 58 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, build_with_options), 59 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, module_load_with_options), 60 * kPtr);
  // 1.5 appended two entries after 1.4's 61 pointer-sized fields.
  EXPECT_EQ(offsetof(bp_host_api_t, device_list_properties), 61 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, device_list), 62 * kPtr);
  // 1.6 appended the five DLPack entries.
  EXPECT_EQ(offsetof(bp_host_api_t, tensor_from_dlpack_versioned), 63 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, tensor_flags), 67 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, event_elapsed_ms), 73 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, native_handle), 74 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, tensor_from_native), 75 * kPtr);
  // 1.7 appended bp_function_create_with_flags.
  EXPECT_EQ(offsetof(bp_host_api_t, function_create_with_flags), 76 * kPtr);
  // 1.9 appended the two layer entries.
  EXPECT_EQ(offsetof(bp_host_api_t, layers_enable), 77 * kPtr);
  EXPECT_EQ(offsetof(bp_host_api_t, layers_active), 78 * kPtr);
  EXPECT_EQ(sizeof(bp_host_api_t), 79 * kPtr);
}

TEST(AbiLayout, Layer) {
  EXPECT_EQ(offsetof(bp_layer_t, struct_size), 0u);
  EXPECT_EQ(offsetof(bp_layer_t, self), kPtr);
  EXPECT_EQ(offsetof(bp_layer_t, wrap_device_api), 2 * kPtr);
  EXPECT_EQ(offsetof(bp_layer_t, wrap_function), 3 * kPtr);
  EXPECT_EQ(offsetof(bp_layer_t, wrap_build), 4 * kPtr);
  EXPECT_EQ(offsetof(bp_layer_t, on_module), 5 * kPtr);
  EXPECT_EQ(sizeof(bp_layer_t), 6 * kPtr);
}

TEST(AbiLayout, BuildOptions) {
  EXPECT_EQ(offsetof(bp_build_options_t, struct_size), 0u);
  EXPECT_EQ(offsetof(bp_build_options_t, host), kPtr);
  EXPECT_EQ(offsetof(bp_build_options_t, source_name), 2 * kPtr);
  EXPECT_EQ(sizeof(bp_build_options_t), 3 * kPtr);
}

TEST(AbiLayout, ModuleLoadOptions) {
  EXPECT_EQ(offsetof(bp_module_load_options_t, struct_size), 0u);
  EXPECT_EQ(offsetof(bp_module_load_options_t, flags), kPtr);
  EXPECT_EQ(sizeof(bp_module_load_options_t), 2 * kPtr);
  EXPECT_EQ(BP_MODULE_LOAD_ALLOW_NATIVE, 1u);
  EXPECT_EQ(BP_MODULE_LOAD_NO_GLOBAL_CALLS, 2u);
}

TEST(AbiLayout, PluginInfo) {
  EXPECT_EQ(offsetof(bp_plugin_info_t, struct_size), 0u);
  EXPECT_EQ(offsetof(bp_plugin_info_t, abi_major), kPtr);
  EXPECT_EQ(offsetof(bp_plugin_info_t, abi_minor), kPtr + 4);
  EXPECT_EQ(offsetof(bp_plugin_info_t, name), 2 * kPtr);
  EXPECT_EQ(offsetof(bp_plugin_info_t, version), 3 * kPtr);
  EXPECT_EQ(offsetof(bp_plugin_info_t, vendor), 4 * kPtr);
  EXPECT_EQ(sizeof(bp_plugin_info_t), 5 * kPtr);
}

TEST(AbiLayout, EnumValuesMatchTvmAndDlpack) {
  // TVM's DeviceAttrKind numbering, so TVM users read the same numbers.
  EXPECT_EQ(BP_ATTR_EXIST, 0);
  EXPECT_EQ(BP_ATTR_COMPUTE_VERSION, 4);
  EXPECT_EQ(BP_ATTR_MAX_THREAD_DIMENSIONS, 8);
  EXPECT_EQ(BP_ATTR_L2_CACHE_SIZE_BYTES, 13);
  EXPECT_EQ(BP_ATTR_IMAGE_PITCH_ALIGNMENT, 16);
  // 1.5's kinds follow TVM's, in the order the header appends them.
  EXPECT_EQ(BP_ATTR_DEVICE_KIND, 17);
  EXPECT_EQ(BP_ATTR_VENDOR, 18);
  EXPECT_EQ(BP_ATTR_VENDOR_ID, 19);
  EXPECT_EQ(BP_ATTR_UUID, 20);
  EXPECT_EQ(BP_ATTR_PCI_BUS_ID, 21);
  EXPECT_EQ(BP_ATTR_MAX_ALLOCATION_SIZE, 22);
  EXPECT_EQ(BP_ATTR_SUPPORTS_FP64, 23);
  EXPECT_EQ(BP_ATTR_SUPPORTS_FP16, 24);
  EXPECT_EQ(BP_ATTR_SUBGROUP_SIZES, 25);
  EXPECT_EQ(BP_ATTR_EXTENSIONS, 26);
  EXPECT_EQ(BP_ATTR_DRIVER_INFO, 27);
  EXPECT_EQ(BP_ATTR_ISA_FLAGS, 28);
  EXPECT_EQ(BP_ATTR_COUNT, 29);
  EXPECT_GT(BP_DEVICE_TYPE_FIRST_DYNAMIC, kDLExtDev);
}

TEST(AbiLayout, AttributeNamesFollowTvm) {
  EXPECT_STREQ(bp_device_attr_name(BP_ATTR_EXIST), "exist");
  EXPECT_STREQ(bp_device_attr_name(BP_ATTR_MAX_THREAD_DIMENSIONS), "max_thread_dimensions");
  EXPECT_STREQ(bp_device_attr_name(BP_ATTR_IMAGE_PITCH_ALIGNMENT), "image_pitch_alignment");
  EXPECT_STREQ(bp_device_attr_name(BP_ATTR_DEVICE_KIND), "device_kind");
  EXPECT_STREQ(bp_device_attr_name(BP_ATTR_MAX_ALLOCATION_SIZE), "max_allocation_size");
  EXPECT_STREQ(bp_device_attr_name(BP_ATTR_ISA_FLAGS), "isa_flags");
  // Every kind has a name, and no two share one.
  std::set<std::string> names;
  for (int32_t kind = 0; kind < BP_ATTR_COUNT; ++kind) {
    ASSERT_NE(bp_device_attr_name(kind), nullptr) << kind;
    EXPECT_TRUE(names.insert(bp_device_attr_name(kind)).second) << bp_device_attr_name(kind);
  }
  EXPECT_EQ(bp_device_attr_name(BP_ATTR_COUNT), nullptr);
  EXPECT_EQ(bp_device_attr_name(-1), nullptr);
}

// host_api.cc's table is generated from the list and checked against c_api.h at compile time;
// here, at run time, each entry holds the function its name says.
TEST(AbiLayout, EachHostTableEntryHoldsItsFunction) {
  const bp_host_api_t* api = bp_host_api();
#define BP_EXPECT_ENTRY(name)                                                        \
  EXPECT_EQ(reinterpret_cast<void*>(api->name), reinterpret_cast<void*>(&bp_##name)) \
      << "bp_host_api()->" #name " is not bp_" #name;
  BP_HOST_API_ENTRIES(BP_EXPECT_ENTRY)
#undef BP_EXPECT_ENTRY
}

TEST(AbiLayout, HostTableIsFullyPopulated) {
  const bp_host_api_t* api = bp_host_api();
  ASSERT_EQ(api->struct_size, sizeof(bp_host_api_t));
  const auto* slots = reinterpret_cast<void* const*>(reinterpret_cast<const char*>(api) + 2 * kPtr);
  for (size_t i = 0; i < (sizeof(bp_host_api_t) - 2 * kPtr) / kPtr; ++i) {
    EXPECT_NE(slots[i], nullptr) << "host table entry " << i << " is null";
  }
}

}  // namespace

namespace {

// backplane_add_plugin stamps BACKPLANE_ABI_VERSION into every manifest; it must follow the
// header when the minor changes.
TEST(AbiLayout, ManifestsCarryTheHeadersVersion) {
  std::ifstream in(std::string(BACKPLANE_PLUGIN_DIR) + "/cpu.bpplugin.json");
  ASSERT_TRUE(in) << "the cpu plugin's manifest is missing from " << BACKPLANE_PLUGIN_DIR;
  std::stringstream text;
  text << in.rdbuf();
  const std::string expected = "\"abi_version\": \"" + std::to_string(BP_ABI_VERSION_MAJOR) + "." +
                               std::to_string(BP_ABI_VERSION_MINOR) + "\"";
  EXPECT_NE(text.str().find(expected), std::string::npos)
      << "cmake/BackplanePlugin.cmake's BACKPLANE_ABI_VERSION is out of date: " << text.str();
}

}  // namespace

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text with every /* ... */ comment replaced by a space. Plain searches: libstdc++'s regex
// executor recurses once a character over `[\s\S]*?`, which overflowed the stack on c_api.h's
// long comments in an ASan build at -O1.
std::string WithoutComments(const std::string& text) {
  std::string out;
  size_t at = 0;
  for (size_t open; (open = text.find("/*", at)) != std::string::npos;) {
    const size_t close = text.find("*/", open + 2);
    EXPECT_NE(close, std::string::npos) << "a comment in c_api.h is not closed";
    if (close == std::string::npos) break;
    out.append(text, at, open - at).append(" ");
    at = close + 2;
  }
  return out.append(text, std::min(at, text.size()), std::string::npos);
}

// The fields of every `typedef struct name { ... } name_t;` in c_api.h, as "name_t.field": the
// name of a function pointer `(*field)` or the last identifier of a declaration.
std::vector<std::string> StructFields(const std::string& header) {
  std::vector<std::string> out;
  static const std::regex kPointer(R"(\(\*\s*(\w+)\))");
  static const std::regex kLast(R"((\w+)\s*$)");
  static const std::regex kTypeName(R"(^\n\} (\w+);)");
  const std::string opening = "typedef struct ";
  for (size_t at = 0; (at = header.find(opening, at)) != std::string::npos;) {
    // `typedef struct name {` ... `\n} name_t;`, as plain searches (see WithoutComments).
    at += opening.size();
    const size_t brace = header.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", at);
    if (brace == at || header.compare(brace, 2, " {") != 0) continue;
    std::smatch name;
    std::string tail;
    size_t close = brace;
    do {
      close = header.find("\n} ", close + 1);
      if (close != std::string::npos) tail = header.substr(close, 128);
    } while (close != std::string::npos && !std::regex_search(tail, name, kTypeName));
    if (close == std::string::npos) break;
    const std::string type = name[1];
    const std::string body = header.substr(brace + 2, close - (brace + 2));
    // Declarations at the struct's own level (a nested union is one field).
    int depth = 0;
    std::string decl;
    for (char c : body) {
      if (c == '{') ++depth;
      if (c == '}') --depth;
      if (c == ';' && depth == 0) {
        std::smatch m;
        if (std::regex_search(decl, m, kPointer) || std::regex_search(decl, m, kLast)) {
          out.push_back(type + "." + m[1].str());
        }
        decl.clear();
      } else {
        decl += c;
      }
    }
  }
  return out;
}

TEST(AbiLayout, EveryFieldAndValueIsPinned) {
  const std::string header = WithoutComments(
      ReadFile(std::string(BACKPLANE_SOURCE_DIR) + "/core/include/backplane/c_api.h"));
  const std::string pins =
      ReadFile(std::string(BACKPLANE_SOURCE_DIR) + "/tests/core/abi_static_layout.h");
  const std::vector<std::string> fields = StructFields(header);
  EXPECT_GE(fields.size(), 100u) << "c_api.h's structs were not found";
  std::set<std::string> types;
  for (const std::string& f : fields) {
    const std::string type = f.substr(0, f.find('.'));
    const std::string field = f.substr(f.find('.') + 1);
    types.insert(type);
    EXPECT_NE(pins.find("ABI_PIN_OFFSET(" + type + ", " + field + ","), std::string::npos)
        << f << " has no ABI_PIN_OFFSET in tests/core/abi_static_layout.h";
  }
  for (const std::string& type : types) {
    EXPECT_NE(pins.find("ABI_PIN_SIZE(" + type + ","), std::string::npos)
        << type << " has no ABI_PIN_SIZE in tests/core/abi_static_layout.h";
  }
  static const std::regex kEnumerator(R"((BP_[A-Z0-9_]+) = \d+)");
  size_t values = 0;
  for (std::sregex_iterator it(header.begin(), header.end(), kEnumerator), end; it != end; ++it) {
    ++values;
    EXPECT_NE(pins.find("ABI_PIN_VALUE(" + (*it)[1].str() + ","), std::string::npos)
        << (*it)[1] << " has no ABI_PIN_VALUE in tests/core/abi_static_layout.h";
  }
  EXPECT_GE(values, 60u) << "c_api.h's enum values were not found";
}

// Every function c_api.h exports is in host_api_entries.h's list, with its entry in the host
// table or among the exports that have none, so a new function cannot be exported and forgotten
// in the table (a new minor appends both: docs/abi.md).
TEST(AbiLayout, EveryExportIsListed) {
  const std::string header = WithoutComments(
      ReadFile(std::string(BACKPLANE_SOURCE_DIR) + "/core/include/backplane/c_api.h"));
  static const std::regex kExport(R"(BP_EXPORT\s+[^;(]*?\b(bp_\w+)\s*\()");
  std::set<std::string> exported;
  for (std::sregex_iterator it(header.begin(), header.end(), kExport), end; it != end; ++it) {
    exported.insert((*it)[1].str());
  }
  EXPECT_GE(exported.size(), 70u) << "c_api.h's exported functions were not found";
  std::set<std::string> listed;
#define BP_LISTED(name) listed.insert("bp_" #name);
  BP_HOST_API_ENTRIES(BP_LISTED)
  BP_HOST_ONLY_EXPORTS(BP_LISTED)
#undef BP_LISTED
  for (const std::string& name : exported) {
    EXPECT_EQ(listed.count(name), 1u)
        << name << " is exported by c_api.h but not listed in core/src/host_api_entries.h: "
        << "append its entry to bp_host_api_t and to BP_HOST_API_ENTRIES";
  }
  for (const std::string& name : listed) {
    EXPECT_EQ(exported.count(name), 1u)
        << name << " is listed in core/src/host_api_entries.h but c_api.h does not export it";
  }
}

}  // namespace
