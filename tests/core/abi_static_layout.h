/* SPDX-License-Identifier: Apache-2.0 */
/* Compile-time pins of the C ABI: the size of every public struct, the offset of every field, every
 * enum value and constant of c_api.h, and the DLPack layout they embed. Included by c_header_test.c
 * (compiled as C99) and abi_layout_test.cc (compiled as C++17), so a reordered, removed, retyped or
 * inserted field fails the build of both with an error that names the struct and the field:
 * "static assertion failed: abi_pin_bp_device_api_t_alloc_workspace_moved_" in C++, "size of array
 * 'abi_pin_bp_device_api_t_alloc_workspace_moved_73' is negative" in C.
 *
 * Appending a field to a growable struct, a value to an enum or an entry to a table (a new minor,
 * docs/abi.md) appends its pin here and updates the size; any other edit of a pin is an ABI break.
 * AbiLayout.EveryFieldAndValueIsPinned (abi_layout_test.cc) checks that every field and enum value
 * c_api.h declares has a pin. Offsets hold for any data model (ABI_P is the size of a pointer);
 * the numbers in comments are LP64's (Linux on x86-64 and AArch64). */
#ifndef BACKPLANE_TESTS_CORE_ABI_STATIC_LAYOUT_H_
#define BACKPLANE_TESTS_CORE_ABI_STATIC_LAYOUT_H_

#include <backplane/c_api.h>
#include <stddef.h>

#define ABI_PIN_JOIN2(a, b) a##b
#define ABI_PIN_JOIN(a, b) ABI_PIN_JOIN2(a, b)
/* C99 has no static_assert: there an array of negative size fails the build, and its name says
 * what moved. */
#if defined(__cplusplus)
#define ABI_PIN(cond, what) static_assert(cond, #what)
#else
#define ABI_PIN(cond, what) typedef char ABI_PIN_JOIN(what, __LINE__)[(cond) ? 1 : -1]
#endif
#define ABI_PIN_SIZE(type, size) ABI_PIN(sizeof(type) == (size), abi_pin_sizeof_##type##_changed_)
#define ABI_PIN_OFFSET(type, field, offset) \
  ABI_PIN(offsetof(type, field) == (offset), abi_pin_##type##_##field##_moved_)
#define ABI_PIN_VALUE(name, value) ABI_PIN((name) == (value), abi_pin_value_of_##name##_changed_)

#define ABI_P sizeof(void*)
/* Where the first function pointer of bp_host_api_t (and `name` of bp_plugin_info_t) lies: after
 * struct_size and two uint32_t, aligned to a pointer (16 on LP64). */
#define ABI_HEAD (((sizeof(size_t) + 8) + ABI_P - 1) / ABI_P * ABI_P)

/* DLPack 0.6 (Debian 12), which the ABI embeds: DLDevice, DLDataType and DLTensor. */
ABI_PIN_SIZE(DLDevice, 8);
ABI_PIN_OFFSET(DLDevice, device_type, 0);
ABI_PIN_OFFSET(DLDevice, device_id, 4);
ABI_PIN_SIZE(DLDataType, 4);
ABI_PIN_OFFSET(DLDataType, code, 0);
ABI_PIN_OFFSET(DLDataType, bits, 1);
ABI_PIN_OFFSET(DLDataType, lanes, 2);
ABI_PIN_OFFSET(DLTensor, data, 0);
ABI_PIN_OFFSET(DLTensor, device, ABI_P);               /* 8 */
ABI_PIN_OFFSET(DLTensor, ndim, ABI_P + 8);             /* 16 */
ABI_PIN_OFFSET(DLTensor, dtype, ABI_P + 12);           /* 20 */
ABI_PIN_OFFSET(DLTensor, shape, ABI_P + 16);           /* 24 */
ABI_PIN_OFFSET(DLTensor, strides, 2 * ABI_P + 16);     /* 32 */
ABI_PIN_OFFSET(DLTensor, byte_offset, 3 * ABI_P + 16); /* 40 */
ABI_PIN_SIZE(DLTensor, 3 * ABI_P + 24);                /* 48 */
/* DLPack 1.0's versioned managed tensor (since 1.6; c_api.h declares it where dlpack.h is 0.x),
 * to the published ABI; and 0.x's DLManagedTensor. */
ABI_PIN_SIZE(DLPackVersion, 8);
ABI_PIN_OFFSET(DLPackVersion, major, 0);
ABI_PIN_OFFSET(DLPackVersion, minor, 4);
ABI_PIN_OFFSET(DLManagedTensorVersioned, version, 0);
ABI_PIN_OFFSET(DLManagedTensorVersioned, manager_ctx, 8);
ABI_PIN_OFFSET(DLManagedTensorVersioned, deleter, 8 + ABI_P);
ABI_PIN_OFFSET(DLManagedTensorVersioned, flags, 8 + 2 * ABI_P);
ABI_PIN_OFFSET(DLManagedTensorVersioned, dl_tensor, 16 + 2 * ABI_P);     /* 32 */
ABI_PIN_SIZE(DLManagedTensorVersioned, 16 + 2 * ABI_P + 3 * ABI_P + 24); /* 80 */
ABI_PIN_VALUE(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
ABI_PIN_VALUE(DLPACK_FLAG_BITMASK_IS_COPIED, 2);
ABI_PIN_OFFSET(DLManagedTensor, dl_tensor, 0);
ABI_PIN_OFFSET(DLManagedTensor, manager_ctx, 3 * ABI_P + 24); /* 48 */
ABI_PIN_OFFSET(DLManagedTensor, deleter, 4 * ABI_P + 24);     /* 56 */
ABI_PIN_SIZE(DLManagedTensor, 5 * ABI_P + 24);                /* 64 */

/* bp_value_t: 16 bytes, not growable. */
ABI_PIN_SIZE(bp_value_t, 16);
ABI_PIN_OFFSET(bp_value_t, type, 0);
ABI_PIN_OFFSET(bp_value_t, reserved0, 4);
ABI_PIN_OFFSET(bp_value_t, u, 8);
ABI_PIN(offsetof(bp_value_t, u.v_int64) == 8, abi_pin_bp_value_t_u_v_int64_moved_);
ABI_PIN(offsetof(bp_value_t, u.v_float64) == 8, abi_pin_bp_value_t_u_v_float64_moved_);
ABI_PIN(offsetof(bp_value_t, u.v_ptr) == 8, abi_pin_bp_value_t_u_v_ptr_moved_);
ABI_PIN(offsetof(bp_value_t, u.v_device) == 8, abi_pin_bp_value_t_u_v_device_moved_);
ABI_PIN(offsetof(bp_value_t, u.v_dtype) == 8, abi_pin_bp_value_t_u_v_dtype_moved_);
ABI_PIN(offsetof(bp_value_t, u.v_tensor) == 8, abi_pin_bp_value_t_u_v_tensor_moved_);
ABI_PIN(offsetof(bp_value_t, u.v_str) == 8, abi_pin_bp_value_t_u_v_str_moved_);
ABI_PIN(offsetof(bp_value_t, u.v_obj) == 8, abi_pin_bp_value_t_u_v_obj_moved_);
ABI_PIN(sizeof(((bp_value_t*)0)->u) == 8, abi_pin_sizeof_bp_value_t_u_changed_);

/* bp_device_api_t: 23 pointer-sized fields (1.0: 15; 1.5 appended list_properties, 1.6 the
 * seven event entries, the three native-handle entries). */
ABI_PIN_OFFSET(bp_device_api_t, struct_size, 0);
ABI_PIN_OFFSET(bp_device_api_t, self, ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, get_attr, 2 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, get_property, 3 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, set_device, 4 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, alloc_data_space, 5 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, free_data_space, 6 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, alloc_workspace, 7 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, free_workspace, 8 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, copy_data_from_to, 9 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, create_stream, 10 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, free_stream, 11 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, set_stream, 12 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, stream_sync, 13 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, sync_stream_from_to, 14 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, list_properties, 15 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, event_create, 16 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, event_free, 17 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, event_record, 18 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, stream_wait_event, 19 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, event_query, 20 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, event_sync, 21 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, event_elapsed_ms, 22 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, native_handle, 23 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, wrap_native, 24 * ABI_P);
ABI_PIN_OFFSET(bp_device_api_t, unwrap_native, 25 * ABI_P);
ABI_PIN_SIZE(bp_device_api_t, 26 * ABI_P);

/* bp_native_buffer_t (1.6). */
ABI_PIN_OFFSET(bp_native_buffer_t, struct_size, 0);
ABI_PIN_OFFSET(bp_native_buffer_t, buffer, 8);
ABI_PIN_OFFSET(bp_native_buffer_t, memory, 16);
ABI_PIN_OFFSET(bp_native_buffer_t, memory_offset, 24);
ABI_PIN_OFFSET(bp_native_buffer_t, size, 32);
ABI_PIN_SIZE(bp_native_buffer_t, 40);
ABI_PIN_VALUE(BP_NATIVE_BUFFER, 1);
ABI_PIN_VALUE(BP_NATIVE_BUFFER_OFFSET, 2);
ABI_PIN_VALUE(BP_NATIVE_MEMORY, 3);
ABI_PIN_VALUE(BP_NATIVE_MEMORY_OFFSET, 4);
ABI_PIN_VALUE(BP_NATIVE_QUEUE, 5);
ABI_PIN_VALUE(BP_NATIVE_QUEUE_FAMILY, 6);
ABI_PIN_VALUE(BP_NATIVE_CONTEXT, 7);
ABI_PIN_VALUE(BP_NATIVE_DEVICE, 8);
ABI_PIN_VALUE(BP_NATIVE_PLATFORM, 9);

/* bp_target_attr_def_t (1.1). */
ABI_PIN_OFFSET(bp_target_attr_def_t, struct_size, 0);
ABI_PIN_OFFSET(bp_target_attr_def_t, name, ABI_P);
ABI_PIN_OFFSET(bp_target_attr_def_t, type, 2 * ABI_P);
ABI_PIN_OFFSET(bp_target_attr_def_t, device_attr, 2 * ABI_P + 4);
ABI_PIN_OFFSET(bp_target_attr_def_t, default_json, 2 * ABI_P + 8); /* 24 */
ABI_PIN_OFFSET(bp_target_attr_def_t, doc, 3 * ABI_P + 8);          /* 32 */
ABI_PIN_SIZE(bp_target_attr_def_t, 4 * ABI_P + 8);                 /* 40 */

/* bp_target_kind_def_t (1.1): 9 pointer-sized fields; 1.6 appends flags. */
ABI_PIN_OFFSET(bp_target_kind_def_t, struct_size, 0);
ABI_PIN_OFFSET(bp_target_kind_def_t, name, ABI_P);
ABI_PIN_OFFSET(bp_target_kind_def_t, device_type, 2 * ABI_P);
ABI_PIN_OFFSET(bp_target_kind_def_t, default_keys, 3 * ABI_P);
ABI_PIN_OFFSET(bp_target_kind_def_t, num_default_keys, 4 * ABI_P);
ABI_PIN_OFFSET(bp_target_kind_def_t, attrs, 5 * ABI_P);
ABI_PIN_OFFSET(bp_target_kind_def_t, num_attrs, 6 * ABI_P);
ABI_PIN_OFFSET(bp_target_kind_def_t, canonicalize, 7 * ABI_P);
ABI_PIN_OFFSET(bp_target_kind_def_t, canonicalize_self, 8 * ABI_P);
/* 1.6: flags (uint32_t), padded to a pointer's size. */
ABI_PIN_OFFSET(bp_target_kind_def_t, flags, 9 * ABI_P);
ABI_PIN_SIZE(bp_target_kind_def_t, 10 * ABI_P);

/* bp_module_vtable_t (1.2): 7 pointer-sized fields. */
ABI_PIN_OFFSET(bp_module_vtable_t, struct_size, 0);
ABI_PIN_OFFSET(bp_module_vtable_t, kind, ABI_P);
ABI_PIN_OFFSET(bp_module_vtable_t, get_function, 2 * ABI_P);
ABI_PIN_OFFSET(bp_module_vtable_t, list_functions, 3 * ABI_P);
ABI_PIN_OFFSET(bp_module_vtable_t, save_to_bytes, 4 * ABI_P);
ABI_PIN_OFFSET(bp_module_vtable_t, inspect_source, 5 * ABI_P);
ABI_PIN_OFFSET(bp_module_vtable_t, destroy, 6 * ABI_P);
ABI_PIN_SIZE(bp_module_vtable_t, 7 * ABI_P);

/* bp_module_load_options_t (1.4). */
ABI_PIN_OFFSET(bp_module_load_options_t, struct_size, 0);
ABI_PIN_OFFSET(bp_module_load_options_t, flags, ABI_P);
ABI_PIN_SIZE(bp_module_load_options_t, 2 * ABI_P);

/* bp_build_options_t (1.4). */
ABI_PIN_OFFSET(bp_build_options_t, struct_size, 0);
ABI_PIN_OFFSET(bp_build_options_t, host, ABI_P);
ABI_PIN_OFFSET(bp_build_options_t, source_name, 2 * ABI_P);
ABI_PIN_SIZE(bp_build_options_t, 3 * ABI_P);

/* bp_host_api_t: struct_size, the version and 61 function pointers (1.0: 38; 1.1: 47; 1.2: 56;
 * 1.3: 57; 1.4: 59; 1.5: 61). The first four fields keep their place in every major. */
ABI_PIN_OFFSET(bp_host_api_t, struct_size, 0);
ABI_PIN_OFFSET(bp_host_api_t, abi_major, sizeof(size_t));
ABI_PIN_OFFSET(bp_host_api_t, abi_minor, sizeof(size_t) + 4);
ABI_PIN_OFFSET(bp_host_api_t, error_set, ABI_HEAD + 0 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, error_last, ABI_HEAD + 1 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, error_clear, ABI_HEAD + 2 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, object_retain, ABI_HEAD + 3 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, object_release, ABI_HEAD + 4 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, object_type, ABI_HEAD + 5 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, string_create, ABI_HEAD + 6 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, string_get, ABI_HEAD + 7 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, bytes_create, ABI_HEAD + 8 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, bytes_get, ABI_HEAD + 9 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, array_create, ABI_HEAD + 10 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, array_size, ABI_HEAD + 11 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, array_get, ABI_HEAD + 12 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, function_create, ABI_HEAD + 13 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, function_call, ABI_HEAD + 14 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, registry_set, ABI_HEAD + 15 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, registry_get, ABI_HEAD + 16 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, registry_remove, ABI_HEAD + 17 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, registry_list, ABI_HEAD + 18 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_type_register, ABI_HEAD + 19 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_type_from_name, ABI_HEAD + 20 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_type_name, ABI_HEAD + 21 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_api_get, ABI_HEAD + 22 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_get_attr, ABI_HEAD + 23 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_get_property, ABI_HEAD + 24 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_set, ABI_HEAD + 25 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_alloc_data_space, ABI_HEAD + 26 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_free_data_space, ABI_HEAD + 27 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_alloc_workspace, ABI_HEAD + 28 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_free_workspace, ABI_HEAD + 29 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_copy_data_from_to, ABI_HEAD + 30 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_stream_create, ABI_HEAD + 31 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_stream_free, ABI_HEAD + 32 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_stream_set, ABI_HEAD + 33 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_stream_sync, ABI_HEAD + 34 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_sync_stream_from_to, ABI_HEAD + 35 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, tensor_empty, ABI_HEAD + 36 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, tensor_get, ABI_HEAD + 37 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, target_kind_register, ABI_HEAD + 38 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, target_kinds_describe, ABI_HEAD + 39 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, target_tag_register, ABI_HEAD + 40 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, target_parse, ABI_HEAD + 41 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, target_from_device, ABI_HEAD + 42 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, target_to_json, ABI_HEAD + 43 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, target_kind, ABI_HEAD + 44 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, target_get_attr, ABI_HEAD + 45 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_attr_name, ABI_HEAD + 46 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, module_create, ABI_HEAD + 47 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, module_kind, ABI_HEAD + 48 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, module_get_function, ABI_HEAD + 49 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, module_list_functions, ABI_HEAD + 50 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, module_inspect_source, ABI_HEAD + 51 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, module_import, ABI_HEAD + 52 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, module_imports, ABI_HEAD + 53 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, module_save, ABI_HEAD + 54 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, module_load, ABI_HEAD + 55 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, build, ABI_HEAD + 56 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, build_with_options, ABI_HEAD + 57 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, module_load_with_options, ABI_HEAD + 58 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_list_properties, ABI_HEAD + 59 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, device_list, ABI_HEAD + 60 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, tensor_from_dlpack_versioned, ABI_HEAD + 61 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, tensor_from_dlpack, ABI_HEAD + 62 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, tensor_to_dlpack_versioned, ABI_HEAD + 63 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, tensor_to_dlpack, ABI_HEAD + 64 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, tensor_flags, ABI_HEAD + 65 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, event_create, ABI_HEAD + 66 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, event_record, ABI_HEAD + 67 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, event_wait, ABI_HEAD + 68 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, event_query, ABI_HEAD + 69 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, event_sync, ABI_HEAD + 70 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, event_elapsed_ms, ABI_HEAD + 71 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, native_handle, ABI_HEAD + 72 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, tensor_from_native, ABI_HEAD + 73 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, function_create_with_flags, ABI_HEAD + 74 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, layers_enable, ABI_HEAD + 75 * ABI_P);
ABI_PIN_OFFSET(bp_host_api_t, layers_active, ABI_HEAD + 76 * ABI_P);
ABI_PIN_SIZE(bp_host_api_t, ABI_HEAD + 77 * ABI_P);

/* bp_layer_t (1.9). */
ABI_PIN_OFFSET(bp_layer_t, struct_size, 0);
ABI_PIN_OFFSET(bp_layer_t, self, ABI_P);
ABI_PIN_OFFSET(bp_layer_t, wrap_device_api, 2 * ABI_P);
ABI_PIN_OFFSET(bp_layer_t, wrap_function, 3 * ABI_P);
ABI_PIN_OFFSET(bp_layer_t, wrap_build, 4 * ABI_P);
ABI_PIN_OFFSET(bp_layer_t, on_module, 5 * ABI_P);
ABI_PIN_SIZE(bp_layer_t, 6 * ABI_P);

/* bp_plugin_info_t. */
ABI_PIN_OFFSET(bp_plugin_info_t, struct_size, 0);
ABI_PIN_OFFSET(bp_plugin_info_t, abi_major, sizeof(size_t));
ABI_PIN_OFFSET(bp_plugin_info_t, abi_minor, sizeof(size_t) + 4);
ABI_PIN_OFFSET(bp_plugin_info_t, name, ABI_HEAD);
ABI_PIN_OFFSET(bp_plugin_info_t, version, ABI_HEAD + ABI_P);
ABI_PIN_OFFSET(bp_plugin_info_t, vendor, ABI_HEAD + 2 * ABI_P);
ABI_PIN_SIZE(bp_plugin_info_t, ABI_HEAD + 3 * ABI_P);

/* Every enum value: numbers are never reused or changed within a major. */
/* bp_error_kind_t */
ABI_PIN_VALUE(BP_OK, 0);
ABI_PIN_VALUE(BP_ERR_INVALID_ARGUMENT, 1);
ABI_PIN_VALUE(BP_ERR_NOT_FOUND, 2);
ABI_PIN_VALUE(BP_ERR_ALREADY_EXISTS, 3);
ABI_PIN_VALUE(BP_ERR_OUT_OF_MEMORY, 4);
ABI_PIN_VALUE(BP_ERR_UNSUPPORTED, 5);
ABI_PIN_VALUE(BP_ERR_VERSION_MISMATCH, 6);
ABI_PIN_VALUE(BP_ERR_PLUGIN, 7);
ABI_PIN_VALUE(BP_ERR_DEVICE, 8);
ABI_PIN_VALUE(BP_ERR_TYPE, 9);
ABI_PIN_VALUE(BP_ERR_INTERNAL, 10);
/* bp_object_type_t */
ABI_PIN_VALUE(BP_OBJECT_STRING, 1);
ABI_PIN_VALUE(BP_OBJECT_BYTES, 2);
ABI_PIN_VALUE(BP_OBJECT_FUNCTION, 3);
ABI_PIN_VALUE(BP_OBJECT_TENSOR, 4);
ABI_PIN_VALUE(BP_OBJECT_ARRAY, 5);
ABI_PIN_VALUE(BP_OBJECT_TARGET, 6);
ABI_PIN_VALUE(BP_OBJECT_MODULE, 7);
ABI_PIN_VALUE(BP_OBJECT_EVENT, 8);
/* bp_value_type_t */
ABI_PIN_VALUE(BP_VALUE_NONE, 0);
ABI_PIN_VALUE(BP_VALUE_INT, 1);
ABI_PIN_VALUE(BP_VALUE_FLOAT, 2);
ABI_PIN_VALUE(BP_VALUE_PTR, 3);
ABI_PIN_VALUE(BP_VALUE_DEVICE, 4);
ABI_PIN_VALUE(BP_VALUE_DTYPE, 5);
ABI_PIN_VALUE(BP_VALUE_TENSOR, 6);
ABI_PIN_VALUE(BP_VALUE_STR, 7);
ABI_PIN_VALUE(BP_VALUE_OBJECT, 8);
/* bp_device_attr_kind_t */
ABI_PIN_VALUE(BP_ATTR_EXIST, 0);
ABI_PIN_VALUE(BP_ATTR_MAX_THREADS_PER_BLOCK, 1);
ABI_PIN_VALUE(BP_ATTR_WARP_SIZE, 2);
ABI_PIN_VALUE(BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK, 3);
ABI_PIN_VALUE(BP_ATTR_COMPUTE_VERSION, 4);
ABI_PIN_VALUE(BP_ATTR_DEVICE_NAME, 5);
ABI_PIN_VALUE(BP_ATTR_MAX_CLOCK_RATE, 6);
ABI_PIN_VALUE(BP_ATTR_MULTI_PROCESSOR_COUNT, 7);
ABI_PIN_VALUE(BP_ATTR_MAX_THREAD_DIMENSIONS, 8);
ABI_PIN_VALUE(BP_ATTR_MAX_REGISTERS_PER_BLOCK, 9);
ABI_PIN_VALUE(BP_ATTR_GCN_ARCH, 10);
ABI_PIN_VALUE(BP_ATTR_API_VERSION, 11);
ABI_PIN_VALUE(BP_ATTR_DRIVER_VERSION, 12);
ABI_PIN_VALUE(BP_ATTR_L2_CACHE_SIZE_BYTES, 13);
ABI_PIN_VALUE(BP_ATTR_TOTAL_GLOBAL_MEMORY, 14);
ABI_PIN_VALUE(BP_ATTR_AVAILABLE_GLOBAL_MEMORY, 15);
ABI_PIN_VALUE(BP_ATTR_IMAGE_PITCH_ALIGNMENT, 16);
ABI_PIN_VALUE(BP_ATTR_DEVICE_KIND, 17);
ABI_PIN_VALUE(BP_ATTR_VENDOR, 18);
ABI_PIN_VALUE(BP_ATTR_VENDOR_ID, 19);
ABI_PIN_VALUE(BP_ATTR_UUID, 20);
ABI_PIN_VALUE(BP_ATTR_PCI_BUS_ID, 21);
ABI_PIN_VALUE(BP_ATTR_MAX_ALLOCATION_SIZE, 22);
ABI_PIN_VALUE(BP_ATTR_SUPPORTS_FP64, 23);
ABI_PIN_VALUE(BP_ATTR_SUPPORTS_FP16, 24);
ABI_PIN_VALUE(BP_ATTR_SUBGROUP_SIZES, 25);
ABI_PIN_VALUE(BP_ATTR_EXTENSIONS, 26);
ABI_PIN_VALUE(BP_ATTR_DRIVER_INFO, 27);
ABI_PIN_VALUE(BP_ATTR_ISA_FLAGS, 28);
ABI_PIN_VALUE(BP_ATTR_COUNT, 29);
/* bp_target_attr_type_t */
ABI_PIN_VALUE(BP_TARGET_ATTR_BOOL, 1);
ABI_PIN_VALUE(BP_TARGET_ATTR_INT, 2);
ABI_PIN_VALUE(BP_TARGET_ATTR_FLOAT, 3);
ABI_PIN_VALUE(BP_TARGET_ATTR_STRING, 4);
ABI_PIN_VALUE(BP_TARGET_ATTR_INT_ARRAY, 5);
ABI_PIN_VALUE(BP_TARGET_ATTR_STRING_ARRAY, 6);
ABI_PIN_VALUE(BP_TARGET_ATTR_MAP, 7);
/* bp_plugin_state_t */
ABI_PIN_VALUE(BP_PLUGIN_DISCOVERED, 0);
ABI_PIN_VALUE(BP_PLUGIN_LOADED, 1);
ABI_PIN_VALUE(BP_PLUGIN_SKIPPED, 2);

/* Constants. The major is pinned; the minor only grows (abi_layout_test.cc checks the manifests).
 */
ABI_PIN_VALUE(BP_ABI_VERSION_MAJOR, 1);
ABI_PIN(BP_ABI_VERSION_MINOR >= 5, abi_pin_BP_ABI_VERSION_MINOR_went_back_);
ABI_PIN_VALUE(BP_DEVICE_TYPE_FIRST_DYNAMIC, 32);
ABI_PIN_VALUE(BP_DEVICE_TYPE_MAX, 256);
ABI_PIN_VALUE(BP_MODULE_LOAD_ALLOW_NATIVE, 0x1u);
ABI_PIN_VALUE(BP_MODULE_LOAD_NO_GLOBAL_CALLS, 0x2u);
ABI_PIN_VALUE(BP_FUNCTION_CONTAINED, 0x1);
ABI_PIN(sizeof(BP_PLUGIN_ENTRY_SYMBOL) == sizeof("bp_plugin_init"), abi_pin_entry_symbol_changed_);
ABI_PIN(sizeof(bp_status_t) == 4, abi_pin_sizeof_bp_status_t_changed_);
ABI_PIN(sizeof(bp_stream_t) == ABI_P, abi_pin_sizeof_bp_stream_t_changed_);

#endif /* BACKPLANE_TESTS_CORE_ABI_STATIC_LAYOUT_H_ */
