// SPDX-License-Identifier: Apache-2.0
// The host function table handed to plugins (and used by the C++ host API).
#include "common.h"

extern "C" {

BP_EXPORT bp_status_t bp_abi_version(uint32_t* out_major, uint32_t* out_minor) {
  if (out_major != nullptr) *out_major = BP_ABI_VERSION_MAJOR;
  if (out_minor != nullptr) *out_minor = BP_ABI_VERSION_MINOR;
  return BP_OK;
}

BP_EXPORT const bp_host_api_t* bp_host_api(void) {
  static const bp_host_api_t kTable = {
      .struct_size = sizeof(bp_host_api_t),
      .abi_major = BP_ABI_VERSION_MAJOR,
      .abi_minor = BP_ABI_VERSION_MINOR,
      .error_set = bp_error_set,
      .error_last = bp_error_last,
      .error_clear = bp_error_clear,
      .object_retain = bp_object_retain,
      .object_release = bp_object_release,
      .object_type = bp_object_type,
      .string_create = bp_string_create,
      .string_get = bp_string_get,
      .bytes_create = bp_bytes_create,
      .bytes_get = bp_bytes_get,
      .array_create = bp_array_create,
      .array_size = bp_array_size,
      .array_get = bp_array_get,
      .function_create = bp_function_create,
      .function_call = bp_function_call,
      .registry_set = bp_registry_set,
      .registry_get = bp_registry_get,
      .registry_remove = bp_registry_remove,
      .registry_list = bp_registry_list,
      .device_type_register = bp_device_type_register,
      .device_type_from_name = bp_device_type_from_name,
      .device_type_name = bp_device_type_name,
      .device_api_get = bp_device_api_get,
      .device_get_attr = bp_device_get_attr,
      .device_get_property = bp_device_get_property,
      .device_set = bp_device_set,
      .device_alloc_data_space = bp_device_alloc_data_space,
      .device_free_data_space = bp_device_free_data_space,
      .device_alloc_workspace = bp_device_alloc_workspace,
      .device_free_workspace = bp_device_free_workspace,
      .device_copy_data_from_to = bp_device_copy_data_from_to,
      .device_stream_create = bp_device_stream_create,
      .device_stream_free = bp_device_stream_free,
      .device_stream_set = bp_device_stream_set,
      .device_stream_sync = bp_device_stream_sync,
      .device_sync_stream_from_to = bp_device_sync_stream_from_to,
      .tensor_empty = bp_tensor_empty,
      .tensor_get = bp_tensor_get,
      .target_kind_register = bp_target_kind_register,
      .target_kinds_describe = bp_target_kinds_describe,
      .target_tag_register = bp_target_tag_register,
      .target_parse = bp_target_parse,
      .target_from_device = bp_target_from_device,
      .target_to_json = bp_target_to_json,
      .target_kind = bp_target_kind,
      .target_get_attr = bp_target_get_attr,
      .device_attr_name = bp_device_attr_name,
      .module_create = bp_module_create,
      .module_kind = bp_module_kind,
      .module_get_function = bp_module_get_function,
      .module_list_functions = bp_module_list_functions,
      .module_inspect_source = bp_module_inspect_source,
      .module_import = bp_module_import,
      .module_imports = bp_module_imports,
      .module_save = bp_module_save,
      .module_load = bp_module_load,
      .build = bp_build,
      .build_with_options = bp_build_with_options,
      .module_load_with_options = bp_module_load_with_options,
      .device_list_properties = bp_device_list_properties,
      .device_list = bp_device_list,
  };
  return &kTable;
}

}  // extern "C"
