# SPDX-License-Identifier: Apache-2.0
# The installed package: <prefix>/lib/cmake/Backplane/ (BackplaneConfig.cmake, its version
# file, the exported targets and BackplanePlugin.cmake) and <prefix>/lib/pkgconfig/
# backplane.pc. Every path in them is relative to where they are installed, so an install
# tree can be moved (tests/install/ moves one and builds against it).
#
# The targets themselves join the export set BackplaneTargets where they are defined:
# core/ (backplane), sdk/ (sdk, ir, codegen, kernels, runner) and sdk/apps/cli (cli).
include(CMakePackageConfigHelpers)

set(BACKPLANE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Backplane)
set(BACKPLANE_INSTALL_PLUGINDIR ${CMAKE_INSTALL_LIBDIR}/backplane/plugins)
set(BACKPLANE_INSTALL_KERNELDIR ${CMAKE_INSTALL_DATADIR}/backplane/kernels)

install(EXPORT BackplaneTargets
        NAMESPACE Backplane::
        FILE BackplaneTargets.cmake
        DESTINATION ${BACKPLANE_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/BackplaneConfig.cmake.in
  ${CMAKE_BINARY_DIR}/package/BackplaneConfig.cmake
  INSTALL_DESTINATION ${BACKPLANE_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR BACKPLANE_INSTALL_PLUGINDIR BACKPLANE_INSTALL_KERNELDIR)
# The package version is the project's. The C ABI has its own version (Backplane_ABI_VERSION);
# plugins and hosts negotiate that one at run time.
write_basic_package_version_file(
  ${CMAKE_BINARY_DIR}/package/BackplaneConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
          ${CMAKE_BINARY_DIR}/package/BackplaneConfig.cmake
          ${CMAKE_BINARY_DIR}/package/BackplaneConfigVersion.cmake
          ${CMAKE_CURRENT_LIST_DIR}/BackplanePlugin.cmake
        DESTINATION ${BACKPLANE_INSTALL_CMAKEDIR})

# pkg-config: the prefix is found from the .pc file's own folder (${pcfiledir}).
file(RELATIVE_PATH BACKPLANE_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" BACKPLANE_PC_TO_PREFIX "${BACKPLANE_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/backplane.pc.in ${CMAKE_BINARY_DIR}/package/backplane.pc
               @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/backplane.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The licence, the changelog and the documentation, where a distribution puts them
# (<prefix>/share/doc/backplane): the tools' --help points there when it exists beside them.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md
              ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/backplane)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/backplane
        FILES_MATCHING PATTERN "*.md")
