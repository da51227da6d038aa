# The installable package: `cmake --install BUILD --prefix PREFIX` puts under PREFIX
#   include/fp8kit/...                      the public headers (and the generated version.h)
#   lib/libfp8kit.a                         every component library's objects in one archive
#   lib/libfp8kit.so[.0[.0.1.0]]            the same as one shared library (FP8KIT_SHARED)
#   bin/fp8kit                              the command-line tool
#   lib/cmake/fp8kit/                       find_package(fp8kit): fp8kit::fp8kit, component cuda
#   lib/pkgconfig/fp8kit.pc                 pkg-config --cflags --libs fp8kit
# Test: tests/install (a consumer project built against a fresh prefix, both ways).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

option(FP8KIT_SHARED "Build and install libfp8kit.so beside libfp8kit.a; fp8kit::fp8kit is then the shared one" ON)
set(FP8KIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/fp8kit)

# The component libraries that hold code: the `fp8kit` target's parts, less the INTERFACE layers.
set(FP8KIT_PART_LIBRARIES)
get_target_property(_fp8kit_parts fp8kit INTERFACE_LINK_LIBRARIES)
foreach(_part IN LISTS _fp8kit_parts)
  get_target_property(_type ${_part} TYPE)
  if(_type STREQUAL "STATIC_LIBRARY")
    list(APPEND FP8KIT_PART_LIBRARIES ${_part})
  endif()
endforeach()

# Their third-party dependencies, each once. Targets are found again by the package config
# (find_dependency of the package that defines them); an archive named by its path (PCRE2 and
# utf8proc for the tokenizer) becomes an imported target that the config finds again by file name.
include(${CMAKE_CURRENT_LIST_DIR}/fp8kit_package_deps.cmake)
fp8kit_collect_dependencies("${FP8KIT_PART_LIBRARIES}")

# One library of all the parts' objects, static and shared: users link one file, and the shared
# one keeps its third-party archives to itself.
set(_fp8kit_objects)
foreach(_part IN LISTS FP8KIT_PART_LIBRARIES)
  list(APPEND _fp8kit_objects $<TARGET_OBJECTS:${_part}>)
endforeach()
set(_fp8kit_public_includes $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                            $<BUILD_INTERFACE:${FP8KIT_GENERATED_INCLUDE_DIR}>
                            $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

add_library(fp8kit_static STATIC ${_fp8kit_objects})
set_target_properties(fp8kit_static PROPERTIES OUTPUT_NAME fp8kit EXPORT_NAME fp8kit_static)
target_include_directories(fp8kit_static PUBLIC ${_fp8kit_public_includes})
target_link_libraries(fp8kit_static PUBLIC ${FP8KIT_PACKAGE_PUBLIC_DEPS} PRIVATE ${FP8KIT_PACKAGE_LINK_DEPS})
set(FP8KIT_INSTALLED_LIBRARIES fp8kit_static)

# A sanitized build (FP8KIT_SANITIZE, scripts/test-san) is for its tests alone: clang links the
# sanitizer runtimes into executables only, so its objects make no shared library that links with
# --no-undefined, and no package that a consumer built without sanitizers can link.
if(FP8KIT_SANITIZE)
  set(FP8KIT_SHARED OFF)
endif()
if(FP8KIT_SHARED)
  add_library(fp8kit_shared SHARED ${_fp8kit_objects})
  set_target_properties(fp8kit_shared PROPERTIES
    OUTPUT_NAME fp8kit EXPORT_NAME fp8kit_shared
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    INSTALL_RPATH_USE_LINK_PATH ON)  # e.g. the CUDA toolkit's lib dir for libcublasLt.so
  target_include_directories(fp8kit_shared PUBLIC ${_fp8kit_public_includes})
  target_link_libraries(fp8kit_shared PUBLIC ${FP8KIT_PACKAGE_PUBLIC_DEPS} PRIVATE ${FP8KIT_PACKAGE_LINK_DEPS})
  # Every undefined symbol resolved at link time; the symbols of the third-party archives linked
  # in (PCRE2, utf8proc, the CUDA runtime) stay inside, so they cannot clash with a program's own.
  target_link_options(fp8kit_shared PRIVATE -Wl,--no-undefined -Wl,--exclude-libs,ALL)
  list(APPEND FP8KIT_INSTALLED_LIBRARIES fp8kit_shared)
  set(FP8KIT_DEFAULT_FLAVOR shared)
else()
  set(FP8KIT_DEFAULT_FLAVOR static)
endif()

# Install rules. The Python module installs itself (component python, cmake/fp8kit_python.cmake).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/fp8kit ${FP8KIT_GENERATED_INCLUDE_DIR}/fp8kit
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel FILES_MATCHING PATTERN "*.h")
install(TARGETS ${FP8KIT_INSTALLED_LIBRARIES} EXPORT fp8kitTargets COMPONENT devel
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET fp8kit_cli)
  set_target_properties(fp8kit_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS fp8kit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
endif()
install(EXPORT fp8kitTargets NAMESPACE fp8kit:: DESTINATION ${FP8KIT_INSTALL_CMAKEDIR} COMPONENT devel)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/fp8kitConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/package/fp8kitConfig.cmake
                              INSTALL_DESTINATION ${FP8KIT_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/fp8kitConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/fp8kitConfig.cmake ${PROJECT_BINARY_DIR}/package/fp8kitConfigVersion.cmake
        DESTINATION ${FP8KIT_INSTALL_CMAKEDIR} COMPONENT devel)

include(${CMAKE_CURRENT_LIST_DIR}/fp8kit_pkgconfig.cmake)

if(FP8KIT_TESTS AND NOT FP8KIT_SANITIZE)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tests/install ${PROJECT_BINARY_DIR}/tests/install)
endif()
