// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the module file loader (bp_module_load): any bytes in, no crash, hang
// or leak out. A file that loads must save and load back to the same bytes, and load with
// BP_MODULE_LOAD_NO_GLOBAL_CALLS too unless that flag is why it is refused; a failure must be a
// proper error with a message. An internal error is a core bug and aborts.
//
// The module kind "fz_blob" is a small real implementation: its payload is its function
// names, one per line; each function returns its own line number.
#include <backplane/c_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "module_loader_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

std::string LastMessage() {
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  return message != nullptr ? message : "";
}

struct Blob {
  std::string payload;
  std::vector<std::string> names;
};

bp_status_t ReturnIndex(void* resource, const bp_value_t*, int32_t, bp_value_t* out) {
  out->type = BP_VALUE_INT;
  out->u.v_int64 = static_cast<int64_t>(reinterpret_cast<uintptr_t>(resource));
  return BP_OK;
}

bp_status_t BlobGet(void* self, const char* name, bp_object_t** out) {
  const auto* b = static_cast<Blob*>(self);
  *out = nullptr;
  for (size_t i = 0; i < b->names.size(); ++i) {
    if (b->names[i] == name) {
      return bp_function_create(ReturnIndex, reinterpret_cast<void*>(i), nullptr, out);
    }
  }
  return BP_OK;
}

bp_status_t BlobList(void* self, bp_object_t** out) {
  const auto* b = static_cast<Blob*>(self);
  std::vector<bp_value_t> values(b->names.size());
  for (size_t i = 0; i < b->names.size(); ++i) {
    values[i].type = BP_VALUE_STR;
    values[i].u.v_str = b->names[i].c_str();
  }
  return bp_array_create(values.data(), values.size(), out);
}

bp_status_t BlobSave(void* self, bp_object_t** out) {
  const auto* b = static_cast<Blob*>(self);
  return bp_bytes_create(b->payload.data(), b->payload.size(), out);
}

const bp_module_vtable_t kBlob = {
    .struct_size = sizeof(bp_module_vtable_t),
    .kind = "fz_blob",
    .get_function = BlobGet,
    .list_functions = BlobList,
    .save_to_bytes = BlobSave,
    .inspect_source = nullptr,
    .destroy = [](void* self) { delete static_cast<Blob*>(self); },
};

bp_status_t LoadBlob(void*, const bp_value_t* args, int32_t n, bp_value_t* out) {
  if (n != 1 || args[0].type != BP_VALUE_OBJECT) {
    return bp_error_set(BP_ERR_INVALID_ARGUMENT, "fz_blob loader: expected one bytes object");
  }
  const void* data = nullptr;
  size_t size = 0;
  bp_status_t st = bp_bytes_get(args[0].u.v_obj, &data, &size);
  if (st != BP_OK) return st;
  auto* b = new Blob{std::string(static_cast<const char*>(data), size), {}};
  size_t start = 0;
  while (start < b->payload.size()) {
    size_t nl = b->payload.find('\n', start);
    if (nl == std::string::npos) nl = b->payload.size();
    b->names.push_back(b->payload.substr(start, nl - start));
    start = nl + 1;
  }
  bp_object_t* m = nullptr;
  st = bp_module_create(&kBlob, b, &m);  // destroys b on failure
  if (st != BP_OK) return st;
  out->type = BP_VALUE_OBJECT;
  out->u.v_obj = m;
  return BP_OK;
}

std::string Save(const bp_object_t* m) {
  bp_object_t* bytes = nullptr;
  if (bp_module_save(m, &bytes) != BP_OK) Die("saving a loaded module failed", LastMessage());
  const void* data = nullptr;
  size_t size = 0;
  bp_bytes_get(bytes, &data, &size);
  std::string out(static_cast<const char*>(data), size);
  bp_object_release(bytes);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  bp_object_t* loader = nullptr;
  if (bp_function_create(LoadBlob, nullptr, nullptr, &loader) != BP_OK ||
      bp_registry_set("runtime.module.load_from_bytes.fz_blob", loader, 0) != BP_OK) {
    Die("registering the fz_blob loader failed", LastMessage());
  }
  bp_object_release(loader);
  return 0;
}

// Mutations almost never keep the hash right, so each input is also tried with its trailing
// hash recomputed: that reaches the structure checks behind it.
static uint64_t Fnv1a(const uint8_t* data, size_t n) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64 (docs/abi.md)
  for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

static int LoadAndCheck(const uint8_t* data, size_t size) {
  bp_object_t* m = nullptr;
  bp_status_t st = bp_module_load(data, size, &m);
  if (st != BP_OK) {
    if (st == BP_ERR_INTERNAL) Die("internal error", LastMessage());
    if (LastMessage().empty()) Die("a failure without a message", "");
    return 0;
  }
  const std::string once = Save(m);
  bp_object_t* again = nullptr;
  if (bp_module_load(once.data(), once.size(), &again) != BP_OK) {
    Die("a saved module does not load back", LastMessage());
  }
  if (Save(again) != once) Die("saving, loading and saving again changed the bytes", "");
  bp_object_release(again);
  // Host code confined to its imports: the file loads, or the flag is what refuses it.
  bp_module_load_options_t options{};
  options.struct_size = sizeof(options);
  options.flags = BP_MODULE_LOAD_NO_GLOBAL_CALLS;
  bp_object_t* confined = nullptr;
  st = bp_module_load_with_options(data, size, &options, &confined);
  if (st == BP_OK) {
    bp_object_release(confined);
  } else if (st != BP_ERR_INVALID_ARGUMENT ||
             LastMessage().find("BP_MODULE_LOAD_NO_GLOBAL_CALLS") == std::string::npos) {
    Die("a file that loads is refused with BP_MODULE_LOAD_NO_GLOBAL_CALLS for another reason",
        LastMessage());
  }
  bp_object_release(m);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  LoadAndCheck(data, size);
  if (size >= 16) {
    std::vector<uint8_t> fixed(data, data + size);
    const uint64_t h = Fnv1a(fixed.data(), size - 8);
    for (int i = 0; i < 8; ++i) fixed[size - 8 + i] = static_cast<uint8_t>(h >> (8 * i));
    LoadAndCheck(fixed.data(), size);
  }
  return 0;
}
