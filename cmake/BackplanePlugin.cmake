# SPDX-License-Identifier: Apache-2.0
#
# backplane_add_plugin(<name>
#   SOURCES <files...>
#   [PROVIDES <registered names...>]   # e.g. device_api.foo target.kind.foo target.build.foo
#   [DEVICE_TYPES <device type names...>]
#   [VERSION <text>] [VENDOR <text>]   # default VERSION: the project's version
#   [OUTPUT_DIR <dir>]                 # default: <build>/lib/backplane/plugins
#   [ALLOW_UNDEFINED])                 # test-only: skip -z defs
#
# Builds lib backplane_<name> (target backplane_<name>, file libbackplane_<name>.so) as a
# shared module with hidden visibility and a version script that exports bp_plugin_* alone
# (the entry point bp_plugin_init; docs/abi.md, "Exported symbols"), with
# -z defs (an undefined symbol fails the link, not the load), compiled against the SDK
# headers only -- a plugin never links libbackplane -- and writes the manifest
# <name>.bpplugin.json beside it so the core can list the plugin without loading it. Unless
# OUTPUT_DIR is given, `cmake --install` puts both in <prefix>/lib/backplane/plugins.
#
# The same file serves the Backplane build and, installed in <prefix>/lib/cmake/Backplane/
# and included by BackplaneConfig.cmake, plugins built out of tree against the installed SDK
# (docs/plugin-guide.md). Both link the target Backplane::sdk: in the build an alias, in
# an install the imported target.
include_guard(GLOBAL)
include(GNUInstallDirs)
# The ABI version the manifest declares: read from the C ABI header the plugin compiles
# against (BP_ABI_VERSION_MAJOR.MINOR), so the two cannot differ. In the build that is
# core/include; installed, the include folder BackplaneConfig.cmake sets.
if(DEFINED Backplane_INCLUDE_DIR)
  set(_bp_c_api_h "${Backplane_INCLUDE_DIR}/backplane/c_api.h")
else()
  set(_bp_c_api_h "${CMAKE_CURRENT_LIST_DIR}/../core/include/backplane/c_api.h")
endif()
if(NOT EXISTS "${_bp_c_api_h}")
  message(FATAL_ERROR "BackplanePlugin.cmake: no ${_bp_c_api_h}, where the ABI version is read "
                      "from; is the Backplane SDK installed completely?")
endif()
file(STRINGS "${_bp_c_api_h}" _bp_abi_lines REGEX "^#define BP_ABI_VERSION_(MAJOR|MINOR) [0-9]+")
string(REGEX REPLACE ".*BP_ABI_VERSION_MAJOR ([0-9]+).*" "\\1" _bp_abi_major "${_bp_abi_lines}")
string(REGEX REPLACE ".*BP_ABI_VERSION_MINOR ([0-9]+).*" "\\1" _bp_abi_minor "${_bp_abi_lines}")
if(NOT _bp_abi_major MATCHES "^[0-9]+$" OR NOT _bp_abi_minor MATCHES "^[0-9]+$")
  message(FATAL_ERROR "BackplanePlugin.cmake: no BP_ABI_VERSION_MAJOR/MINOR in ${_bp_c_api_h}")
endif()
set(BACKPLANE_ABI_VERSION "${_bp_abi_major}.${_bp_abi_minor}")
# A change to the header re-runs the configure, and so the manifests.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_bp_c_api_h}")
# Included in the caller's scope (by BackplaneConfig.cmake too): leave no helper variables.
unset(_bp_c_api_h)
unset(_bp_abi_lines)
unset(_bp_abi_major)
unset(_bp_abi_minor)

function(backplane_add_plugin name)
  cmake_parse_arguments(ARG "ALLOW_UNDEFINED" "VERSION;VENDOR;OUTPUT_DIR"
                        "SOURCES;PROVIDES;DEVICE_TYPES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "backplane_add_plugin(${name}): SOURCES is required")
  endif()
  if(NOT TARGET Backplane::sdk)
    message(FATAL_ERROR "backplane_add_plugin(${name}): the target Backplane::sdk is missing; "
                        "call find_package(Backplane CONFIG REQUIRED) first")
  endif()
  if(NOT ARG_VERSION)
    set(ARG_VERSION "${PROJECT_VERSION}")
  endif()
  if(NOT ARG_VERSION)
    set(ARG_VERSION "0.0.0")
  endif()
  set(install_plugin OFF)
  if(NOT ARG_OUTPUT_DIR)
    if(BACKPLANE_PLUGIN_OUTPUT_DIR)
      set(ARG_OUTPUT_DIR ${BACKPLANE_PLUGIN_OUTPUT_DIR})
    else()  # out of tree: the build mirrors the install layout, as Backplane's own does
      set(ARG_OUTPUT_DIR ${CMAKE_BINARY_DIR}/lib/backplane/plugins)
    endif()
    set(install_plugin ON)  # test plugins, which name their own folder, are not installed
  endif()
  if(NOT TARGET Threads::Threads)
    find_package(Threads REQUIRED)
  endif()
  set(target backplane_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE Backplane::sdk Threads::Threads)
  target_compile_definitions(${target} PRIVATE BACKPLANE_PLUGIN=1)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  # Static libraries linked in (Backplane::ir, codegen, a vendor's own) export nothing: two
  # plugins carrying different versions of one library never bind to each other's copy.
  target_link_options(${target} PRIVATE -Wl,--exclude-libs,ALL)
  # Nor do the template instances of libstdc++ (and any other library's headers) that hidden
  # visibility leaves visible: the version script exports the entry point alone. No version
  # node: nothing links a plugin, the loader finds its entry point with dlsym.
  set(map ${CMAKE_BINARY_DIR}/backplane/plugin.map)
  file(CONFIGURE OUTPUT ${map} CONTENT
"/* Written by backplane_add_plugin (BackplanePlugin.cmake): a plugin exports bp_plugin_*. */
{
  global:
    bp_plugin_*;
  local:
    *;
};
")
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${map})
  if(NOT ARG_ALLOW_UNDEFINED AND NOT BACKPLANE_SANITIZE)
    target_link_options(${target} PRIVATE -Wl,-z,defs)
  endif()
  if(COMMAND backplane_set_warnings)
    backplane_set_warnings(${target})
  endif()

  set(provides "")
  foreach(p IN LISTS ARG_PROVIDES)
    string(APPEND provides "\"${p}\", ")
  endforeach()
  string(REGEX REPLACE ", $" "" provides "${provides}")
  set(types "")
  foreach(t IN LISTS ARG_DEVICE_TYPES)
    string(APPEND types "\"${t}\", ")
  endforeach()
  string(REGEX REPLACE ", $" "" types "${types}")
  file(GENERATE OUTPUT ${ARG_OUTPUT_DIR}/${name}.bpplugin.json CONTENT
"{
  \"manifest_version\": 1,
  \"name\": \"${name}\",
  \"library\": \"$<TARGET_FILE_NAME:${target}>\",
  \"abi_version\": \"${BACKPLANE_ABI_VERSION}\",
  \"version\": \"${ARG_VERSION}\",
  \"vendor\": \"${ARG_VENDOR}\",
  \"provides\": [${provides}],
  \"device_types\": [${types}]
}
")
  if(install_plugin)
    install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/backplane/plugins)
    install(FILES ${ARG_OUTPUT_DIR}/${name}.bpplugin.json
            DESTINATION ${CMAKE_INSTALL_LIBDIR}/backplane/plugins)
  endif()
  set_property(TARGET ${target} PROPERTY BACKPLANE_MANIFEST ${ARG_OUTPUT_DIR}/${name}.bpplugin.json)
endfunction()
