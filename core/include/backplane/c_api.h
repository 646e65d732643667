/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Backplane C ABI: the one contract between the core (libbackplane), host applications
 * and plugins. Plain C99; nothing else crosses a library boundary.
 *
 * Versioning
 *   BP_ABI_VERSION_MAJOR changes when anything here changes incompatibly: a field or
 *   function removed, reordered or retyped, a meaning changed. Hosts and plugins of
 *   different majors refuse each other.
 *   BP_ABI_VERSION_MINOR changes when something is appended: a function at the end of a
 *   table, a field at the end of a struct, an enum value. Every growable struct starts with
 *   `struct_size`; a reader checks it before touching a field past the first version.
 *   docs/abi-changelog.md has an entry for every minor.
 *
 * One header on purpose (about 1,000 lines): the whole contract is what a plugin author and
 * a binding generator read, and the frozen copy of each minor (cmake/abi/) compares as one
 * file.
 *
 * Calling convention
 *   Every function returns a bp_status_t; BP_OK (0) is success, any other value is the
 *   kind of error (bp_error_kind_t), and the message is in this thread's error slot
 *   (bp_error_last). Outputs are pointer parameters named out_*; on failure they are
 *   left untouched unless the declaration says otherwise.
 *
 * Ownership
 *   "owned":    the caller holds one reference and must bp_object_release it.
 *   "borrowed": valid while the object it came from is alive (or as stated); do not free.
 *   Arguments are always borrowed by the callee for the duration of the call; a callee
 *   that keeps an object retains it. Objects are freed by the library that allocated them
 *   (every object is allocated by the core; payloads attached to a function object are
 *   released through the deleter their creator supplied).
 */
#ifndef BACKPLANE_C_API_H_
#define BACKPLANE_C_API_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BP_ABI_VERSION_MAJOR 1
#define BP_ABI_VERSION_MINOR 9

#if defined(_WIN32)
#define BP_EXPORT __declspec(dllexport)
#else
#define BP_EXPORT __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------------------
 * Status and errors
 * ------------------------------------------------------------------------------------- */

/* A status: BP_OK or a bp_error_kind_t. */
typedef int32_t bp_status_t;

typedef enum {
  BP_OK = 0,
  BP_ERR_INVALID_ARGUMENT = 1, /* a caller passed a bad value (null, out of range, ...) */
  BP_ERR_NOT_FOUND = 2,        /* a name, device type or device that does not exist */
  BP_ERR_ALREADY_EXISTS = 3,   /* registering a name that is taken */
  BP_ERR_OUT_OF_MEMORY = 4,    /* host or device memory exhausted */
  BP_ERR_UNSUPPORTED = 5,      /* the operation is not provided by this backend */
  BP_ERR_VERSION_MISMATCH = 6, /* ABI negotiation failed */
  BP_ERR_PLUGIN = 7,           /* a plugin failed to load or initialise */
  BP_ERR_DEVICE = 8,           /* the device or its driver reported a failure */
  BP_ERR_TYPE = 9,             /* a value had another type than expected */
  BP_ERR_INTERNAL = 10         /* a bug: an invariant did not hold */
} bp_error_kind_t;

/* Sets this thread's error slot and returns `kind`, so a failing path reads
 * `return bp_error_set(BP_ERR_..., "...")`. `message` is copied. */
BP_EXPORT bp_status_t bp_error_set(bp_status_t kind, const char* message);

/* Reads this thread's error slot: the kind and message of the last failure on this thread.
 * out_message is borrowed and valid until the next bp_error_set or failing call on this
 * thread. Either output may be null. Returns BP_OK. */
BP_EXPORT bp_status_t bp_error_last(bp_status_t* out_kind, const char** out_message);

/* Clears this thread's error slot. */
BP_EXPORT bp_status_t bp_error_clear(void);

/* A static, human-readable name for an error kind ("invalid argument", ...). */
BP_EXPORT const char* bp_error_kind_name(bp_status_t kind);

/* ---------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------- */

/* The ABI version this libbackplane speaks. Outputs may be null. */
BP_EXPORT bp_status_t bp_abi_version(uint32_t* out_major, uint32_t* out_minor);

/* ---------------------------------------------------------------------------------------
 * Objects: refcounted, opaque, allocated and freed by the core
 * ------------------------------------------------------------------------------------- */

typedef struct bp_object bp_object_t;

typedef enum {
  BP_OBJECT_STRING = 1,   /* immutable UTF-8 text, NUL-terminated */
  BP_OBJECT_BYTES = 2,    /* immutable byte buffer */
  BP_OBJECT_FUNCTION = 3, /* a packed function */
  BP_OBJECT_TENSOR = 4,   /* a DLTensor whose data space it owns */
  BP_OBJECT_ARRAY = 5,    /* an immutable array of bp_value_t */
  BP_OBJECT_TARGET = 6,   /* an immutable Target (since 1.1) */
  BP_OBJECT_MODULE = 7,   /* a runtime Module (since 1.2) */
  BP_OBJECT_EVENT = 8     /* a point in a stream's work (since 1.6) */
} bp_object_type_t;

/* Adds a reference. A null object is ignored. */
BP_EXPORT bp_status_t bp_object_retain(bp_object_t* obj);
/* Drops a reference; the last one frees the object. A null object is ignored. */
BP_EXPORT bp_status_t bp_object_release(bp_object_t* obj);
/* The object's bp_object_type_t. */
BP_EXPORT bp_status_t bp_object_type(const bp_object_t* obj, int32_t* out_type);

/* ---------------------------------------------------------------------------------------
 * Values: a 16-byte tagged value used for arguments, results and attributes
 * ------------------------------------------------------------------------------------- */

typedef enum {
  BP_VALUE_NONE = 0,   /* no value: "not supported / not applicable" */
  BP_VALUE_INT = 1,    /* v_int64 */
  BP_VALUE_FLOAT = 2,  /* v_float64 */
  BP_VALUE_PTR = 3,    /* v_ptr: an opaque pointer, never freed by the receiver */
  BP_VALUE_DEVICE = 4, /* v_device */
  BP_VALUE_DTYPE = 5,  /* v_dtype */
  BP_VALUE_TENSOR = 6, /* v_tensor: a borrowed DLTensor*, for arguments only */
  BP_VALUE_STR = 7,    /* v_str: a borrowed const char*, for arguments only */
  BP_VALUE_OBJECT = 8  /* v_obj: a bp_object_t*; a result holds one owned reference */
} bp_value_type_t;

typedef struct {
  int32_t type; /* bp_value_type_t */
  int32_t reserved0;
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
    DLDevice v_device;
    DLDataType v_dtype;
    DLTensor* v_tensor;
    const char* v_str;
    bp_object_t* v_obj;
  } u;
} bp_value_t;

/* ---------------------------------------------------------------------------------------
 * String, bytes and array objects
 * ------------------------------------------------------------------------------------- */

/* Creates a string object holding a copy of `size` bytes of `data` (owned). */
BP_EXPORT bp_status_t bp_string_create(const char* data, size_t size, bp_object_t** out_str);
/* The string's NUL-terminated text and size, borrowed from `str`. out_size may be null. */
BP_EXPORT bp_status_t bp_string_get(const bp_object_t* str, const char** out_data,
                                    size_t* out_size);

/* Creates a bytes object holding a copy of `size` bytes of `data` (owned). */
BP_EXPORT bp_status_t bp_bytes_create(const void* data, size_t size, bp_object_t** out_bytes);
/* The bytes, borrowed from `bytes`. */
BP_EXPORT bp_status_t bp_bytes_get(const bp_object_t* bytes, const void** out_data,
                                   size_t* out_size);

/* Creates an array holding copies of `size` values (owned). Object values are retained;
 * BP_VALUE_STR values are copied into string objects; BP_VALUE_TENSOR is refused. */
BP_EXPORT bp_status_t bp_array_create(const bp_value_t* values, size_t size,
                                      bp_object_t** out_array);
BP_EXPORT bp_status_t bp_array_size(const bp_object_t* array, size_t* out_size);
/* Element `index`; an object element is borrowed from the array. */
BP_EXPORT bp_status_t bp_array_get(const bp_object_t* array, size_t index, bp_value_t* out_value);

/* ---------------------------------------------------------------------------------------
 * Packed functions and the global function registry
 * ------------------------------------------------------------------------------------- */

/* A packed function's body. `args` are borrowed. On success the callee writes its result
 * to *out_result (already set to BP_VALUE_NONE by the caller); an object result transfers
 * one reference to the caller. On failure it returns a status and sets the error slot. */
typedef bp_status_t (*bp_packed_fn_t)(void* resource, const bp_value_t* args, int32_t num_args,
                                      bp_value_t* out_result);

/* Creates a function object (owned). `resource` is passed to every call; when the object
 * dies, `resource_deleter(resource)` runs if it is not null, in the creator's library. */
BP_EXPORT bp_status_t bp_function_create(bp_packed_fn_t body, void* resource,
                                         void (*resource_deleter)(void* resource),
                                         bp_object_t** out_func);

/* Flags of bp_function_create_with_flags (since 1.7). */
typedef enum {
  /* The body never lets a C++ exception out and sets the error slot (bp_error_set) on every
   * failure, as the SDK's CatchAtEdge does. bp_function_call then calls it as a tail call,
   * without the guard that contains an exception and explains a failure without a message. */
  BP_FUNCTION_CONTAINED = 0x1
} bp_function_flag_t;

/* Since 1.8: the IR text versions a code generator reads (docs/ir.md, "Versions"), or'ed into
 * the flags of the function a plugin registers as "target.build.<kind>":
 * BP_FUNCTION_READS_IR(oldest, newest), 1 <= oldest <= newest <= 255. bp_build writes the
 * kernels it hands that code generator in a version of that range, lowering what a newer
 * version added where an older one can say the same (loops with a step, assignable variables,
 * negation), and refuses a kernel that needs more with BP_ERR_UNSUPPORTED, naming the construct,
 * the version it needs and the plugin. A code generator without these bits reads version 1 only.
 * The bits mean nothing on other functions. */
#define BP_FUNCTION_READS_IR(oldest, newest) \
  ((((uint32_t)(oldest)&0xffu) << 16) | (((uint32_t)(newest)&0xffu) << 8))
#define BP_FUNCTION_READS_IR_MASK 0x00ffff00u
#define BP_FUNCTION_READS_IR_OLDEST(flags) (((uint32_t)(flags) >> 16) & 0xffu)
#define BP_FUNCTION_READS_IR_NEWEST(flags) (((uint32_t)(flags) >> 8) & 0xffu)

/* Since 1.7. bp_function_create with `flags`, a set of bp_function_flag_t bits (and, since 1.8,
 * BP_FUNCTION_READS_IR); an unknown bit, or a READS_IR range that is not 1 <= oldest <= newest,
 * is BP_ERR_INVALID_ARGUMENT. */
BP_EXPORT bp_status_t bp_function_create_with_flags(bp_packed_fn_t body, void* resource,
                                                    void (*resource_deleter)(void* resource),
                                                    uint32_t flags, bp_object_t** out_func);

/* Calls a function. *out_result is set to BP_VALUE_NONE first, then to the result. */
BP_EXPORT bp_status_t bp_function_call(const bp_object_t* func, const bp_value_t* args,
                                       int32_t num_args, bp_value_t* out_result);

/* Registers `func` under `name` in the global registry (the registry retains it). A name
 * that is taken is BP_ERR_ALREADY_EXISTS naming the owner, unless `allow_override` != 0.
 * While a plugin loads (its static constructors, which dlopen runs, and its bp_plugin_init,
 * on the loading thread) the registration is recorded as that plugin's, and the name must be
 * one its manifest declares in "provides" (else BP_ERR_PLUGIN, or BP_ERR_ALREADY_EXISTS when
 * another plugin's manifest declares it); there `allow_override` replaces only an entry the
 * same plugin registered, never the host's or another plugin's. A refusal then also fails the
 * plugin's load, rolled back, even if the plugin goes on. The same rule holds for target kinds
 * and tags, and for new device types ("device_types"). */
BP_EXPORT bp_status_t bp_registry_set(const char* name, bp_object_t* func, int32_t allow_override);

/* Looks up `name` (owned). A name provided by a discovered plugin that is not loaded yet
 * loads that plugin first. A missing name is BP_ERR_NOT_FOUND. */
BP_EXPORT bp_status_t bp_registry_get(const char* name, bp_object_t** out_func);

/* Removes `name`; BP_ERR_NOT_FOUND if absent. During a plugin's bp_plugin_init, only a name
 * that plugin registered (else BP_ERR_ALREADY_EXISTS naming the owner). */
BP_EXPORT bp_status_t bp_registry_remove(const char* name);

/* Lists every registered name, sorted, as an array of string objects (owned). Names that
 * discovered but unloaded plugins declare in their manifests are included. */
BP_EXPORT bp_status_t bp_registry_list(bp_object_t** out_names);

/* ---------------------------------------------------------------------------------------
 * Device types: names and DLPack ids, both ways
 * ------------------------------------------------------------------------------------- */

/* The first id handed to a name DLPack does not define. Ids below it and above
 * kDLExtDev are kept for DLPack's future types. */
#define BP_DEVICE_TYPE_FIRST_DYNAMIC 32
/* One past the largest device type id. */
#define BP_DEVICE_TYPE_MAX 256

/* Returns the id of `name`, registering a fresh one (>= BP_DEVICE_TYPE_FIRST_DYNAMIC) if
 * the name is new. DLPack's names (cpu, cuda, cuda_host, opencl, vulkan, metal, vpi, rocm,
 * rocm_host, ext_dev, cuda_managed, oneapi, webgpu, hexagon) keep their DLPack ids. A name
 * is [a-z0-9_] and 1..63 characters. */
BP_EXPORT bp_status_t bp_device_type_register(const char* name, int32_t* out_type);
/* These three discover plugins first (once per process, as every entry point whose answer
 * depends on plugins does), so the types that manifests declare are known. */
/* The id of a known name; BP_ERR_NOT_FOUND otherwise. */
BP_EXPORT bp_status_t bp_device_type_from_name(const char* name, int32_t* out_type);
/* The name of a known id (borrowed, valid for the life of the process). */
BP_EXPORT bp_status_t bp_device_type_name(int32_t type, const char** out_name);
/* Every known device type: writes up to `capacity` ids and the total count. */
BP_EXPORT bp_status_t bp_device_type_list(int32_t* out_types, size_t capacity, size_t* out_count);

/* ---------------------------------------------------------------------------------------
 * DeviceAPI: the table a plugin provides for a device type (docs/abi.md)
 * ------------------------------------------------------------------------------------- */

/* Attribute kinds for get_attr: every kind TVM's DeviceAttrKind has, same numbers. */
typedef enum {
  BP_ATTR_EXIST = 0,                       /* int: 1 if the device exists */
  BP_ATTR_MAX_THREADS_PER_BLOCK = 1,       /* int */
  BP_ATTR_WARP_SIZE = 2,                   /* int */
  BP_ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 3, /* int: bytes */
  BP_ATTR_COMPUTE_VERSION = 4,             /* string: "9.0" */
  BP_ATTR_DEVICE_NAME = 5,                 /* string */
  BP_ATTR_MAX_CLOCK_RATE = 6,              /* int: kHz */
  BP_ATTR_MULTI_PROCESSOR_COUNT = 7,       /* int */
  BP_ATTR_MAX_THREAD_DIMENSIONS = 8,       /* string: "[1024, 1024, 64]" */
  BP_ATTR_MAX_REGISTERS_PER_BLOCK = 9,     /* int */
  BP_ATTR_GCN_ARCH = 10,                   /* string */
  BP_ATTR_API_VERSION = 11,                /* int or string */
  BP_ATTR_DRIVER_VERSION = 12,             /* string */
  BP_ATTR_L2_CACHE_SIZE_BYTES = 13,        /* int */
  BP_ATTR_TOTAL_GLOBAL_MEMORY = 14,        /* int: bytes */
  BP_ATTR_AVAILABLE_GLOBAL_MEMORY = 15,    /* int: bytes */
  BP_ATTR_IMAGE_PITCH_ALIGNMENT = 16,      /* int: bytes */
  /* Since 1.5. docs/device-attributes.md says what each kind means and what every backend
   * reads it from. Lists are array objects. */
  BP_ATTR_DEVICE_KIND = 17,         /* string: "cpu", "gpu", "accelerator" or "other" */
  BP_ATTR_VENDOR = 18,              /* string: the vendor as the API names it */
  BP_ATTR_VENDOR_ID = 19,           /* int: the API's vendor id (a PCI vendor id for PCI) */
  BP_ATTR_UUID = 20,                /* string: "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
  BP_ATTR_PCI_BUS_ID = 21,          /* string: "dddd:bb:dd.f" */
  BP_ATTR_MAX_ALLOCATION_SIZE = 22, /* int: bytes in one data space allocation at most */
  BP_ATTR_SUPPORTS_FP64 = 23,       /* int: 1 if kernels can compute in float64, else 0 */
  BP_ATTR_SUPPORTS_FP16 = 24,       /* int: 1 if kernels can compute in float16, else 0 */
  BP_ATTR_SUBGROUP_SIZES = 25,      /* array of int: the subgroup (warp) sizes it runs */
  BP_ATTR_EXTENSIONS = 26,          /* array of string: the API's extensions, sorted */
  BP_ATTR_DRIVER_INFO = 27,         /* string: the driver's own name and version text */
  BP_ATTR_ISA_FLAGS = 28,           /* array of string: instruction set features, sorted */
  BP_ATTR_COUNT = 29                /* number of kinds; grows with the minor version */
} bp_device_attr_kind_t;

/* The snake_case name of an attribute kind ("max_threads_per_block"), or NULL for a kind this
 * host does not know. Static storage. Since 1.1. */
BP_EXPORT const char* bp_device_attr_name(int32_t kind);

/* A stream handle, opaque to everyone but its DeviceAPI. NULL is the device's default
 * stream and is always valid. */
typedef void* bp_stream_t;

/* Native handles (since 1.6): a backend's own objects, as 64-bit values (a pointer, a
 * non-dispatchable Vulkan handle or a CUDA device address). Which kinds a backend has, and
 * what each is, its documentation says; the common ones: */
typedef enum {
  BP_NATIVE_BUFFER = 1,        /* of a data handle: cl_mem, VkBuffer, CUdeviceptr */
  BP_NATIVE_BUFFER_OFFSET = 2, /* of a data handle: where its bytes start in that buffer */
  BP_NATIVE_MEMORY = 3,        /* of a data handle: the VkDeviceMemory bound to its buffer */
  BP_NATIVE_MEMORY_OFFSET = 4, /* of a data handle: where the buffer is bound in that memory */
  BP_NATIVE_QUEUE = 5,         /* of a stream: cl_command_queue, VkQueue, CUstream */
  BP_NATIVE_QUEUE_FAMILY = 6,  /* of a stream: the Vulkan queue family index */
  BP_NATIVE_CONTEXT = 7,       /* cl_context, VkDevice, CUcontext (the primary context) */
  BP_NATIVE_DEVICE = 8,        /* cl_device_id, VkPhysicalDevice, CUdevice */
  BP_NATIVE_PLATFORM = 9       /* cl_platform_id, VkInstance */
} bp_native_kind_t;

/* An application's buffer to wrap (bp_tensor_from_native). */
typedef struct bp_native_buffer {
  size_t struct_size;     /* sizeof(bp_native_buffer_t) */
  uint64_t buffer;        /* cl_mem, VkBuffer, CUdeviceptr */
  uint64_t memory;        /* the VkDeviceMemory bound to `buffer` (Vulkan); else 0 */
  uint64_t memory_offset; /* where `buffer` is bound in `memory` (Vulkan); else 0 */
  uint64_t size;          /* the bytes from the buffer's start that Backplane may use */
} bp_native_buffer_t;

/* The DeviceAPI table. Every entry receives `self` first. A plugin keeps the table and
 * `self` alive until the process ends. Entries marked optional may be null; the core then
 * applies the default noted per entry. String results are string objects (owned by the
 * caller). Copies and stream work may be asynchronous: the host side of a copy is read before
 * copy_data_from_to returns (so the caller may reuse it at once), but a device-to-host copy is
 * complete only after stream_sync on the same stream. */
typedef struct bp_device_api {
  size_t struct_size; /* sizeof(bp_device_api_t) as the plugin was built */
  void* self;

  /* Writes the attribute, or BP_VALUE_NONE when it cannot be queried or does not apply.
   * A device id past the end answers BP_ATTR_EXIST = 0 and NONE for the rest, and so does a
   * kind the plugin does not know (one from a newer minor). A value is none, int, float, a
   * string object or (since 1.5, for the list kinds) an array object of ints or strings. */
  bp_status_t (*get_attr)(void* self, DLDevice dev, int32_t kind, bp_value_t* out_value);
  /* Optional: string-keyed properties beyond the enum; NONE for unknown keys. */
  bp_status_t (*get_property)(void* self, DLDevice dev, const char* key, bp_value_t* out_value);
  /* Optional: makes `dev` the active device of the calling thread; null means the device
   * needs no activation. */
  bp_status_t (*set_device)(void* self, DLDevice dev);
  /* Allocates data space: transferable to/from the host. `alignment` is a power of two;
   * `type_hint` is the dtype that will live there. *out_data may be an opaque handle. A
   * zero-size request gives a valid, freeable handle. */
  bp_status_t (*alloc_data_space)(void* self, DLDevice dev, size_t nbytes, size_t alignment,
                                  DLDataType type_hint, void** out_data);
  bp_status_t (*free_data_space)(void* self, DLDevice dev, void* data);
  /* Optional pair: scratch space for use within an operator. Null entries fall back to
   * alloc_data_space / free_data_space. */
  bp_status_t (*alloc_workspace)(void* self, DLDevice dev, size_t nbytes, DLDataType type_hint,
                                 void** out_data);
  bp_status_t (*free_workspace)(void* self, DLDevice dev, void* data);
  /* Copies `from` to `to` (same byte size, compact) on `stream` of the non-CPU side. At most
   * one side is a CPU device; the other is this DeviceAPI's type. Honour byte_offset. */
  bp_status_t (*copy_data_from_to)(void* self, const DLTensor* from, const DLTensor* to,
                                   bp_stream_t stream);
  /* Optional: a new stream; null entry (or a NULL result) means a single-queue device. */
  bp_status_t (*create_stream)(void* self, DLDevice dev, bp_stream_t* out_stream);
  /* Optional (required with create_stream): frees a stream created above. */
  bp_status_t (*free_stream)(void* self, DLDevice dev, bp_stream_t stream);
  /* Optional: makes `stream` the active stream of `dev` for generated code. */
  bp_status_t (*set_stream)(void* self, DLDevice dev, bp_stream_t stream);
  /* Returns once all work submitted to `stream` before the call has completed. */
  bp_status_t (*stream_sync)(void* self, DLDevice dev, bp_stream_t stream);
  /* Optional: `dst` may not proceed past its queued work until `src` has finished the work
   * queued now. A null entry makes the core call stream_sync(src). */
  bp_status_t (*sync_stream_from_to)(void* self, DLDevice dev, bp_stream_t src, bp_stream_t dst);

  /* Since 1.5 (a table whose struct_size ends before it has none). */
  /* Optional: the keys get_property answers for `dev`, as an array of string objects
   * (owned by the caller); every key listed must answer something other than none. A null
   * entry lists no keys. A device id past the end answers an empty array. */
  bp_status_t (*list_properties)(void* self, DLDevice dev, bp_object_t** out_keys);

  /* Since 1.6. Optional, all seven or none: events, markers in a stream's work. event_create
   * makes one (an opaque handle of the plugin's); event_record marks the point after the work
   * queued on `stream` so far (recording again moves the mark); stream_wait_event makes
   * `stream` wait for the marked point without the host waiting; event_query writes 1 once the
   * point is passed (or the event was never recorded), else 0; event_sync returns once it is
   * passed; event_elapsed_ms writes the milliseconds between two recorded and passed points of
   * one device (the core checks both; BP_ERR_UNSUPPORTED if the device cannot time); event_free
   * frees a handle. Without them the core records by synchronizing the stream and reading the
   * host's clock. */
  bp_status_t (*event_create)(void* self, DLDevice dev, void** out_event);
  bp_status_t (*event_free)(void* self, DLDevice dev, void* event);
  bp_status_t (*event_record)(void* self, DLDevice dev, void* event, bp_stream_t stream);
  bp_status_t (*stream_wait_event)(void* self, DLDevice dev, bp_stream_t stream, void* event);
  bp_status_t (*event_query)(void* self, DLDevice dev, void* event, int32_t* out_done);
  bp_status_t (*event_sync)(void* self, DLDevice dev, void* event);
  bp_status_t (*event_elapsed_ms)(void* self, DLDevice dev, void* start, void* end, double* out_ms);

  /* Since 1.6. Optional: native handles (bp_native_kind_t; docs/host-guide.md, "Native
   * handles"). native_handle writes the backend's handle of `kind` for `object`: a data handle
   * for the BUFFER and MEMORY kinds, a stream (null: the device's default) for the QUEUE kinds,
   * ignored for the others; BP_ERR_UNSUPPORTED names a kind the backend has none of. A null
   * entry has none. */
  bp_status_t (*native_handle)(void* self, DLDevice dev, int32_t kind, void* object, uint64_t* out);
  /* Since 1.6. Optional, both or none: wrap_native makes a data handle of `dev` over an
   * application's buffer (checked to be one of `dev`, `size` bytes at least), which copies and
   * kernels use like data space; the plugin never frees the buffer, and free_data_space refuses
   * the handle. unwrap_native forgets the handle: the buffer is wholly the application's again.
   * A null entry wraps nothing. */
  bp_status_t (*wrap_native)(void* self, DLDevice dev, const struct bp_native_buffer* buffer,
                             void** out_data);
  bp_status_t (*unwrap_native)(void* self, DLDevice dev, void* data);
} bp_device_api_t;

/* The DeviceAPI for a device type (borrowed, valid for the life of the process). It is
 * found by calling the registered function "device_api.<type name>", which returns the
 * table as BP_VALUE_PTR; the plugin that declares it is loaded on first use. An unknown
 * type or a missing plugin is BP_ERR_NOT_FOUND with a message naming the type and the
 * plugins that were looked at. */
BP_EXPORT bp_status_t bp_device_api_get(int32_t device_type, const bp_device_api_t** out_api);

/* Core entry points over the DeviceAPI tables, with the defaults of null optional entries
 * (bp_device_api_t) applied and the arguments checked. Host applications and generated code
 * use these. */
BP_EXPORT bp_status_t bp_device_get_attr(DLDevice dev, int32_t kind, bp_value_t* out_value);
BP_EXPORT bp_status_t bp_device_get_property(DLDevice dev, const char* key, bp_value_t* out_value);
/* The keys bp_device_get_property answers for `dev`, as an array of string objects (owned),
 * in the plugin's order. A plugin built before 1.5, or one without list_properties, lists
 * none: the array is empty. Since 1.5. */
BP_EXPORT bp_status_t bp_device_list_properties(DLDevice dev, bp_object_t** out_keys);
/* Every device here: for each known device type in id order whose DeviceAPI loads, ids 0, 1,
 * ... while BP_ATTR_EXIST says 1 (loading the plugins that provide DeviceAPIs). Writes up to
 * `capacity` devices to out_devices (may be NULL when capacity is 0) and the total count to
 * *out_count. A device's type name is bp_device_type_name(dev.device_type) and its name
 * BP_ATTR_DEVICE_NAME. A DeviceAPI that fails to load or to answer BP_ATTR_EXIST contributes
 * no devices (bp_plugins_list records why a plugin failed). Since 1.5. */
BP_EXPORT bp_status_t bp_device_list(DLDevice* out_devices, size_t capacity, size_t* out_count);
BP_EXPORT bp_status_t bp_device_set(DLDevice dev);
BP_EXPORT bp_status_t bp_device_alloc_data_space(DLDevice dev, size_t nbytes, size_t alignment,
                                                 DLDataType type_hint, void** out_data);
BP_EXPORT bp_status_t bp_device_free_data_space(DLDevice dev, void* data);
BP_EXPORT bp_status_t bp_device_alloc_workspace(DLDevice dev, size_t nbytes, DLDataType type_hint,
                                                void** out_data);
BP_EXPORT bp_status_t bp_device_free_workspace(DLDevice dev, void* data);
/* Copies between any two devices. Shapes may differ but byte sizes must match; both
 * tensors must be compact. Between two device types of one plugin (cuda and cuda_host) the
 * plugin copies, through the destination type's DeviceAPI, and `stream` is the one of its
 * devices that has streams; between device types of two plugins the core stages through
 * host memory and synchronises. Otherwise `stream` belongs to the non-CPU side (or `to` when
 * both are devices). */
BP_EXPORT bp_status_t bp_device_copy_data_from_to(const DLTensor* from, const DLTensor* to,
                                                  bp_stream_t stream);
BP_EXPORT bp_status_t bp_device_stream_create(DLDevice dev, bp_stream_t* out_stream);
BP_EXPORT bp_status_t bp_device_stream_free(DLDevice dev, bp_stream_t stream);
BP_EXPORT bp_status_t bp_device_stream_set(DLDevice dev, bp_stream_t stream);
BP_EXPORT bp_status_t bp_device_stream_sync(DLDevice dev, bp_stream_t stream);
BP_EXPORT bp_status_t bp_device_sync_stream_from_to(DLDevice dev, bp_stream_t src, bp_stream_t dst);

/* ---------------------------------------------------------------------------------------
 * Tensors: refcounted DLTensors that own their data space
 * ------------------------------------------------------------------------------------- */

/* Allocates a compact tensor on `dev` (owned); its data space is freed with the object. */
BP_EXPORT bp_status_t bp_tensor_empty(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                      DLDevice dev, bp_object_t** out_tensor);
/* The tensor's DLTensor, borrowed from `tensor`. */
BP_EXPORT bp_status_t bp_tensor_get(const bp_object_t* tensor, DLTensor** out_dltensor);

/* DLPack exchange (since 1.6). Debian's dlpack.h is DLPack 0.6, which has DLManagedTensor only;
 * DLPack 1.0's versioned managed tensor (the same layout in 1.1) is declared here to the
 * published ABI, unless a DLPack 1.x dlpack.h was included before this header. */
#if !defined(DLPACK_MAJOR_VERSION)
typedef struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#endif

/* Wraps a producer's DLPack 1.x tensor as a tensor object without copying, and takes it over:
 * its deleter runs once, when the last reference to the object goes (on the thread that
 * releases it). On failure nothing is taken: the caller still owns `managed` and must call
 * its deleter. Refused: another DLPack major (BP_ERR_UNSUPPORTED), a shape or dtype no
 * tensor can have, data that is null for a non-empty tensor (BP_ERR_INVALID_ARGUMENT). The
 * flags are kept (bp_tensor_flags): a read-only tensor is refused where it would be written
 * (a kernel parameter the kernel stores to, the destination of the C++ API's copies). */
BP_EXPORT bp_status_t bp_tensor_from_dlpack_versioned(DLManagedTensorVersioned* managed,
                                                      bp_object_t** out_tensor);
/* The same for a DLPack 0.x producer's DLManagedTensor (no version, no flags). */
BP_EXPORT bp_status_t bp_tensor_from_dlpack(DLManagedTensor* managed, bp_object_t** out_tensor);
/* Exports `tensor` for a DLPack 1.x consumer: a new DLManagedTensorVersioned (version 1.0) that
 * shares the tensor's memory and holds a reference to it until the consumer calls its
 * deleter, exactly once. Its flags are the tensor's (read-only stays read-only). */
BP_EXPORT bp_status_t bp_tensor_to_dlpack_versioned(bp_object_t* tensor,
                                                    DLManagedTensorVersioned** out_managed);
/* The same for a DLPack 0.x consumer. A read-only tensor is refused (BP_ERR_INVALID_ARGUMENT):
 * DLManagedTensor cannot say it is read-only. */
BP_EXPORT bp_status_t bp_tensor_to_dlpack(bp_object_t* tensor, DLManagedTensor** out_managed);
/* The DLPACK_FLAG_BITMASK_* flags of `tensor`: 0 for a tensor from bp_tensor_empty, the
 * producer's for an imported one. */
BP_EXPORT bp_status_t bp_tensor_flags(const bp_object_t* tensor, uint64_t* out_flags);

/* ---------------------------------------------------------------------------------------
 * Events (since 1.6): points in a stream's work, for ordering streams and timing
 * ------------------------------------------------------------------------------------- */

/* A new event of `dev` (owned), not yet recorded. */
BP_EXPORT bp_status_t bp_event_create(DLDevice dev, bp_object_t** out_event);
/* Marks the point after the work queued on `stream` (of the event's device) so far. On a
 * device whose DeviceAPI has no events, this waits for that work and reads the host's clock. */
BP_EXPORT bp_status_t bp_event_record(bp_object_t* event, bp_stream_t stream);
/* Work queued on `stream` (of the event's device) after this call waits for the recorded
 * point; the host does not wait. */
BP_EXPORT bp_status_t bp_event_wait(const bp_object_t* event, bp_stream_t stream);
/* *out_done = 1 once the recorded point is passed, or when the event was never recorded. */
BP_EXPORT bp_status_t bp_event_query(const bp_object_t* event, int32_t* out_done);
/* Returns once the recorded point is passed. */
BP_EXPORT bp_status_t bp_event_sync(const bp_object_t* event);
/* Milliseconds from `start`'s point to `end`'s, both recorded on one device (waits until both
 * are passed). BP_ERR_INVALID_ARGUMENT for events not recorded or of two devices. */
BP_EXPORT bp_status_t bp_event_elapsed_ms(const bp_object_t* start, const bp_object_t* end,
                                          double* out_ms);

/* ---------------------------------------------------------------------------------------
 * Native handles (since 1.6): a backend's own objects in and out
 * ------------------------------------------------------------------------------------- */

/* The backend's handle of `kind` (bp_native_kind_t) for `object`: the DLTensor's `data` of a
 * tensor of `dev` for the BUFFER and MEMORY kinds (add the tensor's byte_offset to
 * BUFFER_OFFSET for its first byte), a stream of `dev` (null: its default) for the QUEUE
 * kinds, null for the others. The handle stays the backend's: use it, do not free it, and not
 * after the tensor, stream or plugin is gone. BP_ERR_UNSUPPORTED where the backend has no
 * such handle. */
BP_EXPORT bp_status_t bp_native_handle(DLDevice dev, bp_native_kind_t kind, const void* object,
                                       uint64_t* out_handle);
/* A tensor (owned) of `dev` over an application's native buffer, without a copy. The buffer
 * stays the application's and must live, unchanged in where it is bound, until Backplane calls
 * release(release_ctx) (which may be null): once, when the tensor and every view of it
 * (DLPack exports, module arguments in flight) are gone. `shape` has `ndim` extents; the
 * tensor is compact and must fit in buffer->size. On failure nothing is kept and release is
 * not called. BP_ERR_UNSUPPORTED where the backend wraps nothing. */
BP_EXPORT bp_status_t bp_tensor_from_native(DLDevice dev, const bp_native_buffer_t* buffer,
                                            int32_t ndim, const int64_t* shape, DLDataType dtype,
                                            void (*release)(void* release_ctx), void* release_ctx,
                                            bp_object_t** out_tensor);

/* ---------------------------------------------------------------------------------------
 * Targets (since 1.1): TargetKinds with attribute schemas, tags, Target objects
 * ------------------------------------------------------------------------------------- */

/* The type of a target attribute. Values cross the ABI as JSON text: bool is true/false,
 * int a JSON integer, float a JSON number, string a JSON string, the arrays JSON arrays of
 * integers or strings, and a map any JSON object. */
typedef enum {
  BP_TARGET_ATTR_BOOL = 1,
  BP_TARGET_ATTR_INT = 2,
  BP_TARGET_ATTR_FLOAT = 3,
  BP_TARGET_ATTR_STRING = 4,
  BP_TARGET_ATTR_INT_ARRAY = 5,
  BP_TARGET_ATTR_STRING_ARRAY = 6,
  BP_TARGET_ATTR_MAP = 7
} bp_target_attr_type_t;

/* One attribute of a kind's schema. Growable. */
typedef struct bp_target_attr_def {
  size_t struct_size;
  const char* name;         /* [a-z0-9_-]+, e.g. "max_num_threads", "num-cores" */
  int32_t type;             /* bp_target_attr_type_t */
  int32_t device_attr;      /* a bp_device_attr_kind_t that FromDevice reads it from, or -1 */
  const char* default_json; /* optional: the default as JSON text; NULL = no default */
  const char* doc;          /* optional: one line for `backplane target --list` */
} bp_target_attr_def_t;

/* A kind's canonicalizer. It receives the parsed attributes as a JSON object (defaults
 * filled, types checked) and `device`: the device FromDevice is reading, or NULL when the
 * Target is not built from a device. It returns the final attributes as a JSON object in a
 * string object (owned), or fails with a message naming the attribute. Only here may a kind
 * query the device (through the host table). The core type-checks the result against the
 * schema again. */
typedef bp_status_t (*bp_target_canonicalizer_t)(void* self, const char* attrs_json,
                                                 const DLDevice* device,
                                                 bp_object_t** out_attrs_json);

/* A TargetKind. Growable. Everything is copied at registration. */
typedef struct bp_target_kind_def {
  size_t struct_size;
  const char* name;                /* [a-z0-9_]+, e.g. "cuda" */
  const char* device_type;         /* the device type it runs on, by name, e.g. "cpu" */
  const char* const* default_keys; /* e.g. {"cuda", "gpu"} */
  size_t num_default_keys;
  const bp_target_attr_def_t* attrs;
  size_t num_attrs;
  bp_target_canonicalizer_t canonicalize; /* optional */
  void* canonicalize_self;
  /* Since 1.6: BP_TARGET_KIND_* bits (0 for none). */
  uint32_t flags;
} bp_target_kind_def_t;

/* bp_target_kind_def_t.flags (since 1.6). BP_TARGET_KIND_WHOLE_IR: bp_build gives the kind's
 * code generator the whole IR, parsed but neither verified nor split (whatever the kind's device
 * type), and checks that the module it returns finds every PrimFunc. For kinds that build for
 * another Target and run the result elsewhere, such as the remote plugin's "remote" kind, whose
 * generator builds for the remote device's own Target (which verifies and splits the IR) and
 * runs the module on the server. An unknown bit is BP_ERR_INVALID_ARGUMENT. */
#define BP_TARGET_KIND_WHOLE_IR 0x1u

/* Registers a kind. A name registered before is BP_ERR_ALREADY_EXISTS naming both owners.
 * Every Target also has the common attributes "keys" (string array), "tag" (string), "host"
 * (a nested Target) and "from_device" (int: the device id it was built from, -1 if not);
 * a kind must not declare them. */
BP_EXPORT bp_status_t bp_target_kind_register(const bp_target_kind_def_t* def);

/* Every kind with its device type, keys and schema, and every tag, as one JSON document in
 * a string object (owned): {"kinds": [...], "tags": {...}}. */
BP_EXPORT bp_status_t bp_target_kinds_describe(bp_object_t** out_json);

/* Registers a tag: a name ("nvidia/h100") for a Target configuration given in any form
 * bp_target_parse accepts. It is parsed (and checked) on registration. */
BP_EXPORT bp_status_t bp_target_tag_register(const char* tag, const char* target_text);

/* Parses a Target (owned) from any of: a JSON object ({"kind": "cuda", "arch": "sm_90"}), a
 * kind name ("cuda"), a tag ("nvidia/h100"), or "kind -key=value -flag" (values may be
 * quoted; commas separate array elements; -flag means true). Defaults are filled and the
 * kind's canonicalizer runs. An unknown kind or attribute, a wrong type or a bad value is
 * BP_ERR_INVALID_ARGUMENT naming it, the expected type, and the nearest valid names. */
BP_EXPORT bp_status_t bp_target_parse(const char* text, bp_object_t** out_target);

/* A Target (owned) for `dev`: the kind whose device type is the device's (`kind` chooses
 * when several are; NULL picks the first registered), with every attribute that names a
 * device_attr read from the device, then the canonicalizer with the device. */
BP_EXPORT bp_status_t bp_target_from_device(DLDevice dev, const char* kind,
                                            bp_object_t** out_target);

/* The canonical JSON of a Target (string object, owned): keys sorted, defaults included;
 * parsing it gives an equal Target. */
BP_EXPORT bp_status_t bp_target_to_json(const bp_object_t* target, bp_object_t** out_json);

/* The Target's kind name (borrowed from the Target). */
BP_EXPORT bp_status_t bp_target_kind(const bp_object_t* target, const char** out_kind);

/* An attribute: bool and int as BP_VALUE_INT, float as BP_VALUE_FLOAT, string as a string
 * object, arrays as an array object, a map as a string object holding its JSON, "host" as a
 * Target object (objects owned). An attribute the Target does not have is BP_VALUE_NONE; a
 * name the kind does not declare is BP_ERR_INVALID_ARGUMENT naming the nearest names. */
BP_EXPORT bp_status_t bp_target_get_attr(const bp_object_t* target, const char* name,
                                         bp_value_t* out_value);

/* ---------------------------------------------------------------------------------------
 * Runtime Modules (since 1.2): what a code generator returns
 * ------------------------------------------------------------------------------------- */

/* What a module implementation provides. Growable; the table and `kind` have static lifetime
 * (they live in the plugin, which is never unloaded). A saved module is read back by the
 * registered function "runtime.module.load_from_bytes.<kind>", which takes one bytes object
 * and returns a module object. */
typedef struct bp_module_vtable {
  size_t struct_size;
  const char* kind; /* [a-z0-9_]+, e.g. "c", "cuda" */
  /* The function `name` (owned), or *out_func = NULL with BP_OK when the module lacks it. */
  bp_status_t (*get_function)(void* self, const char* name, bp_object_t** out_func);
  /* Every function name, as an array of string objects (owned). */
  bp_status_t (*list_functions)(void* self, bp_object_t** out_names);
  /* Optional: this module's own bytes (not its imports), as a bytes object (owned). Null
   * means the module cannot be saved (bp_module_save says so, naming the kind). */
  bp_status_t (*save_to_bytes)(void* self, bp_object_t** out_bytes);
  /* Optional: generated source for people ("" = the module's main form, or a format such as
   * "c", "ptx", "spirv-asm"), as a string object (owned); NULL with BP_OK when unknown. */
  bp_status_t (*inspect_source)(void* self, const char* format, bp_object_t** out_source);
  /* Frees `self`; called once, when the module object dies. */
  void (*destroy)(void* self);
} bp_module_vtable_t;

/* Wraps an implementation as a module object (owned). On failure `destroy(self)` has run,
 * unless the vtable is too short to hold `destroy` (then the caller still owns `self`). */
BP_EXPORT bp_status_t bp_module_create(const bp_module_vtable_t* vtable, void* self,
                                       bp_object_t** out_module);
/* The module's kind (borrowed, static). */
BP_EXPORT bp_status_t bp_module_kind(const bp_object_t* module, const char** out_kind);
/* Finds a function by name in the module, then (if `query_imports` != 0) in its imports,
 * depth first (owned). A missing name is BP_ERR_NOT_FOUND naming the module's kind and the
 * nearest names it has. */
BP_EXPORT bp_status_t bp_module_get_function(const bp_object_t* module, const char* name,
                                             int32_t query_imports, bp_object_t** out_func);
/* The module's own function names (array of string objects, owned). */
BP_EXPORT bp_status_t bp_module_list_functions(const bp_object_t* module, bp_object_t** out_names);
/* Generated source (see inspect_source); BP_VALUE_NONE-like: *out_source = NULL if unknown. */
BP_EXPORT bp_status_t bp_module_inspect_source(const bp_object_t* module, const char* format,
                                               bp_object_t** out_source);
/* Makes `module` import `imported` (retained); importing the same module again does nothing.
 * Importing a module into itself, directly or through its imports, is refused. */
BP_EXPORT bp_status_t bp_module_import(bp_object_t* module, bp_object_t* imported);
/* The module's imports, as an array of module objects (owned). */
BP_EXPORT bp_status_t bp_module_imports(const bp_object_t* module, bp_object_t** out_imports);
/* Saves the module with every module it imports, in one self-checking file format
 * (docs/abi.md), as a bytes object (owned). */
BP_EXPORT bp_status_t bp_module_save(const bp_object_t* module, bp_object_t** out_bytes);
/* Loads what bp_module_save wrote (owned). Each module is read by its kind's loader, whose
 * plugin loads on first use; loaders check every invariant the build established, so a file is
 * trusted no more than the IR it was built from. A truncated or corrupted input, an unknown
 * kind or a loader that fails is an error naming what is wrong, never a crash. Since 1.4, a
 * module of a kind that carries native code (its plugin registers
 * "runtime.module.native_code.<kind>", e.g. the cpu plugin's "c" modules, which hold a shared
 * library) is refused with BP_ERR_INVALID_ARGUMENT before its loader runs: use
 * bp_module_load_with_options and BP_MODULE_LOAD_ALLOW_NATIVE to load it. */
BP_EXPORT bp_status_t bp_module_load(const void* data, size_t size, bp_object_t** out_module);

/* bp_module_load_options_t.flags (since 1.4). BP_MODULE_LOAD_ALLOW_NATIVE loads modules that
 * carry native code. That code runs in this process, with its rights, from the moment it is
 * loaded, and nothing in a file proves who made it (the checksum detects damage, not
 * tampering): set it only for files this host built itself or got from a source it trusts
 * (docs/security.md, "Saved modules"). */
#define BP_MODULE_LOAD_ALLOW_NATIVE 0x1u
/* BP_MODULE_LOAD_NO_GLOBAL_CALLS (since 1.6) confines the host code of the loaded modules (the
 * core's "ir_host" kind) to the modules it imports: each call_packed may name only a function
 * of those modules (its kernels), never one of the global registry. A module whose host code
 * names another function is refused with BP_ERR_INVALID_ARGUMENT naming it, before anything
 * runs, and the loaded modules never look a name up in the registry when called. Set it for
 * files from callers who may not call every registered function, as `backplane serve` does for
 * every module a client uploads (docs/security.md, "Remote devices"). Modules of the other
 * kinds without native code (opencl, vulkan, cuda) hold kernels only and call nothing by name.
 * Native code (BP_MODULE_LOAD_ALLOW_NATIVE) can reach anything in the process, the registry
 * included, whatever this flag says: allowing it is full trust. */
#define BP_MODULE_LOAD_NO_GLOBAL_CALLS 0x2u

/* What bp_module_load_with_options takes besides the bytes (since 1.4). Growable: zero it and
 * set struct_size to sizeof(bp_module_load_options_t); fields past the caller's struct_size read
 * as zero. */
typedef struct bp_module_load_options {
  size_t struct_size;
  uint32_t flags; /* BP_MODULE_LOAD_* bits; an unknown bit is BP_ERR_INVALID_ARGUMENT */
} bp_module_load_options_t;

/* bp_module_load with options (since 1.4); the result is owned. `options` may be NULL:
 * bp_module_load's behaviour. A struct_size smaller than the first version of the struct is
 * BP_ERR_INVALID_ARGUMENT. */
BP_EXPORT bp_status_t bp_module_load_with_options(const void* data, size_t size,
                                                  const bp_module_load_options_t* options,
                                                  bp_object_t** out_module);

/* ---------------------------------------------------------------------------------------
 * Building (since 1.3): IR in, Module out (docs/architecture.md, "Building code")
 * ------------------------------------------------------------------------------------- */

/* Builds the kernel IR `ir_text` (its text form, `size` bytes, docs/ir.md) for `target`
 * and returns a module (owned) in which every PrimFunc of the input is found by name.
 * The IR is parsed and verified first. For a Target whose kind runs on the CPU, the module
 * is what the kind's code generator "target.build.<kind>" returns for the whole IR. For any
 * other Target, SplitHostDevice makes each region bound to thread axes a kernel; the
 * kernels go to "target.build.<kind>" and the host code becomes a module of kind "ir_host"
 * that importing the device module and launching the kernels through packed calls, run by
 * the core's IR interpreter (so no C compiler is needed on the machine). `host` (may be
 * NULL: the Target's "host" attribute, if any) must be a Target whose kind runs on the CPU;
 * it is recorded, and the host code is interpreted whatever it is (docs/codegen-guide.md).
 * Errors: BP_ERR_INVALID_ARGUMENT for IR that does not parse or verify (the messages
 * have line:column or name the function and statement), BP_ERR_NOT_FOUND when no plugin
 * provides the code generator, and whatever the code generator reports. */
BP_EXPORT bp_status_t bp_build(const char* ir_text, size_t size, const bp_object_t* target,
                               const bp_object_t* host, bp_object_t** out_module);

/* What bp_build_with_options takes besides the IR and the Target (since 1.4). Growable: zero it
 * and set struct_size to sizeof(bp_build_options_t); fields past the caller's struct_size read
 * as zero. */
typedef struct bp_build_options {
  size_t struct_size;
  /* The CPU Target of the host code, as bp_build's `host` (borrowed; may be NULL). */
  const bp_object_t* host;
  /* The input's name in parse errors ("kernel.bpir:3:11: expected ..."), such as its file name
   * (borrowed; NULL or "": "bp_build input"). */
  const char* source_name;
} bp_build_options_t;

/* bp_build with options (since 1.4). `options` may be NULL: bp_build's behaviour. A
 * struct_size smaller than the first version of the struct is BP_ERR_INVALID_ARGUMENT. */
BP_EXPORT bp_status_t bp_build_with_options(const char* ir_text, size_t size,
                                            const bp_object_t* target,
                                            const bp_build_options_t* options,
                                            bp_object_t** out_module);

/* ---------------------------------------------------------------------------------------
 * Plugins
 * ------------------------------------------------------------------------------------- */

/* What the core offers a plugin. Plugins never link libbackplane: they call the core
 * through this table, so one plugin binary works with every host of the same major.
 * Append-only; check struct_size before using an entry added after 1.0.
 * The first four fields (struct_size, abi_major, abi_minor, error_set) keep their place and
 * meaning in EVERY major version, so a plugin can always read the host's version and report
 * a mismatch through error_set. */
typedef struct bp_host_api {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;

  bp_status_t (*error_set)(bp_status_t kind, const char* message);
  bp_status_t (*error_last)(bp_status_t* out_kind, const char** out_message);
  bp_status_t (*error_clear)(void);

  bp_status_t (*object_retain)(bp_object_t* obj);
  bp_status_t (*object_release)(bp_object_t* obj);
  bp_status_t (*object_type)(const bp_object_t* obj, int32_t* out_type);

  bp_status_t (*string_create)(const char* data, size_t size, bp_object_t** out_str);
  bp_status_t (*string_get)(const bp_object_t* str, const char** out_data, size_t* out_size);
  bp_status_t (*bytes_create)(const void* data, size_t size, bp_object_t** out_bytes);
  bp_status_t (*bytes_get)(const bp_object_t* bytes, const void** out_data, size_t* out_size);
  bp_status_t (*array_create)(const bp_value_t* values, size_t size, bp_object_t** out_array);
  bp_status_t (*array_size)(const bp_object_t* array, size_t* out_size);
  bp_status_t (*array_get)(const bp_object_t* array, size_t index, bp_value_t* out_value);

  bp_status_t (*function_create)(bp_packed_fn_t body, void* resource,
                                 void (*resource_deleter)(void* resource), bp_object_t** out_func);
  bp_status_t (*function_call)(const bp_object_t* func, const bp_value_t* args, int32_t num_args,
                               bp_value_t* out_result);
  bp_status_t (*registry_set)(const char* name, bp_object_t* func, int32_t allow_override);
  bp_status_t (*registry_get)(const char* name, bp_object_t** out_func);
  bp_status_t (*registry_remove)(const char* name);
  bp_status_t (*registry_list)(bp_object_t** out_names);

  bp_status_t (*device_type_register)(const char* name, int32_t* out_type);
  bp_status_t (*device_type_from_name)(const char* name, int32_t* out_type);
  bp_status_t (*device_type_name)(int32_t type, const char** out_name);

  bp_status_t (*device_api_get)(int32_t device_type, const bp_device_api_t** out_api);
  bp_status_t (*device_get_attr)(DLDevice dev, int32_t kind, bp_value_t* out_value);
  bp_status_t (*device_get_property)(DLDevice dev, const char* key, bp_value_t* out_value);
  bp_status_t (*device_set)(DLDevice dev);
  bp_status_t (*device_alloc_data_space)(DLDevice dev, size_t nbytes, size_t alignment,
                                         DLDataType type_hint, void** out_data);
  bp_status_t (*device_free_data_space)(DLDevice dev, void* data);
  bp_status_t (*device_alloc_workspace)(DLDevice dev, size_t nbytes, DLDataType type_hint,
                                        void** out_data);
  bp_status_t (*device_free_workspace)(DLDevice dev, void* data);
  bp_status_t (*device_copy_data_from_to)(const DLTensor* from, const DLTensor* to,
                                          bp_stream_t stream);
  bp_status_t (*device_stream_create)(DLDevice dev, bp_stream_t* out_stream);
  bp_status_t (*device_stream_free)(DLDevice dev, bp_stream_t stream);
  bp_status_t (*device_stream_set)(DLDevice dev, bp_stream_t stream);
  bp_status_t (*device_stream_sync)(DLDevice dev, bp_stream_t stream);
  bp_status_t (*device_sync_stream_from_to)(DLDevice dev, bp_stream_t src, bp_stream_t dst);

  bp_status_t (*tensor_empty)(int32_t ndim, const int64_t* shape, DLDataType dtype, DLDevice dev,
                              bp_object_t** out_tensor);
  bp_status_t (*tensor_get)(const bp_object_t* tensor, DLTensor** out_dltensor);

  /* Since 1.1. */
  bp_status_t (*target_kind_register)(const bp_target_kind_def_t* def);
  bp_status_t (*target_kinds_describe)(bp_object_t** out_json);
  bp_status_t (*target_tag_register)(const char* tag, const char* target_text);
  bp_status_t (*target_parse)(const char* text, bp_object_t** out_target);
  bp_status_t (*target_from_device)(DLDevice dev, const char* kind, bp_object_t** out_target);
  bp_status_t (*target_to_json)(const bp_object_t* target, bp_object_t** out_json);
  bp_status_t (*target_kind)(const bp_object_t* target, const char** out_kind);
  bp_status_t (*target_get_attr)(const bp_object_t* target, const char* name,
                                 bp_value_t* out_value);
  const char* (*device_attr_name)(int32_t kind);

  /* Since 1.2. */
  bp_status_t (*module_create)(const bp_module_vtable_t* vtable, void* self,
                               bp_object_t** out_module);
  bp_status_t (*module_kind)(const bp_object_t* module, const char** out_kind);
  bp_status_t (*module_get_function)(const bp_object_t* module, const char* name,
                                     int32_t query_imports, bp_object_t** out_func);
  bp_status_t (*module_list_functions)(const bp_object_t* module, bp_object_t** out_names);
  bp_status_t (*module_inspect_source)(const bp_object_t* module, const char* format,
                                       bp_object_t** out_source);
  bp_status_t (*module_import)(bp_object_t* module, bp_object_t* imported);
  bp_status_t (*module_imports)(const bp_object_t* module, bp_object_t** out_imports);
  bp_status_t (*module_save)(const bp_object_t* module, bp_object_t** out_bytes);
  bp_status_t (*module_load)(const void* data, size_t size, bp_object_t** out_module);

  /* Since 1.3. */
  bp_status_t (*build)(const char* ir_text, size_t size, const bp_object_t* target,
                       const bp_object_t* host, bp_object_t** out_module);

  /* Since 1.4. */
  bp_status_t (*build_with_options)(const char* ir_text, size_t size, const bp_object_t* target,
                                    const bp_build_options_t* options, bp_object_t** out_module);
  bp_status_t (*module_load_with_options)(const void* data, size_t size,
                                          const bp_module_load_options_t* options,
                                          bp_object_t** out_module);

  /* Since 1.5. */
  bp_status_t (*device_list_properties)(DLDevice dev, bp_object_t** out_keys);
  bp_status_t (*device_list)(DLDevice* out_devices, size_t capacity, size_t* out_count);

  /* Since 1.6. */
  bp_status_t (*tensor_from_dlpack_versioned)(DLManagedTensorVersioned* managed,
                                              bp_object_t** out_tensor);
  bp_status_t (*tensor_from_dlpack)(DLManagedTensor* managed, bp_object_t** out_tensor);
  bp_status_t (*tensor_to_dlpack_versioned)(bp_object_t* tensor,
                                            DLManagedTensorVersioned** out_managed);
  bp_status_t (*tensor_to_dlpack)(bp_object_t* tensor, DLManagedTensor** out_managed);
  bp_status_t (*tensor_flags)(const bp_object_t* tensor, uint64_t* out_flags);
  bp_status_t (*event_create)(DLDevice dev, bp_object_t** out_event);
  bp_status_t (*event_record)(bp_object_t* event, bp_stream_t stream);
  bp_status_t (*event_wait)(const bp_object_t* event, bp_stream_t stream);
  bp_status_t (*event_query)(const bp_object_t* event, int32_t* out_done);
  bp_status_t (*event_sync)(const bp_object_t* event);
  bp_status_t (*event_elapsed_ms)(const bp_object_t* start, const bp_object_t* end, double* out_ms);
  bp_status_t (*native_handle)(DLDevice dev, bp_native_kind_t kind, const void* object,
                               uint64_t* out_handle);
  bp_status_t (*tensor_from_native)(DLDevice dev, const bp_native_buffer_t* buffer, int32_t ndim,
                                    const int64_t* shape, DLDataType dtype,
                                    void (*release)(void* release_ctx), void* release_ctx,
                                    bp_object_t** out_tensor);

  /* Since 1.7. */
  bp_status_t (*function_create_with_flags)(bp_packed_fn_t body, void* resource,
                                            void (*resource_deleter)(void* resource),
                                            uint32_t flags, bp_object_t** out_func);

  /* Since 1.9. */
  bp_status_t (*layers_enable)(const char* spec);
  bp_status_t (*layers_active)(bp_object_t** out_names);
} bp_host_api_t;

/* The host table of this libbackplane (borrowed, static). Host applications may call the
 * bp_* functions directly or through this table; the C++ host API uses the table so the same
 * headers serve plugins (in a host, Function calls bp_function_call, the hot one, directly). */
BP_EXPORT const bp_host_api_t* bp_host_api(void);

/* What a plugin answers. Strings are borrowed from the plugin and must stay valid while it
 * is loaded (string literals are the norm). */
typedef struct bp_plugin_info {
  size_t struct_size;
  uint32_t abi_major;  /* the ABI major the plugin speaks */
  uint32_t abi_minor;  /* the lowest host minor the plugin needs */
  const char* name;    /* the plugin's name, as in its manifest */
  const char* version; /* the plugin's own version, free form */
  const char* vendor;  /* optional */
} bp_plugin_info_t;

/* The one symbol a plugin exports. The host fills `host` and offers its version in it;
 * the plugin writes what it speaks to *out_info (whose struct_size the host has set) and,
 * if the versions agree, registers its functions through `host`. A plugin that cannot
 * work with this host returns BP_ERR_VERSION_MISMATCH (after filling out_info) with a
 * message. The host refuses another major, and a minor newer than its own, itself. */
#define BP_PLUGIN_ENTRY_SYMBOL "bp_plugin_init"
typedef bp_status_t (*bp_plugin_init_fn_t)(const bp_host_api_t* host, bp_plugin_info_t* out_info);

/* ---------------------------------------------------------------------------------------
 * Plugin discovery (host side)
 * ------------------------------------------------------------------------------------- */

/* Adds a folder to search before BACKPLANE_PLUGIN_PATH and the install's plugin folder.
 * Takes effect at the next bp_plugins_discover (which runs once by itself on first use). */
BP_EXPORT bp_status_t bp_plugin_path_add(const char* folder);

/* Scans the plugin folders in the documented order (paths added with bp_plugin_path_add,
 * BACKPLANE_PLUGIN_PATH, the install's lib/backplane/plugins, the build tree's) and reads
 * every manifest; loads nothing. Safe to call again: it adds newly found plugins. */
BP_EXPORT bp_status_t bp_plugins_discover(void);

/* Loads every discovered plugin that is not loaded or skipped yet. Failures are recorded
 * per plugin, not returned. */
BP_EXPORT bp_status_t bp_plugins_load_all(void);

/* Loads the plugin at `library_path` now (its manifest is optional). The path must be
 * absolute: a relative one is BP_ERR_INVALID_ARGUMENT, never resolved against the current
 * directory. Returns the error of that plugin on failure; the failure is also recorded. */
BP_EXPORT bp_status_t bp_plugin_load(const char* library_path);

typedef enum {
  BP_PLUGIN_DISCOVERED = 0, /* manifest read, library not loaded yet */
  BP_PLUGIN_LOADED = 1,     /* loaded and initialised */
  BP_PLUGIN_SKIPPED = 2     /* refused or failed; see reason */
} bp_plugin_state_t;

/* The plugins known so far, in discovery order, as one string object (owned) holding a
 * JSON array of objects: {"name", "library", "manifest", "state" ("discovered" | "loaded" |
 * "skipped"), "reason", "abi_version", "version", "vendor", "provides": [names],
 * "registered": [the names its init registered that it still owns], "shadowed_by": the
 * library of the plugin earlier on the search path that shadows it (or null), "device_types":
 * [names]}. Fields not known yet are null. Also lists the folders searched:
 * the whole is {"search_path": [...], "plugins": [...]}. */
BP_EXPORT bp_status_t bp_plugins_list(bp_object_t** out_json);

/* ---------------------------------------------------------------------------------------
 * Layers (since 1.9; docs/layer-guide.md)
 *
 * A layer sits between the host and every plugin: it wraps the DeviceAPI tables of the device
 * types it chooses and, optionally, the module functions the core hands out and the code
 * generators bp_build calls. A layer is a plugin (bp_plugin_init, a manifest) that registers
 * the function "layer.<name>": called with one string argument, the layer's options ("" when
 * none were given), it returns BP_VALUE_PTR to a bp_layer_t that stays valid until the process
 * exits, or fails naming the option it refuses.
 *
 * The chain is fixed on the first use of any DeviceAPI: the layers named by BACKPLANE_LAYERS
 * (read with secure_getenv, so ignored in setuid and setgid programs) first, then those the
 * host enabled with bp_layers_enable, in the order given. The first is the outermost: it sees
 * a call first and its table calls the second's, down to the plugin's. With no layer enabled
 * the core calls the plugin's tables as it does without this section.
 * ------------------------------------------------------------------------------------- */

typedef struct bp_layer {
  size_t struct_size; /* sizeof(bp_layer_t) as the layer was built */
  void* self;         /* passed back to every entry */

  /* Required. Wraps `next`, the table below this layer for device type `device_type` (named
   * `type_name`): the plugin's, or the next layer's. Sets *out_table to the table the core (or
   * the layer above) calls instead, which stays valid until the process exits, or to NULL to
   * leave this device type unwrapped. The table's optional entries must be null exactly where
   * `next`'s are (the core applies the same defaults either way) and each entry passes on to
   * `next` with next->self. It must not call the bp_device_* or bp_event_* functions (the
   * chain being built is the one they would use). */
  bp_status_t (*wrap_device_api)(void* self, int32_t device_type, const char* type_name,
                                 const bp_device_api_t* next, const bp_device_api_t** out_table);
  /* Optional. Wraps a function that bp_module_get_function hands out: `name` is what it was
   * asked for, `module_kind` the kind of the module asked. Sets *out_func to a function (a new
   * reference) to hand out instead, which calls `next` (borrowed: retain it to keep it), or to
   * NULL to hand out `next`. */
  bp_status_t (*wrap_function)(void* self, const char* module_kind, const char* name,
                               bp_object_t* next, bp_object_t** out_func);
  /* Optional. Wraps the code generator "target.build.<target_kind>" for one bp_build: as
   * wrap_function, for `next`, the registered function bp_build would call. */
  bp_status_t (*wrap_build)(void* self, const char* target_kind, bp_object_t* next,
                            bp_object_t** out_func);
  /* Optional. Told of each module object made once the chain is built (bp_module_create, which
   * bp_build, bp_module_load and plugins make theirs with): `alive` is 1 when it is made and 0
   * when it dies, just before its implementation's destroy runs. `module` only names it: the
   * layer must not retain, release or use it. `kind` is its kind (static). bp_build and
   * bp_module_load build the chain first, so every module they make is told. */
  void (*on_module)(void* self, const bp_object_t* module, const char* kind, int32_t alive);
} bp_layer_t;

/* Enables layers for this process: `spec` is a comma-separated list of layer names, each
 * optionally followed by ':' and its options ("validation,faults:seed=7:rate=0.01"; a layer's
 * guide lists its options). Layers run in the order given, after those of BACKPLANE_LAYERS.
 * Errors (BP_ERR_INVALID_ARGUMENT): a malformed spec, a layer already enabled, or a call after
 * the chain was fixed by the first use of a DeviceAPI. A name no plugin declares is
 * BP_ERR_NOT_FOUND when the chain is built, and fails that first use. */
BP_EXPORT bp_status_t bp_layers_enable(const char* spec);

/* The enabled layers, outermost first, as an array object (owned) of strings "name" or
 * "name:options". Builds the chain if it is not built yet (loading the layers), so a layer
 * that cannot load fails here with its reason. */
BP_EXPORT bp_status_t bp_layers_active(bp_object_t** out_names);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BACKPLANE_C_API_H_ */
