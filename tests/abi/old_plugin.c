/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin as a third party built it against an older Backplane: plain C99, compiled once per
 * frozen header (cmake/abi/<version>/backplane/c_api.h comes first on the include path), so its
 * bp_device_api_t and everything it reads from the host table have the layout of that version.
 * tests/abi/CMakeLists.txt builds it as libbackplane_oldabi<major>_<minor>.so with device type
 * OLD_ABI_NAME; today's host must load it, pass it through the conformance kit and degrade where
 * its tables are shorter (old_plugin_test.cc).
 *
 * The device keeps its data in host memory behind opaque handles (as a real accelerator's are),
 * with every handle checked, and runs every copy before returning: one queue, no streams. */
#include <backplane/c_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef OLD_ABI_NAME
#error "OLD_ABI_NAME (the device type name) must be defined by the build"
#endif

#define STR2(x) #x
#define STR(x) STR2(x)
/* The ABI version of the header this plugin was built with, e.g. "1.0". */
#define HEADER_VERSION STR(BP_ABI_VERSION_MAJOR) "." STR(BP_ABI_VERSION_MINOR)

/* Total data space of the one device. */
#define CAPACITY ((uint64_t)1 << 30)
/* Handles are serial numbers with a tag, never host addresses. */
#define HANDLE_TAG ((uint64_t)0x0A << 56)

typedef struct region {
  uint64_t handle;
  size_t size;
  unsigned char* data;
  struct region* next;
} region_t;

static const bp_host_api_t* g_host;
static int32_t g_type = -1;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static region_t* g_regions;
static uint64_t g_next = 1;
static uint64_t g_used;
/* The lowest host minor this plugin needs: its header's (a variable, so that 1.0's 0 does not make
 * the comparison below one that the compiler calls always false). */
static const uint32_t g_needed_minor = BP_ABI_VERSION_MINOR;

static bp_status_t fail(bp_status_t kind, const char* what) {
  char message[256];
  snprintf(message, sizeof(message), "%s (" OLD_ABI_NAME ", built against ABI " HEADER_VERSION ")",
           what);
  return g_host->error_set(kind, message);
}

static int exists(DLDevice dev) { return (int32_t)dev.device_type == g_type && dev.device_id == 0; }

static bp_status_t check_device(DLDevice dev) {
  if (exists(dev)) return BP_OK;
  return fail(BP_ERR_NOT_FOUND, "no such device: " OLD_ABI_NAME " has one device, id 0");
}

static bp_status_t string_value(const char* text, bp_value_t* out) {
  bp_object_t* s = NULL;
  bp_status_t st = g_host->string_create(text, strlen(text), &s);
  if (st != BP_OK) return st;
  out->type = BP_VALUE_OBJECT;
  out->u.v_obj = s;
  return BP_OK;
}

static bp_status_t int_value(int64_t x, bp_value_t* out) {
  out->type = BP_VALUE_INT;
  out->u.v_int64 = x;
  return BP_OK;
}

static bp_status_t get_attr(void* self, DLDevice dev, int32_t kind, bp_value_t* out) {
  (void)self;
  out->type = BP_VALUE_NONE;
  if (kind == BP_ATTR_EXIST) return int_value(exists(dev) ? 1 : 0, out);
  if (!exists(dev)) return BP_OK;
  switch (kind) {
    case BP_ATTR_DEVICE_NAME:
      return string_value("Backplane ABI " HEADER_VERSION " plugin", out);
    case BP_ATTR_TOTAL_GLOBAL_MEMORY:
      return int_value((int64_t)CAPACITY, out);
    case BP_ATTR_AVAILABLE_GLOBAL_MEMORY: {
      int64_t free_bytes;
      pthread_mutex_lock(&g_mu);
      free_bytes = (int64_t)(CAPACITY - g_used);
      pthread_mutex_unlock(&g_mu);
      return int_value(free_bytes, out);
    }
    default:
      return BP_OK; /* none: includes every kind newer than this plugin's header */
  }
}

/* One property, which every version answers; only a 1.5 plugin can list it. */
static bp_status_t get_property(void* self, DLDevice dev, const char* key, bp_value_t* out) {
  (void)self;
  out->type = BP_VALUE_NONE;
  if (exists(dev) && key != NULL && strcmp(key, "abi_header") == 0) {
    return string_value(HEADER_VERSION, out);
  }
  return BP_OK;
}

static bp_status_t set_device(void* self, DLDevice dev) {
  (void)self;
  return check_device(dev);
}

static bp_status_t alloc_data_space(void* self, DLDevice dev, size_t nbytes, size_t alignment,
                                    DLDataType type_hint, void** out_data) {
  region_t* r;
  bp_status_t st = check_device(dev);
  (void)self;
  (void)alignment; /* handles, not addresses: the host never reads through them */
  (void)type_hint;
  if (st != BP_OK) return st;
  if (nbytes > CAPACITY) return fail(BP_ERR_OUT_OF_MEMORY, "more than the device holds");
  r = (region_t*)calloc(1, sizeof(region_t));
  if (r == NULL) return fail(BP_ERR_OUT_OF_MEMORY, "out of host memory");
  r->data = (unsigned char*)calloc(nbytes == 0 ? 1 : nbytes, 1);
  if (r->data == NULL) {
    free(r);
    return fail(BP_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  r->size = nbytes;
  pthread_mutex_lock(&g_mu);
  if (g_used + nbytes > CAPACITY) {
    pthread_mutex_unlock(&g_mu);
    free(r->data);
    free(r);
    return fail(BP_ERR_OUT_OF_MEMORY, "the device is full");
  }
  r->handle = HANDLE_TAG | g_next++;
  r->next = g_regions;
  g_regions = r;
  g_used += nbytes;
  pthread_mutex_unlock(&g_mu);
  *out_data = (void*)(uintptr_t)r->handle;
  return BP_OK;
}

static bp_status_t free_data_space(void* self, DLDevice dev, void* data) {
  region_t** at;
  bp_status_t st = check_device(dev);
  (void)self;
  if (st != BP_OK) return st;
  pthread_mutex_lock(&g_mu);
  for (at = &g_regions; *at != NULL; at = &(*at)->next) {
    if ((*at)->handle == (uint64_t)(uintptr_t)data) {
      region_t* r = *at;
      *at = r->next;
      g_used -= r->size;
      pthread_mutex_unlock(&g_mu);
      free(r->data);
      free(r);
      return BP_OK;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return fail(BP_ERR_INVALID_ARGUMENT, "not a live data space");
}

static size_t tensor_bytes(const DLTensor* t) {
  size_t n = ((size_t)t->dtype.bits * t->dtype.lanes + 7) / 8;
  int32_t i;
  for (i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

/* The host address of [offset, offset + n) of the data space `handle`, or NULL when the handle
 * is not live or the range does not fit. Called with g_mu held. */
static unsigned char* resolve(const void* handle, uint64_t offset, size_t n) {
  const region_t* r;
  for (r = g_regions; r != NULL; r = r->next) {
    if (r->handle == (uint64_t)(uintptr_t)handle) {
      if (offset > r->size || n > r->size - offset) return NULL;
      return r->data + offset;
    }
  }
  return NULL;
}

static bp_status_t copy_data_from_to(void* self, const DLTensor* from, const DLTensor* to,
                                     bp_stream_t stream) {
  const size_t n = tensor_bytes(from);
  const int from_host = from->device.device_type == kDLCPU;
  const int to_host = to->device.device_type == kDLCPU;
  unsigned char* src;
  unsigned char* dst;
  bp_status_t st = check_device(from_host ? to->device : from->device);
  (void)self;
  if (st != BP_OK) return st;
  if (stream != NULL) return fail(BP_ERR_INVALID_ARGUMENT, "only the null stream exists");
  pthread_mutex_lock(&g_mu);
  src = from_host ? (unsigned char*)from->data + from->byte_offset
                  : resolve(from->data, from->byte_offset, n);
  dst =
      to_host ? (unsigned char*)to->data + to->byte_offset : resolve(to->data, to->byte_offset, n);
  if (src == NULL || dst == NULL) {
    pthread_mutex_unlock(&g_mu);
    return fail(BP_ERR_INVALID_ARGUMENT,
                "a data space that is not live, or a range past its end, in a copy");
  }
  memmove(dst, src, n);
  pthread_mutex_unlock(&g_mu);
  return BP_OK;
}

static bp_status_t stream_sync(void* self, DLDevice dev, bp_stream_t stream) {
  (void)self;
  if (stream != NULL) return fail(BP_ERR_INVALID_ARGUMENT, "only the null stream exists");
  return check_device(dev); /* every copy completed before it returned */
}

#if BP_ABI_VERSION_MINOR >= 5
static bp_status_t list_properties(void* self, DLDevice dev, bp_object_t** out_keys) {
  bp_value_t key;
  (void)self;
  memset(&key, 0, sizeof(key));
  key.type = BP_VALUE_STR;
  key.u.v_str = "abi_header";
  return g_host->array_create(&key, exists(dev) ? 1 : 0, out_keys);
}
#endif

/* Filled in bp_plugin_init: C99 has designated initializers, and entries this version's header
 * does not have are not there at all. struct_size is this header's size of the table. */
static bp_device_api_t g_table;

static bp_status_t device_api(void* resource, const bp_value_t* args, int32_t num_args,
                              bp_value_t* out) {
  (void)resource;
  (void)args;
  (void)num_args;
  out->type = BP_VALUE_PTR;
  out->u.v_ptr = &g_table;
  return BP_OK;
}

BP_EXPORT bp_status_t bp_plugin_init(const bp_host_api_t* host, bp_plugin_info_t* out_info);

bp_status_t bp_plugin_init(const bp_host_api_t* host, bp_plugin_info_t* out_info) {
  bp_object_t* fn = NULL;
  bp_status_t st;
  out_info->abi_major = BP_ABI_VERSION_MAJOR;
  out_info->abi_minor = BP_ABI_VERSION_MINOR;
  out_info->name = OLD_ABI_NAME;
  out_info->version = HEADER_VERSION;
  if (out_info->struct_size >= offsetof(bp_plugin_info_t, vendor) + sizeof(const char*)) {
    out_info->vendor = "Backplane ABI tests";
  }
  if (host->abi_major != BP_ABI_VERSION_MAJOR || host->abi_minor < g_needed_minor ||
      host->struct_size < sizeof(bp_host_api_t)) {
    return host->error_set(BP_ERR_VERSION_MISMATCH,
                           "plugin " OLD_ABI_NAME " needs a host of ABI " HEADER_VERSION);
  }
  g_host = host;

  g_table.struct_size = sizeof(bp_device_api_t);
  g_table.get_attr = get_attr;
  g_table.get_property = get_property;
  g_table.set_device = set_device;
  g_table.alloc_data_space = alloc_data_space;
  g_table.free_data_space = free_data_space;
  g_table.copy_data_from_to = copy_data_from_to;
  g_table.stream_sync = stream_sync;
#if BP_ABI_VERSION_MINOR >= 5
  g_table.list_properties = list_properties;
#endif

  st = host->device_type_register(OLD_ABI_NAME, &g_type);
  if (st != BP_OK) return st;
  st = host->function_create(device_api, NULL, NULL, &fn);
  if (st != BP_OK) return st;
  st = host->registry_set("device_api." OLD_ABI_NAME, fn, 0);
  host->object_release(fn);
  return st;
}
