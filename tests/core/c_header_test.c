/* SPDX-License-Identifier: Apache-2.0 */
/* The C ABI header compiles as strict C99 and works from C: this program is built with
 * -std=c99 -pedantic -Werror and exits non-zero on any failure. abi_static_layout.h pins the
 * layout at compile time, so a moved field fails this build (abi_layout_test.cc includes the same
 * pins as C++). */
#include <backplane/c_api.h>
#include <stdio.h>
#include <string.h>

#include "abi_static_layout.h"

static int failures = 0;
#define EXPECT(cond)                                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                         \
    }                                                                     \
  } while (0)

static bp_status_t add3(void* resource, const bp_value_t* args, int32_t n, bp_value_t* out) {
  (void)resource;
  if (n != 3) return bp_error_set(BP_ERR_INVALID_ARGUMENT, "add3 takes 3 arguments");
  out->type = BP_VALUE_INT;
  out->u.v_int64 = args[0].u.v_int64 + args[1].u.v_int64 + args[2].u.v_int64;
  return BP_OK;
}

int main(void) {
  uint32_t major = 0, minor = 99;
  bp_object_t* f = NULL;
  bp_object_t* g = NULL;
  bp_value_t args[3];
  bp_value_t out;
  const char* msg = NULL;
  bp_status_t kind = BP_OK;
  int32_t id = 0;
  const char* name = NULL;
  int i;

  EXPECT(bp_abi_version(&major, &minor) == BP_OK);
  EXPECT(major == BP_ABI_VERSION_MAJOR && minor == BP_ABI_VERSION_MINOR);
  EXPECT(bp_host_api()->struct_size == sizeof(bp_host_api_t));
  EXPECT(sizeof(bp_value_t) == 16);
  EXPECT(bp_host_api()->build_with_options == bp_build_with_options);
  EXPECT(bp_host_api()->module_load_with_options == bp_module_load_with_options);

  EXPECT(bp_function_create(add3, NULL, NULL, &f) == BP_OK);
  EXPECT(bp_registry_set("c_test.add3", f, 0) == BP_OK);
  EXPECT(bp_registry_get("c_test.add3", &g) == BP_OK);
  for (i = 0; i < 3; ++i) {
    args[i].type = BP_VALUE_INT;
    args[i].reserved0 = 0;
    args[i].u.v_int64 = 1000 * (i + 1) + 7;
  }
  EXPECT(bp_function_call(g, args, 3, &out) == BP_OK);
  EXPECT(out.type == BP_VALUE_INT && out.u.v_int64 == 1007 + 2007 + 3007);
  EXPECT(bp_function_call(g, args, 2, &out) == BP_ERR_INVALID_ARGUMENT);
  EXPECT(bp_error_last(&kind, &msg) == BP_OK);
  EXPECT(kind == BP_ERR_INVALID_ARGUMENT && strstr(msg, "3 arguments") != NULL);

  EXPECT(bp_device_type_from_name("vulkan", &id) == BP_OK && id == kDLVulkan);
  EXPECT(bp_device_type_name(kDLOpenCL, &name) == BP_OK && strcmp(name, "opencl") == 0);

  /* ABI 1.5: a C host lists the devices (type and index; the name is an attribute) and the
   * properties of each, instead of probing BP_ATTR_EXIST in a loop. */
  {
    DLDevice devices[64];
    size_t count = 0, again = 0, n = 0, k;
    bp_object_t* keys = NULL;
    EXPECT(bp_host_api()->device_list == bp_device_list);
    EXPECT(bp_device_list(NULL, 0, &count) == BP_OK);
    EXPECT(bp_device_list(devices, 64, &again) == BP_OK && again == count);
    for (k = 0; k < count && k < 64; ++k) {
      EXPECT(bp_device_type_name(devices[k].device_type, &name) == BP_OK && name != NULL);
      EXPECT(bp_device_get_attr(devices[k], BP_ATTR_EXIST, &out) == BP_OK);
      EXPECT(out.type == BP_VALUE_INT && out.u.v_int64 == 1);
      EXPECT(bp_device_get_attr(devices[k], BP_ATTR_DEVICE_NAME, &out) == BP_OK);
      if (out.type == BP_VALUE_OBJECT) bp_object_release(out.u.v_obj);
      EXPECT(bp_device_list_properties(devices[k], &keys) == BP_OK && keys != NULL);
      EXPECT(bp_array_size(keys, &n) == BP_OK);
      bp_object_release(keys);
      keys = NULL;
    }
    EXPECT(bp_device_list(NULL, 1, &count) == BP_ERR_INVALID_ARGUMENT);
  }

  bp_object_release(g);
  bp_object_release(f);
  if (failures == 0) printf("c_header_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
