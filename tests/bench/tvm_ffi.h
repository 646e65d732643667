// SPDX-License-Identifier: Apache-2.0
// Apache tvm-ffi, the peer the call benchmarks compare against, loaded at run time
// from the Python package `apache-tvm-ffi` (its libtvm_ffi.so): nothing of it is linked or
// built, and without it the tvm-ffi benchmarks report why and the pairs show "not run".
//
// The library is found at $BACKPLANE_BENCH_TVM_FFI, else in the project's .venv
// (`.venv/bin/pip install apache-tvm-ffi`). The few declarations used are tvm-ffi's stable C ABI
// (tvm/ffi/c_api.h, 0.1.x), written out here.
#ifndef BACKPLANE_TESTS_BENCH_TVM_FFI_H_
#define BACKPLANE_TESTS_BENCH_TVM_FFI_H_

#include <dlfcn.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace benchwork::tvmffi {

// TVMFFIAny: a 16-byte tagged value.
struct Any {
  int32_t type_index;
  uint32_t zero_padding;
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
  };
};
static_assert(sizeof(Any) == 16, "TVMFFIAny is 16 bytes");
constexpr int32_t kNone = 0;
constexpr int32_t kInt = 1;
constexpr int32_t kDLTensorPtr = 7;

using SafeCall = int (*)(void* handle, const Any* args, int32_t num_args, Any* result);

// The entry points the benchmarks use, or an error saying why there are none.
struct Library {
  int (*function_create)(void* self, SafeCall safe_call, void (*deleter)(void*),
                         void** out) = nullptr;
  int (*function_call)(void* func, Any* args, int32_t num_args, Any* result) = nullptr;
  int (*object_dec_ref)(void* obj) = nullptr;
  std::string error;
};

inline const Library& Load() {
  static const Library lib = [] {
    Library l;
    std::string path;
    if (const char* env = getenv("BACKPLANE_BENCH_TVM_FFI")) {
      path = env;
    } else {
      std::error_code ec;
      const std::filesystem::path lib_dir =
          std::filesystem::path(BACKPLANE_SOURCE_DIR) / ".venv" / "lib";
      for (const auto& e : std::filesystem::directory_iterator(lib_dir, ec)) {
        const auto candidate = e.path() / "site-packages" / "tvm_ffi" / "lib" / "libtvm_ffi.so";
        if (std::filesystem::exists(candidate, ec)) path = candidate.string();
      }
    }
    if (path.empty()) {
      l.error =
          "tvm-ffi not found: `.venv/bin/pip install apache-tvm-ffi` or set "
          "BACKPLANE_BENCH_TVM_FFI to its libtvm_ffi.so";
      return l;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* why = dlerror();
      l.error = "cannot load " + path + ": " + (why != nullptr ? why : "unknown reason");
      return l;
    }
    l.function_create =
        reinterpret_cast<decltype(l.function_create)>(dlsym(h, "TVMFFIFunctionCreate"));
    l.function_call = reinterpret_cast<decltype(l.function_call)>(dlsym(h, "TVMFFIFunctionCall"));
    l.object_dec_ref = reinterpret_cast<decltype(l.object_dec_ref)>(dlsym(h, "TVMFFIObjectDecRef"));
    if (l.function_create == nullptr || l.function_call == nullptr || l.object_dec_ref == nullptr) {
      l.error = path + " lacks TVMFFIFunctionCreate, TVMFFIFunctionCall or TVMFFIObjectDecRef";
    }
    return l;
  }();
  return lib;
}

}  // namespace benchwork::tvmffi

#endif  // BACKPLANE_TESTS_BENCH_TVM_FFI_H_
