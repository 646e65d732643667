# SPDX-License-Identifier: Apache-2.0
# Build-tree helpers of this project (not installed with the SDK).

# backplane_targets_under(<dir> <out_var> [TYPES <type>...]): the targets defined in the source
# folder <dir> and every folder below it, optionally only those of the given TYPEs
# (MODULE_LIBRARY, EXECUTABLE, ...). For build steps that must follow whatever a folder adds
# later: the tests that load every plugin, the GPU bundle.
function(backplane_targets_under dir out_var)
  cmake_parse_arguments(ARG "" "" "TYPES" ${ARGN})
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  set(found "")
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT ARG_TYPES OR type IN_LIST ARG_TYPES)
      list(APPEND found ${t})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    backplane_targets_under(${sub} more ${ARGN})
    list(APPEND found ${more})
  endforeach()
  set(${out_var} ${found} PARENT_SCOPE)
endfunction()
