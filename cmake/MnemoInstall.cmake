# Install rules, in one place.
#
# A normal install (`cmake --install BUILD --prefix PREFIX`) gives
#   lib/libmnemo.so*, lib/libmnemo_cuda.so (when built), include/mnemo.h,
#   lib/cmake/mnemo/{mnemoConfig,mnemoConfigVersion,mnemoTargets}.cmake
#   (imported target mnemo::mnemo) and lib/pkgconfig/mnemo.pc.
# Under scikit-build-core (SKBUILD set) the library and its CUDA module go
# into the Python package folder instead, where the package's loader and the
# library's module loader look first.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

if(SKBUILD)
  # One file named by the SONAME: wheels cannot hold the usual symlinks.
  install(FILES "$<TARGET_FILE:mnemo>" DESTINATION mnemo
          RENAME "${CMAKE_SHARED_LIBRARY_PREFIX}mnemo${CMAKE_SHARED_LIBRARY_SUFFIX}.${MNEMO_ABI_VERSION}"
          PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  if(TARGET mnemo_cuda)
    install(TARGETS mnemo_cuda LIBRARY DESTINATION mnemo)
  endif()
  return()
endif()

set(MNEMO_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/mnemo")

install(TARGETS mnemo EXPORT mnemoTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES cabi/include/mnemo.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET mnemo_cuda)
  # Next to libmnemo.so: the module loader looks in the library's own folder.
  install(TARGETS mnemo_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

install(EXPORT mnemoTargets NAMESPACE mnemo:: DESTINATION ${MNEMO_CMAKE_DIR})
configure_package_config_file(cmake/mnemoConfig.cmake.in "${PROJECT_BINARY_DIR}/package/mnemoConfig.cmake"
                              INSTALL_DESTINATION ${MNEMO_CMAKE_DIR})
# 0.x releases may break the API between minor versions; from 1.0 on the
# major version is the promise.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_mnemo_compat SameMinorVersion)
else()
  set(_mnemo_compat SameMajorVersion)
endif()
write_basic_package_version_file("${PROJECT_BINARY_DIR}/package/mnemoConfigVersion.cmake"
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY ${_mnemo_compat})
install(FILES "${PROJECT_BINARY_DIR}/package/mnemoConfig.cmake" "${PROJECT_BINARY_DIR}/package/mnemoConfigVersion.cmake"
        DESTINATION ${MNEMO_CMAKE_DIR})

# pkg-config: the prefix found from the .pc file's own folder, so the
# `--prefix` given at install time (or a moved prefix) is right.
file(RELATIVE_PATH MNEMO_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" MNEMO_PC_TO_PREFIX "${MNEMO_PC_TO_PREFIX}")
configure_file(cmake/mnemo.pc.in "${PROJECT_BINARY_DIR}/package/mnemo.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/package/mnemo.pc" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
