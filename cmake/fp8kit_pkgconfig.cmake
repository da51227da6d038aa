# pkg-config file of the installed package: lib/pkgconfig/fp8kit.pc (relocatable: paths relative
# to the file). `pkg-config --cflags --libs fp8kit` links libfp8kit.so when it is installed;
# `--static` adds the third-party libraries that libfp8kit.a needs. Test: tests/install.
set(_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH _pc_up /${_pc_dir} /)
string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")

# Include directories of the public headers' dependencies, less the compiler's own.
set(_pc_cflags "-I\${includedir}")
foreach(_dep IN LISTS FP8KIT_PACKAGE_PUBLIC_DEPS)
  get_target_property(_dirs ${_dep} INTERFACE_INCLUDE_DIRECTORIES)
  foreach(_dir IN LISTS _dirs)
    if(_dir AND NOT _dir MATCHES "^/usr(/local)?/include/?$")
      string(APPEND _pc_cflags " -I${_dir}")
    endif()
  endforeach()
endforeach()

# What libfp8kit.a needs: each library file (resolved when the build is generated), system
# libraries by name, -pthread for Threads::Threads; header-only targets add nothing.
set(_pc_private)
set(_pc_seen)
set(_pc_pending ${FP8KIT_PACKAGE_LINK_DEPS})
while(_pc_pending)
  list(POP_FRONT _pc_pending _dep)
  string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" _dep "${_dep}")
  if(_dep STREQUAL "" OR _dep IN_LIST _pc_seen OR _dep MATCHES "^\\$<")
    continue()
  endif()
  list(APPEND _pc_seen ${_dep})
  if(_dep STREQUAL "Threads::Threads")
    list(APPEND _pc_private "-pthread")
  elseif(TARGET ${_dep})
    get_target_property(_type ${_dep} TYPE)
    if(NOT _type STREQUAL "INTERFACE_LIBRARY")
      list(APPEND _pc_private "$<TARGET_LINKER_FILE:${_dep}>")
    endif()
    get_target_property(_links ${_dep} INTERFACE_LINK_LIBRARIES)
    if(_links)
      list(APPEND _pc_pending ${_links})
    endif()
  elseif(IS_ABSOLUTE "${_dep}" OR _dep MATCHES "^-")
    list(APPEND _pc_private "${_dep}")
  else()
    list(APPEND _pc_private "-l${_dep}")
  endif()
endwhile()
list(JOIN _pc_private " " _pc_private)

file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/package/fp8kit.pc CONTENT "prefix=\${pcfiledir}/${_pc_up}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}

Name: fp8kit
Description: FP8 quantization, checkpoints and kernels (vLLM-compatible) in C++
Version: ${PROJECT_VERSION}
Cflags: ${_pc_cflags}
Libs: -L\${libdir} -lfp8kit
Libs.private: ${_pc_private}
")
install(FILES ${PROJECT_BINARY_DIR}/package/fp8kit.pc DESTINATION ${_pc_dir} COMPONENT devel)
