// SPDX-License-Identifier: Apache-2.0
// The one list of what libbackplane exports: every entry of the host table bp_host_api_t, in
// table order, and the exported functions that have no entry. The table's initializer
// (host_api.cc) is generated from it, and host_api.cc checks at compile time that each entry
// is the table member of that name, at its place, with exactly the type of the exported
// function bp_<name> that c_api.h declares; AbiLayout.EveryExportIsListed checks that every
// BP_EXPORT of c_api.h is listed here. A table member, an initializer and a declaration can
// therefore not drift apart: any difference is a build or test failure.
//
// Why c_api.h does not expand this list itself: the header is the frozen contract, and the ABI
// check (cmake/abi/check_abi.sh) compares its declarations as text with the frozen header of
// its version; an expansion would also hide each declaration's documentation and the table's
// layout from the reader (docs/architecture.md, "The host table").
//
// Adding a function (a new minor, docs/abi.md): declare bp_<name> in c_api.h, append its
// member at the end of bp_host_api_t, and append X(<name>) at the end of
// BP_HOST_API_ENTRIES. Internal to the core: this is not an installed header.
#ifndef BACKPLANE_CORE_HOST_API_ENTRIES_H_
#define BACKPLANE_CORE_HOST_API_ENTRIES_H_

// X(name) for each entry of bp_host_api_t after its version fields (struct_size, abi_major,
// abi_minor), in table order. The entry `name` holds the exported function bp_<name>.
#define BP_HOST_API_ENTRIES(X)    \
  /* 1.0 */                       \
  X(error_set)                    \
  X(error_last)                   \
  X(error_clear)                  \
  X(object_retain)                \
  X(object_release)               \
  X(object_type)                  \
  X(string_create)                \
  X(string_get)                   \
  X(bytes_create)                 \
  X(bytes_get)                    \
  X(array_create)                 \
  X(array_size)                   \
  X(array_get)                    \
  X(function_create)              \
  X(function_call)                \
  X(registry_set)                 \
  X(registry_get)                 \
  X(registry_remove)              \
  X(registry_list)                \
  X(device_type_register)         \
  X(device_type_from_name)        \
  X(device_type_name)             \
  X(device_api_get)               \
  X(device_get_attr)              \
  X(device_get_property)          \
  X(device_set)                   \
  X(device_alloc_data_space)      \
  X(device_free_data_space)       \
  X(device_alloc_workspace)       \
  X(device_free_workspace)        \
  X(device_copy_data_from_to)     \
  X(device_stream_create)         \
  X(device_stream_free)           \
  X(device_stream_set)            \
  X(device_stream_sync)           \
  X(device_sync_stream_from_to)   \
  X(tensor_empty)                 \
  X(tensor_get)                   \
  /* 1.1 */                       \
  X(target_kind_register)         \
  X(target_kinds_describe)        \
  X(target_tag_register)          \
  X(target_parse)                 \
  X(target_from_device)           \
  X(target_to_json)               \
  X(target_kind)                  \
  X(target_get_attr)              \
  X(device_attr_name)             \
  /* 1.2 */                       \
  X(module_create)                \
  X(module_kind)                  \
  X(module_get_function)          \
  X(module_list_functions)        \
  X(module_inspect_source)        \
  X(module_import)                \
  X(module_imports)               \
  X(module_save)                  \
  X(module_load)                  \
  /* 1.3 */                       \
  X(build)                        \
  /* 1.4 */                       \
  X(build_with_options)           \
  X(module_load_with_options)     \
  /* 1.5 */                       \
  X(device_list_properties)       \
  X(device_list)                  \
  /* 1.6 */                       \
  X(tensor_from_dlpack_versioned) \
  X(tensor_from_dlpack)           \
  X(tensor_to_dlpack_versioned)   \
  X(tensor_to_dlpack)             \
  X(tensor_flags)                 \
  X(event_create)                 \
  X(event_record)                 \
  X(event_wait)                   \
  X(event_query)                  \
  X(event_sync)                   \
  X(event_elapsed_ms)             \
  X(native_handle)                \
  X(tensor_from_native)           \
  X(function_create_with_flags)   \
  /* 1.9 */                       \
  X(layers_enable)                \
  X(layers_active)

// X(name) for each exported function bp_<name> that has no entry in bp_host_api_t, so plugins
// cannot reach it: the version and table queries, two queries that 1.0's table left out
// (bp_error_kind_name, bp_device_type_list; a table entry for either would be a new minor),
// and what only a host application does (discovery and loading).
#define BP_HOST_ONLY_EXPORTS(X) \
  X(abi_version)                \
  X(host_api)                   \
  X(error_kind_name)            \
  X(device_type_list)           \
  X(plugin_path_add)            \
  X(plugins_discover)           \
  X(plugins_load_all)           \
  X(plugin_load)                \
  X(plugins_list)

#endif  // BACKPLANE_CORE_HOST_API_ENTRIES_H_
