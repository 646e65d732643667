# SPDX-License-Identifier: Apache-2.0
# Under BACKPLANE_SANITIZE every target of the project is built with ASan and UBSan.
if(BACKPLANE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
