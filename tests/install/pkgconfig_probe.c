/* SPDX-License-Identifier: Apache-2.0
 * Built by tests/install/install_test.sh with nothing but
 * `cc probe.c $(pkg-config --cflags --libs backplane)`: a C host program against the
 * installed package. It loads the installed plugins and checks that cpu:0 exists. */
#include <backplane/c_api.h>
#include <stdio.h>

int main(void) {
  uint32_t major = 0, minor = 0;
  bp_value_t exist;
  const DLDevice cpu = {kDLCPU, 0};
  bp_abi_version(&major, &minor);
  if (bp_plugins_load_all() != BP_OK || bp_device_get_attr(cpu, BP_ATTR_EXIST, &exist) != BP_OK) {
    const char* message = NULL;
    bp_error_last(NULL, &message);
    fprintf(stderr, "pkgconfig_probe: %s\n", message != NULL ? message : "(no message)");
    return 1;
  }
  printf("pkgconfig_probe: ABI %u.%u, cpu:0 exists = %lld\n", major, minor,
         (long long)exist.u.v_int64);
  return exist.type == BP_VALUE_INT && exist.u.v_int64 == 1 ? 0 : 1;
}
