# SPDX-License-Identifier: Apache-2.0
# Under BACKPLANE_SANITIZE every target of the project is built with ASan and UBSan.
#
# UBSan's `enum` check is off: DLPack's DLDevice.device_type is a C enum field, and device
# types registered at run time get ids from 32 up (as TVM's do), outside the C++ value range
# of DLDeviceType. The ABI is C, where the field is an int; C++ code here is built without
# -fstrict-enums (GCC's and Clang's default, stated explicitly below), so such values are
# read as the integers they are. docs/abi.md explains this.
if(BACKPLANE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize=enum -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
# ThreadSanitizer, for the concurrency tests (the tsan preset); it cannot be combined with ASan.
if(BACKPLANE_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fno-strict-enums>)

# backplane_unoptimized_under_asan(): the targets the calling directory adds from here on are
# compiled at -O0 under the asan preset, which compiles the rest at -O1 (CMakePresets.json;
# docs/architecture.md says why). For code that does little work of its own at run time (the
# tests, the command-line tools over libbackplane), where -O1 under ASan and UBSan more than
# doubles the compile time (sdk/apps/cli/backplane/info.cc: 38 s of CPU at -O1, 16 s at -O0).
function(backplane_unoptimized_under_asan)
  if(BACKPLANE_SANITIZE)
    add_compile_options($<$<CONFIG:Debug>:-O0>)
  endif()
endfunction()
