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
