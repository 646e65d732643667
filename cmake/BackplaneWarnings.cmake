# SPDX-License-Identifier: Apache-2.0
# backplane_set_warnings(<target>): the project's warning set, errors under BACKPLANE_WERROR.
function(backplane_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow=local
                                           $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>
                                           $<$<BOOL:${BACKPLANE_WERROR}>:-Werror>)
endfunction()
