// SPDX-License-Identifier: Apache-2.0
// The host function table handed to plugins (and used by the C++ host API). Its initializer is
// generated from the one list of entries (host_api_entries.h), which is checked here against
// the table's declaration and the exported functions' declarations in c_api.h.
#include <cstddef>
#include <type_traits>

#include "common.h"
#include "host_api_entries.h"

namespace backplane {
namespace core {
namespace {

// Each entry's place: its index in the list.
enum HostApiEntry : size_t {
#define BP_ENTRY_INDEX(name) kEntry_##name,
  BP_HOST_API_ENTRIES(BP_ENTRY_INDEX)
#undef BP_ENTRY_INDEX
      kHostApiEntries
};

// The entries follow the version fields, one function pointer each, with no gap.
constexpr size_t kFirstEntry = offsetof(bp_host_api_t, abi_minor) + sizeof(uint32_t);
constexpr size_t kEntrySize = sizeof(void (*)(void));

// Per entry: the member `name` exists, has exactly the type of &bp_<name> as c_api.h declares
// the function, and sits at the entry's place in the list.
#define BP_CHECK_ENTRY(name)                                                               \
  static_assert(std::is_same_v<decltype(bp_host_api_t::name), decltype(&bp_##name)>,       \
                "bp_host_api_t::" #name " and bp_" #name " (c_api.h) differ in type");     \
  static_assert(offsetof(bp_host_api_t, name) == kFirstEntry + kEntry_##name * kEntrySize, \
                "bp_host_api_t::" #name " is not at its place in host_api_entries.h");
BP_HOST_API_ENTRIES(BP_CHECK_ENTRY)
#undef BP_CHECK_ENTRY

// Together with the places above: every member of the table is in the list, none twice.
static_assert(sizeof(bp_host_api_t) == kFirstEntry + kHostApiEntries * kEntrySize,
              "bp_host_api_t has members that host_api_entries.h does not list");

// The exported functions without an entry are declared too.
#define BP_CHECK_DECLARED(name) static_assert(std::is_function_v<decltype(bp_##name)>);
BP_HOST_ONLY_EXPORTS(BP_CHECK_DECLARED)
#undef BP_CHECK_DECLARED

}  // namespace
}  // namespace core
}  // namespace backplane

extern "C" {

BP_EXPORT bp_status_t bp_abi_version(uint32_t* out_major, uint32_t* out_minor) {
  if (out_major != nullptr) *out_major = BP_ABI_VERSION_MAJOR;
  if (out_minor != nullptr) *out_minor = BP_ABI_VERSION_MINOR;
  return BP_OK;
}

BP_EXPORT const bp_host_api_t* bp_host_api(void) {
#define BP_ENTRY_INIT(name) .name = bp_##name,
  static const bp_host_api_t kTable = {.struct_size = sizeof(bp_host_api_t),
                                       .abi_major = BP_ABI_VERSION_MAJOR,
                                       .abi_minor = BP_ABI_VERSION_MINOR,
                                       BP_HOST_API_ENTRIES(BP_ENTRY_INIT)};
#undef BP_ENTRY_INIT
  return &kTable;
}

}  // extern "C"
