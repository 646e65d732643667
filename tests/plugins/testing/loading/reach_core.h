/* SPDX-License-Identifier: Apache-2.0 */
/* For the plugins of this folder: what a plugin's static constructor can do before the host
 * calls its bp_plugin_init. It has no host table yet, but the core is in the process: it finds
 * bp_host_api with dlsym (a library that links libbackplane reaches it the same way). Written
 * in C, so that the library defines no STB_GNU_UNIQUE symbol and a dlclose really unmaps it. */
#ifndef BACKPLANE_TESTS_LOADING_REACH_CORE_H_
#define BACKPLANE_TESTS_LOADING_REACH_CORE_H_

#include <backplane/c_api.h>
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

/* The host table of the core in this process, or NULL. */
static inline const bp_host_api_t* ReachCore(void) {
  const bp_host_api_t* (*get)(void) = NULL;
  void* symbol = dlsym(RTLD_DEFAULT, "bp_host_api");
  memcpy(&get, &symbol, sizeof(get));
  return get != NULL ? get() : NULL;
}

static inline bp_status_t ReturnNothing(void* resource, const bp_value_t* args, int32_t num_args,
                                        bp_value_t* out_result) {
  (void)resource;
  (void)args;
  (void)num_args;
  (void)out_result;
  return BP_OK;
}

/* Registers a function that returns nothing as `name`; the status, which the callers here
 * ignore as a careless plugin would. */
static inline bp_status_t RegisterNothing(const bp_host_api_t* host, const char* name,
                                          int32_t allow_override) {
  bp_object_t* f = NULL;
  if (host == NULL || host->function_create(ReturnNothing, NULL, NULL, &f) != BP_OK) {
    return BP_ERR_INTERNAL;
  }
  bp_status_t st = host->registry_set(name, f, allow_override);
  host->object_release(f);
  return st;
}

/* The answer of an entry point that succeeds. */
static inline bp_status_t Answer(bp_plugin_info_t* out_info, const char* name) {
  out_info->abi_major = BP_ABI_VERSION_MAJOR;
  out_info->abi_minor = 0;
  out_info->name = name;
  out_info->version = "1.0.0";
  return BP_OK;
}

#endif /* BACKPLANE_TESTS_LOADING_REACH_CORE_H_ */
